package asyncsteps_test

// KeyedThrottle on virtual time, with exact entry times: keys that do not
// share a limit, a key's queue limit, the period's end, a key idle and
// used again within its period, a hold on one key, a cancel while
// waiting, bad keys, 10,000 keys that leave nothing behind; on Loops in
// a testing/synctest bubble, a Loop closed with a waiter and flows of two
// Loops sharing one KeyedThrottle.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// keyedRate is a KeyedThrottle[string] or a KeyedLimiter[string].
type keyedRate interface {
	Sync(as asyncsteps.AsyncSteps, key string, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc)
	Key(key string) asyncsteps.Syncer
	Hold(key string, until time.Time)
	Len() int
}

// keyedTrace starts flows on tt that pass through a key of kt, and
// traces "NAME@MS" as each enters, "NAME:CODE: INFO" as its error
// handler sees an error, and "len@MS=N" for Len at the times asked.
type keyedTrace struct {
	tt *asyncsteps.TestTool
	kt keyedRate
	tr tracer
}

// enterAt starts the flow name on key at when, from the start of tt's
// clock; a timeout, if not zero, is set on the step that syncs.
func (k *keyedTrace) enterAt(when time.Duration, key, name string, timeout ...time.Duration) {
	r := asyncsteps.New(asyncsteps.WithTool(k.tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if len(timeout) > 0 {
			as.SetTimeout(timeout[0])
		}
		k.kt.Sync(as, key, func(asyncsteps.AsyncSteps, ...any) { k.tr.addf("%s@%d", name, at(k.tt)) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		k.tr.addf("%s:%s: %s", name, code, as.State().ErrorInfo)
		as.Success()
	})
	k.at(when, func() { r.Execute() })
}

// lenAt traces Len at when.
func (k *keyedTrace) lenAt(when time.Duration) {
	k.at(when, func() { k.tr.addf("len@%d=%d", at(k.tt), k.kt.Len()) })
}

// holdAt holds key at when until the instant until, both from the start
// of tt's clock.
func (k *keyedTrace) holdAt(when time.Duration, key string, until time.Duration) {
	holdAt(k.tt, when, until, func(u time.Time) { k.kt.Hold(key, u) })
}

func (k *keyedTrace) at(when time.Duration, f func()) {
	k.tt.Deferred(when-k.tt.Now().Sub(asyncsteps.TestToolEpoch), f)
}

// drive runs every event, and checks that nothing is left: no key, no
// timer.
func (k *keyedTrace) drive(t *testing.T, want string) {
	t.Helper()
	drive(t, k.tt)
	wantTrace(t, &k.tr, want)
	wantLen(t, k.kt, "at the end", 0)
	syncWantIdle(t, k.tt)
}

// Each key has a rate of its own: a key whose period is full queues its
// flows while the flows of another key go on, and a key whose period
// ends with nobody waiting is dropped.
func TestKeyedThrottleKeysDoNotShareALimit(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](2, time.Second)}
	k.enterAt(0, "a", "a1")
	k.enterAt(0, "a", "a2")
	k.enterAt(0, "a", "a3")
	k.enterAt(0, "b", "b1")
	k.enterAt(ms(500), "b", "b2")
	k.lenAt(ms(600))
	k.lenAt(ms(1100)) // b's period ended with nobody waiting; a3's runs
	k.lenAt(ms(2100))
	k.drive(t, "a1@0,a2@0,b1@0,b2@500,len@600=2,a3@1000,len@1100=1,len@2100=0")
}

// Each key has a queue of its own, with the queue limit of a Throttle.
func TestKeyedThrottleQueueLimitPerKey(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](1, time.Second, 1)}
	for _, key := range []string{"a", "b"} {
		for i := 1; i <= 3; i++ {
			k.enterAt(0, key, key+strconv.Itoa(i))
		}
	}
	k.drive(t, "a1@0,a3:DefenseRejected: Throttle queue limit,b1@0,b3:DefenseRejected: Throttle queue limit,"+
		"a2@1000,b2@1000")
}

// At the end of a key's period, the flow that waited and one that comes
// then enter in the next period, max at once; one more waits for the
// period after.
func TestKeyedThrottlePeriodBoundary(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](2, time.Second)}
	k.enterAt(0, "a", "a1")
	k.enterAt(0, "a", "a2")
	k.enterAt(ms(999), "a", "a3")
	k.enterAt(ms(1000), "a", "a4")
	k.enterAt(ms(1000), "a", "a5")
	k.lenAt(ms(2500))
	k.lenAt(ms(3000) + 1)
	k.drive(t, "a1@0,a2@0,a3@1000,a4@1000,a5@2000,len@2500=1,len@3000=0")
}

