package bench

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// perStep reports the time and allocations of one b.Loop iteration divided by
// n, the steps it runs.
func perStep(b *testing.B, n int, unit string) {
	b.Helper()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/"+unit)
}

// BenchmarkSeq is workload a: one flow of 1,000,000 sequential steps on a
// real Loop, each completing with Success(i).
func BenchmarkSeq(b *testing.B) {
	const steps = 1_000_000
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	step := func(as asyncsteps.AsyncSteps, args ...any) { as.Success(1000) }
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range steps {
			r.Add(step)
		}
		if _, err := r.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	perStep(b, steps, "step")
}
