//go:build cgo

package cabi

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The free of the root is posted, then handle_error from another thread
// claims the step, which waits with a C cancel handler, and the tool
// drops both posts (ResetEvents, as a closed loop drops what it had not
// run): the free's fallback releases the steps the flow left, running
// the C cancel handler of this one once, as a cancel on a running loop
// runs it after such an error (TestCancelAfterAClaimedOutsideError). The
// error, never applied, has not ended the step; taken for a claimed
// success, it made the step look ended, and the handler did not run.
func TestFreeDroppedAfterAClaimedOutsideError(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	before := ctest.FlowCounters()
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFGo}})
	var step unsafe.Pointer
	ctest.FlowHook = func(p unsafe.Pointer, _ int) {
		step = p
		ctest.FlowGuard(p, 0) // waits, with a C cancel handler
	}
	t.Cleanup(func() { ctest.FlowHook = nil })
	ptr := New(tt)
	r := Wrap(ptr).(*asyncsteps.Root)
	ctest.FlowAdd(ptr, 0)
	ended := ""
	r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code })
	tt.Run()
	if step == nil {
		t.Fatal("the step's callback did not run")
	}
	ctest.FlowFree(ptr)
	fromGoroutine(func() { ctest.FlowComplete(step, 7) })
	tt.ResetEvents()
	tt.Run()
	if n := ctest.FlowCounters().Cancels - before.Cancels; n != 1 {
		t.Errorf("the step's C cancel handler ran %d times, want 1", n)
	}
	if ended != "" {
		t.Errorf("the flow ended with %q, want no outcome", ended)
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	if n := ctest.FlowCounters().Violations - before.Violations; n != 0 {
		t.Errorf("%d violations of the C side", n)
	}
}
