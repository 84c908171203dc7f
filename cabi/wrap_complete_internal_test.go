//go:build cgo

package cabi

import (
	"context"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C step that waits with a cancel handler and stack memory, completed
// by Go through Wrap of its pointer, in its callback (on the loop) or
// from another goroutine, is released as when C completes it: its node
// leaves the registry, its stack memory is cleaned up, and its cancel
// handler is called once for an error (the failing step's own, as the
// engine runs a Go step's), never after a success. Before, Wrap gave the
// engine's step itself, whose completion the node never saw: the node and
// the stack memory stayed for good, also after the root's free.
func TestCStepCompletedThroughWrapIsReleased(t *testing.T) {
	tests := []struct {
		name     string
		complete func(as asyncsteps.AsyncSteps, loop *asyncsteps.Loop)
		want     string
		cancels  int
	}{
		{"Success in its callback", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { as.Success() }, "ok", 0},
		{"Success later on the loop", func(as asyncsteps.AsyncSteps, loop *asyncsteps.Loop) {
			loop.Immediate(func() { as.Success() })
		}, "ok", 0},
		{"Success from a goroutine", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { go as.Success() }, "ok", 0},
		{"Error in its callback", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { as.Error("Gone", "by Go") }, "Gone: by Go", 1},
		{"Error later on the loop", func(as asyncsteps.AsyncSteps, loop *asyncsteps.Loop) {
			loop.Immediate(func() { as.Error("Gone", "by Go") })
		}, "Gone: by Go", 1},
		{"Error from a goroutine", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { go as.Error("Gone", "by Go") }, "Gone: by Go", 1},
		{"Fail in its callback", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { asyncsteps.Fail(as, errGone) }, "InternalError: gone by Go", 1},
		{"Fail later on the loop", func(as asyncsteps.AsyncSteps, loop *asyncsteps.Loop) {
			loop.Immediate(func() { asyncsteps.Fail(as, errGone) })
		}, "InternalError: gone by Go", 1},
		{"Fail from a goroutine", func(as asyncsteps.AsyncSteps, _ *asyncsteps.Loop) { go asyncsteps.Fail(as, errGone) }, "InternalError: gone by Go", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := ctest.FlowCounters()
			ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFWaitGo}})
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			ctest.FlowHook = func(step unsafe.Pointer, _ int) { tc.complete(Wrap(step), loop) }
			defer func() { ctest.FlowHook = nil }()
			ptr := New(loop)
			r := Wrap(ptr).(*asyncsteps.Root)
			st := r.State()
			ctest.FlowAdd(ptr, 0)
			ended := make(chan string, 1)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ended <- "ok" })
			r.ExecuteWith(func(err *asyncsteps.Error) { ended <- err.Code + ": " + st.ErrorInfo })
			if got := <-ended; got != tc.want {
				t.Errorf("the flow ended with %q, want %q", got, tc.want)
			}
			afterLoopRan(loop)
			checkCStepReleased(t, "once the flow ended", st, before, tc.cancels)
			ctest.FlowFree(ptr)
			afterLoopRan(loop) // the free's post, which cancels the flow
			afterLoopRan(loop) // the release posted behind the cancel
			checkCStepReleased(t, "after the root's free", st, before, tc.cancels)
			if Wrap(ptr) != nil {
				t.Error("the root pointer is valid after its free")
			}
		})
	}
}

// checkCStepReleased fails the test unless the flow of st has no node left,
// the one stack memory taken since before is cleaned up, and cancel
// handlers ran cancels times.
func checkCStepReleased(t *testing.T, when string, st *asyncsteps.State, before ctest.Counters, cancels int) {
	t.Helper()
	c := ctest.FlowCounters()
	allocs, cleanups := c.StackAllocs-before.StackAllocs, c.StackCleanups-before.StackCleanups
	if n := nodesOf(st); n != 0 {
		t.Errorf("%s: %d nodes of the flow in the registry, want 0", when, n)
	}
	if allocs != 1 || cleanups != 1 {
		t.Errorf("%s: %d stack allocations, %d cleanups; want 1 and 1", when, allocs, cleanups)
	}
	if n := c.Cancels - before.Cancels; n != cancels {
		t.Errorf("%s: %d cancel handlers ran, want %d", when, n, cancels)
	}
	if n := c.Violations - before.Violations; n != 0 {
		t.Errorf("%s: %d violations of the C side", when, n)
	}
}

// Break through Wrap in the C step's callback ends the Go loop around it
// as breakLoop through the pointer does: the step's node and stack memory
// go at once, and its cancel handler is called once, as the engine calls
// the own cancel handler of a Go step that breaks (Break unwinds as an
// error does).
func TestCStepBreakThroughWrapIsReleased(t *testing.T) {
	before := ctest.FlowCounters()
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFWaitGo}})
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	ctest.FlowHook = func(step unsafe.Pointer, _ int) { Wrap(step).Break() }
	defer func() { ctest.FlowHook = nil }()
	ptr := New(loop)
	r := Wrap(ptr).(*asyncsteps.Root)
	st := r.State()
	turns := 0
	r.Loop(func(as asyncsteps.AsyncSteps) {
		turns++
		ctest.FlowAdd(Binary(as), 0)
	})
	// Run returns once the flow has ended, after its end posted the
	// release of Binary's pointer, which afterLoopRan then waits for.
	if _, err := r.Run(context.Background()); err != nil || turns != 1 {
		t.Errorf("the flow ended with %v after %d turns of the loop, want success after 1", err, turns)
	}
	afterLoopRan(loop)
	checkCStepReleased(t, "once the flow ended", st, before, 1)
	ctest.FlowFree(ptr)
	afterLoopRan(loop)
	afterLoopRan(loop)
	checkCStepReleased(t, "after the root's free", st, before, 1)
}
