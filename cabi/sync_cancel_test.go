//go:build cgo

package cabi_test

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// cancelledFirst is a Syncer that lets the flow in at once, and whose
// caller's flow is cancelled (by CancelLocker) just before the section's
// step completes the caller's lock step: its success or, with fail, its
// error handler. It stands for the cancel handler of another thread that
// runs while the hidden flow, on its own loop, enters the section. done
// is closed once the step or handler has returned.
type cancelledFirst struct {
	fail bool
	done chan struct{}
}

func (s cancelledFirst) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if s.fail {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Error("Boom")
		}, func(as asyncsteps.AsyncSteps, code string) {
			defer close(s.done)
			ctest.CancelLocker()
			onerror[0](as, code)
		})
		return
	}
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		defer close(s.done)
		ctest.CancelLocker()
		f(as, args...)
	})
}

// The lock function of our sync, called for a step of another table: once
// the step's cancel handler has returned, neither success nor handle_error
// reaches the step, whose memory the other implementation may have freed.
// Before, the hidden flow's section went on to call success (or
// handle_error) on the cancelled step.
func TestLockOfCancelledForeignStepCompletesNothing(t *testing.T) {
	for _, fail := range []bool{false, true} {
		ctest.Reset()
		done := make(chan struct{})
		s := cabi.Sync(cancelledFirst{fail: fail, done: done})
		ctest.CancelLock(s)
		<-done
		cabi.FreeSync(s)
		// The section's step or handler has returned: the trace is whole.
		want := []string{"cancelled step locks", "cancelled step waits", "cancelled step cancelled"}
		if got := ctest.Lines(); !slices.Equal(got, want) {
			t.Errorf("fail %v: trace %q, want %q", fail, got, want)
		}
	}
}
