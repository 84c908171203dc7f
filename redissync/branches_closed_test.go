package redissync

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestBranchOfAClosedLoopMakesNoDeadlock: on a Max 2 Mutex held by G and
// by F, whose branch waits, F's loop is closed: F and its branch are gone
// and F's lease is to come back. G's branch then waits for that lease and
// enters with it; it does not fail with the deadlock error, which the
// stale branch of F, counted as waiting for F, made it fail with before.
// Recheck is an hour and the TTL a minute, so that only the check of G's
// branch can find F's loop closed.
func TestBranchOfAClosedLoopMakesNoDeadlock(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	m := c.NewMutex("stale", MutexOptions{Max: 2, MaxQueue: -1, TTL: time.Minute})
	loops := newLoops(t, 1)
	lg, lf := loops[0], asyncsteps.NewLoop()
	defer lf.Close()
	var tr tracer
	var gIn, fClosed atomic.Bool
	g := asyncsteps.New(asyncsteps.WithTool(lg))
	g.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("G in")
		gIn.Store(true)
		as.Await(until("F's loop closed", fClosed.Load))
		as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("G's branch in") },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.add("G's branch onerror %s: %s", code, as.State().ErrorInfo)
				})
		})
	})
	gDone := g.Promise()
	waitFor(t, "G inside", gIn.Load)
	f := asyncsteps.New(asyncsteps.WithTool(lf))
	f.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("F in")
		as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("F's branch in") })
		})
	})
	fDone := f.Promise()
	waitFor(t, "F's branch to queue", func() bool { return queuedOn(&m.gateQueue, lf) == 1 })
	lf.Close()
	wantError(t, (<-fDone).Err, asyncsteps.InternalError, "the flow's loop is closed")
	fClosed.Store(true)
	if err := (<-gDone).Err; err != nil {
		t.Errorf("G: %v", err)
	}
	tr.check(t, "G in", "F in", "G's branch in")
	wantAllGivenBack(t, rdb, m)
}
