package asyncsteps_test

// Throttle.Hold and Limiter.Hold on virtual time, with exact entry times:
// the queue let in at the hold's end, a hold while idle, holds that do not
// shorten one set, a hold shorter than the period, one whose instant has
// passed, a cancel and a full queue while held, a flow at the hold's end,
// a Limiter; on Loops in a testing/synctest bubble, a hold across loops,
// one of them closing. And the rate a provider that counts over any
// sliding window sees.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// holdTrace starts flows on tt that pass through obj, and traces
// "NAME@MS" as each enters, or "NAME:CODE: INFO" as its error handler
// sees a refusal.
type holdTrace struct {
	tt  *asyncsteps.TestTool
	obj asyncsteps.Syncer
	tr  tracer
}

// heldFlow is a flow that holdTrace started, with its Result once it
// has started.
type heldFlow struct {
	r   *asyncsteps.Root
	res <-chan asyncsteps.Result
}

// enterAt starts the flow name at when, from the start of tt's clock.
func (h *holdTrace) enterAt(when time.Duration, name string) *heldFlow {
	f := &heldFlow{r: asyncsteps.New(asyncsteps.WithTool(h.tt))}
	f.r.Sync(h.obj, func(asyncsteps.AsyncSteps, ...any) { h.tr.addf("%s@%d", name, at(h.tt)) },
		func(as asyncsteps.AsyncSteps, code string) { h.tr.addf("%s:%s: %s", name, code, as.State().ErrorInfo) })
	h.tt.Deferred(when-h.tt.Now().Sub(asyncsteps.TestToolEpoch), func() { f.res = f.r.Promise() })
	return f
}

// holdAt calls hold(until) at when, both from the start of tt's clock.
func holdAt(tt *asyncsteps.TestTool, when, until time.Duration, hold func(time.Time)) {
	tt.Deferred(when-tt.Now().Sub(asyncsteps.TestToolEpoch), func() { hold(asyncsteps.TestToolEpoch.Add(until)) })
}

// A Hold keeps every flow out until its end: the period in progress
// lets no more in and lasts until then, the flows that wait or come
// meanwhile queue, and at the hold's end they enter as a new period
// begins, max at once, in their order; then the Throttle counts as
// before. The hold here comes from a flow's step, as a 429 would.
func TestThrottleHoldReleasesTheQueueAtItsEnd(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(2, time.Second)
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(0, "a")
	h.enterAt(0, "b")
	h.enterAt(0, "c") // waits for the period's end, 1000, then for the hold's
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tt.Deferred(200*time.Millisecond, func() { as.Success() })
		as.WaitExternal()
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		th.Hold(as.Tool().Now().Add(4800 * time.Millisecond)) // "Retry-After" at 200: until 5000
	})
	r.Execute()
	h.enterAt(1000*time.Millisecond, "d")
	h.enterAt(5500*time.Millisecond, "e") // [5000, 6000) is full with c and d
	h.enterAt(7500*time.Millisecond, "f") // idle since 7000
	drive(t, tt)
	wantTrace(t, &h.tr, "a@0,b@0,c@5000,d@5000,e@6000,f@7500")
	syncWantIdle(t, tt)
}

// A Hold while the Throttle is idle arms no timer: the first flow that
// must wait times the hold's end on its own tool, and one that comes
// after that end enters at once.
func TestThrottleHoldWhileIdle(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	th.Hold(asyncsteps.TestToolEpoch.Add(300 * time.Millisecond))
	syncWantIdle(t, tt)
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(100*time.Millisecond, "a")
	h.enterAt(100*time.Millisecond, "b")
	h.enterAt(1000*time.Millisecond, "c")
	drive(t, tt)
	wantTrace(t, &h.tr, "a@300,b@400,c@1000")
	syncWantIdle(t, tt)
}

// A Hold never shortens one already set, and a Hold whose end has passed
// keeps nobody out.
func TestThrottleHoldNeverShortensOne(t *testing.T) {
	t.Run("shorter", func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
		th.Hold(asyncsteps.TestToolEpoch.Add(5 * time.Second))
		th.Hold(asyncsteps.TestToolEpoch.Add(2 * time.Second))
		h := &holdTrace{tt: tt, obj: th}
		h.enterAt(0, "a")
		drive(t, tt)
		wantTrace(t, &h.tr, "a@5000")
		syncWantIdle(t, tt)
	})
	t.Run("past", func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		tt.Advance(time.Second)
		th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
		th.Hold(asyncsteps.TestToolEpoch.Add(500 * time.Millisecond))
		h := &holdTrace{tt: tt, obj: th}
		h.enterAt(time.Second, "a")
		h.enterAt(time.Second, "b")
		drive(t, tt)
		wantTrace(t, &h.tr, "a@1000,b@1100")
		syncWantIdle(t, tt)
	})
}

