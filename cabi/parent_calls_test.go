//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// Each call that only a Go step's own callback may make, through its
// Binary pointer from a C sub-step's callback, is InternalError in that
// sub-step, also after another such call that a handler recovered from.
func TestSecondCallOnAGoParentIsInternalErrorToo(t *testing.T) {
	ctest.ReviewReset()
	r, _ := newRoot(t)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ctest.TwoParentCalls(cabi.Binary(as))
	})
	runReview(t, r, []string{
		"first returns",
		"eh InternalError Success called on the AsyncSteps of a step that waits for its sub-steps",
		"second returns",
		"eh InternalError Error(Lost) called on the AsyncSteps of a step that waits for its sub-steps",
	})
}
