//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A parallel's pointer made in a step is its callback's: another thread
// that adds a branch on it, while that callback runs, adds nothing, as a
// call on the step's own pointer whose sub-steps run has no effect from
// there. Before, the branch was added from that thread, writing the
// step's frame beside the loop (a data race under -race), and it ran.
func TestParallelOfAStepFromAnotherThreadAddsNothing(t *testing.T) {
	for which, call := range []string{"add", "loop", "repeat"} {
		t.Run(call, func(t *testing.T) {
			ctest.ReviewReset()
			r, root := newRoot(t)
			ctest.ParallelFromThread(root, which)
			runReview(t, r, []string{"joined", "branch 1", "after"})
		})
	}
}
