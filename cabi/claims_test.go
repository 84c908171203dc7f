//go:build cgo

package cabi_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// checkClaimsTrace compares the trace of the claims' C steps with want.
func checkClaimsTrace(t *testing.T, want ...string) {
	t.Helper()
	if got := ctest.ClaimsTrace(); !reflect.DeepEqual(got, want) {
		t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every function of the table on the pointer of a completed step is
// ignored, on the loop's thread too: rootId 0, isValid and
// is_same_thread 0, NULL from stack, stateVariable (allocate not called),
// parallel and newInstance, sched_* an invalid handle whose callback
// never runs, and no step added, run or cancelled.
func TestStalePointerEveryFunction(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	ctest.StaleTable(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkClaimsTrace(t,
		"rootId=0 isValid=0 is_same_thread=0 own is_same_thread=1",
		"stack=NULL stateVariable=NULL parallel=NULL newInstance=NULL",
		"sched_is_valid immediate=0 deferred=0",
		"own isValid=1",
		"own immediate ran",
	)
}

// A NULL function, sync or code fails the calling step with
// InternalError naming the argument, once its callback returns; sched_* with a NULL callback gives
// an invalid handle, a NULL handle is never valid, and stateVariable
// with a NULL name returns NULL without allocating.
func TestNullArgumentsOfTheTable(t *testing.T) {
	r, root := newRoot(t)
	ctest.ClaimsReset()
	sync := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(sync)
	ctest.NullArgs(root, sync)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkClaimsTrace(t,
		"add: returned",
		"add: InternalError Add: nil step function",
		"loop: returned",
		"loop: InternalError Loop: nil body function",
		"repeat: returned",
		"repeat: InternalError Repeat: nil body function",
		"addSync sync: returned",
		"addSync sync: InternalError Sync: nil Syncer",
		"addSync f: returned",
		"addSync f: InternalError Sync: nil step function",
		"handle_error code: returned",
		"handle_error code: InternalError handle_error: NULL code",
		"sched cb: valid=00",
		"sched cb: NULL handle valid=0",
		"sched cb: returned",
		"stateVariable name: NULL",
		"stateVariable name: returned",
	)
}
