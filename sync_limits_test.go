package asyncsteps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A zero LimiterOptions field means "not limited by this": a zero
// Concurrent lets every flow in at once, a zero Rate sets no rate limit, a
// zero Period is one second; the entry times (ms) of 6 flows that each
// stay 10 ms inside show each limit alone.
func TestLimiterZeroOptionsLimitNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lim     asyncsteps.Syncer
		entries string
	}{
		{"zero options", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{}), "0,0,0,0,0,0"},
		{"zero Limiter", &asyncsteps.Limiter{}, "0,0,0,0,0,0"},
		{"Concurrent only", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 2, MaxQueue: 4}), "0,0,10,10,20,20"},
		{"Rate only", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Rate: 3, Period: 100 * time.Millisecond, Burst: 3}), "0,0,0,100,100,100"},
		{"zero Period", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Rate: 3, Burst: asyncsteps.Unlimited}), "0,0,0,1000,1000,1000"},
		{"zero KeyedLimiter", new(asyncsteps.KeyedLimiter[string]).Key("a"), "0,0,0,0,0,0"},
		{"KeyedLimiter Concurrent only", asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 2, MaxQueue: 4}).Key("a"),
			"0,0,10,10,20,20"},
		{"KeyedLimiter Rate only", asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Rate: 3, Period: 100 * time.Millisecond, Burst: 3}).Key("a"),
			"0,0,0,100,100,100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			c := newSyncCrowd(tt, tc.lim)
			c.start(6, syncHoldFor(10*time.Millisecond))
			drive(t, tt)
			c.wantCounts(t, "the end", 6, 0)
			if got := c.entryTimes(); got != tc.entries {
				t.Errorf("entries at %s ms, want %s", got, tc.entries)
			}
			syncWantIdle(t, tt)
			wantKeysInUse(t, tc.lim, 0)
		})
	}
}

// The trial's Limiter: a concurrency limit and a queue, no rate set. It
// lets all 400 flows through, 4 at a time, where the spec's defaults for
// the unset fields rejected all but one.
func TestLimiterConcurrencyWithoutRateRejectsNone(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 4, MaxQueue: 400}))
	c.start(400, syncHoldFor(time.Millisecond))
	drive(t, tt)
	c.wantCounts(t, "the end", 400, 0)
	if c.maxInside != 4 {
		t.Errorf("%d flows inside at once, want 4", c.maxInside)
	}
	if got := tt.Now().Sub(asyncsteps.TestToolEpoch); got != 100*time.Millisecond {
		t.Errorf("the flows took %v, want 100ms (400 / 4 × 1ms)", got)
	}
}

// SpecLimiterOptions are the spec's defaults, by name: one flow inside, one
// entry per second, no queue for either.
func TestSpecLimiterOptions(t *testing.T) {
	want := asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 0, Rate: 1, Period: time.Second, Burst: 0}
	if got := asyncsteps.SpecLimiterOptions(); got != want {
		t.Errorf("SpecLimiterOptions() = %+v, want %+v", got, want)
	}
	// Two flows at once: the second finds the slot taken and no queue.
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewLimiter(asyncsteps.SpecLimiterOptions()))
	c.start(2, syncHoldFor(10*time.Millisecond))
	tt.Advance(20 * time.Millisecond)
	c.wantCounts(t, "20ms", 1, 1)
	c.wantRejections(t, asyncsteps.DefenseRejected, "Mutex queue limit")
	// The first has left: a third finds the slot free but this second's
	// entry spent, and no burst queue.
	c.start(1, nil)
	drive(t, tt)
	c.wantCounts(t, "the end", 1, 2)
	if got := c.rejected[1]; got != "DefenseRejected: Throttle queue limit" {
		t.Errorf("the third saw %q, want the rate's rejection", got)
	}
	syncWantIdle(t, tt)
}

