//go:build cgo

package cabi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// runReview runs r, whose C steps log to the review's trace, and checks
// that it succeeds with the trace want. Before, a hang ran into the
// context's end.
func runReview(t *testing.T, r *asyncsteps.Root, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Run(ctx); err != nil {
		t.Fatalf("flow: %v\ntrace: %q", err, ctest.ReviewTrace())
	}
	if got := ctest.ReviewTrace(); !slices.Equal(got, want) {
		t.Errorf("trace:\n got %q\nwant %q", got, want)
	}
}

// The table's lock of one of our syncs, then an addSync of it in the same
// flow: the addSync is reentrant, as the header promises. Before, the
// hidden flow that holds for the lock was another holder of the Mutex,
// and the addSync waited for it forever.
func TestTableLockThenAddSyncOfOneMutex(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	s := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(s)
	ctest.LockAndAddSync(root, s, true)
	runReview(t, r, []string{"b0 lock", "b0 addSync", "b0 inside addSync", "b0 unlock", "b0 after"})
}

// The reverse: the table's lock inside the flow's addSync section.
func TestAddSyncThenTableLockOfOneMutex(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	s := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(s)
	ctest.LockAndAddSync(root, s, false)
	runReview(t, r, []string{"b0 inside addSync", "b0 lock", "b0 unlock", "b0 after"})
}

// Three parallel branches each lock a Mutex(1) through the table, then
// addSync it: each branch is a holder of its own, so they take the section
// one after the other, and inside it each one's addSync is reentrant.
func TestBranchesTableLockThenAddSync(t *testing.T) {
	ctest.ReviewReset()
	r, root := newRoot(t)
	s := cabi.Sync(asyncsteps.NewMutex(1))
	defer cabi.FreeSync(s)
	ctest.BranchesLock(root, s, 3)
	runReview(t, r, []string{
		"b1 lock", "b2 lock", "b3 lock",
		"b1 addSync", "b1 inside addSync", "b1 unlock",
		"b2 addSync", "b2 inside addSync", "b2 unlock",
		"b3 addSync", "b3 inside addSync", "b3 unlock",
		"b0 after",
	})
}
