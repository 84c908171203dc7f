package asyncsteps_test

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// TestLoopClosedReportsCloseWithoutWakingTheLoop: Closed is false on a
// running Loop and on the loop of DefaultTool, true from Close on and on
// a zero Loop, and asking it from another goroutine costs the loop no
// pass, as a probe with Deferred did (a timer scheduled from another
// goroutine wakes a sleeping loop).
func TestLoopClosedReportsCloseWithoutWakingTheLoop(t *testing.T) {
	l := asyncsteps.NewLoop()
	var passes atomic.Int64
	l.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) { passes.Add(1) }})
	ran := make(chan struct{})
	l.Immediate(func() { close(ran) })
	<-ran // the loop sleeps now, until something wakes it
	before := passes.Load()
	var got []bool
	for range 3 {
		got = append(got, l.Closed())
	}
	// A callback of its own: it makes the one pass expected.
	ran = make(chan struct{})
	l.Immediate(func() { close(ran) })
	<-ran
	if n := passes.Load() - before; n != 1 {
		t.Errorf("%d passes for 3 calls of Closed and a callback, want 1", n)
	}
	l.Close()
	got = append(got, l.Closed(), new(asyncsteps.Loop).Closed())
	if d, ok := asyncsteps.DefaultTool().(*asyncsteps.Loop); ok {
		got = append(got, d.Closed())
	}
	want := []bool{false, false, false, true, true, false}
	if !slices.Equal(got, want) {
		t.Errorf("Closed: %v, want %v (open ×3, closed, zero Loop, DefaultTool's loop)", got, want)
	}
}
