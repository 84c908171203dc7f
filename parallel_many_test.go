package asyncsteps

import (
	"slices"
	"testing"
)

// A Parallel of more branches than its definition holds itself, and a
// clone of it, run every branch once, in the order they were added.
func TestParallelOfManyBranchesRunsThemAll(t *testing.T) {
	tt := NewTestTool()
	for _, n := range []int{0, 1, 4, 5, 12, 13, 300} {
		var ran []int
		model := New(WithTool(tt))
		p := model.Parallel()
		for i := range n {
			p.Add(func(as AsyncSteps, _ ...any) { ran = append(ran, i) })
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		c := model.Clone()
		p.Add(func(as AsyncSteps, _ ...any) { ran = append(ran, -1) }) // not in c
		c.Execute()
		tt.Run()
		if !slices.Equal(ran, want) {
			t.Errorf("a clone of a Parallel of %d branches ran %v, want %v", n, ran, want)
		}
		ran = nil
		model.Execute()
		tt.Run()
		if want = append(want, -1); !slices.Equal(ran, want) {
			t.Errorf("a Parallel of %d branches and one more ran %v, want %v", n+1, ran, want)
		}
	}
}
