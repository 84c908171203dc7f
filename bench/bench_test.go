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
	b.Cleanup(func() { closeAfterFlows(loop) })
	return loop
}

// closeAfterFlows closes l once its flows have ended. The workloads wait
// for a flow's last callback, and the flow ends a turn of the loop later:
// a Loop closed in between ends it with "the flow's loop is closed", which
// the workloads' unhandled-error functions report as a failure. A
// callback scheduled after the last callback has returned runs after that
// turn; the second round trip covers a flow that yielded once more.
func closeAfterFlows(l *asyncsteps.Loop) {
	for range 2 {
		done := make(chan struct{})
		l.Immediate(func() { close(done) })
		<-done
	}
	l.Close()
}

// The floor: what a step body costs by itself, called through the
// AsyncSteps interface with a Success that stores its arguments, over the
// same 1,000,000 values of i as BenchmarkSeq. Success(i) boxes i and makes
// the variadic slice (2 allocations, but for i < 256, which Go boxes
// without allocating); Success() makes neither. Every ns/step of the
// engine's workloads is read against these, measured in the same run.
func BenchmarkFloor(b *testing.B)       { floor(b, repeatSucceedWithInt) }
func BenchmarkFloorNoArgs(b *testing.B) { floor(b, repeatSucceed) }

// floorSteps is an AsyncSteps whose Success keeps its arguments, as the
// engine's does; its other methods are never called.
type floorSteps struct {
	as
	args []any
}

func (f *floorSteps) Success(args ...any) { f.args = args }

// floorBody is called through a variable so that the compiler can neither
// inline it nor see the AsyncSteps' dynamic type.
var floorBody asyncsteps.RepeatFunc

func floor(b *testing.B, body asyncsteps.RepeatFunc) {
	const n = 1_000_000
	floorBody = body
	var steps as = &floorSteps{}
	b.ReportAllocs()
	for b.Loop() {
		for i := range n {
			floorBody(steps, i)
		}
	}
	per(b, n, "step")
}

// a. seq: one flow, Repeat(1_000_000), each iteration Success(i).
func BenchmarkSeq(b *testing.B) { repeatOnce(b, 1_000_000, "step", repeatSucceedWithInt) }

// a'. seq with Success(): the engine's own cost per step.
func BenchmarkSeqNoArgs(b *testing.B) { repeatOnce(b, 1_000_000, "step", repeatSucceed) }

// b. nested: Repeat(1_000_000), each iteration adds one sub-step.
func BenchmarkNested(b *testing.B) { repeatOnce(b, 1_000_000, "outer", repeatAddOne) }

// e. error: Repeat(200_000), each iteration adds a step that calls
// Error("E"), caught by its own handler that calls Success.
func BenchmarkError(b *testing.B) { repeatOnce(b, 200_000, "error", repeatAddFailing) }

func repeatSucceedWithInt(as as, i int) { as.Success(i) }
func repeatSucceed(as as, _ int)        { as.Success() }
func repeatAddOne(as as, _ int)         { as.Add(succeed) }
func repeatAddFailing(as as, _ int)     { as.Add(fail, recoverStep) }

func succeed(as as, _ ...any)     { as.Success() }
func fail(as as, _ ...any)        { as.Error("E") }
func recoverStep(as as, _ string) { as.Success() }
func passOn(as as, args ...any)   { as.Success(args[0]) }

// repeatOnce runs, per b.Loop iteration, one flow of one Repeat(n, body)
// on a real Loop, building the flow included, and reports the time per
// iteration in ns/unit.
func repeatOnce(b *testing.B, n int, unit string, body asyncsteps.RepeatFunc) {
	repeatOnceOn(b, newLoop(b), n, unit, body)
}

// repeatOnceOn is repeatOnce on loop.
func repeatOnceOn(b *testing.B, loop *asyncsteps.Loop, n int, unit string, body asyncsteps.RepeatFunc) {
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Repeat(n, body)
		run(b, r)
	}
	per(b, n, unit)
}

