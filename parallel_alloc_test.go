package asyncsteps

import "testing"

// A Parallel of a few branches costs the flow one allocation, its
// definition: the room of its branches, the value Parallel returns and the
// control of its first execution come with it. The same steps one after
// the other cost one too, their queue: the flows compared run the same
// steps, as branches and in sequence.
func TestAParallelCostsOneAllocation(t *testing.T) {
	tt := NewTestTool()
	noop := func(AsyncSteps, ...any) {}
	run := func(add func(as AsyncSteps)) float64 { return flowAllocs(tt, add) }
	seq := run(func(as AsyncSteps) { as.Add(noop).Add(noop).Add(noop) })
	par := run(func(as AsyncSteps) { as.Parallel().Add(noop).Add(noop).Add(noop) })
	if par != seq {
		t.Errorf("a flow allocates %v objects with a Parallel of three steps, %v with the steps in sequence: want as many", par, seq)
	}
}
