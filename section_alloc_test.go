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
	run := func(add func(as AsyncSteps)) float64 {
		return testing.AllocsPerRun(100, func() {
			r := New(WithTool(l))
			r.Add(func(as AsyncSteps, _ ...any) { add(as) })
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := run(func(as AsyncSteps) { as.Add(noop) })
	synced := run(func(as AsyncSteps) { m.Sync(as, noop) })
	if synced != plain+1 {
		t.Errorf("a flow allocates %v objects with a Mutex's Sync, %v with the step alone: want one more", synced, plain)
	}
}
