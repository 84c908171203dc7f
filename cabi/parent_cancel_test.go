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

// setCancel on the pointer of a Go step given by Binary, from the C
// callback of its sub-step, is refused by the engine (InternalError in
// the sub-step), so the cancel handler is not the step's: the free of
// the root, releasing the step that its closed loop left with sub-steps
// running, does not call it (the cleanup of the root's stack memory,
// last, tells that the free is done). Before, the pointer kept the
// refused handler, and the free called it.
func TestRefusedSetCancelOnAGoParentIsNotKept(t *testing.T) {
	ctest.ReviewReset()
	loop := asyncsteps.NewLoop()
	root := cabi.New(loop)
	cabi.Wrap(root).(*asyncsteps.Root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ctest.ParentCancelFromSub(cabi.Binary(as))
	})
	ctest.RootStackLog(root)
	ctest.ExecuteWaiting(root)
	if !ctest.WaitReview(3, 10*time.Second) {
		t.Fatalf("the sub-step did not wait: %q", ctest.ReviewTrace())
	}
	loop.Close()
	if !ctest.WaitReview(4, 10*time.Second) {
		t.Fatalf("no unhandled_error: %q", ctest.ReviewTrace())
	}
	cabi.FreeWait(root) // the loop has stopped: the release runs on another goroutine
	if !ctest.WaitReview(5, 10*time.Second) {
		t.Fatalf("the free did not release the root: %q", ctest.ReviewTrace())
	}
	want := []string{
		"sub: setCancel returned",
		"sub eh InternalError",
		"wait",
		"unhandled InternalError error_info=the flow's loop is closed last_exception=InternalError",
		"root stack cleanup",
	}
	if got := ctest.ReviewTrace(); !slices.Equal(got, want) {
		t.Errorf("trace:\n got %q\nwant %q", got, want)
	}
}
