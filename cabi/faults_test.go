//go:build cgo

package cabi_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// childEnv names the test that a re-executed test binary runs as a child.
const childEnv = "CABI_FAULT_CHILD"

// inChild runs body in a child process (the test binary run again for
// this test only), for a fault that may crash the process, and returns the
// child's combined output; the test fails if the child does not exit 0.
// In the child, inChild runs body and exits.
func inChild(t *testing.T, body func()) string {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		body()
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count", "1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v; output:\n%s", err, out)
	}
	return string(out)
}

// A Go callback that a foreign table's Tool runs (sched_immediate) and that
// panics is logged, as on a Loop; the panic never unwinds the foreign
// table's C frames, and the table's loop goes on.
func TestForeignToolCallbackPanicIsLogged(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		tool := cabi.Wrap(root).Tool()
		tool.Immediate(func() { panic("boom in sched") })
		ran := ctest.FakeRunSched()
		tool.Immediate(func() { fmt.Println("second callback ran") })
		ctest.FakeRunSched()
		fmt.Printf("ran=%v trace=%q\n", ran, ctest.Trace())
	})
	for _, want := range []string{
		"asyncsteps: panic in loop callback",
		"boom in sched",
		"second callback ran\n",
		`ran=true trace="fake: sched callback returned\nfake: sched callback returned\n"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
