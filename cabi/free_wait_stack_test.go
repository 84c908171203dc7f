//go:build cgo

package cabi_test

import (
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// FreeWait of a root never executed, with no state variable but stack
// memory taken on it while idle, or on a parallel made on it, returns once
// that memory's cleanup has run. The loop is busy when FreeWait is called,
// so one that does not wait returns before the cleanup; before, it did
// not wait: only an execution or a state variable made it.
func TestFreeWaitOfAnIdleRootWaitsForItsStackCleanup(t *testing.T) {
	for _, onParallel := range []bool{false, true} {
		name := "root"
		if onParallel {
			name = "parallel"
		}
		t.Run(name, func(t *testing.T) {
			root := newCRoot(t)
			loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
			if !ctest.IdleStack(root, onParallel) {
				t.Fatal("stack on the idle root gave NULL")
			}
			busy := make(chan struct{})
			loop.Immediate(func() { <-busy })
			time.AfterFunc(20*time.Millisecond, func() { close(busy) })
			cabi.FreeWait(root)
			if got := ctest.StackCleanups(); got != 1 {
				t.Errorf("stack cleanups when FreeWait returned: %d, want 1", got)
			}
		})
	}
}
