//go:build cgo

package cabi_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The table's lock of one of our syncs, taken by a step of ours, holds
// until its unlock or until the execution of the step's flow ends, by any
// path: a flow that fails, times out or is cancelled before its unlock
// leaves no holder behind. Before, the hidden flow of the lock stayed in
// the section for good: the root's next execution entered at once, as a
// reentrant holder that had not locked, and kept the section after its
// own unlock, so that any other flow waited for the Mutex for ever.
func TestTableLockLeftByAFailedFlowIsGiven(t *testing.T) {
	for _, tc := range []struct {
		name  string
		how   int
		trace []string
		err   string // the code the first execution fails with; "" for cancel
	}{
		{"ErrorInLockStep", 0, []string{"b0 lock", "b0 error MyError"}, "MyError"},
		{"ErrorInNextStep", 1, []string{"b0 lock", "b0 fail", "b0 error MyError"}, "MyError"},
		{"Timeout", 2, []string{"b0 lock", "b0 time out", "b0 error Timeout"}, "Timeout"},
		{"RootCancel", 3, []string{"b0 lock", "b0 wait"}, ""},
		{"SiblingBranchFails", 4, []string{"b1 lock", "b2 wait", "b1 fail sibling", "b0 error MyError"}, "MyError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ReviewReset()
			r, root := newRoot(t)
			m := asyncsteps.NewMutex(1)
			s := cabi.Sync(m)
			defer cabi.FreeSync(s)

			ctest.LockFail(root, s, tc.how)
			runFailing(t, r, len(tc.trace), tc.err)
			if got := ctest.ReviewTrace(); !slices.Equal(got, tc.trace) {
				t.Fatalf("first execution's trace:\n got %q\nwant %q", got, tc.trace)
			}

			// The root executed again locks and unlocks: it must wait for
			// no one, and leave the Mutex free for another root.
			ctest.ReviewReset()
			ctest.LockUnlock(root, s)
			runReview(t, r, []string{"b9 lock", "b9 unlock"})
			enterWithin(t, m, time.Second)

			// So does another root's lock through the table.
			ctest.ReviewReset()
			other, otherRoot := newRoot(t)
			ctest.LockUnlock(otherRoot, s)
			runReview(t, other, []string{"b9 lock", "b9 unlock"})
		})
	}
}

// runFailing runs r, which fails with code (or, for "", waits until the
// review's trace has n lines and is then cancelled), within a bound.
func runFailing(t *testing.T, r *asyncsteps.Root, n int, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code == "" {
		go func() {
			ctest.WaitReview(n, 5*time.Second)
			cancel()
		}()
	}
	_, err := r.Run(ctx)
	var ae *asyncsteps.Error
	switch {
	case code == "" && !errors.Is(err, context.Canceled):
		t.Fatalf("first execution: %v, want cancelled", err)
	case code != "" && (!errors.As(err, &ae) || ae.Code != code):
		t.Fatalf("first execution: %v, want %s", err, code)
	}
}

// enterWithin checks that another root enters m within d.
func enterWithin(t *testing.T, m asyncsteps.Syncer, d time.Duration) {
	t.Helper()
	other := asyncsteps.New()
	m.Sync(other, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("in") }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if res, err := other.Run(ctx); err != nil || !slices.Equal(res, []any{"in"}) {
		t.Fatalf("another root in the Mutex: %v %v; a holder was left behind", res, err)
	}
}

// A loop closed between the table's lock and its unlock ends the flow
// where it stands: the holder goes with it.
func TestTableLockLeftByAClosedLoopIsGiven(t *testing.T) {
	ctest.ReviewReset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	root := cabi.Binary(r)
	m := asyncsteps.NewMutex(1)
	s := cabi.Sync(m)
	defer cabi.FreeSync(s)

	ctest.LockFail(root, s, 3)
	done := r.Promise()
	if !ctest.WaitReview(2, 5*time.Second) {
		t.Fatalf("trace: %q", ctest.ReviewTrace())
	}
	loop.Close()
	<-done
	if got, want := ctest.ReviewTrace(), []string{"b0 lock", "b0 wait"}; !slices.Equal(got, want) {
		t.Fatalf("trace:\n got %q\nwant %q", got, want)
	}
	enterWithin(t, m, time.Second)
}
