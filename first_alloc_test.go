package asyncsteps

import "testing"

// A race costs what a Gather of the same branches costs when it cancels
// none of them, and its results one more: the cell of the slice its
// branches append to. First adds its then's closure (then gets the one
// value of a Quorum of 1). The race's definition is one allocation, as a
// Parallel's: its need sits beside the Parallel's definition.
func TestFirstCostsGatherAndOneSlice(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	branch := func(as AsyncSteps) { as.Success(1) }
	three := []func(as AsyncSteps){branch, branch, branch}
	gather := flowAllocs(tt, func(as AsyncSteps) { Gather(as, func(AsyncSteps, []int) {}, three...) })
	quorum := flowAllocs(tt, func(as AsyncSteps) { Quorum(as, 3, func(AsyncSteps, []int) {}, three...) })
	if quorum != gather+1 {
		t.Errorf("a flow allocates %v objects with a Quorum of all, %v with Gather: want one more", quorum, gather)
	}
	one := three[:1]
	gather = flowAllocs(tt, func(as AsyncSteps) { Gather(as, func(AsyncSteps, []int) {}, one...) })
	first := flowAllocs(tt, func(as AsyncSteps) { First(as, func(AsyncSteps, int) {}, one...) })
	if first != gather+2 {
		t.Errorf("a flow allocates %v objects with a First of one branch, %v with Gather: want two more", first, gather)
	}
}
