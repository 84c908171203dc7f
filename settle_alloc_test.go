package asyncsteps

import "testing"

// A Settle costs what a Gather of the same branches costs, and one slice
// more: the steps with the handler of its branches, made all at once. Only
// a failed branch allocates more, for its error.
func TestSettleCostsGatherAndOneSlice(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	branch := func(as AsyncSteps) { as.Success(1) }
	branches := []func(as AsyncSteps){branch, branch, branch}
	gather := flowAllocs(tt, func(as AsyncSteps) { Gather(as, func(AsyncSteps, []int) {}, branches...) })
	settle := flowAllocs(tt, func(as AsyncSteps) { Settle(as, func(AsyncSteps, []Settled[int]) {}, branches...) })
	if settle != gather+1 {
		t.Errorf("a flow allocates %v objects with Settle, %v with Gather: want one more", settle, gather)
	}
}
