package asyncsteps_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// BenchmarkForEachLimit runs, per op, one flow on a Loop that calls a
// function for each of n items, as a ForEachLimit of 8 items at a time
// and as a Parallel of one branch per item, and reports the cost per
// item: time, bytes allocated, allocations. Run with
//
//	go test -run '^$' -bench ForEachLimit -benchmem .
//
// The Parallel holds every item's branch from the start; the ForEachLimit
// holds 8, and pulls the next pair as one ends.
func BenchmarkForEachLimit(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprint("item ", i)
		}
		seen := 0
		item := func(_ asyncsteps.AsyncSteps, i int, s string) { seen += i + len(s) }
		b.Run(fmt.Sprintf("ForEachLimit/items=%d", n), func(b *testing.B) {
			perItem(b, n, func(r *asyncsteps.Root) {
				asyncsteps.ForEachLimit(r, slices.All(items), 8, item)
			})
		})
		b.Run(fmt.Sprintf("Parallel/items=%d", n), func(b *testing.B) {
			perItem(b, n, func(r *asyncsteps.Root) {
				p := r.Parallel()
				for i, s := range items {
					p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { item(as, i, s) })
				}
			})
		})
	}
}

// perItem runs a flow that add builds per op, on a Loop, and reports the
// time (and the process's CPU time, for a shared machine), bytes and
// allocations per item of the n it runs.
func perItem(b *testing.B, n int, add func(r *asyncsteps.Root)) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	for b.Loop() {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		add(r)
		if _, err := r.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	reportPerUnit(b, n, cpuTime()-cpu, "item")
	runtime.ReadMemStats(&after)
	items := float64(b.N) * float64(n)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/items, "B/item")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/items, "allocs/item")
}

// BenchmarkForEachChan runs, per op, one flow on a Loop that calls a
// function for each of n values of a channel, 8 items at a time, and
// reports the cost per item as BenchmarkForEachLimit does. Run with
//
//	go test -run '^$' -bench ForEachChan -benchmem .
//
// buffered: the values are all in the channel, closed, as the step
// begins, and are received on the loop. unbuffered: a goroutine sends
// them one by one, and the step's goroutine waits for most of them.
func BenchmarkForEachChan(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		seen := 0
		item := func(_ asyncsteps.AsyncSteps, i int) { seen += i }
		b.Run(fmt.Sprintf("buffered/items=%d", n), func(b *testing.B) {
			perItem(b, n, func(r *asyncsteps.Root) {
				ch := make(chan int, n)
				for i := range n {
					ch <- i
				}
				close(ch)
				asyncsteps.ForEachChan(r, ch, 8, item)
			})
		})
		b.Run(fmt.Sprintf("unbuffered/items=%d", n), func(b *testing.B) {
			perItem(b, n, func(r *asyncsteps.Root) {
				ch := make(chan int)
				go func() {
					for i := range n {
						ch <- i
					}
					close(ch)
				}()
				asyncsteps.ForEachChan(r, ch, 8, item)
			})
		})
	}
}
