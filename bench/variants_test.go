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
func BenchmarkSeq10k(b *testing.B)  { seqN(b, 10_000) }
func BenchmarkSeq100k(b *testing.B) { seqN(b, 100_000) }

func seqN(b *testing.B, steps int) {
	loop := newLoop(b)
	step := func(as as, _ ...any) { as.Success(1000) }
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range steps {
			r.Add(step)
		}
		run(b, r)
	}
	per(b, steps, "step")
}

// b at 10k outer steps.
func BenchmarkNested10k(b *testing.B) {
	const steps = 10_000
	loop := newLoop(b)
	inner := func(as as, _ ...any) { as.Success() }
	outer := func(as as, _ ...any) { as.Add(inner) }
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range steps {
			r.Add(outer)
		}
		run(b, r)
	}
	per(b, steps, "outer")
}

// e at 10k errors.
func BenchmarkError10k(b *testing.B) {
	const steps = 10_000
	loop := newLoop(b)
	fail := func(as as, _ ...any) { as.Error("E") }
	recover := func(as as, _ string) { as.Success() }
	b.ReportAllocs()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		for range steps {
			r.Add(fail, recover)
		}
		run(b, r)
	}
	per(b, steps, "error")
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