// A Hold that ends before the period in progress fills the period: the
// flows that come meanwhile enter as the next period begins, at the
// period's own end.
func TestThrottleHoldShorterThanThePeriod(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(2, time.Second)
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(0, "a")
	holdAt(tt, 100*time.Millisecond, 300*time.Millisecond, th.Hold)
	h.enterAt(200*time.Millisecond, "b")
	h.enterAt(1100*time.Millisecond, "c")
	drive(t, tt)
	wantTrace(t, &h.tr, "a@0,b@1000,c@1100")
	syncWantIdle(t, tt)
}

// A Hold whose instant has passed, made while a period runs, still fills
// that period: Hold reads no clock to tell it has passed. The period
// ends at its own end.
func TestThrottleHoldPastFillsThePeriod(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(2, time.Second)
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(0, "a")
	holdAt(tt, 500*time.Millisecond, 100*time.Millisecond, th.Hold)
	h.enterAt(600*time.Millisecond, "b")
	drive(t, tt)
	wantTrace(t, &h.tr, "a@0,b@1000")
	syncWantIdle(t, tt)
}

// A flow cancelled while held leaves the queue: it never enters, and
// the one behind it enters at the hold's end.
func TestThrottleHoldCancelWhileHeld(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	th.Hold(asyncsteps.TestToolEpoch.Add(time.Second))
	h := &holdTrace{tt: tt, obj: th}
	a, b := h.enterAt(0, "a"), h.enterAt(0, "b")
	tt.Deferred(500*time.Millisecond, a.r.Cancel)
	drive(t, tt)
	wantTrace(t, &h.tr, "b@1000")
	if err := result(t, a.res).Err; !errors.Is(err, context.Canceled) {
		t.Errorf("a ended with %v, want a cancel", err)
	}
	wantSuccess(t, result(t, b.res))
	syncWantIdle(t, tt)
}

// While held, a flow that finds the queue full is refused at once, as
// in a full period.
func TestThrottleHoldQueueLimit(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond, 1)
	th.Hold(asyncsteps.TestToolEpoch.Add(time.Second))
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(0, "a")
	h.enterAt(0, "b")
	drive(t, tt)
	wantTrace(t, &h.tr, "b:DefenseRejected: Throttle queue limit,a@1000")
	syncWantIdle(t, tt)
}

// A flow that comes at the hold's end, its timer due at that instant
// and armed after it, ends the hold itself: the waiter enters first and
// the flow waits for the next period, as at any period's end.
func TestThrottleFlowAtTheHoldsEnd(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	h := &holdTrace{tt: tt, obj: th}
	h.enterAt(500*time.Millisecond, "late") // armed first: runs first at 500
	h.enterAt(0, "a")
	h.enterAt(50*time.Millisecond, "w") // times the hold's rest
	holdAt(tt, 60*time.Millisecond, 500*time.Millisecond, th.Hold)
	drive(t, tt)
	wantTrace(t, &h.tr, "a@0,w@500,late@600")
	syncWantIdle(t, tt)
}

// A Limiter's Hold holds its rate gate; a Limiter with no Rate has none,
// and its Hold does nothing.
func TestLimiterHold(t *testing.T) {
	t.Run("rated", func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: 2, MaxQueue: asyncsteps.Unlimited,
			Rate: 1, Period: 100 * time.Millisecond, Burst: asyncsteps.Unlimited,
		})
		lim.Hold(asyncsteps.TestToolEpoch.Add(time.Second))
		h := &holdTrace{tt: tt, obj: lim}
		h.enterAt(0, "a")
		h.enterAt(0, "b")
		h.enterAt(0, "c") // waits for a slot, then for the rate
		drive(t, tt)
		wantTrace(t, &h.tr, "a@1000,b@1100,c@1200")
		syncWantIdle(t, tt)
	})
	t.Run("no rate", func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1})
		lim.Hold(asyncsteps.TestToolEpoch.Add(time.Second))
		h := &holdTrace{tt: tt, obj: lim}
		h.enterAt(0, "a")
		drive(t, tt)
		wantTrace(t, &h.tr, "a@0")
		syncWantIdle(t, tt)
	})
}

// A Hold from a flow of one Loop holds the flows of another, and lasts
// its whole time though the Loop its end is timed on closes: the end is
// timed again on the loop of a flow that waits for it.
func TestThrottleHoldAcrossLoopsOneClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(1, time.Minute), start: time.Now()}

		wantEntered(t, "a", te.enter(doomed, "a"))
		lost := te.enter(doomed, "lost") // the first waiter: the hold's end is timed on its loop
		synctest.Wait()
		time.Sleep(10 * time.Second)
		hold := asyncsteps.New(asyncsteps.WithTool(live))
		hold.Add(func(as asyncsteps.AsyncSteps, _ ...any) { te.th.Hold(as.Tool().Now().Add(time.Hour)) })
		if _, err := hold.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		next := te.enter(live, "next")
		synctest.Wait()
		doomed.Close()

		wantErrText(t, "lost", (<-lost).Err, "InternalError: the flow's loop is closed")
		wantEntered(t, "next", next)
		wantTrace(t, &te.tr, "a at 0s,next at 1h0m10s")
	})
}

