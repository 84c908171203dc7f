package asyncsteps_test

// KeyedLimiter on virtual time, with exact entry times: keys that do not
// share their limits, a key kept while a flow holds a slot or its period
// runs, a key idle then used again within its period, a hold on one key,
// the zero value, bad keys. The tests of every Syncer list its key too.

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// enterFor starts the flow name on key at when, which stays inside for
// stay, and traces "NAME@MS" as it enters.
func (k *keyedTrace) enterFor(when time.Duration, key, name string, stay time.Duration) {
	r := asyncsteps.New(asyncsteps.WithTool(k.tt))
	k.kt.Sync(r, key, func(as asyncsteps.AsyncSteps, _ ...any) {
		k.tr.addf("%s@%d", name, at(k.tt))
		k.tt.Deferred(stay, func() { as.Success() })
		as.WaitExternal()
	}, func(as asyncsteps.AsyncSteps, code string) {
		k.tr.addf("%s:%s: %s", name, code, as.State().ErrorInfo)
		as.Success()
	})
	k.at(when, func() { r.Execute() })
}

// Each key has its own slots and its own rate: a key's flows take turns
// and wait for its rate while another key's go on. A key is kept while a
// flow holds or waits for one of its slots, or its period runs.
func TestKeyedLimiterKeysDoNotShareLimits(t *testing.T) {
	kl := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: asyncsteps.Unlimited, Rate: 2, Period: time.Second, Burst: asyncsteps.Unlimited})
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: kl}
	for _, name := range []string{"a1", "a2", "a3"} {
		k.enterFor(0, "a", name, ms(100))
	}
	k.enterFor(0, "b", "b1", ms(100))
	k.lenAt(ms(500))  // a3 holds a's slot, waiting for its rate; b's period runs
	k.lenAt(ms(1050)) // a3 is inside; b's period has ended
	k.lenAt(ms(2100))
	k.drive(t, "a1@0,b1@0,a2@100,len@500=2,a3@1000,len@1050=1,len@2100=0")
}

// A key whose slots are all free is kept while its period runs: its
// entries count until the period ends.
func TestKeyedLimiterKeyIdleThenReusedInItsPeriodStillCounts(t *testing.T) {
	kl := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{
		Concurrent: 5, MaxQueue: asyncsteps.Unlimited, Rate: 2, Period: time.Second, Burst: asyncsteps.Unlimited})
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: kl}
	k.enterAt(0, "a", "a1")
	k.enterAt(0, "a", "a2")
	k.lenAt(ms(500))
	k.enterAt(ms(600), "a", "a3")
	k.enterAt(ms(600), "a", "a4")
	k.drive(t, "a1@0,a2@0,len@500=1,a3@1000,a4@1000")
}

// A hold on one key keeps the flows of that key out of its rate until
// its end, holding their slots, and no other key's. A KeyedLimiter with
// no Rate has nothing to hold.
func TestKeyedLimiterHoldHoldsOneKey(t *testing.T) {
	kl := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: asyncsteps.Unlimited, Rate: 1, Period: ms(100), Burst: asyncsteps.Unlimited})
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: kl}
	k.holdAt(0, "a", ms(500))
	k.enterAt(ms(100), "a", "a1")
	k.enterAt(ms(100), "b", "b1")
	k.enterAt(ms(100), "a", "a2")
	k.lenAt(ms(150))
	k.drive(t, "b1@100,len@150=2,a1@500,a2@600")

	unrated := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1})
	unrated.Hold("a", asyncsteps.TestToolEpoch.Add(time.Hour))
	wantLen(t, unrated, "after a Hold with no Rate", 0)
}

// The zero KeyedLimiter limits nothing, and keeps no key; it still
// refuses a key that could never be found again.
func TestKeyedLimiterZeroValue(t *testing.T) {
	k := &keyedTrace{tt: asyncsteps.NewTestTool(), kt: new(asyncsteps.KeyedLimiter[string])}
	for _, name := range []string{"a1", "a2", "a3"} {
		k.enterFor(0, "a", name, ms(100))
	}
	k.lenAt(ms(50))
	k.drive(t, "a1@0,a2@0,a3@0,len@50=0")

	r, tt := newFlow()
	new(asyncsteps.KeyedLimiter[float64]).Sync(r, math.NaN(), func(asyncsteps.AsyncSteps, ...any) {})
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "KeyedLimiter: key not equal to itself (NaN)")
}

// A key that is not comparable or not equal to itself fails the step that
// would enter, as a KeyedMutex's does, and keeps no key; Hold on one does
// nothing.
func TestKeyedLimiterKeyMisuse(t *testing.T) {
	anyKeys := asyncsteps.NewKeyedLimiter[any](asyncsteps.SpecLimiterOptions())
	floatKeys := asyncsteps.NewKeyedLimiter[float64](asyncsteps.SpecLimiterOptions())
	checkKeyMisuse(t, "KeyedLimiter", anyKeys, floatKeys)
	anyKeys.Hold([]int{1}, asyncsteps.TestToolEpoch.Add(time.Hour))
	floatKeys.Hold(math.NaN(), asyncsteps.TestToolEpoch.Add(time.Hour))
	wantLen(t, anyKeys, "after Hold", 0)
	wantLen(t, floatKeys, "after Hold", 0)
}

// NewKeyedLimiter refuses what NewLimiter refuses, and names itself.
func TestNewKeyedLimiterRejectsNegativeLimits(t *testing.T) {
	defer func() {
		const want = "asyncsteps: NewKeyedLimiter: negative Rate -5"
		if r := recover(); r != want {
			t.Errorf("panicked with %#v, want %q", r, want)
		}
	}()
	asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 2, Rate: -5})
}

// ExampleKeyedLimiter limits the calls to each upstream host to 2 at once
// and 2 a second, with 1 more call waiting for a slot and 1 for the rate;
// the rest are refused. Each call takes 10ms: call 2 gets a slot then,
// and waits for the next second; call 3 finds the queue full. One host's
// calls do not hold up another's.
func ExampleKeyedLimiter() {
	tt := asyncsteps.NewTestTool()
	perHost := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{
		Concurrent: 2, MaxQueue: 1, Rate: 2, Period: time.Second, Burst: 1,
	})
	for i, host := range strings.Fields("a.example a.example a.example a.example b.example") {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		perHost.Sync(r, host, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Printf("%d %s: called at %v\n", i, host, syncElapsed(tt))
			as.Add(syncPause(10 * time.Millisecond)) // the call
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Printf("%d %s: %s (%s)\n", i, host, code, as.State().ErrorInfo)
			as.Success()
		})
		r.Execute()
	}
	tt.Run()
	fmt.Println("hosts in use:", perHost.Len())
	// Output:
	// 0 a.example: called at 0s
	// 1 a.example: called at 0s
	// 3 a.example: DefenseRejected (Mutex queue limit)
	// 4 b.example: called at 0s
	// 2 a.example: called at 1s
	// hosts in use: 0
}
