package redissync

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestHoldersKeyOutlivesEveryLease: the holders key expires a second after
// the lease in it that runs out last, whatever the TTL of the process that
// made the round trip. It expired TTL + 1s after each round trip, with the
// TTL of the process that made it: an instance with a short TTL (a rolling
// change of the setting) that merely tried to enter made the key, and with
// it the lease of a holder with a long TTL, expire under that holder,
// letting another flow in beside it.
func TestHoldersKeyOutlivesEveryLease(t *testing.T) {
	addr := sharedRedis(t)
	a, rdb := newClient(t, addr, Options{})
	b, _ := newClient(t, addr, Options{Prefix: a.opts.Prefix})
	long := a.NewMutex("m", MutexOptions{Max: 1, TTL: time.Minute})
	short := b.NewMutex("m", MutexOptions{Max: 1, TTL: 100 * time.Millisecond})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, long, &tr, "A", release)
	wantError(t, (<-enter(l, short, &tr, "B")).Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	// A's lease runs out a minute after it entered: the key a second later.
	ttl := rdb.PTTL(context.Background(), long.keys[0]).Val()
	if ttl <= time.Minute-5*time.Second || ttl > time.Minute+time.Second {
		t.Errorf("the holders key expires in %v, want just under %v", ttl, time.Minute+time.Second)
	}
	close(release)
	if res := <-held; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "B onerror DefenseRejected: Mutex queue limit", "A out")
}
