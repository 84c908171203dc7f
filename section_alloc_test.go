package asyncsteps

import (
	"testing"
	"time"
)

// A Mutex's Sync called directly, as a step adds its critical section,
// costs the flow one allocation: the step that enters, which holds the
// gates as they are (the section itself comes from the loop's pool).
func TestDirectSyncCostsOneAllocation(t *testing.T) {
	oneAPIChunk(t)
	l := newTestLoop(t)
	m := NewMutex(1)
	noop := func(AsyncSteps, ...any) {}
	run := func(add func(as AsyncSteps)) float64 { return loopFlowAllocs(t, l, add) }
	plain := run(func(as AsyncSteps) { as.Add(noop) })
	synced := run(func(as AsyncSteps) { m.Sync(as, noop) })
	if synced != plain+1 {
		t.Errorf("a flow allocates %v objects with a Mutex's Sync, %v with the step alone: want one more", synced, plain)
	}
}

// loopFlowAllocs returns the objects a flow on l allocates whose one step runs
// add.
func loopFlowAllocs(t *testing.T, l *Loop, add func(as AsyncSteps)) float64 {
	return testing.AllocsPerRun(100, func() {
		r := New(WithTool(l))
		r.Add(func(as AsyncSteps, _ ...any) { add(as) })
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// A KeyedMutex's Sync on a key in use, here one that another flow holds,
// costs what a Mutex's does, called directly or through AsyncSteps.Sync
// with a Syncer of the key made once: the lookup allocates nothing.
func TestKeyedMutexSyncCostsAsMutexOnAKeyInUse(t *testing.T) {
	oneAPIChunk(t)
	l := newTestLoop(t)
	m, km := NewMutex(2), NewKeyedMutex[string](2)
	key := km.Key("a")
	holder := New(WithTool(l))
	km.Sync(holder, "a", func(as AsyncSteps, _ ...any) { as.WaitExternal() })
	held := holder.Promise()
	defer func() { holder.Cancel(); <-held }()
	noop := func(AsyncSteps, ...any) {}
	run := func(add func(as AsyncSteps)) float64 { return loopFlowAllocs(t, l, add) }
	for _, c := range []struct {
		name         string
		mutex, keyed func(as AsyncSteps)
	}{
		{"Sync", func(as AsyncSteps) { m.Sync(as, noop) }, func(as AsyncSteps) { km.Sync(as, "a", noop) }},
		{"AsyncSteps.Sync", func(as AsyncSteps) { as.Sync(m, noop) }, func(as AsyncSteps) { as.Sync(key, noop) }},
	} {
		if mutex, keyed := run(c.mutex), run(c.keyed); keyed != mutex {
			t.Errorf("%s: a flow allocates %v objects with a KeyedMutex, %v with a Mutex", c.name, keyed, mutex)
		}
	}
	if n := km.Len(); n != 1 {
		t.Errorf("%d keys in use, want the holder's", n)
	}
}

// A Throttle's period costs one allocation, on a TestTool the entry of
// its timer: a flow that opens a period of its own (a rate of 1 per
// millisecond, the tool driven to the period's end) allocates one object
// more than one that enters a period that runs on (timed on another
// tool, never driven). Before, the task of the timer, which names the
// period it times, took an allocation of its own at every period.
func TestAThrottlePeriodCostsItsTimerAlone(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	noop := func(AsyncSteps, ...any) {}
	perFlow := NewThrottle(1, time.Millisecond)
	shared := NewThrottle(1000, time.Hour)
	other := NewTestTool()
	opener := New(WithTool(other))
	shared.Sync(opener, noop)
	opener.Execute()
	other.Advance(0) // opener enters: shared's period runs on, timed on other
	opening := flowAllocs(tt, func(as AsyncSteps) { perFlow.Sync(as, noop) })
	entering := flowAllocs(tt, func(as AsyncSteps) { shared.Sync(as, noop) })
	if opening != entering+1 {
		t.Errorf("a flow that opens a period allocates %v objects, one that enters a running period %v: want one more",
			opening, entering)
	}
}
