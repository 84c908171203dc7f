package asyncsteps

import "testing"

// A Repeat added by the step that runs it costs the flow one allocation,
// its definition: the control of the definition's first execution and the
// step of its iterations come with it. Loop and ForEach take the same
// path (a Loop needs a Break to end, and a ForEach's collection costs its
// own allocations). The flows compared differ only by the loop around the
// same body.
func TestALoopCostsOneAllocation(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	noop := func(AsyncSteps, ...any) {}
	run := func(add func(as AsyncSteps)) float64 { return flowAllocs(tt, add) }
	plain := run(func(as AsyncSteps) { as.Add(func(as AsyncSteps, _ ...any) { as.Add(noop) }) })
	repeat := run(func(as AsyncSteps) { as.Repeat(1, func(as AsyncSteps, _ int) { as.Add(noop) }) })
	if repeat != plain+1 {
		t.Errorf("a flow allocates %v objects with a Repeat, %v without: want one more", repeat, plain)
	}
}

// flowAllocs returns the allocations of a flow on tt whose one step calls
// add, from its start to its end.
func flowAllocs(tt *TestTool, add func(as AsyncSteps)) float64 {
	return testing.AllocsPerRun(100, func() {
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) { add(as) })
		r.Execute()
		tt.Run()
	})
}

// oneAPIChunk makes each flow's step APIs one chunk, made at its first
// step, until t ends: flows compared by their allocations then differ by
// what they compare, not by how many chunks their steps took.
func oneAPIChunk(t *testing.T) {
	apiChunkFloor.Store(maxAPIChunk)
	t.Cleanup(func() { apiChunkFloor.Store(0) })
}
