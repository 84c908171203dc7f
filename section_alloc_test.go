package asyncsteps

import "testing"

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