// A key that no flow enters or waits for is kept while its period runs:
// its entries count until the period ends. Dropped as its last flow left
// and made again, it would let max more in within the period: 2×max.
func TestKeyedThrottleKeyIdleThenReusedInItsPeriodStillCounts(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](2, time.Second)}
	k.enterAt(0, "a", "a1")
	k.enterAt(0, "a", "a2")
	k.lenAt(ms(500))
	k.enterAt(ms(600), "a", "a3")
	k.enterAt(ms(600), "a", "a4")
	k.drive(t, "a1@0,a2@0,len@500=1,a3@1000,a4@1000")
}

// A hold on one key keeps the flows of that key out until its end, and
// no other key's. A hold on a key nobody uses keeps the key, with no
// timer, until a flow of the KeyedThrottle comes after its end.
func TestKeyedThrottleHoldHoldsOneKey(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](1, ms(100))}
	k.holdAt(0, "a", ms(500))
	k.holdAt(0, "c", ms(300))
	k.enterAt(ms(100), "a", "a1")
	k.enterAt(ms(100), "b", "b1")
	k.enterAt(ms(100), "a", "a2")
	k.lenAt(ms(150))
	k.lenAt(ms(450)) // b's period is over; c's hold is, but no flow came since
	k.enterAt(ms(700), "d", "d1")
	k.lenAt(ms(750))
	k.drive(t, "b1@100,len@150=3,len@450=2,a1@500,a2@600,d1@700,len@750=1")
}

// Holds made on 10,000 keys nobody uses arm no timer, and leave nothing
// once a flow comes after their end.
func TestKeyedThrottleHoldsOnKeysNobodyUsesLeaveNothing(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	kt := asyncsteps.NewKeyedThrottle[string](1, time.Second)
	for i := range 10000 {
		kt.Hold(strconv.Itoa(i), asyncsteps.TestToolEpoch.Add(time.Second))
	}
	wantLen(t, kt, "held", 10000)
	syncWantIdle(t, tt)
	tt.Advance(time.Second)
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	kt.Sync(r, "other", func(asyncsteps.AsyncSteps, ...any) {})
	res := r.Promise()
	tt.Advance(0)
	wantSuccess(t, result(t, res))
	wantLen(t, kt, "after a flow", 1)
	drive(t, tt)
	wantLen(t, kt, "at the end", 0)
	syncWantIdle(t, tt)
}

// A flow cancelled while it waits (here by its timeout) leaves its key's
// queue; the period still runs its time.
func TestKeyedThrottleCancelWhileWaiting(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: asyncsteps.NewKeyedThrottle[string](1, time.Second)}
	k.enterAt(0, "a", "a1")
	k.enterAt(0, "a", "a2", ms(300))
	k.enterAt(ms(500), "a", "a3")
	k.drive(t, "a1@0,a2:Timeout: ,a3@1000")
}

// A section cancelled after its step took the key, before it asked the
// key's gates (a Parallel branch that failed in between), lets go of the
// key. Before, a key with a rate limit alone was kept for good: its
// section let go of it only as its entry asked the Throttle.
func TestKeyedSectionCancelledBeforeItsGatesLetsGoOfTheKey(t *testing.T) {
	for name, keyed := range map[string]interface {
		Key(key string) asyncsteps.Syncer
		Len() int
	}{
		"KeyedMutex":                asyncsteps.NewKeyedMutex[string](1),
		"KeyedThrottle":             asyncsteps.NewKeyedThrottle[string](1, time.Second),
		"KeyedLimiter rate":         asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Rate: 1}),
		"KeyedLimiter slots":        asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1}),
		"KeyedLimiter slots & rate": asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, Rate: 1}),
	} {
		t.Run(name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Sync(keyed.Key("a"), tr.step("f"))
				})
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						tr.addf("len=%d", keyed.Len()) // the section took the key
						as.Error("Boom")
					})
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("onerror %s", code)
				as.Success()
			})
			r.Execute()
			drive(t, tt)
			wantTrace(t, &tr, "len=1,onerror Boom")
			wantLen(t, keyed, "after the flow", 0)
			syncWantIdle(t, tt)
		})
	}
}

