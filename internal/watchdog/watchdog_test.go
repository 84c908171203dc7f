package watchdog

import (
	"testing"
	"time"
)

const tick = 100 * time.Millisecond

// advanceAll counts gaps on a Timer of limit and returns the index of the
// gap that reached the limit (-1: none) and the time counted.
func advanceAll(limit time.Duration, gaps ...time.Duration) (reached int, elapsed time.Duration) {
	tm := newTimer(limit, nil)
	for i, g := range gaps {
		if tm.advance(g, tick) {
			return i, tm.Elapsed()
		}
	}
	return -1, tm.Elapsed()
}

func repeat(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// Ticks on time count whole: a 1 s limit is reached on the tenth tick of
// 100 ms.
func TestTimerReachesItsLimitOnTicks(t *testing.T) {
	reached, elapsed := advanceAll(time.Second, repeat(tick, 20)...)
	if reached != 9 || elapsed != time.Second {
		t.Errorf("reached at gap %d, elapsed %v; want gap 9, 1s", reached, elapsed)
	}
}

// A gap of 40 s between two ticks (the process stopped) counts as two
// ticks: the limit is reached on the running time alone.
func TestTimerCountsAStallAsTwoTicks(t *testing.T) {
	gaps := append(repeat(tick, 3), 40*time.Second)
	gaps = append(gaps, repeat(tick, 10)...)
	reached, elapsed := advanceAll(time.Second, gaps...)
	if reached != 8 || elapsed != time.Second {
		t.Errorf("reached at gap %d, elapsed %v; want gap 8 (3 ticks, a stall counted 2, 5 more), 1s", reached, elapsed)
	}
}

// A Timer stopped before its limit never calls its function, and one on
// the real clock calls it once the limit has passed; Expired says which.
func TestAfterFuncAndStop(t *testing.T) {
	stopped := AfterFunc(time.Hour, func() { t.Error("a stopped Timer called its function") })
	stopped.Stop()
	stopped.Stop()
	ran := make(chan struct{}, 2)
	tm := AfterFunc(50*time.Millisecond, func() { ran <- struct{}{} })
	defer tm.Stop()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the function did not run")
	}
	if !tm.Expired() || stopped.Expired() {
		t.Errorf("Expired %v and %v (stopped), want true and false", tm.Expired(), stopped.Expired())
	}
}
