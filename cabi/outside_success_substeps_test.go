//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A success from another thread while the step's callback runs completes
// nothing when that callback then adds sub-steps or fails the step
// itself: the error that fails the step runs its cancel handler, as it
// does without that success. Before, the success counted as the step's,
// and the handler was skipped.
func TestVoidOutsideSuccessKeepsTheStepsCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		own  bool
	}{{"sub-step fails", false}, {"own handle_error", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ReviewReset()
			r, root := newRoot(t)
			ctest.OutsideSuccessThenFail(root, tc.own)
			runReview(t, r, []string{"joined", "cancel", "eh Boom"})
		})
	}
}
