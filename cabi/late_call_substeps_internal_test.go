//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A handle_error from another thread on a step whose C sub-step runs
// (a Go step given by Binary, with a C cancel handler, that added a C
// step which waits), which the stopped loop does not run: the free
// leaves the flow's steps innermost first, the sub-step's cancel
// handler before its step's, each once. The late call's fallback must
// not run the outer step's cancel handler ahead of its sub-step's.
func TestLateErrorOnAStepWithSubStepsLeavesInnermostFirst(t *testing.T) {
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
	fromGoroutine(func() { ctest.HandleError(p, "Boom", "late") })
	ctest.Free(owned)
	waitFallbacks(t, lp)
	want := "held\nunhandled InternalError data=x root=1\nheld cancel\nguard cancel\nguard cleanup\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
}
