package asyncsteps

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// toolinfo.BranchID keeps the first id given for a parallel branch, for
// all its steps, and none for the flow itself or a value that is not a
// running step; a later branch, whose frame may be the earlier one's
// recycled, keeps its own.
func TestBranchIDIsKeptPerBranchUntilItEnds(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	var got []int64
	id := func(give int64) StepFunc {
		return func(as AsyncSteps, _ ...any) { got = append(got, toolinfo.BranchID(as, give)) }
	}
	r.Add(id(1))
	p := r.Parallel()
	p.Add(func(as AsyncSteps, args ...any) {
		id(2)(as, args...)
		as.Add(id(3))
	})
	p.Add(id(4))
	r.Parallel().Add(id(5))
	r.Add(func(AsyncSteps, ...any) { got = append(got, toolinfo.BranchID("not a step", 6)) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 2, 4, 2, 5, 0}; !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}