// 10,000 keys used once each leave no key and no timer once their
// periods have ended.
func TestKeyedThrottleKeysUsedOnceLeaveNothing(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	kt := asyncsteps.NewKeyedThrottle[int](1, time.Second)
	results := make([]<-chan asyncsteps.Result, 10000)
	for i := range results {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		kt.Sync(r, i, func(asyncsteps.AsyncSteps, ...any) {})
		results[i] = r.Promise()
	}
	tt.Advance(0)
	wantSuccesses(t, results)
	wantLen(t, kt, "in their period", 10000)
	if n := tt.Pending(); n != 10000 {
		t.Errorf("%d events in their period, want a timer per key: 10000", n)
	}
	tt.Advance(time.Second)
	wantLen(t, kt, "after their period", 0)
	syncWantIdle(t, tt)
}

// A key that is not comparable (an interface holding a slice) or not
// equal to itself (NaN) fails the step that would enter with
// InternalError, before onerror or f run, and keeps no key; Hold on one
// does nothing.
func TestKeyedThrottleKeyMisuse(t *testing.T) {
	anyKeys := asyncsteps.NewKeyedThrottle[any](1, time.Second)
	floatKeys := asyncsteps.NewKeyedThrottle[float64](1, time.Second)
	checkKeyMisuse(t, "KeyedThrottle", anyKeys, floatKeys)
	anyKeys.Hold([]int{1}, asyncsteps.TestToolEpoch.Add(time.Hour))
	floatKeys.Hold(math.NaN(), asyncsteps.TestToolEpoch.Add(time.Hour))
	wantLen(t, anyKeys, "after Hold", 0)
	wantLen(t, floatKeys, "after Hold", 0)
}

// The zero KeyedThrottle lets one flow per second in per key, and queues
// without limit.
func TestKeyedThrottleZeroValue(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: new(asyncsteps.KeyedThrottle[string])}
	for i := 1; i <= 3; i++ {
		k.enterAt(0, "a", "a"+strconv.Itoa(i))
	}
	k.enterAt(0, "b", "b1")
	k.drive(t, "a1@0,b1@0,a2@1000,a3@2000")
}

// NewKeyedThrottle refuses what NewThrottle refuses.
func TestNewKeyedThrottlePanics(t *testing.T) {
	for _, c := range []struct {
		max    int
		period time.Duration
		want   string
	}{
		{0, time.Second, "asyncsteps: NewKeyedThrottle: max must be at least 1"},
		{1, 0, "asyncsteps: NewKeyedThrottle: period must be positive"},
	} {
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("NewKeyedThrottle(%d, %v) panicked with %v, want %q", c.max, c.period, r, c.want)
				}
			}()
			asyncsteps.NewKeyedThrottle[string](c.max, c.period)
		}()
	}
}

// A key whose Loop closes before its period ends keeps its period: a
// flow of a live loop that comes for it waits for that end, and times
// it; a key with no such flow is kept, with no timer, until a flow of
// the KeyedThrottle comes after its end. Nothing is left afterwards.
func TestKeyedThrottleLoopClosedWithWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doomed, live := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer live.Close()
		kt := asyncsteps.NewKeyedThrottle[string](1, time.Hour)
		start := time.Now()
		var tr tracer
		enter := func(loop *asyncsteps.Loop, key, name string) <-chan asyncsteps.Result {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			kt.Sync(r, key, func(asyncsteps.AsyncSteps, ...any) { tr.addf("%s at %v", name, time.Since(start)) })
			return r.Promise()
		}
		keys := func() { synctest.Wait(); tr.addf("%d keys at %v", kt.Len(), time.Since(start)) }

		firstA, firstX := enter(doomed, "a", "first a"), enter(doomed, "x", "first x")
		synctest.Wait()
		time.Sleep(10 * time.Minute)
		lost := enter(doomed, "a", "lost")
		synctest.Wait()
		doomed.Close()
		wantErrText(t, "lost", (<-lost).Err, "InternalError: the flow's loop is closed")
		keys()
		time.Sleep(30 * time.Minute)
		nextA := enter(live, "a", "next a") // times the rest of a's period
		time.Sleep(21 * time.Minute)
		y := enter(live, "y", "y") // after x's end: x goes
		keys()
		time.Sleep(3 * time.Hour)
		keys()
		for name, res := range map[string]<-chan asyncsteps.Result{"first a": firstA, "first x": firstX, "next a": nextA, "y": y} {
			wantEntered(t, name, res)
		}
		wantTrace(t, &tr, "first a at 0s,first x at 0s,2 keys at 10m0s,next a at 1h0m0s,y at 1h1m0s,"+
			"2 keys at 1h1m0s,0 keys at 4h1m0s")
	})
}

