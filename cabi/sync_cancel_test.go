//go:build cgo

package cabi_test

import (
	"slices"
	"testing"
	"time"

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

// refusing is a Syncer that refuses every flow, with "Boom".
type refusing struct{ done chan struct{} }

func (s refusing) Sync(as asyncsteps.AsyncSteps, _ asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error("Boom")
	}, func(as asyncsteps.AsyncSteps, code string) {
		defer close(s.done)
		onerror[0](as, code)
	})
}

// The lock function of our sync, refused for a step of another table
// whose handle_error unwinds the step as an FTN12 implementation does,
// calling the step's cancel handler before it returns: that cancel
// handler, which comes inside the completion it is to exclude, on the
// same thread, does nothing, rather than wait for the completion (see
// cancelLock): the hidden flow's loop would hang for good.
func TestLockRefusedForAnUnwindingForeignStep(t *testing.T) {
	ctest.Reset()
	ctest.CancelStepUnwinds(true)
	defer ctest.CancelStepUnwinds(false)
	done := make(chan struct{})
	s := cabi.Sync(refusing{done: done})
	ctest.CancelLock(s)
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a bound on a hang, not a wait
		t.Fatal("the refusal's handle_error never returned: the cancel handler it called waits for it")
	}
	cabi.FreeSync(s)
	want := []string{"cancelled step locks", "cancelled step waits", "cancelled step lock: Boom", "cancelled step cancelled"}
	if got := ctest.Lines(); !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// lettingIn is a Syncer that lets every flow in at once.
type lettingIn struct{ done chan struct{} }

func (s lettingIn) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, _ ...asyncsteps.ErrorFunc) {
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		defer close(s.done)
		f(as, args...)
	})
}

// The lock function of our sync, for a step of another table whose flow
// is cancelled, on another thread, while the hidden flow's success on
// the step runs: the step's cancel handler returns only once that
// success has returned, after which the other implementation may free
// the step. Before, the cancel handler found its record dropped as the
// section began, and returned at once, during the success.
func TestLockCancelledDuringItsSuccessWaitsForIt(t *testing.T) {
	ctest.Reset()
	ctest.CancelStepRaces(true)
	defer ctest.CancelStepRaces(false)
	done := make(chan struct{})
	s := cabi.Sync(lettingIn{done: done})
	ctest.CancelLock(s)
	<-done
	ctest.CancelRaceWait()
	cabi.FreeSync(s)
	want := []string{"cancelled step locks", "cancelled step waits", "cancelled step locked"}
	if got := ctest.Lines(); !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}