// One entry per Period/Rate never lets more than Rate in within any
// window of Period, as a provider that counts over a sliding window
// wants: 10 a second as one each 100ms. (Rate per Period lets 2×Rate-1
// in across a period's end: TestLimiterRateLetsNearlyTwiceRateInAcrossAPeriodEnd.)
func TestThrottleOnePerIntervalKeepsToTheRateInEveryWindow(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	var entries []time.Duration
	arrive := func(at time.Duration, flows int) {
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
				entries = append(entries, tt.Now().Sub(asyncsteps.TestToolEpoch))
			})
			tt.Deferred(at, func() { r.Execute() })
		}
	}
	arrive(0, 1)
	arrive(999*time.Millisecond, 4)
	arrive(1000*time.Millisecond, 6)
	arrive(2550*time.Millisecond, 3)
	drive(t, tt)
	want := []time.Duration{0, 999, 1099, 1199, 1299, 1399, 1499, 1599, 1699, 1799, 1899, 2550, 2650, 2750}
	if len(entries) != len(want) {
		t.Fatalf("entries at %v, want %v (ms)", entries, want)
	}
	for i := range want {
		if entries[i] != want[i]*time.Millisecond {
			t.Fatalf("entries at %v, want %v (ms)", entries, want)
		}
	}
	for i := range entries {
		n := 0
		for _, e := range entries[i:] {
			if e < entries[i]+time.Second {
				n++
			}
		}
		if n > 10 {
			t.Errorf("%d entries within a second of %v", n, entries[i])
		}
	}
}

// A Hold from a goroutine of no loop, while the period's timer runs on
// one Loop and a flow of another waits, keeps that flow out until the
// hold's end: the old timer does nothing, the waiter's loop times the
// rest.
func TestThrottleHoldFromAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing, waiting := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer timing.Close()
		defer waiting.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(1, time.Minute), start: time.Now()}
		wantEntered(t, "a", te.enter(timing, "a"))
		w := te.enter(waiting, "w")
		synctest.Wait()
		time.Sleep(10 * time.Second)
		te.th.Hold(time.Now().Add(time.Hour))
		wantEntered(t, "w", w)
		wantTrace(t, &te.tr, "a at 0s,w at 1h0m10s")
	})
}

// A Hold with no flow waiting, whose period's Loop then closes, leaves
// the rest untimed: a flow that comes after the hold's end enters at
// once, timing the next period, not waiting for a timer nobody armed.
func TestThrottleHoldThenItsLoopClosesWithNoWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		te := &throttleEntries{t: t, th: asyncsteps.NewThrottle(1, time.Minute), start: time.Now()}
		wantEntered(t, "a", te.enter(doomed, "a"))
		time.Sleep(10 * time.Second)
		te.th.Hold(time.Now().Add(time.Hour))
		doomed.Close()
		time.Sleep(2 * time.Hour)
		wantEntered(t, "late", te.enter(live, "late"))
		wantEntered(t, "next", te.enter(live, "next"))
		wantTrace(t, &te.tr, "a at 0s,late at 2h0m10s,next at 2h1m10s")
	})
}

// Holds made from many goroutines while flows of two Loops enter, for
// -race: no flow enters within a hold made before it (the bubble's clock
// stands still between a flow's entry and its step, so a hold made at the
// instant of an entry may come either side of it), and every flow enters.
func TestThrottleHoldsFromManyGoroutines(t *testing.T) {
	for seed := range uint64(5) {
		synctest.Test(t, func(t *testing.T) {
			loops := []*asyncsteps.Loop{asyncsteps.NewLoop(), asyncsteps.NewLoop()}
			defer loops[0].Close()
			defer loops[1].Close()
			th := asyncsteps.NewThrottle(2, 10*time.Millisecond)
			start := time.Now()
			var mu sync.Mutex
			var holds [][2]time.Duration // made at, until
			var entries []time.Duration
			var flows []<-chan asyncsteps.Result
			var wg sync.WaitGroup
			for g := range uint64(4) {
				wg.Go(func() { // holds
					rng := rand.New(rand.NewPCG(seed, g))
					for range 10 {
						time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
						now := time.Now()
						until := now.Add(time.Duration(rng.IntN(40)) * time.Millisecond)
						th.Hold(until)
						mu.Lock()
						holds = append(holds, [2]time.Duration{now.Sub(start), until.Sub(start)})
						mu.Unlock()
					}
				})
				wg.Go(func() { // flows
					rng := rand.New(rand.NewPCG(seed, 100+g))
					for range 25 {
						time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						r := asyncsteps.New(asyncsteps.WithTool(loops[g%2]))
						r.Sync(th, func(asyncsteps.AsyncSteps, ...any) {
							mu.Lock()
							entries = append(entries, time.Since(start))
							mu.Unlock()
						})
						mu.Lock()
						flows = append(flows, r.Promise())
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, f := range flows {
				wantSuccess(t, <-f)
			}
			if len(entries) != 100 {
				t.Errorf("%d entries, want 100", len(entries))
			}
			for _, e := range entries {
				for _, h := range holds {
					if e > h[0] && e < h[1] {
						t.Errorf("an entry at %v, within the hold made at %v until %v", e, h[0], h[1])
					}
				}
			}
		})
	}
}
