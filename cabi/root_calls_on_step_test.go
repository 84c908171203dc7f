//go:build cgo

package cabi_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// free, execute and cancel, functions of a root, called in a C step's
// callback on the step's own pointer fail the step with InternalError
// naming the misuse; its error handler runs and the flow goes on. Before,
// they were ignored, and the step, which made no completion, succeeded.
func TestRootCallsOnAStepPointerFailTheStep(t *testing.T) {
	for i, call := range []string{"free", "execute", "cancel"} {
		t.Run(call, func(t *testing.T) {
			ctest.ReviewReset()
			r, root := newRoot(t)
			ctest.RootCallOnStep(root, i)
			runReview(t, r, []string{
				"returned valid=1",
				"eh InternalError " + call + " called on a step's pointer: it is for a root's",
				"b-1 after",
			})
		})
	}
}

// isValid in the callback that called handle_error or breakLoop, after the
// call, is 1: the step is settled when the callback returns, as the header
// says. The error handler's pointer is valid too.
func TestIsValidAfterAnErrorInTheSameCallback(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	ctest.ValidAfterError(root)
	runReview(t, r, []string{
		"after handle_error valid=1",
		"eh Fail valid=1",
		"after breakLoop valid=1",
		"b-1 after",
	})
}

// cancel on the root's pointer and then handle_error in one C step's
// callback: the cancel, requested before the error, wins. The cancel
// handlers of the running steps run, innermost first, no error handler
// does, and the flow ends cancelled, as the header says of cancel.
func TestCancelThenHandleErrorInACStep(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	ctest.CancelThenFail(root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Run err = %v, want one matching context.Canceled", err)
	}
	want := []string{"returned", "cancel step", "cancel outer"}
	if got := ctest.ReviewTrace(); !slices.Equal(got, want) {
		t.Errorf("trace:\n got %q\nwant %q", got, want)
	}
}
