package asyncsteps

import (
	"sync"
	"testing"
	"time"
)

// burstTimers arms n timers through deferred, then cancels them all.
func burstTimers(n int, deferred func(time.Duration, func()) Handle) {
	hs := make([]Handle, n)
	for i := range hs {
		hs[i] = deferred(time.Hour+time.Duration(i), func() {})
	}
	for _, h := range hs {
		h.Cancel()
	}
}

// Cancelled timers leave their heap at once, but the array a burst of them
// grew stayed for the life of the Loop or TestTool: 24 MB after a million.
// An idle owner now gives it back, keeping one timer's slot here.
func TestTimerHeapShrinksAfterABurst(t *testing.T) {
	const n = 4 * keptQueue // grows the array past keptQueue
	t.Run("Loop", func(t *testing.T) {
		l := NewLoop()
		defer l.Close()
		done := make(chan struct{})
		l.Immediate(func() {
			burstTimers(n, l.Deferred)
			l.Deferred(time.Hour, func() {}) // one left armed
			close(done)
		})
		<-done
		deadline := time.Now().Add(10 * time.Second)
		for !l.sleeping.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		wantOneTimerKept(t, &l.mu, &l.timers, "asleep")
	})
	t.Run("TestTool", func(t *testing.T) {
		tt := NewTestTool()
		burstTimers(n, tt.Deferred)
		tt.Deferred(time.Hour, func() {})
		tt.Advance(time.Minute)
		wantOneTimerKept(t, &tt.mu, &tt.timers, "idle")
	})
}

// wantOneTimerKept checks, under mu, that h holds one timer in an array
// of two: what trim keeps of a heap with one timer left.
func wantOneTimerKept(t *testing.T, mu *sync.Mutex, h *timerHeap, when string) {
	t.Helper()
	mu.Lock()
	size, capacity := len(h.items), cap(h.items)
	mu.Unlock()
	if size != 1 || capacity != 2 {
		t.Errorf("%s with %d timers in an array of %d, want 1 in 2", when, size, capacity)
	}
}

// The queue of a TestTool that a burst of immediates grew gives its
// buffer back once the tool idles, as a Loop's queues and the timer heap
// do: it kept it, 24 bytes a slot, for the life of the tool.
func TestTestToolQueueShrinksAfterABurst(t *testing.T) {
	tt := NewTestTool()
	for range 4 * keptQueue {
		tt.Immediate(func() {})
	}
	for range 4 * keptQueue {
		tt.Immediate(func() {}).Cancel()
	}
	tt.Run()
	tt.mu.Lock()
	size := len(tt.queue.buf)
	tt.mu.Unlock()
	if size != 0 {
		t.Errorf("idle with a queue buffer of %d slots, want none", size)
	}
}