// One queue rule for Mutex, Throttle and Limiter: a limit left out or
// negative is unlimited, a limit n lets n wait, 0 lets none wait. Five
// flows arrive at once at a primitive that lets one in.
func TestQueueRuleIsOneForAllPrimitives(t *testing.T) {
	period := 10 * time.Millisecond
	mutex := func(q ...int) asyncsteps.Syncer { return asyncsteps.NewMutex(1, q...) }
	throttle := func(q ...int) asyncsteps.Syncer { return asyncsteps.NewThrottle(1, period, q...) }
	concurrency := func(q int) asyncsteps.Syncer {
		return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: q})
	}
	rate := func(q int) asyncsteps.Syncer {
		return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Rate: 1, Period: period, Burst: q})
	}
	keyedThrottle := func(q ...int) asyncsteps.Syncer { return asyncsteps.NewKeyedThrottle[string](1, period, q...).Key("a") }
	keyedConcurrency := func(q int) asyncsteps.Syncer {
		return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: q}).Key("a")
	}
	keyedRate := func(q int) asyncsteps.Syncer {
		return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Rate: 1, Period: period, Burst: q}).Key("a")
	}
	const full, late = "Mutex queue limit", "Throttle queue limit"
	for _, tc := range []struct {
		name     string
		obj      asyncsteps.Syncer
		rejected int
		info     string
	}{
		{"zero Mutex", &asyncsteps.Mutex{}, 0, ""},
		{"NewMutex(1)", mutex(), 0, ""},
		{"NewMutex(1, Unlimited)", mutex(asyncsteps.Unlimited), 0, ""},
		{"NewMutex(1, 2)", mutex(2), 2, full},
		{"NewMutex(1, 0)", mutex(0), 4, full},
		{"zero Throttle", &asyncsteps.Throttle{}, 0, ""},
		{"NewThrottle(1, 10ms)", throttle(), 0, ""},
		{"NewThrottle(1, 10ms, Unlimited)", throttle(asyncsteps.Unlimited), 0, ""},
		{"NewThrottle(1, 10ms, 2)", throttle(2), 2, late},
		{"NewThrottle(1, 10ms, 0)", throttle(0), 4, late},
		{"Limiter MaxQueue Unlimited", concurrency(asyncsteps.Unlimited), 0, ""},
		{"Limiter MaxQueue 2", concurrency(2), 2, full},
		{"Limiter MaxQueue 0", concurrency(0), 4, full},
		{"Limiter Burst Unlimited", rate(asyncsteps.Unlimited), 0, ""},
		{"Limiter Burst 2", rate(2), 2, late},
		{"Limiter Burst 0", rate(0), 4, late},
		{"zero KeyedThrottle", new(asyncsteps.KeyedThrottle[string]).Key("a"), 0, ""},
		{"NewKeyedThrottle(1, 10ms)", keyedThrottle(), 0, ""},
		{"NewKeyedThrottle(1, 10ms, 2)", keyedThrottle(2), 2, late},
		{"NewKeyedThrottle(1, 10ms, 0)", keyedThrottle(0), 4, late},
		{"KeyedLimiter MaxQueue Unlimited", keyedConcurrency(asyncsteps.Unlimited), 0, ""},
		{"KeyedLimiter MaxQueue 2", keyedConcurrency(2), 2, full},
		{"KeyedLimiter MaxQueue 0", keyedConcurrency(0), 4, full},
		{"KeyedLimiter Burst Unlimited", keyedRate(asyncsteps.Unlimited), 0, ""},
		{"KeyedLimiter Burst 2", keyedRate(2), 2, late},
		{"KeyedLimiter Burst 0", keyedRate(0), 4, late},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			c := newSyncCrowd(tt, tc.obj)
			c.start(5, syncHoldFor(time.Millisecond))
			drive(t, tt)
			c.wantCounts(t, "the end", 5-tc.rejected, tc.rejected)
			c.wantRejections(t, asyncsteps.DefenseRejected, tc.info)
			syncWantIdle(t, tt)
		})
	}
}

// NewLimiter takes a negative MaxQueue or Burst as unlimited; a negative
// Concurrent, Rate or Period is a mistake, whose panic names the field
// and its value (the first of them, in that order, if several are): the
// message said "negative Concurrent, Rate or Period", which left the one
// to fix in a configuration to guess.
func TestNewLimiterRejectsNegativeLimits(t *testing.T) {
	asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: -5, Rate: 1, Burst: -1})
	for _, tc := range []struct {
		opts asyncsteps.LimiterOptions
		want string
	}{
		{asyncsteps.LimiterOptions{Concurrent: -1}, "asyncsteps: NewLimiter: negative Concurrent -1"},
		{asyncsteps.LimiterOptions{Concurrent: 2, Rate: -5}, "asyncsteps: NewLimiter: negative Rate -5"},
		{asyncsteps.LimiterOptions{Period: -1}, "asyncsteps: NewLimiter: negative Period -1ns"},
		{asyncsteps.LimiterOptions{Rate: 10, Period: -time.Second}, "asyncsteps: NewLimiter: negative Period -1s"},
		{asyncsteps.LimiterOptions{Concurrent: -3, Rate: -4, Period: -time.Second}, "asyncsteps: NewLimiter: negative Concurrent -3"},
	} {
		func() {
			defer func() {
				if got := recover(); got != tc.want {
					t.Errorf("NewLimiter(%+v) panicked with %#v, want %q", tc.opts, got, tc.want)
				}
			}()
			asyncsteps.NewLimiter(tc.opts)
		}()
	}
}

// A Limiter's Burst bounds the queue, not how many enter together: a
// period begins with its first entry, and the Rate entries of a period may
// all come at once, so that Rate-1 entries just before a period's end and
// Rate as the next begins make 2×Rate-1 within a millisecond, 9 for Rate 5
// per 500ms (10 a second), where a token bucket's burst would bound them.
// While flows wait, each period lets its Rate in at its start: the 11th
// flow enters at 1s.
func TestLimiterRateLetsNearlyTwiceRateInAcrossAPeriodEnd(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Rate: 5, Period: 500 * time.Millisecond, Burst: asyncsteps.Unlimited})
	var entries []string
	arrive := func(at time.Duration, flows int) {
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tt.Deferred(at, func() { as.Success() })
				as.WaitExternal()
			})
			r.Sync(lim, func(as asyncsteps.AsyncSteps, _ ...any) {
				entries = append(entries, fmt.Sprint(tt.Now().Sub(asyncsteps.TestToolEpoch)))
			})
			r.Execute()
		}
	}
	arrive(0, 1)
	arrive(499*time.Millisecond, 4)
	arrive(500*time.Millisecond, 6)
	drive(t, tt)
	if got, want := strings.Join(entries, ","), "0s,499ms,499ms,499ms,499ms,500ms,500ms,500ms,500ms,500ms,1s"; got != want {
		t.Errorf("entries at %s, want %s", got, want)
	}
}
