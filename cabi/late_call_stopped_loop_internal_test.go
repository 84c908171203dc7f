//go:build cgo

package cabi

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// lateCalls are the calls that fail a waiting step from outside its
// callback, made on the step of ctest.HeldWithCancel from the calling
// goroutine: through the table (only the step's own callback may make
// them), or by Go on step, what Wrap gave for the step's pointer while it
// was valid.
var lateCalls = []struct {
	name string
	call func(step asyncsteps.AsyncSteps)
}{
	{"add", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCAdd) }},
	{"parallel", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCParallel) }},
	{"loop", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCLoop) }},
	{"repeat", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCRepeat) }},
	{"addSync", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCSync) }},
	{"setTimeout", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCTimeout) }},
	{"setCancel", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCCancel) }},
	{"waitExternal", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCWait) }},
	{"breakLoop", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCBreak) }},
	{"continueLoop", func(asyncsteps.AsyncSteps) { ctest.LateCallHeld(ctest.OCContinue) }},
	{"Go Break", func(step asyncsteps.AsyncSteps) { step.Break() }},
	{"Go Continue", func(step asyncsteps.AsyncSteps) { step.Continue() }},
	{"Go Add", func(step asyncsteps.AsyncSteps) { step.Add(func(asyncsteps.AsyncSteps, ...any) {}) }},
}

// A call that fails a waiting C step from outside its callback (see
// lateCalls), made from another goroutine once the step's loop has
// stopped, before or after the free of the root: the step's cancel
// handler runs once, as the failure would have run it, whichever of the
// call's fallback and the free's comes first, and no node is left.
// Before, the fallback of a call through the table released the step
// without its cancel handler, and the free's then found it released.
func TestLateCallOnAStoppedLoopRunsTheCancelHandler(t *testing.T) {
	for _, c := range lateCalls {
		for _, freeFirst := range []bool{false, true} {
			name := map[bool]string{false: c.name + " then free", true: "free then " + c.name}[freeFirst]
			t.Run(name, func(t *testing.T) {
				loop, owned, lp, r := heldOnLoop(t)
				step := Wrap(ctest.HeldStep())
				loop.Close() // waits until the loop has stopped
				call := func() { c.call(step) }
				if freeFirst {
					ctest.Free(owned)
					waitFallbacks(t, lp) // the free's fallback ran
					fromGoroutine(call)
				} else {
					fromGoroutine(call)
					ctest.Free(owned)
				}
				waitFallbacks(t, lp)
				want := "held\nunhandled InternalError data=x root=1\nheld cancel\n"
				checkTraceLeavesNoNode(t, r, want)
			})
		}
	}
}

// A call that fails a waiting C step from outside its callback (see
// lateCalls), made from another goroutine, whose task ResetEvents drops:
// the failure applies when the tool runs next, as a TestTool keeps Go's
// calls from another goroutine, so the step's cancel handler runs once
// and the flow ends with the InternalError. Before, the fallback of a
// call through the table released the step, which then waited on, and a
// cancel of the flow found it released: its cancel handler never ran.
func TestLateCallDroppedByResetEventsApplies(t *testing.T) {
	for _, c := range lateCalls {
		t.Run(c.name, func(t *testing.T) {
			runtime.LockOSThread() // the C steps check that they run on one thread
			defer runtime.UnlockOSThread()
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			owned := New(tt)
			r := Wrap(owned).(*asyncsteps.Root)
			ctest.HeldWithCancel(owned)
			ctest.ExecuteOnly(owned, "x", 1)
			tt.Run()
			step := Wrap(ctest.HeldStep())
			fromGoroutine(func() { c.call(step) })
			tt.ResetEvents()
			tt.Run()
			running := r.Running()
			ctest.Free(owned) // cancels a flow that still runs
			tt.Run()
			if running {
				t.Error("the flow still ran after the failure")
			}
			want := "held\nheld cancel\nunhandled InternalError data=x root=1\n"
			checkTraceLeavesNoNode(t, r, want)
		})
	}
}

// A success from another thread claims the waiting C step first, and a
// late add, made before the success is posted, loses its claim but is
// posted first; the loop, closed, runs neither. The add's fallback comes
// first and must not run the step's cancel handler, which the winning
// success forbids: the step has ended.
func TestLateCallThatLostToASuccessRunsNoCancelHandler(t *testing.T) {
	loop, owned, lp, r := heldOnLoop(t)
	loop.Close()
	t.Cleanup(func() { testHookClaimed = nil })
	lost := false
	testHookClaimed = func(_ *node, kind uint32, won bool) {
		switch {
		case kind == outsideSuccess && won:
			ctest.LateCallHeld(ctest.OCAdd) // loses, and is posted first
		case kind == outsideCall:
			lost = !won
		}
	}
	fromGoroutine(ctest.SucceedHeld)
	testHookClaimed = nil
	if !lost {
		t.Fatal("the add did not lose its claim to the success")
	}
	ctest.Free(owned)
	waitFallbacks(t, lp)
	want := "held\nunhandled InternalError data=x root=1\n"
	checkTraceLeavesNoNode(t, r, want)
}

// heldOnLoop starts, on a new Loop that the test closes at its end, a
// root made by C (owned) whose flow runs ctest.HeldWithCancel, and
// returns once the held step waits; lp is the loop's cabi context and r
// the root's Go side.
func heldOnLoop(t *testing.T) (loop *asyncsteps.Loop, owned unsafe.Pointer, lp *loopCtx, r *asyncsteps.Root) {
	t.Helper()
	ctest.Reset()
	loop = asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	owned = New(loop)
	lp = loopFor(loop)
	r = Wrap(owned).(*asyncsteps.Root)
	ctest.HeldWithCancel(owned)
	ctest.ExecuteOnly(owned, "x", 1)
	if !ctest.WaitFor("held", 5*time.Second) {
		t.Fatalf("the held step did not run: %q", ctest.Trace())
	}
	return loop, owned, lp, r
}
