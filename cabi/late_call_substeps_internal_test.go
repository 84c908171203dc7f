//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A handle_error or success from another thread on a step whose C
// sub-step waits (a Go step given by Binary, with stack memory and a C
// cancel handler, that added a C step), which the stopped loop does not
// run: the free leaves the flow's steps innermost first, the sub-step's
// cancel handler before its step's handler and stack cleanup, each
// once. Before, the late call's fallback ran the outer step's handler,
// or for a success freed its stack memory, ahead of the sub-step's
// cancel handler, which may read that memory.
func TestLateErrorOnAStepWithSubStepsLeavesInnermostFirst(t *testing.T) {
	for _, late := range []struct {
		name string
		call func(p unsafe.Pointer)
	}{
		{"handle_error", func(p unsafe.Pointer) { ctest.HandleError(p, "Boom", "late") }},
		{"success", ctest.SucceedStep},
	} {
		t.Run(late.name, func(t *testing.T) { leaveAfterLateCall(t, late.call) })
	}
}

func leaveAfterLateCall(t *testing.T, call func(p unsafe.Pointer)) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	owned := New(loop)
	lp := loopFor(loop)
	r := Wrap(owned).(*asyncsteps.Root)
	outer := make(chan unsafe.Pointer, 1)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := Binary(as)
		ctest.Guard(p)
		ctest.HeldWithCancel(p)
		outer <- p
	})
	ctest.ExecuteOnly(owned, "x", 1)
	if !ctest.WaitFor("held", 5*time.Second) {
		t.Fatalf("the held step did not run: %q", ctest.Trace())
	}
	p := <-outer
	loop.Close()
	fromGoroutine(func() { call(p) })
	ctest.Free(owned)
	waitFallbacks(t, lp)
	want := "held\nunhandled InternalError data=x root=1\nheld cancel\nguard cancel\nguard cleanup\n"
	checkTraceLeavesNoNode(t, r, want)
}
