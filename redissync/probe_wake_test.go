package redissync

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// countingTool is a Tool of another package, run by a Loop, with a
// Closed method: it counts the timers scheduled on it.
type countingTool struct {
	loop     *asyncsteps.Loop
	deferred atomic.Int64
}

func (c *countingTool) Immediate(f func()) asyncsteps.Handle { return c.loop.Immediate(f) }
func (c *countingTool) IsSameThread() bool                   { return c.loop.IsSameThread() }
func (c *countingTool) Now() time.Time                       { return c.loop.Now() }
func (c *countingTool) Closed() bool                         { return c.loop.Closed() }

func (c *countingTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	c.deferred.Add(1)
	return c.loop.Deferred(d, f)
}

// queueOnThrottle takes the one entry of th with a flow of other, then
// queues flow X of tool on it; X waits an hour, until the test ends.
func queueOnThrottle(t *testing.T, th *Throttle, other *asyncsteps.Loop, tool asyncsteps.Tool) {
	t.Helper()
	var tr tracer
	if res := <-enter(other, th, &tr, "F"); res.Err != nil {
		t.Fatal(res.Err)
	}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Sync(th, func(asyncsteps.AsyncSteps, ...any) {})
	r.Promise()
	waitFor(t, "X to queue", func() bool { return queued(&th.gateQueue) == 1 })
}

// refuseOn makes a round trip of th for a flow of l, which the full queue
// refuses: each round trip with a flow queued looks for a closed loop
// among theirs.
func refuseOn(t *testing.T, th *Throttle, l *asyncsteps.Loop) {
	t.Helper()
	var tr tracer
	wantError(t, (<-enter(l, th, &tr, "B")).Err, asyncsteps.DefenseRejected, "Throttle queue limit")
}

// TestRoundTripDoesNotWakeTheLoopsItProbes: a Syncer's round trip made
// while flows wait in its queue asks their loops whether they are closed
// without scheduling anything on them. It scheduled a timer on each and
// cancelled it, which woke each sleeping loop to rearm its sleep: a loop
// whose flows waited on a busy Syncer woke at each of its round trips.
func TestRoundTripDoesNotWakeTheLoopsItProbes(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	loops := newLoops(t, 2)
	t.Run("a Tool with Closed", func(t *testing.T) {
		th := c.NewThrottle("probe-tool", ThrottleOptions{Rate: 1, Period: time.Hour, MaxQueue: 1})
		tool := &countingTool{loop: loops[0]}
		queueOnThrottle(t, th, loops[1], tool)
		before := tool.deferred.Load()
		for range 3 {
			refuseOn(t, th, loops[1])
		}
		if n := tool.deferred.Load() - before; n != 0 {
			t.Errorf("%d timers scheduled on the queued flow's tool by 3 round trips, want 0", n)
		}
	})
	t.Run("a Loop", func(t *testing.T) {
		th := c.NewThrottle("probe-loop", ThrottleOptions{Rate: 1, Period: time.Hour, MaxQueue: 1})
		a := asyncsteps.NewLoop()
		defer a.Close()
		var passes atomic.Int64
		a.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) { passes.Add(1) }})
		queueOnThrottle(t, th, loops[1], a)
		// A callback of its own: once it has run, the loop sleeps until
		// something wakes it, and each pass after it is a wake-up.
		ran := make(chan struct{})
		runOn := func() {
			a.Immediate(func() { close(ran) })
			<-ran
			ran = make(chan struct{})
		}
		runOn()
		before := passes.Load()
		for range 3 {
			refuseOn(t, th, loops[1])
			runOn()
		}
		if n := passes.Load() - before; n != 3 {
			t.Errorf("%d passes of the queued flow's loop over 3 round trips and 3 callbacks of its own, want 3", n)
		}
	})
}
