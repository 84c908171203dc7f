package asyncsteps_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Point 9: the time per branch of a Parallel whose branches sync on one
// shared Mutex, and per level of error handlers that rethrow, stay flat
// from 1,000 to 100,000 (they grew with N before). Run with
//
//	go test -run '^$' -bench 'Hostile' -benchmem .
//
// and compare the ns/branch and ns/level metrics across sizes (cpu-ns, the
// process's CPU time, when the machine is shared). The CPU time includes
// the garbage collector's, which runs beside the benchmark.

var hostileSizes = []int{1_000, 10_000, 100_000}

func BenchmarkHostileParallelMutex(b *testing.B) {
	for _, n := range hostileSizes {
		b.Run(fmt.Sprintf("branches=%d", n), func(b *testing.B) {
			m := asyncsteps.NewMutex(10)
			cpu := cpuTime()
			for b.Loop() {
				r, tt := newFlow()
				p := r.Parallel()
				for range n {
					p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {})
				}
				ch := r.Promise()
				tt.Run()
				if res := <-ch; res.Err != nil {
					b.Fatal(res.Err)
				}
			}
			reportPerUnit(b, n, cpuTime()-cpu, "branch")
		})
	}
}

func BenchmarkHostileRethrowDepth(b *testing.B) {
	for _, n := range hostileSizes {
		b.Run(fmt.Sprintf("levels=%d", n), func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				r, tt := newFlow()
				level := 0
				var nest asyncsteps.StepFunc
				nest = func(as asyncsteps.AsyncSteps, _ ...any) {
					level++
					if level == n {
						as.Error("Deep")
					}
					as.Add(nest, func(as asyncsteps.AsyncSteps, code string) { as.Error(code) })
				}
				r.Add(nest)
				ch := r.Promise()
				tt.Run()
				if res := <-ch; res.Err == nil {
					b.Fatal("no error")
				}
			}
			reportPerUnit(b, n, cpuTime()-cpu, "level")
		})
	}
}

// reportPerUnit reports the wall time and the process's CPU time per unit
// (of n per op): on a shared machine the CPU time is the steadier figure.
func reportPerUnit(b *testing.B, n int, cpu time.Duration, unit string) {
	units := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/units, "ns/"+unit)
	b.ReportMetric(float64(cpu.Nanoseconds())/units, "cpu-ns/"+unit)
}
