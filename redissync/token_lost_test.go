package redissync

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestTokenAfterLeaseLost: once a renewal finds the section's lease gone
// from Redis (here deleted, as a FLUSHALL or an eviction would), Token
// reports no token for the rest of the section, also in a nested one. It
// went on returning the old token, as if the lease were still held.
func TestTokenAfterLeaseLost(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("lost", MutexOptions{Max: 1, TTL: 300 * time.Millisecond})
	l := newLoops(t, 1)[0]
	var tr tracer
	inside := make(chan struct{})
	release := make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tok, ok := m.Token(as)
		tr.add("in: token > 0 %v, held %v", tok > 0, ok)
		close(inside)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitChan(as, release) })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tok, ok := m.Token(as)
			tr.add("lease lost: token %d, held %v", tok, ok)
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				tok, ok := m.Token(as)
				tr.add("nested: token %d, held %v", tok, ok)
			})
		})
	})
	p := r.Promise()
	<-inside
	if err := rdb.Del(context.Background(), m.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a renewal to find the lease gone", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.held) == 0
	})
	close(release)
	if res := <-p; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "in: token > 0 true, held true", "lease lost: token 0, held false", "nested: token 0, held false")
}
