package bench

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// What hooks cost when set: workloads c (on the loop) and e with hooks
// that do nothing, to compare with BenchmarkManyFlowsOnLoop and
// BenchmarkError10k, which run without hooks.
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

func BenchmarkError10kHooked(b *testing.B) {
	l := newLoop(b)
	l.SetHooks(noopHooks)
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		for range 10_000 {
			r.Add(fail, recoverStep)
		}
		run(b, r)
	}
	per(b, 10_000, "error")
}
