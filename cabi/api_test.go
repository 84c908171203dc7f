package cabi_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

// The public API of package cabi, which C and Go code outside this
// repository is written against, checked by the compiler.
var (
	_ func(asyncsteps.AsyncSteps) unsafe.Pointer = cabi.Binary
	_ func(unsafe.Pointer) asyncsteps.AsyncSteps = cabi.Wrap
)

// The header's tables list their functions in the order of the spec's
// section 2.7 (a C caller indexes them), each with its index, and the
// union's array covers them all.
func TestHeaderTablesInSpecOrder(t *testing.T) {
	src, err := os.ReadFile("futoin_asyncsteps.h")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][]string{
		"FutoInAsyncStepsAPI_": {"add", "parallel", "stateVariable", "stack", "success",
			"handle_error", "setTimeout", "setCancel", "waitExternal", "loop", "repeat",
			"breakLoop", "continueLoop", "execute", "cancel", "addSync", "rootId", "isValid",
			"newInstance", "free", "sched_immediate", "sched_deferred", "sched_cancel",
			"sched_is_valid", "is_same_thread"},
		"FutoInSyncAPI_": {"lock", "unlock"},
	}
	member := regexp.MustCompile(`(?m)^ {12}[A-Za-z].*\(\*(\w+)\)\(`)
	index := regexp.MustCompile(`/\* Index (\d+)\. (\w+):`)
	for name, want := range tables {
		start := strings.Index(string(src), "struct "+name+"\n")
		if start < 0 {
			t.Fatalf("no struct %s in the header", name)
		}
		body := string(src[start:])
		end := strings.Index(body, "void* funcs[")
		if end < 0 {
			t.Fatalf("%s has no funcs array", name)
		}
		if !strings.HasPrefix(body[end:], fmt.Sprintf("void* funcs[%d];", len(want))) {
			t.Errorf("%s: %.20s, want funcs[%d]", name, body[end:], len(want))
		}
		body = body[:end]
		var got []string
		for _, m := range member.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s lists\n%v\nwant\n%v", name, got, want)
		}
		for i, m := range index.FindAllStringSubmatch(body, -1) {
			if m[1] != strconv.Itoa(i) || i >= len(want) || m[2] != want[i] {
				t.Errorf("%s: comment Index %s. %s at position %d", name, m[1], m[2], i)
			}
		}
	}
}
