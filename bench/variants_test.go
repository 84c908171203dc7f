package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The plain-goroutine baselines of workloads c, f, g and h, the workloads
// whose flows are independent on a Loop with SetBursts(true), and variants
// of workload i (two loops). bench/compare runs the headline ones beside
// bench_test.go's; -bench . runs them all.

// seq-flat, many-flows, mutex and timers on a Loop whose flows run their
// steps back to back (Loop.SetBursts), not one step per turn.
func BenchmarkSeqFlatBursts(b *testing.B)   { seqFlat(b, burstLoop(b)) }
func BenchmarkManyFlowsBursts(b *testing.B) { manyFlowsOn(b, burstLoop(b)) }
func BenchmarkMutexBursts(b *testing.B)     { mutexFlows(b, burstLoop(b)) }
func BenchmarkTimersBursts(b *testing.B)    { timerFlows(b, burstLoop(b)) }

func burstLoop(b *testing.B) *asyncsteps.Loop {
	l := newLoop(b)
	l.SetBursts(true)
	return l
}

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

// f's baseline in plain Go: 1,000 goroutines that each pass 100 times
// through a semaphore of 10 (a buffered channel), one call inside, as a Go
// team would write workload f without the library.
func BenchmarkMutexGoroutines(b *testing.B) {
	const flows, syncs = 1000, 100
	b.ReportAllocs()
	for b.Loop() {
		sem := make(chan struct{}, 10)
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			go func() {
				defer wg.Done()
				for range syncs {
					sem <- struct{}{}
					step1()
					<-sem
				}
			}()
		}
		wg.Wait()
	}
	per(b, flows*syncs, "sync")
}

// g's baseline in plain Go: 10,000 goroutines that each wait, with a 1 s
// timeout, for a completion that another goroutine sends, as a Go team
// would write workload g without the library: the timer is stopped once
// the completion has come.
func BenchmarkTimersGoroutines(b *testing.B) {
	const flows = 10_000
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Add(flows)
		for range flows {
			go func() {
				defer wg.Done()
				timeout := time.NewTimer(time.Second)
				done := make(chan int, 1)
				go func() { done <- step1() }()
				select {
				case <-done:
					timeout.Stop()
				case <-timeout.C:
					b.Error("timed out")
				}
			}()
		}
		wg.Wait()
	}
	per(b, flows, "flow")
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

// i with a bounded number of flows in flight, as in a server that serves
// at most so many requests at once: each loop makes its share of workload
// c's flows on its own goroutine, 1,000 at first, then one more each time
// one ends (from its last step), so that flows die young instead of
// 100,000 living at once.
func BenchmarkScaleInFlight(b *testing.B) {
	const flows, inFlight = 100_000, 1000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "loops=1", 2: "loops=2"}[n], func(b *testing.B) {
			loops := make([]*asyncsteps.Loop, n)
			for i := range loops {
				loops[i] = newLoop(b)
			}
			onError := asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { b.Error(err) })
			b.ReportAllocs()
			for b.Loop() {
				var all sync.WaitGroup
				for _, l := range loops {
					all.Go(func() { flowsInFlight(l, flows/n, inFlight, onError) })
				}
				all.Wait()
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}

// flowsInFlight runs flows of workload c on l, made on l's goroutine with
// at most inFlight running at once, and waits for their end.
func flowsInFlight(l *asyncsteps.Loop, flows, inFlight int, onError asyncsteps.Option) {
	var wg sync.WaitGroup // one per loop: a counter shared by loops would be contended
	wg.Add(flows)
	made := 0 // on l only
	var next func()
	next = func() {
		if made == flows {
			return
		}
		made++
		r := asyncsteps.New(asyncsteps.WithTool(l), onError)
		threeSteps(r)
		r.Add(func(as as, _ ...any) { wg.Done(); next() })
		r.Execute()
	}
	l.Immediate(func() {
		for range inFlight {
			next()
		}
	})
	wg.Wait()
}

// i (and c) the way a server spreads flows: one producer making every flow
// with LoopGroup.New, over a group of one loop and of two.
func BenchmarkScaleGroup(b *testing.B) {
	const flows = 100_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "loops=1", 2: "loops=2"}[n], func(b *testing.B) {
			g := asyncsteps.NewLoopGroup(n)
			b.Cleanup(func() {
				for _, l := range g.Loops() {
					closeAfterFlows(l)
				}
				g.Close()
			})
			onError := asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { b.Error(err) })
			b.ReportAllocs()
			for b.Loop() {
				makeFlows(flows, func() *asyncsteps.Root { return g.New(onError) })
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}

// i's ceiling on this machine: what c's flows allocate, and nothing else,
// made by one goroutine and by two. Per flow: an object the size of a Root
// and one the size of its step queue, four 16-byte ones (the benchmark's
// variadic slices and closure) and four handles taken from blocks of 256,
// all kept until the batch ends, as c's flows are: 462 bytes per flow with
// the slice that keeps them, against c's 440. No engine runs: the ratio is how far the Go runtime itself
// scales work that allocates like this on 2 cores, with the garbage
// collector sharing them.
func BenchmarkScaleAllocOnly(b *testing.B) {
	const flows = 100_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "goroutines=1", 2: "goroutines=2"}[n], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() { allocLikeFlows(flows / n) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(flows)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
		})
	}
}

// The same split of work that allocates nothing (an FNV-style hash over a
// counter): how far this machine's two cores scale computation alone.
func BenchmarkScaleCPUOnly(b *testing.B) {
	const rounds = 20_000_000
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "goroutines=1", 2: "goroutines=2"}[n], func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() { cpuSink.Add(hashRounds(rounds / n)) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(rounds)*float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
		})
	}
}

var cpuSink atomic.Uint64

func hashRounds(n int) uint64 {
	h := uint64(14695981039346656037)
	for i := range n {
		h ^= uint64(i)
		h *= 1099511628211
	}
	return h
}

// flowLike has the size of a Root and points to what a flow points to.
type flowLike struct {
	queue   *[4]stepLike
	small   [4]*[1]any
	handles []handleLike
	_       [152]byte
}

// stepLike has the size and pointers of a queued step; handleLike, of a
// handle (the blank pointers are scanned by the collector all the same).
type stepLike struct {
	_ [2]*int
}

type handleLike struct {
	_  *flowLike
	fl *flowLike
	_  [8]byte
}

func allocLikeFlows(n int) {
	kept := make([]*flowLike, n)
	var block []handleLike
	for i := range kept {
		f := &flowLike{queue: new([4]stepLike)}
		for j := range f.small {
			f.small[j] = new([1]any)
		}
		if len(block) < 4 {
			block = make([]handleLike, 256)
		}
		f.handles, block = block[:4:4], block[4:]
		for j := range f.handles {
			f.handles[j].fl = f
		}
		kept[i] = f
	}
}
