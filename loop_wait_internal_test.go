package asyncsteps

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// waitHeldBy checks that Wait on l, closed, waits for a goroutine that a
// hook holds until release is closed: Wait under a context of 10ms ends
// with its error, and Wait returns nil once the goroutine is let go.
func waitHeldBy(t *testing.T, l *Loop, release chan struct{}) {
	t.Helper()
	start := time.Now()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); err != context.DeadlineExceeded || time.Since(start) != 10*time.Millisecond {
		t.Errorf("Wait while the goroutine is held: %v at %v, want %v at 10ms", err, time.Since(start), context.DeadlineExceeded)
	}
	close(release)
	if err := l.Wait(context.Background()); err != nil || time.Since(start) != 10*time.Millisecond {
		t.Errorf("Wait: %v at %v, want <nil> at 10ms", err, time.Since(start))
	}
}

// A goroutine that the loop keeps for Await functions, idle when the loop
// closes, counts for Wait until it has ended.
func TestLoopWaitCountsTheGoroutinesItKeeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop()
		r := New(WithTool(l))
		r.Await(func(context.Context) (any, error) { return nil, nil })
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		hook := func(p *awaitWorkers) {
			if p == &l.awaitWorkers { // not a goroutine of another test's loop
				<-release
			}
		}
		testHookAwaitWorkerEnds.Store(&hook)
		defer testHookAwaitWorkerEnds.Store(nil)
		waitHeldBy(t, l, release)
	})
}

// The goroutine of a ForEachChan that waits for its channel counts for
// Wait until it has ended.
func TestLoopWaitCountsTheGoroutineOfForEachChan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop()
		r := New(WithTool(l))
		ForEachChan(r, make(chan int), 1, func(AsyncSteps, int) {})
		release := make(chan struct{})
		onceHook(t, &testHookChanWaitBegins, func() { <-release })
		res := r.Promise()
		synctest.Wait() // the goroutine waits, held by the hook
		waitHeldBy(t, l, release)
		wantLoopClosed(t, <-res)
	})
}

// wantLoopClosed fails the test unless res is that of a flow its closed
// loop ended.
func wantLoopClosed(t *testing.T, res Result) {
	t.Helper()
	if e, ok := res.Err.(*Error); !ok || e.Code != InternalError || e.Info != loopClosedInfo {
		t.Errorf("Result.Err = %v, want the loop's close", res.Err)
	}
}
