package asyncsteps

import (
	"testing"
	"time"
)

// BenchmarkLoopPost measures one post plus its run on the loop goroutine:
// the path a flow takes from step to step. b.Loop is called from the loop
// goroutine, one call at a time, so the benchmark's state is never shared.
func BenchmarkLoopPost(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	done := make(chan struct{})
	var step taskFunc
	step = func() {
		if b.Loop() {
			l.post(step)
		} else {
			close(done)
		}
	}
	b.ReportAllocs()
	l.Immediate(func() { l.post(step) })
	<-done
}

// BenchmarkLoopImmediateCrossGoroutine measures Immediate throughput from
// another goroutine while the loop drains concurrently.
func BenchmarkLoopImmediateCrossGoroutine(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		l.Immediate(f)
	}
	done := make(chan struct{})
	l.Immediate(func() { close(done) })
	<-done
}

// BenchmarkLoopImmediateParallel measures Immediate throughput from several
// goroutines at once, the contention case for the inbox lock.
func BenchmarkLoopImmediateParallel(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	f := func() {}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Immediate(f)
		}
	})
	done := make(chan struct{})
	l.Immediate(func() { close(done) })
	<-done
}

// BenchmarkLoopImmediateRoundTrip measures the latency of handing one
// callback to a sleeping loop and hearing back: a wake-up each time.
func BenchmarkLoopImmediateRoundTrip(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	ch := make(chan struct{})
	f := func() { ch <- struct{}{} }
	b.ReportAllocs()
	for b.Loop() {
		l.Immediate(f)
		<-ch
	}
}

// BenchmarkTestToolImmediate measures an Immediate and its run on TestTool.
func BenchmarkTestToolImmediate(b *testing.B) {
	tt := NewTestTool()
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		tt.Immediate(f)
		tt.NextEvent()
	}
}

// BenchmarkLoopIsSameThreadIdle asks an idle loop, from a goroutine 64
// calls deep (a handler under net/http is about as deep), whether it is the
// loop's goroutine: what Root.Run pays before every flow it waits for.
func BenchmarkLoopIsSameThreadIdle(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	for !l.waiting.Load() {
		time.Sleep(time.Millisecond)
	}
	askIsSameThread(b, l, 64)
}

// BenchmarkLoopIsSameThreadBusy is BenchmarkLoopIsSameThreadIdle while the
// loop runs a callback, as a busy server's loops mostly do: the loop's
// goroutine is not waiting, so the answer takes the stack check.
func BenchmarkLoopIsSameThreadBusy(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	running, stop := make(chan struct{}), make(chan struct{})
	l.Immediate(func() {
		close(running)
		<-stop
	})
	<-running
	defer close(stop)
	askIsSameThread(b, l, 20)
}

// askIsSameThread times l.IsSameThread from depth calls deep on the
// benchmark's goroutine, which is not the loop's.
func askIsSameThread(b *testing.B, l *Loop, depth int) {
	var deep func(n int) bool
	deep = func(n int) bool {
		if n > 0 {
			return deep(n - 1)
		}
		same := false
		for b.Loop() {
			same = same || l.IsSameThread()
		}
		return same
	}
	if deep(depth) {
		b.Fatal("IsSameThread() = true off the loop")
	}
}
