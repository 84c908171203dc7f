package bench

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// What hooks cost when set: BenchmarkManyFlowsOnLoop and BenchmarkError
// again, on a loop with hooks that do nothing.
var noopHooks = &asyncsteps.Hooks{
	FlowStart: func(ctx context.Context) context.Context { return ctx },
	FlowEnd:   func(context.Context, error) {},
	StepError: func(context.Context, *asyncsteps.Error) {},
	LoopPass:  func(*asyncsteps.Loop, int) {},
}

func BenchmarkManyFlowsOnLoopHooked(b *testing.B) {
	const flows = 100_000
	l := newLoop(b)
	l.SetHooks(noopHooks)
	b.ReportAllocs()
	for b.Loop() {
		flowsOnLoops(b, flows, []*asyncsteps.Loop{l})
	}
	per(b, flows, "flow")
}

func BenchmarkErrorHooked(b *testing.B) {
	l := newLoop(b)
	l.SetHooks(noopHooks)
	repeatOnceOn(b, l, 200_000, "error", repeatAddFailing)
}
