package redissync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestThrottleEntryOfALeaverGoesToTheNext: an entry that Redis admits for
// a queued flow that is cancelled while the round trip is under way goes
// to the next flow of the queue. It was spent on the flow that left, and
// the next one waited for the entry after it: here a minute.
func TestThrottleEntryOfALeaverGoesToTheNext(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
	c.rdb.(*redis.Client).AddHook(h)
	th := c.NewThrottle("leaver", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, th, &tr, "A"); res.Err != nil { // the minute's entry
		t.Fatal(res.Err)
	}
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(th, func(asyncsteps.AsyncSteps, ...any) { tr.add("B in") })
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return queued(&th.gateQueue) == 1 })
	cres := enter(l, th, &tr, "C")
	waitFor(t, "C to queue", func() bool { return queued(&th.gateQueue) == 2 })
	// An entry free again (the key lost), and a round trip for B and C
	// that Redis has not answered yet.
	if err := rdb.Del(context.Background(), th.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	h.armed <- struct{}{}
	th.signal()
	<-h.started
	rb.Cancel()
	if res := <-b; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("B ended with %v, want a cancel", res.Err)
	}
	close(h.release)
	select {
	case res := <-cres:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("C still waits: the entry admitted for B was spent on it")
	}
	tr.check(t, "A in", "C in")
}

// TestThrottleEntryOfAFreshLeaverGoesToTheNext: the same for a flow that
// is cancelled while its first round trip is under way: the entry goes to
// the flow that asked after it.
func TestThrottleEntryOfAFreshLeaverGoesToTheNext(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	hold := func() *roundTripHold {
		h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
		c.rdb.(*redis.Client).AddHook(h)
		return h
	}
	// The hook added first is the outer one: X's call passes second's
	// before first's holds it, so arming second then holds the next call.
	second := hold()
	first := hold()
	th := c.NewThrottle("fresh", ThrottleOptions{Rate: 2, Period: time.Minute, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	first.armed <- struct{}{}
	x := enter(l, th, &tr, "X")
	<-first.started
	// A and B ask while X's round trip is under way: they are tried
	// together in the next, which takes the minute's second entry for A.
	ra := asyncsteps.New(asyncsteps.WithTool(l))
	ra.Sync(th, func(asyncsteps.AsyncSteps, ...any) { tr.add("A in") })
	a := ra.Promise()
	bres := enter(l, th, &tr, "B")
	waitFor(t, "A and B to ask", func() bool { th.mu.Lock(); defer th.mu.Unlock(); return len(th.fresh) == 2 })
	second.armed <- struct{}{}
	close(first.release)
	if res := <-x; res.Err != nil {
		t.Fatal(res.Err)
	}
	<-second.started
	ra.Cancel()
	if res := <-a; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("A ended with %v, want a cancel", res.Err)
	}
	close(second.release)
	select {
	case res := <-bres:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B still waits: the entry admitted for A was spent on it")
	}
	tr.check(t, "X in", "B in")
}

// TestThrottleEntryOfALeaverGoesToAFlowThatAskedDuringTheRoundTrip: the
// entry that Redis admits for a flow that is cancelled while its round
// trip is under way goes to a flow that asked meanwhile, when none of the
// round trip's is left to take it. It was spent on nobody, and that flow
// waited for the next entry: here a minute.
func TestThrottleEntryOfALeaverGoesToAFlowThatAskedDuringTheRoundTrip(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
	c.rdb.(*redis.Client).AddHook(h)
	th := c.NewThrottle("late", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	h.armed <- struct{}{}
	ra := asyncsteps.New(asyncsteps.WithTool(l))
	ra.Sync(th, func(asyncsteps.AsyncSteps, ...any) { tr.add("A in") })
	a := ra.Promise()
	<-h.started // A's round trip, which takes the minute's entry
	ra.Cancel()
	if res := <-a; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("A ended with %v, want a cancel", res.Err)
	}
	bres := enter(l, th, &tr, "B")
	waitFor(t, "B to ask", func() bool { th.mu.Lock(); defer th.mu.Unlock(); return len(th.fresh) == 1 })
	close(h.release)
	select {
	case res := <-bres:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B still waits: the entry admitted for A was spent on nobody")
	}
	tr.check(t, "B in")
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.queue.live != 0 || len(th.fresh) != 0 || len(th.waiting) != 0 {
		t.Errorf("%d flows queued, %d fresh, waiting counted on %d loops; want none",
			th.queue.live, len(th.fresh), len(th.waiting))
	}
}
