package bench

import (
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Variants of the workloads at the sizes the JavaScript reference can run in
// seconds (its queue degrades quadratically past ~16k steps), and the plain
// goroutine baseline of workload h. bench/compare runs them beside
// bench_test.go's.

// a at 10k and 100k steps.
func BenchmarkSeq10k(b *testing.B)  { steps(b, 10_000, "step", succeedWithInt) }
func BenchmarkSeq100k(b *testing.B) { steps(b, 100_000, "step", succeedWithInt) }

// b at 10k outer steps.
func BenchmarkNested10k(b *testing.B) { steps(b, 10_000, "outer", addOne) }

// e at 10k errors.
func BenchmarkError10k(b *testing.B) { steps(b, 10_000, "error", fail, recoverStep) }

// h's baseline: 100,000 goroutines blocked on a channel at once, measured
// as BenchmarkParked measures flows (HeapInuse+StackInuse after GC, with the
// harness' own WaitGroups counted alike).
func BenchmarkParkedGoroutines(b *testing.B) {
	const goroutines = 100_000
	for b.Loop() {
		before := sysAfterGC()
		release := make(chan struct{})
		var started, done sync.WaitGroup
		started.Add(goroutines)
		done.Add(goroutines)
		for range goroutines {
			go func() {
				started.Done()
				<-release
				done.Done()
			}()
		}
		started.Wait()
		after := sysAfterGC()
		b.ReportMetric(float64(after-before)/goroutines, "B/goroutine")
		close(release)
		done.Wait()
	}
}

// c and i with the flows created on their own loop's goroutine (in an
// Immediate callback, as a request handler on the loop would), so that no
// producer goroutine competes with the loops for the 2 cores: the figure of
// the engine alone.
func BenchmarkManyFlowsOnLoop(b *testing.B) {
	const flows = 100_000
	loops := []*asyncsteps.Loop{newLoop(b)}
	b.ReportAllocs()
	for b.Loop() {
		flowsOnLoops(b, flows, loops)
	}
	per(b, flows, "flow")
	b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

func BenchmarkScaleOnLoop(b *testing.B) {
	const flows = 100_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "loops=1", 2: "loops=2"}[n], func(b *testing.B) {
			loops := make([]*asyncsteps.Loop, n)
			for i := range loops {
				loops[i] = newLoop(b)
			}
			for b.Loop() {
				flowsOnLoops(b, flows, loops)
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}

// flowsOnLoops runs workload c's flows, split evenly over loops, each loop
// creating its share in one callback.
func flowsOnLoops(b *testing.B, flows int, loops []*asyncsteps.Loop) {
	onError := asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { b.Error(err) })
	var wg sync.WaitGroup
	wg.Add(flows)
	for _, l := range loops {
		l.Immediate(func() {
			for range flows / len(loops) {
				executeThreeSteps(asyncsteps.New(asyncsteps.WithTool(l), onError), &wg)
			}
		})
	}
	wg.Wait()
}

// i (and c) the way a server spreads flows: one producer making every flow
// with LoopGroup.New, over a group of one loop and of two.
func BenchmarkScaleGroup(b *testing.B) {
	const flows = 100_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "loops=1", 2: "loops=2"}[n], func(b *testing.B) {
			g := asyncsteps.NewLoopGroup(n)
			b.Cleanup(g.Close)
			onError := asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { b.Error(err) })
			b.ReportAllocs()
			for b.Loop() {
				makeFlows(flows, func() *asyncsteps.Root { return g.New(onError) })
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}
