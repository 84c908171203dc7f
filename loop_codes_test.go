package asyncsteps_test

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// LoopBreak and LoopCont raised as errors act as Break and Continue, the
// info as the label (the doc of the codes warns against using them for
// errors of one's own): Error(LoopBreak, "outer") leaves the labelled
// loop; an Await function's *Error with LoopCont goes on with the next
// iteration.
func TestLoopCodesRaisedAsErrorsActAsBreakAndContinue(t *testing.T) {
	var tr tracer
	r, _ := newFlow()
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("outer%d", i)
		as.Repeat(3, func(as asyncsteps.AsyncSteps, j int) {
			tr.addf("inner%d", j)
			if j == 0 {
				as.Await(func(context.Context) (any, error) {
					return nil, &asyncsteps.Error{Code: asyncsteps.LoopCont}
				})
				return
			}
			as.Error(asyncsteps.LoopBreak, "outer")
		})
	}, "outer")
	r.Add(tr.step("after"))

	if _, err := runCtx(t, r); err != nil {
		t.Fatal(err)
	}
	wantTrace(t, &tr, "outer0,inner0,inner1,after")
}
