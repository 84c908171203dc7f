package asyncsteps_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// throttleEntries starts flows that enter th and trace when, counted from
// start on the bubble's clock.
type throttleEntries struct {
	t     *testing.T
	th    *asyncsteps.Throttle
	start time.Time
	tr    tracer
}

func (te *throttleEntries) enter(loop *asyncsteps.Loop, name string) <-chan asyncsteps.Result {
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Sync(te.th, func(as asyncsteps.AsyncSteps, _ ...any) {
		te.tr.addf("%s at %v", name, time.Since(te.start))
	})
	return r.Promise()
}

func wantEntered(t *testing.T, name string, done <-chan asyncsteps.Result) {
	t.Helper()
	if res := <-done; res.Err != nil {
		t.Errorf("%s: %v, want success", name, res.Err)
	}
}

// A period timed on a Loop that closes before the period ends still lasts
// its whole time: the rest of it is timed on the loop of the first flow
// waiting for it that is not closing too, so a partial shutdown lets no
// more than the rate in.
func TestThrottlePeriodOutlivesItsLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(1, time.Hour), start: time.Now()}

		first := te.enter(doomed, "first")
		synctest.Wait()
		time.Sleep(10 * time.Minute)
		lost := te.enter(doomed, "lost") // the head of the queue, gone with its loop
		next := te.enter(live, "next")
		after := te.enter(live, "after")
		synctest.Wait() // all three queued
		doomed.Close()

		wantEntered(t, "first", first)
		wantErrText(t, "lost", (<-lost).Err, "InternalError: the flow's loop is closed")
		wantEntered(t, "next", next)
		wantEntered(t, "after", after)
		wantTrace(t, &te.tr, "first at 0s,next at 1h0m0s,after at 2h0m0s")
	})
}

// With nobody waiting when its Loop closes, the period runs on untimed: a
// flow that comes before its end and finds it full waits for that end,
// timing it on its own loop; one that comes after it starts the next
// period at once.
func TestThrottleUntimedPeriodAfterItsLoopCloses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		arrives []time.Duration // after the one before it entered
		want    string
	}{
		{"before its end", 2, []time.Duration{20 * time.Minute, 10 * time.Minute}, "first at 0s,second at 20m0s,third at 1h0m0s"},
		{"after its end", 1, []time.Duration{2 * time.Hour, 0}, "first at 0s,second at 2h0m0s,third at 3h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
				defer live.Close()
				te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(tc.max, time.Hour), start: time.Now()}

				wantEntered(t, "first", te.enter(doomed, "first"))
				doomed.Close()
				for i, name := range []string{"second", "third"} {
					time.Sleep(tc.arrives[i])
					wantEntered(t, name, te.enter(live, name))
				}
				wantTrace(t, &te.tr, tc.want)
			})
		})
	}
}

// Two loops that share a Throttle close at once: the one its period is
// timed on, and another whose flow waits for the period's end. That flow
// is gone with its loop, which takes it out of the queue as it stops, so
// the period still lasts its whole time: a flow of a live loop that comes
// meanwhile waits for its end. Before, the period ended when the first
// loop closed, letting the gone flow in, and a new period began whose
// other entries went to live flows at once: three entries in 10 minutes
// for a rate of two an hour.
func TestThrottlePeriodOutlivesTwoClosingLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, alsoDoomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(2, time.Hour), start: time.Now()}

		first, second := te.enter(doomed, "first"), te.enter(doomed, "second")
		synctest.Wait()
		time.Sleep(10 * time.Minute)
		lost := te.enter(alsoDoomed, "lost")
		synctest.Wait() // queued
		// alsoDoomed is closing, still in a callback, when doomed closes.
		stuck := make(chan struct{})
		alsoDoomed.Immediate(func() { <-stuck })
		synctest.Wait()
		go alsoDoomed.Close()
		synctest.Wait()
		doomed.Close()
		next := te.enter(live, "next")
		synctest.Wait()
		close(stuck)

		wantEntered(t, "first", first)
		wantEntered(t, "second", second)
		wantErrText(t, "lost", (<-lost).Err, "InternalError: the flow's loop is closed")
		wantEntered(t, "next", next)
		wantTrace(t, &te.tr, "first at 0s,second at 0s,next at 1h0m0s")
	})
}

// A period left untimed by its closed Loop is timed again by a flow of a
// live Loop that comes before its end and must wait: the timer ends it
// at that end, and with nobody waiting then (the flow was cancelled) the
// Throttle goes idle and forgets its clock. A flow of a TestTool that
// comes afterwards opens the next period, though no flow of a Loop came
// after that end.
func TestThrottleUntimedPeriodTimedAgainEndsForEveryClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(1, time.Hour), start: time.Now()}

		wantEntered(t, "first", te.enter(doomed, "first"))
		doomed.Close() // the period runs on untimed
		time.Sleep(10 * time.Minute)
		waiter := asyncsteps.New(asyncsteps.WithTool(live))
		waiter.Sync(te.th, func(asyncsteps.AsyncSteps, ...any) { te.tr.addf("waiter in") })
		waited := waiter.Promise()
		synctest.Wait() // queued: the rest of the period is timed on live
		time.Sleep(10 * time.Minute)
		waiter.Cancel()
		wantErrText(t, "waiter", (<-waited).Err, "context canceled")
		time.Sleep(time.Hour) // past the period's end: its timer has run
		synctest.Wait()

		tt := asyncsteps.NewTestTool()
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(te.th, func(asyncsteps.AsyncSteps, ...any) { te.tr.addf("tested in") },
			func(as asyncsteps.AsyncSteps, code string) {
				te.tr.addf("tested onerror %s: %s", code, as.State().ErrorInfo)
				as.Success()
			})
		if _, err := r.Run(context.Background()); err != nil {
			t.Errorf("Run: %v", err)
		}
		wantTrace(t, &te.tr, "first at 0s,tested in")
	})
}
