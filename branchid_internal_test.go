package asyncsteps

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// toolinfo.BranchID keeps the first id given for a parallel branch, for
// all its steps, and none for the flow itself; a later branch, whose frame
// may be the earlier one's recycled, keeps its own. A value that is not a
// running step, or a decorator without Unwrap, is not known: the engine
// cannot tell where it runs.
func TestBranchIDIsKeptPerBranchUntilItEnds(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	r := New(WithTool(loop))
	var got []string
	note := func(as any, give int64) {
		id, known := toolinfo.BranchID(as, give)
		got = append(got, fmt.Sprint(id, known))
	}
	id := func(give int64) StepFunc {
		return func(as AsyncSteps, _ ...any) { note(as, give) }
	}
	r.Add(id(1))
	p := r.Parallel()
	p.Add(func(as AsyncSteps, args ...any) {
		id(2)(as, args...)
		as.Add(id(3))
	})
	p.Add(func(as AsyncSteps, _ ...any) { note(struct{ AsyncSteps }{as}, 4) })
	r.Parallel().Add(id(5))
	r.Add(func(AsyncSteps, ...any) { note("not a step", 6) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"0 true", "2 true", "0 false", "2 true", "5 true", "0 false"}
	if !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}
}
