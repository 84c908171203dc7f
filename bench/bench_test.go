package bench

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

type as = asyncsteps.AsyncSteps

// per reports the time of one b.Loop iteration divided by n, in ns per unit,
// and the allocations likewise.
func per(b *testing.B, n int, unit string) {
	b.Helper()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/"+unit)
}

func run(b *testing.B, r *asyncsteps.Root) {
	b.Helper()
	if _, err := r.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func newLoop(b *testing.B) *asyncsteps.Loop {
	loop := asyncsteps.NewLoop()
	b.Cleanup(loop.Close)
	return loop
}

// a. seq: one flow of 1,000,000 sequential steps, each Success(i).
func BenchmarkSeq(b *testing.B) { steps(b, 1_000_000, "step", succeedWithInt) }

// a'. seq with steps that pass no args: the engine's own cost per step.
func BenchmarkSeqNoArgs(b *testing.B) { steps(b, 1_000_000, "step", succeed) }

// b. nested: every step adds one sub-step.
func BenchmarkNested(b *testing.B) { steps(b, 100_000, "outer", addOne) }

// e. error: steps that call Error("E"), each caught by its own handler that
// calls Success.
func BenchmarkError(b *testing.B) { steps(b, 100_000, "error", fail, recoverStep) }

func succeedWithInt(as as, _ ...any) { as.Success(1000) }
func succeed(as as, _ ...any)        { as.Success() }
func addOne(as as, _ ...any)         { as.Add(succeed) }
func fail(as as, _ ...any)           { as.Error("E") }
func recoverStep(as as, _ string)    { as.Success() }

// steps runs, per b.Loop iteration, one flow of n steps fn (with onerror)
// on a real Loop, building the flow included, and reports the time per
// step in ns/unit.
func steps(b *testing.B, n int, unit string, fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	loop := newLoop(b)
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range n {
			r.Add(fn, onerror...)
		}
		run(b, r)
	}
	per(b, n, unit)
}

// c. many-flows: 100,000 independent flows of 3 steps each.
func BenchmarkManyFlows(b *testing.B) {
	const flows = 100_000
	loop := newLoop(b)
	b.ReportAllocs()
	for b.Loop() {
		manyFlows(b, flows, loop)
	}
	per(b, flows, "flow")
	b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

func threeSteps(r *asyncsteps.Root) {
	r.Add(func(as as, _ ...any) { as.Success(1) }).
		Add(func(as as, args ...any) { as.Success(args[0].(int) + 1) }).
		Add(func(as as, args ...any) { as.Success(args[0].(int) + 1) })
}

func manyFlows(b *testing.B, flows int, loop asyncsteps.Tool) {
	onError := asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { b.Error(err) })
	makeFlows(flows, func() *asyncsteps.Root { return asyncsteps.New(asyncsteps.WithTool(loop), onError) })
}

// makeFlows makes and executes flows flows of workload c with newRoot, and
// waits for their end.
func makeFlows(flows int, newRoot func() *asyncsteps.Root) {
	var wg sync.WaitGroup
	wg.Add(flows)
	for range flows {
		executeThreeSteps(newRoot(), &wg)
	}
	wg.Wait()
}

// executeThreeSteps executes r with workload c's steps and a last one that
// tells wg.
func executeThreeSteps(r *asyncsteps.Root, wg *sync.WaitGroup) {
	threeSteps(r)
	r.Add(func(as as, _ ...any) { wg.Done() })
	r.Execute()
}

// c'. the same three calls with plain goroutines and a WaitGroup.
func BenchmarkManyGoroutines(b *testing.B) {
	const flows = 100_000
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Add(flows)
		results := make([]int, flows) // each goroutine hands its result on, as a flow does
		for i := range flows {
			go func() {
				defer wg.Done()
				v := step1()
				v = step2(v)
				results[i] = step2(v)
			}()
		}
		wg.Wait()
	}
	per(b, flows, "flow")
	b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

//go:noinline
func step1() int { return 1 }

//go:noinline
func step2(v int) int { return v + 1 }

// d. parallel: a Parallel of 1,000 one-step branches, 100 times.
func BenchmarkParallel(b *testing.B) {
	const branches, times = 1000, 100
	loop := newLoop(b)
	branch := func(as as, _ ...any) { as.Success() }
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Repeat(times, func(as as, _ int) {
			p := as.Parallel()
			for range branches {
				p.Add(branch)
			}
		})
		run(b, r)
	}
	per(b, branches*times, "branch")
}

// f. mutex: 1,000 flows through Sync on NewMutex(10), one-step section.
func BenchmarkMutex(b *testing.B) {
	const flows = 1000
	loop := newLoop(b)
	section := func(as as, _ ...any) { as.Success() }
	b.ReportAllocs()
	for b.Loop() {
		mu := asyncsteps.NewMutex(10)
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Sync(mu, section).Add(func(as as, _ ...any) { wg.Done() })
			r.Execute()
		}
		wg.Wait()
	}
	per(b, flows, "sync")
}

// g. timers: 10,000 flows whose step sets SetTimeout(time.Second) and is
// completed by a Tool().Immediate callback.
func BenchmarkTimers(b *testing.B) {
	const flows = 10_000
	loop := newLoop(b)
	step := func(as as, _ ...any) {
		as.SetTimeout(time.Second)
		as.Tool().Immediate(func() { as.Success() })
	}
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(step).Add(func(as as, _ ...any) { wg.Done() })
			r.Execute()
		}
		wg.Wait()
	}
	per(b, flows, "flow")
}

// h. parked: 100,000 flows each waiting in WaitExternal at once; bytes per
// flow counting heap and goroutine stacks (process Sys after GC). The
// harness allocates what it keeps per flow (a slot for its AsyncSteps)
// before the first measurement, and shares one step function, so that only
// the flows are counted.
func BenchmarkParked(b *testing.B) {
	const flows = 100_000
	for b.Loop() {
		loop := asyncsteps.NewLoop()
		waiting := make([]as, flows)
		parked := 0
		all := make(chan struct{})
		step := func(as as, _ ...any) { // on the loop: parked needs no lock
			as.WaitExternal()
			waiting[parked] = as
			if parked++; parked == flows {
				close(all)
			}
		}
		before := sysAfterGC()
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(step)
			r.Execute()
		}
		<-all
		after := sysAfterGC()
		b.ReportMetric(float64(after-before)/flows, "B/flow")
		for _, w := range waiting {
			w.Success()
		}
		loop.Close()
	}
}

func sysAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// i. scale: workload c spread over two loops versus one.
func BenchmarkScale(b *testing.B) {
	const flows = 100_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "loops=1", 2: "loops=2"}[n], func(b *testing.B) {
			loops := make([]asyncsteps.Tool, n)
			for i := range loops {
				loops[i] = newLoop(b)
			}
			for b.Loop() {
				var wg sync.WaitGroup
				for _, l := range loops {
					wg.Go(func() { manyFlows(b, flows/n, l) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}
