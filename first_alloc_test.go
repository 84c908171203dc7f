package asyncsteps

import "testing"

// A race costs what a Gather of the same branches costs when it cancels
// none of them, and its results one more: the cell of the count of
// results its branches have stored. First adds its then's closure (then
// gets the one value of a Quorum of 1). The race's definition is one
// allocation, as a Parallel's: its need sits beside the Parallel's
// definition.
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

// A nil then costs what a then that passes its value on with Success
// costs: the helper's last step calls Success in its place.
func TestNilThenCostsWhatAPassingThenCosts(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	branch := func(as AsyncSteps) { as.Success(1) }
	three := []func(as AsyncSteps){branch, branch, branch}
	passSlice := func(as AsyncSteps, vs []int) { as.Success(vs) }
	cases := []struct {
		name          string
		nilThen, then func(as AsyncSteps)
	}{
		{"Gather", func(as AsyncSteps) { Gather[int](as, nil, three...) },
			func(as AsyncSteps) { Gather(as, passSlice, three...) }},
		{"Settle", func(as AsyncSteps) { Settle[int](as, nil, three...) },
			func(as AsyncSteps) { Settle(as, func(as AsyncSteps, rs []Settled[int]) { as.Success(rs) }, three...) }},
		{"Quorum", func(as AsyncSteps) { Quorum[int](as, 2, nil, three...) },
			func(as AsyncSteps) { Quorum(as, 2, passSlice, three...) }},
		{"First", func(as AsyncSteps) { First[int](as, nil, three...) },
			func(as AsyncSteps) { First(as, func(as AsyncSteps, v int) { as.Success(v) }, three...) }},
	}
	for _, c := range cases {
		if nilThen, then := flowAllocs(tt, c.nilThen), flowAllocs(tt, c.then); nilThen != then {
			t.Errorf("%s: a flow allocates %v objects with a nil then, %v with one that calls Success: want as many",
				c.name, nilThen, then)
		}
	}
}