// Flows on two Loops sharing one KeyedThrottle enter each key at its
// rate, max at the start of each period, whatever loop they run on.
func TestKeyedThrottleFlowsOnTwoLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops := []*asyncsteps.Loop{asyncsteps.NewLoop(), asyncsteps.NewLoop()}
		defer func() {
			for _, l := range loops {
				l.Close()
			}
		}()
		const keys, perKey = 5, 6
		kt := asyncsteps.NewKeyedThrottle[int](2, ms(100))
		start := time.Now()
		var mu sync.Mutex
		entered := make([][]time.Duration, keys)
		var results []<-chan asyncsteps.Result
		for i := range perKey {
			for key := range keys {
				r := asyncsteps.New(asyncsteps.WithTool(loops[(i+key)%2]))
				kt.Sync(r, key, func(asyncsteps.AsyncSteps, ...any) {
					mu.Lock()
					defer mu.Unlock()
					entered[key] = append(entered[key], time.Since(start))
				})
				results = append(results, r.Promise())
			}
		}
		for i, res := range results {
			wantEntered(t, strconv.Itoa(i), res)
		}
		want := []time.Duration{0, 0, ms(100), ms(100), ms(200), ms(200)}
		for key, times := range entered {
			slices.Sort(times)
			if !slices.Equal(times, want) {
				t.Errorf("key %d entered at %v, want %v", key, times, want)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantLen(t, kt, "at the end", 0)
	})
}

// ExampleKeyedThrottle limits each tenant to 2 requests a second, with
// 1 more queued; the rest are refused, as a gateway answers 503, and one
// tenant's burst does not slow another's requests.
func ExampleKeyedThrottle() {
	tt := asyncsteps.NewTestTool()
	perTenant := asyncsteps.NewKeyedThrottle[string](2, time.Second, 1)
	for i, tenant := range strings.Fields("acme acme acme acme umbrella") {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		perTenant.Sync(r, tenant, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Printf("%d %s: 200 at %v\n", i, tenant, as.Tool().Now().Sub(asyncsteps.TestToolEpoch))
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Printf("%d %s: 503 (%s)\n", i, tenant, code)
			as.Success()
		})
		r.Execute()
	}
	tt.Run()
	fmt.Println("tenants in use:", perTenant.Len())
	// Output:
	// 0 acme: 200 at 0s
	// 1 acme: 200 at 0s
	// 3 acme: 503 (DefenseRejected)
	// 4 umbrella: 200 at 0s
	// 2 acme: 200 at 1s
	// tenants in use: 0
}

// BenchmarkKeyedThrottleSync measures a flow that enters a period with
// room, next to the same flow on a Throttle: in a period that runs, on a
// key in use ("in period"), and in a period the flow opens, whose timer
// then ends it, on a key nobody uses (made, timed and dropped at each
// Sync: "new period").
func BenchmarkKeyedThrottleSync(b *testing.B) {
	section := func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(1) }
	roomy := asyncsteps.NewThrottle(math.MaxInt32, time.Hour)
	timed := asyncsteps.NewThrottle(1, time.Millisecond)
	kt := asyncsteps.NewKeyedThrottle[string](math.MaxInt32, time.Hour)
	ktTimed := asyncsteps.NewKeyedThrottle[string](1, time.Millisecond)
	key := kt.Key("in use")
	cases := []struct {
		name     string
		sync     func(r *asyncsteps.Root)
		inPeriod bool // the period stays: the tool runs only what is due
	}{
		{"in period/Throttle", func(r *asyncsteps.Root) { r.Sync(roomy, section) }, true},
		{"in period/KeyedThrottle.Sync", func(r *asyncsteps.Root) { kt.Sync(r, "in use", section) }, true},
		{"in period/Key", func(r *asyncsteps.Root) { r.Sync(key, section) }, true},
		{"new period/Throttle", func(r *asyncsteps.Root) { r.Sync(timed, section) }, false},
		{"new period/KeyedThrottle.Sync", func(r *asyncsteps.Root) { ktTimed.Sync(r, "new", section) }, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tt := asyncsteps.NewTestTool()
			b.ReportAllocs()
			for b.Loop() {
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				c.sync(r)
				r.Execute()
				if c.inPeriod {
					tt.Advance(0)
				} else {
					tt.Run()
				}
			}
			tt.Run()
		})
	}
}
