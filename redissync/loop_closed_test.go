package redissync

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// The tests below queue a flow on a loop that is then closed: the flow
// stops without its cancel handlers, so only the Syncer can take it out
// of the queue. Recheck is an hour, so that a later flow's round trip,
// not the fallback re-check, must find it.

// queueDoomed starts a flow on a new loop that enters s and waits in q,
// then closes the loop. The flow's Promise ends as every flow of a closed
// loop does.
func queueDoomed(t *testing.T, s asyncsteps.Syncer, q *gateQueue, tr *tracer) {
	t.Helper()
	doomed := asyncsteps.NewLoop()
	x := enter(doomed, s, tr, "X")
	waitFor(t, "X to queue", func() bool { return queued(q) == 1 })
	doomed.Close()
	wantError(t, (<-x).Err, asyncsteps.InternalError, "the flow's loop is closed")
}

// enterQueued starts a flow on l that enters s, then reads its token with
// token (if not nil) into got, and returns once the flow waits in q, the
// only one there. It fails the test if the flow ends first: refused, say.
func enterQueued(t *testing.T, l *asyncsteps.Loop, s asyncsteps.Syncer, q *gateQueue, tr *tracer, name string,
	token func(asyncsteps.AsyncSteps) (int64, bool), got *atomic.Int64) <-chan asyncsteps.Result {
	t.Helper()
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("%s in", name)
		if token != nil {
			n, _ := token(as)
			got.Store(n)
		}
	})
	res := r.Promise()
	waitFor(t, name+" to queue", func() bool { return queuedOn(q, l) == 1 || len(res) > 0 })
	if len(res) > 0 {
		t.Fatalf("%s ended instead of waiting: %v", name, (<-res).Err)
	}
	if n := queued(q); n != 1 {
		t.Fatalf("%d flows queued, want 1: %s", n, name)
	}
	return res
}

// queuedOn returns the number of flows of l waiting in q's queue.
func queuedOn(q *gateQueue, l *asyncsteps.Loop) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, w := range q.queue.items {
		if w.state == wQueued && w.tool == l {
			n++
		}
	}
	return n
}

// int64Key reads a counter of Redis.
func int64Key(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMutexQueuedLoopClosedLeaves: a flow queued on a Mutex whose loop is
// closed leaves the queue at the next round trip: it no longer counts
// against MaxQueue, and the lease given back goes to the next flow, not
// to it.
func TestMutexQueuedLoopClosedLeaves(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	m := c.NewMutex("qclosed", MutexOptions{Max: 1, MaxQueue: 1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	var tr tracer
	release := make(chan struct{})
	h := holdOpen(t, l, m, &tr, "H", release)
	first := int64Key(t, rdb, m.keys[1])

	queueDoomed(t, m, &m.gateQueue, &tr)
	var token atomic.Int64
	b := enterQueued(t, l, m, &m.gateQueue, &tr, "B", m.Token, &token)
	if n := rdb.ZCard(ctx, m.keys[0]).Val(); n != 1 {
		t.Fatalf("%d leases in Redis while H holds and B waits, want 1", n)
	}
	close(release)
	if res := <-h; res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := token.Load(); got != first+1 {
		t.Errorf("B's token %d, want %d: the next lease after H's", got, first+1)
	}
	if last := int64Key(t, rdb, m.keys[1]); last != first+1 {
		t.Errorf("%d leases given out after H's, want 1 (B's)", last-first)
	}
	waitFor(t, "no lease in Redis", func() bool { return rdb.ZCard(ctx, m.keys[0]).Val() == 0 })
	tr.check(t, "H in", "H out", "B in")
}

// TestMutexQueuedLoopClosedNotAdmitted: a flow queued on a Mutex whose
// loop is closed is not given the lease that is given back next.
func TestMutexQueuedLoopClosedNotAdmitted(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	m := c.NewMutex("qclosed", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	var tr tracer
	release := make(chan struct{})
	h := holdOpen(t, l, m, &tr, "H", release)
	first := int64Key(t, rdb, m.keys[1])
	queueDoomed(t, m, &m.gateQueue, &tr)
	close(release)
	if res := <-h; res.Err != nil {
		t.Fatal(res.Err)
	}
	waitFor(t, "an empty queue", func() bool { return queued(&m.gateQueue) == 0 })
	waitFor(t, "no lease in Redis", func() bool { return rdb.ZCard(ctx, m.keys[0]).Val() == 0 })
	if last := int64Key(t, rdb, m.keys[1]); last != first {
		t.Errorf("%d leases given out after H's, want none", last-first)
	}
	tr.check(t, "H in", "H out")
}

// TestThrottleQueuedLoopClosedLeaves: a flow queued on a Throttle whose
// loop is closed leaves the queue at the next round trip: it no longer
// counts against MaxQueue, and the next entry goes to the next flow.
func TestThrottleQueuedLoopClosedLeaves(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	th := c.NewThrottle("qclosed", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, th, &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	queueDoomed(t, th, &th.gateQueue, &tr)
	b := enterQueued(t, l, th, &th.gateQueue, &tr, "B", nil, nil)
	admitNext(t, rdb, th)
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	wantEntries(t, rdb, th, 1)
	tr.check(t, "A in", "B in")
}

// TestLimiterQueuedLoopClosedLeaves: a flow that holds a Limiter's slot
// and waits for its rate when its loop is closed leaves the rate's queue
// at the next round trip; its slot goes back at the next renewal or
// re-check, as any holder's whose loop was closed.
func TestLimiterQueuedLoopClosedLeaves(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	lim := c.NewLimiter("qclosed", LimiterOptions{Concurrent: 2, Rate: 1, Period: time.Minute, Burst: 1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	var tr tracer
	var token atomic.Int64
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(lim, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A in")
		n, _ := lim.Token(as)
		token.Store(n)
	})
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	first := token.Load()

	queueDoomed(t, lim, &lim.throttle.gateQueue, &tr)
	b := enterQueued(t, l, lim, &lim.throttle.gateQueue, &tr, "B", lim.Token, &token)
	if n := rdb.ZCard(ctx, lim.mutex.keys[0]).Val(); n != 2 {
		t.Fatalf("%d slots held in Redis, want 2: X's and B's", n)
	}
	admitNext(t, rdb, lim.throttle)
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := token.Load(); got != first+2 {
		t.Errorf("B's token %d, want %d: after A's and X's", got, first+2)
	}
	wantEntries(t, rdb, lim.throttle, 1)
	// B's slot goes back in a round trip after its flow has ended; X's
	// stays until the next renewal (TTL/3) or re-check, past the test.
	waitFor(t, "one slot held in Redis after B, X's", func() bool {
		return rdb.ZCard(ctx, lim.mutex.keys[0]).Val() == 1
	})
	tr.check(t, "A in", "B in")
}

// admitNext makes the next entry of th possible at once: its Rate is 1
// per minute, too slow to wait for. It forgets the entries made, and
// wakes th's goroutine for a round trip.
func admitNext(t *testing.T, rdb *redis.Client, th *Throttle) {
	t.Helper()
	if err := rdb.Del(context.Background(), th.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	th.signal()
}

// wantEntries checks that want entries of th, at 1 per minute, were
// made since admitNext: the key of the next entry's time expires a
// minute after it for each.
func wantEntries(t *testing.T, rdb *redis.Client, th *Throttle, want int) {
	t.Helper()
	ttl := rdb.PTTL(context.Background(), th.keys[0]).Val()
	got := int((ttl + 30*time.Second) / time.Minute)
	if got != want {
		t.Errorf("%d entries (the next in %v), want %d", got, ttl, want)
	}
}
