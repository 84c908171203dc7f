//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C step that ends its request frees the root of its own flow: the flow
// is cancelled as by cancel, so the next step does not run, with a pointer
// to a root its owner has freed along with what the steps use.
// On a Loop the release that free posts came after the next step.
func TestFreeInOwnStepCancelsTheNextStep(t *testing.T) {
	for how, name := range []string{"free", "cancel"} {
		t.Run(name+"/TestTool", func(t *testing.T) {
			tool := asyncsteps.NewTestTool()
			ctest.Reset()
			ro := newOwnedRoot(tool)
			p := unsafe.Pointer(ro.node.bsi)
			ctest.FreeInStep(p, how)
			ctest.ExecuteOnly(p, "x", 1)
			tool.Run()
			checkFreedInStep(t, ro, name)
			ctest.Free(p)
		})
		t.Run(name+"/Loop", func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			ctest.Reset()
			ro := newOwnedRoot(loop)
			p := unsafe.Pointer(ro.node.bsi)
			ctest.FreeInStep(p, how)
			ctest.ExecuteOnly(p, "x", 1)
			for ro.root.Running() { // the next step, if it runs, runs before the end
				time.Sleep(time.Millisecond)
			}
			checkFreedInStep(t, ro, name)
			FreeWait(p)
		})
	}
}

func checkFreedInStep(t *testing.T, ro *rootObj, name string) {
	t.Helper()
	if got, want := ctest.Trace(), name+"\n"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if ro.root.Running() {
		t.Error("the freed root's flow still runs")
	}
}

// The free comes in the first step while the execute that started the
// flow, on another thread, has not returned yet (a fast first step): the
// free's release waits for that execute, but the flow is cancelled at
// once all the same, so that the next step does not run.
func TestFreeInOwnStepBeforeExecuteReturns(t *testing.T) {
	for how, name := range []string{"free", "cancel"} {
		t.Run(name, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			ctest.Reset()
			ro := newOwnedRoot(loop)
			p := unsafe.Pointer(ro.node.bsi)
			ctest.FreeInStep(p, how)
			testHookStarted = func() {
				// The execute returns only once the flow has ended.
				for ro.root.Running() {
					time.Sleep(time.Millisecond)
				}
			}
			defer func() { testHookStarted = nil }()
			ctest.ExecuteOnly(p, "x", 1)
			checkFreedInStep(t, ro, name)
			FreeWait(p)
		})
	}
}
