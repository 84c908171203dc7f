package asyncsteps_test

import (
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Point 9: the time per branch of a Parallel whose branches sync on one
// shared Mutex, and per level of error handlers that rethrow, stay flat
// from 1,000 to 100,000 (they grew with N before). Run with
//
//	go test -run '^$' -bench 'Hostile' -benchmem .
//
// and compare the ns/branch and ns/level metrics across sizes.

var hostileSizes = []int{1_000, 10_000, 100_000}

func BenchmarkHostileParallelMutex(b *testing.B) {
	for _, n := range hostileSizes {
		b.Run(fmt.Sprintf("branches=%d", n), func(b *testing.B) {
			m := asyncsteps.NewMutex(10)
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
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/branch")
		})
	}
}

func BenchmarkHostileRethrowDepth(b *testing.B) {
	for _, n := range hostileSizes {
		b.Run(fmt.Sprintf("levels=%d", n), func(b *testing.B) {
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
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/level")
		})
	}
}
