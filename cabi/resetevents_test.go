//go:build cgo

package cabi_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// On a TestTool, the free of a C root that ResetEvents drops ends the
// root's flow, as the close of a Loop ends it: a Go step of the flow that
// waits, completed after the free, runs none of the root's C steps, and
// the Mutex section the flow is in is given back, when the tool runs
// next, to the flow that waits for it. It does so whether ResetEvents dropped the whole free or only
// the release that the free had posted after the cancel of the flow
// (which ResetEvents keeps). Before, the flow stayed running: the completion ran the root's C
// steps, whose state variable was allocated after the free's cleanups and
// never cleaned up, and the other flow never entered the Mutex.
func TestFreeDroppedByResetEventsEndsTheFlow(t *testing.T) {
	for _, ranFree := range []bool{false, true} {
		name := map[bool]string{false: "free dropped", true: "release dropped"}[ranFree]
		t.Run(name, func(t *testing.T) { checkFreedFlowEnds(t, ranFree) })
	}
}

func checkFreedFlowEnds(t *testing.T, ranFree bool) {
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	tt := asyncsteps.NewTestTool()
	mu := asyncsteps.NewMutex(1)
	owned := cabi.New(tt)
	r := cabi.Wrap(owned).(*asyncsteps.Root)
	var waiting asyncsteps.AsyncSteps
	r.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) {
		waiting = as
		as.WaitExternal()
	})
	ctest.State(owned) // C steps that allocate the state variable "counter"
	ctest.ExecuteOnly(owned, "x", 1)

	var trace []string
	other := asyncsteps.New(asyncsteps.WithTool(tt))
	other.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) { trace = append(trace, "other entered") })
	other.Execute()
	tt.Run() // the C root's flow waits inside the Mutex, the other flow for it

	ctest.Free(owned)
	if ranFree {
		tt.NextEvent() // the free: it posts the cancel of the flow, then the release
	}
	tt.ResetEvents()
	if got := ctest.Trace(); got != "" {
		t.Errorf("C trace after ResetEvents: %q, want none", got)
	}
	tt.Run()
	if r.Running() {
		t.Error("the freed root's flow still runs")
	}
	if len(trace) != 1 || trace[0] != "other entered" {
		t.Errorf("other flow: %q, want [other entered]", trace)
	}
	waiting.Success() // too late: the flow was freed
	tt.Run()
	if got := ctest.Trace(); got != "" {
		t.Errorf("C trace once the waiting Go step completed: %q, want none", got)
	}
	if cabi.Wrap(owned) != nil {
		t.Error("the root is still valid after its free was dropped")
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d callbacks scheduled at the end", n)
	}
}

// On a TestTool, the free of a Go root given to C that ResetEvents drops
// releases the root pointer only, as the free does when the tool runs it:
// the flow stays Go's, and a C step of it that waits keeps its pointer,
// so that its completion from C lets the flow go on. Before, the step was
// released after its cancel handler, though the flow still waited for it:
// the completion was ignored, and the flow waited for ever.
func TestGoRootFreeDroppedByResetEventsLeavesItsFlowRunning(t *testing.T) {
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	given := cabi.Binary(r)
	ctest.HeldWithCancel(given) // waits until SucceedHeld
	ended := false
	r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = true })
	r.Execute()
	tt.Run()
	ctest.Free(given)
	tt.ResetEvents()
	if cabi.Wrap(given) != nil {
		t.Error("the root pointer is still valid after its free was dropped")
	}
	ctest.SucceedHeld()
	tt.Run()
	if !ended || r.Running() {
		t.Errorf("the flow ended %v, runs %v; want true, false", ended, r.Running())
	}
	if got, want := ctest.Trace(), "held\n"; got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// On a TestTool, the cleanup of a custom object that no C step received,
// which cabi posts to the tool once the Go side has dropped the object,
// runs inside ResetEvents if ResetEvents drops it. Before, it was lost
// with the callback, and so was the object.
func TestCustomObjectCleanupDroppedByResetEventsRuns(t *testing.T) {
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	root := cabi.Binary(r)
	ctest.Custom(root)
	r.Add(func(asyncsteps.AsyncSteps, ...any) {}) // drops the last custom object
	r.Execute()
	tt.Run()
	if n := ctest.Cleanups(); n != 1 {
		t.Fatalf("%d cleanups once the flow ended, want 1", n)
	}
	if !gcUntil(5*time.Second, func() bool { return tt.Pending() > 0 }) {
		t.Fatal("the cleanup of the dropped custom object was never posted")
	}
	tt.ResetEvents()
	if n := ctest.Cleanups(); n != 2 {
		t.Errorf("%d cleanups after ResetEvents, want 2", n)
	}
	ctest.Free(root)
	tt.Run()
}
