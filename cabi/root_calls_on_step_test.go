//go:build cgo

package cabi_test

import (
	"testing"

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
