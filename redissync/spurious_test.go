package redissync

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestMutexFreedDuringRoundTripNotRefused: a flow that asks while a round
// trip is under way, after a holder of the process left during it, is
// tried, and enters: the slot is free once the holder's lease goes back.
// The answer to the round trip, which found the Mutex full, refused it
// with "Mutex queue limit" without trying it.
func TestMutexFreedDuringRoundTripNotRefused(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
	c.rdb.(*redis.Client).AddHook(h)
	m := c.NewMutex("m", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", release)

	h.armed <- struct{}{} // B's round trip waits
	b := enter(l, m, &tr, "B")
	<-h.started
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	late := enter(l, m, &tr, "C")
	waitFor(t, "C to ask", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.fresh) == 1
	})
	close(h.release)
	wantError(t, (<-b).Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	if res := <-late; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "A out", "B onerror DefenseRejected: Mutex queue limit", "C in")
}
