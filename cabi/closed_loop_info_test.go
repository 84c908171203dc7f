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

// An execution that its closed loop ends reaches C's unhandled_error with
// the error's info in "error_info" and its code in "last_exception", as
// any error that ends a flow. Before, no step had raised the error, so
// the State held none: "error_info" was "" and "last_exception" NULL.
func TestClosedLoopErrorInfoReachesCUnhandledError(t *testing.T) {
	ctest.ReviewReset()
	loop := asyncsteps.NewLoop()
	root := cabi.New(loop)
	defer cabi.FreeWait(root)
	ctest.ExecuteWaiting(root)
	if !ctest.WaitReview(1, 10*time.Second) {
		t.Fatal("the step did not run")
	}
	loop.Close()
	if !ctest.WaitReview(2, 10*time.Second) {
		t.Fatalf("no unhandled_error: %q", ctest.ReviewTrace())
	}
	want := []string{"waits", "unhandled InternalError error_info=the flow's loop is closed last_exception=InternalError"}
	if got := ctest.ReviewTrace(); !slices.Equal(got, want) {
		t.Errorf("trace:\n got %q\nwant %q", got, want)
	}
}
