package asyncsteps_test

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// BenchmarkStart measures a flow of one step on a Loop, from New to its
// end, for each way to start it and learn of its end: the allocations
// are those of the Root, its step array and step API, and what the start
// method adds (a Promise's channel, ExecuteThen's waiter, Run's waiter and
// channel, and under a context that can end the watch of it).
func BenchmarkStart(b *testing.B) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	ended := make(chan asyncsteps.Result, 1)
	signal := func(as asyncsteps.AsyncSteps, _ ...any) { ended <- asyncsteps.Result{} }
	then := func(res asyncsteps.Result) { ended <- res }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	starts := []struct {
		name string
		run  func(r *asyncsteps.Root)
	}{
		{"Execute", func(r *asyncsteps.Root) {
			r.Add(signal)
			r.Execute()
			<-ended
		}},
		{"ExecuteThen", func(r *asyncsteps.Root) {
			r.SuccessStep()
			r.ExecuteThen(then)
			<-ended
		}},
		{"Promise", func(r *asyncsteps.Root) {
			r.SuccessStep()
			<-r.Promise()
		}},
		{"Run", func(r *asyncsteps.Root) {
			r.SuccessStep()
			r.Run(context.Background()) //nolint:errcheck // a success
		}},
		// Under a context that can end, which each flow watches.
		{"PromiseContext", func(r *asyncsteps.Root) {
			r.SuccessStep()
			<-r.PromiseContext(ctx)
		}},
		{"ExecuteThenContext", func(r *asyncsteps.Root) {
			r.SuccessStep()
			r.ExecuteThenContext(ctx, then)
			<-ended
		}},
	}
	for _, s := range starts {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.run(asyncsteps.New(asyncsteps.WithTool(loop)))
			}
		})
	}
}