// a”. seq-flat: 100 flows of 10,000 queued steps each, executed at once on
// one loop; the first step of a flow calls Success(1), each other passes
// its argument on with Success(args[0]). ns per step.
func BenchmarkSeqFlat(b *testing.B) { seqFlat(b, newLoop(b)) }

func seqFlat(b *testing.B, loop *asyncsteps.Loop) {
	const flows, steps = 100, 10_000
	first := func(as as, _ ...any) { as.Success(1) }
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(first)
			for range steps - 1 {
				r.Add(passOn)
			}
			r.Add(func(as as, _ ...any) { wg.Done() })
			r.Execute()
		}
		wg.Wait()
	}
	per(b, flows*steps, "step")
}

// The shape of the first measurements, kept for a note only: one flow of
// 1,000,000 steps queued up front, each Success(1000). The reference keeps
// a queue in a JavaScript array whose shift() copies it past about 16k
// entries, so its time per step grows with the queue: a ratio on this
// shape measures that, not this engine.
func BenchmarkSeqQueued(b *testing.B) {
	const n = 1_000_000
	loop := newLoop(b)
	step := func(as as, _ ...any) { as.Success(1000) }
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range n {
			r.Add(step)
		}
		run(b, r)
	}
	per(b, n, "step")
}

// c. many-flows: 100,000 independent flows of 3 steps each, on one loop.
func BenchmarkManyFlows(b *testing.B) { manyFlowsOn(b, newLoop(b)) }

func manyFlowsOn(b *testing.B, loop *asyncsteps.Loop) {
	const flows = 100_000
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

// f. mutex: 1,000 flows of 100 Sync steps each on one NewMutex(10), with a
// one-step critical section, executed at once on one loop. ns per Sync.
func BenchmarkMutex(b *testing.B) { mutexFlows(b, newLoop(b)) }

func mutexFlows(b *testing.B, loop *asyncsteps.Loop) {
	const flows, syncs = 1000, 100
	section := func(as as, _ ...any) { as.Success() }
	b.ReportAllocs()
	for b.Loop() {
		mu := asyncsteps.NewMutex(10)
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			for range syncs {
				r.Sync(mu, section)
			}
			r.Add(func(as as, _ ...any) { wg.Done() })
			r.Execute()
		}
		wg.Wait()
	}
	per(b, flows*syncs, "sync")
}

// g. timers: 10,000 flows whose step sets SetTimeout(time.Second) and is
// completed by a Tool().Immediate callback.
func BenchmarkTimers(b *testing.B) { timerFlows(b, newLoop(b)) }

func timerFlows(b *testing.B, loop *asyncsteps.Loop) {
	const flows = 10_000
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

// h. parked: 100,000 flows, each started with Promise and waiting in
// WaitExternal at once; bytes per flow counting heap and goroutine stacks
// (HeapInuse+StackInuse after GC): the Root, its queue, the handles and the
// Promise's channel. The harness allocates what it keeps per flow (a slot
// for its AsyncSteps and one for its channel) before the first measurement,
// and shares one step function, so that only the flows are counted.
func BenchmarkParked(b *testing.B) {
	const flows = 100_000
	for b.Loop() {
		loop := asyncsteps.NewLoop()
		waiting := make([]as, flows)
		promises := make([]<-chan asyncsteps.Result, flows)
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
		for i := range flows {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(step)
			promises[i] = r.Promise()
		}
		<-all
		after := sysAfterGC()
		b.ReportMetric(float64(after-before)/flows, "B/flow")
		for _, w := range waiting {
			w.Success()
		}
		for _, p := range promises {
			if res := <-p; res.Err != nil {
				b.Fatal(res.Err)
			}
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

// i. two loops: workload c spread over two loops versus one, each loop
// fed by its own producer goroutine.
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
