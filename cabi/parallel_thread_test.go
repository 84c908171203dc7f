//go:build cgo

package cabi_test

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
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

// success and handle_error on the pointer of a parallel made in a step,
// from another thread while the step's callback runs, fail the step with
// the InternalError of a call from another goroutine on a step that does
// not wait, which names the call the engine refused (the code given to
// handle_error is not kept): the branch does not run, nor does the next
// step. Once the step's callback has returned (from a thread that a
// branch of the parallel joins), they have no effect: the branch is
// completed by the thread, and the flow goes on.
func TestParallelCompletedFromAnotherThread(t *testing.T) {
	const notWaiting = " called from another goroutine on a step that does not wait: call WaitExternal, SetTimeout or SetCancel first"
	for _, tc := range []struct {
		name              string
		handleError, late bool
		info              string // of the InternalError; "" for none
		trace             []string
	}{
		{"success", false, false, "Success called on the value returned by Parallel" + notWaiting, nil},
		{"handle_error", true, false, "Error called on the value returned by Parallel" + notWaiting, nil},
		{"success/late", false, true, "", []string{"step returns", "branch waits", "thread called", "after"}},
		{"handle_error/late", true, true, "", []string{"step returns", "branch waits", "thread called", "after"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ReviewReset()
			r, root := newRoot(t)
			ctest.ParallelCompleteFromThread(root, tc.handleError, tc.late)
			_, err := run(t, r)
			trace := tc.trace
			if tc.info != "" {
				trace = []string{"thread called", "step returns", "step error InternalError: " + tc.info}
				if e := asyncsteps.ErrorFrom(err); e == nil || e.Code != asyncsteps.InternalError || e.Info != tc.info {
					t.Errorf("the flow ended with %v, want InternalError: %s", err, tc.info)
				}
			} else if err != nil {
				t.Errorf("the flow failed: %v", err)
			}
			if got := ctest.ReviewTrace(); !slices.Equal(got, trace) {
				t.Errorf("trace:\n got %q\nwant %q", got, trace)
			}
		})
	}
}
