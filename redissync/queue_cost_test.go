package redissync

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestRoundTripCostIsNotTheQueues: a round trip of a Throttle or a Mutex
// with thousands of flows queued allocates what one with a few does: it
// walks its queue only as far as the flows it tries, and finds the loops
// to probe by their count. Each round trip copied the whole queue (64 KB
// for 8,000 flows) and walked it three times: at 8,000 flows queued, a
// Throttle of 4,000 entries per second used 2.7 times the CPU per entry
// that it used with 10.
func TestRoundTripCostIsNotTheQueues(t *testing.T) {
	const waiters = 8000
	c, _ := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	calls := &scriptCounter{}
	calls.counting.Store(true)
	c.rdb.(*redis.Client).AddHook(calls)
	l := newLoops(t, 1)[0]
	var tr tracer
	th := c.NewThrottle("cost", ThrottleOptions{Rate: 1, Period: time.Hour, MaxQueue: -1})
	if res := <-enter(l, th, &tr, "first"); res.Err != nil { // the hour's entry
		t.Fatal(res.Err)
	}
	m := c.NewMutex("cost", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Hour})
	release := make(chan struct{})
	defer func() {
		// The waiters fail first: let go before, the holder's lease went
		// to one of them, which entered while the test ended.
		c.Close()
		close(release)
	}()
	holdOpen(t, l, m, &tr, "holder", release)
	for _, s := range []struct {
		name string
		s    asyncsteps.Syncer
		q    *gateQueue
	}{{"Throttle", th, &th.gateQueue}, {"Mutex", m, &m.gateQueue}} {
		for range waiters {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Sync(s.s, func(asyncsteps.AsyncSteps, ...any) { t.Errorf("a flow entered the %s", s.name) })
			r.Promise()
		}
		waitFor(t, "the flows to queue", func() bool { return queued(s.q) == waiters })
		const rounds = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range rounds {
			n := calls.calls.Load()
			s.q.signal()
			waitFor(t, "a round trip", func() bool { return calls.calls.Load() > n })
		}
		runtime.ReadMemStats(&after)
		perRound := (after.TotalAlloc - before.TotalAlloc) / rounds
		t.Logf("%s: %d bytes allocated per round trip with %d flows queued", s.name, perRound, waiters)
		if perRound > 16<<10 {
			t.Errorf("%s: %d bytes allocated per round trip with %d flows queued, want under 16 KiB",
				s.name, perRound, waiters)
		}
	}
}

// TestWaitingCountsFollowTheFlows: the count of waiting flows per loop,
// by which a round trip finds the loops to probe, follows each way a
// flow stops waiting: admitted from the queue, refused, cancelled, failed
// by Close; no loop is left counted.
func TestWaitingCountsFollowTheFlows(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("counts", ThrottleOptions{Rate: 1, Period: 300 * time.Millisecond, MaxQueue: 2})
	loops := newLoops(t, 2)
	l1, l2 := loops[0], loops[1]
	counts := func() string {
		th.mu.Lock()
		defer th.mu.Unlock()
		return fmt.Sprintf("%d %d %d", len(th.waiting), th.waiting[l1], th.waiting[l2])
	}
	var tr tracer
	if res := <-enter(l1, th, &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	b := enter(l1, th, &tr, "B")
	waitFor(t, "B to queue", func() bool { return queued(&th.gateQueue) == 1 })
	rc := asyncsteps.New(asyncsteps.WithTool(l2))
	rc.Sync(th, func(asyncsteps.AsyncSteps, ...any) { tr.add("C in") })
	cres := rc.Promise()
	waitFor(t, "C to queue", func() bool { return queued(&th.gateQueue) == 2 })
	if got := counts(); got != "2 1 1" {
		t.Errorf("B and C queued: loops, flows of l1, of l2: %s, want 2 1 1", got)
	}
	wantError(t, (<-enter(l1, th, &tr, "D")).Err, asyncsteps.DefenseRejected, "Throttle queue limit")
	rc.Cancel()
	<-cres
	if got := counts(); got != "1 1 0" {
		t.Errorf("D refused, C cancelled: %s, want 1 1 0", got)
	}
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := counts(); got != "0 0 0" {
		t.Errorf("B admitted: %s, want 0 0 0", got)
	}
	e := enter(l2, th, &tr, "E")
	waitFor(t, "E to queue", func() bool { return queued(&th.gateQueue) == 1 })
	c.Close()
	wantError(t, (<-e).Err, asyncsteps.CommError, "redissync: client closed")
	if got := counts(); got != "0 0 0" {
		t.Errorf("E failed by Close: %s, want 0 0 0", got)
	}
	tr.check(t, "A in", "D onerror DefenseRejected: Throttle queue limit", "B in",
		"E onerror CommError: redissync: client closed")
}
