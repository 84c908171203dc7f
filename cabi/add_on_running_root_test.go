//go:build cgo

package cabi_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// add, loop, repeat and parallel on a root owned by C, from another thread
// while its flow runs (a misuse: a root is built before it is executed or
// while it is idle), have no effect, as on the pointer of a parallel made
// in a step: the flow's queue is the loop's.
func TestAddOnARunningRootFromAnotherThread(t *testing.T) {
	for which, call := range []string{"add", "loop", "repeat", "parallel"} {
		t.Run(call, func(t *testing.T) {
			root := newCRoot(t)
			ctest.Hold(root)
			ctest.ExecuteOnly(root, "x", 1)
			ctest.WaitHeld()
			ctest.AddOnRunning(root, which)
			releaseAndCheckNothingRan(t, root)
		})
	}
}

// addSync on a running root, and add on a parallel made on the root while
// it was idle, from another thread while the flow runs, have no effect
// either.
func TestAddSyncAndIdleParallelOnARunningRoot(t *testing.T) {
	for _, call := range []string{"addSync", "parallel made idle"} {
		t.Run(call, func(t *testing.T) {
			root := newCRoot(t)
			ctest.Hold(root)
			if call != "addSync" {
				ctest.ParallelOfIdle(root)
			}
			ctest.ExecuteOnly(root, "x", 1)
			ctest.WaitHeld()
			if call == "addSync" {
				sync := cabi.Sync(asyncsteps.NewMutex(1))
				defer cabi.FreeSync(sync)
				ctest.AddSyncOnRunning(root, sync)
			} else {
				ctest.AddOnIdleParallel()
			}
			releaseAndCheckNothingRan(t, root)
		})
	}
}

// releaseAndCheckNothingRan completes the step of Hold on root, waits
// until the root is idle again, and checks that nothing logged meanwhile;
// then it frees root.
func releaseAndCheckNothingRan(t *testing.T, root unsafe.Pointer) {
	t.Helper()
	ctest.ReleaseHeld()
	deadline := time.Now().Add(5 * time.Second)
	for ctest.IsValid(root) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := ctest.Trace(); got != "" {
		t.Errorf("trace %q, want none", got)
	}
	ctest.Free(root)
}
