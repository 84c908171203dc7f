package redissync

import (
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestCloseEndsExclusion: a section still running when its Client closes
// goes on, without its lease, as Close documents: a flow of another
// instance enters beside it, and Token in the section reports no token
// from then on. It went on returning the token, as if the lease were held.
func TestCloseEndsExclusion(t *testing.T) {
	addr := sharedRedis(t)
	a, _ := newClient(t, addr, Options{})
	b, _ := newClient(t, addr, Options{Prefix: a.opts.Prefix})
	ma := a.NewMutex("m", MutexOptions{Max: 1, TTL: time.Minute})
	mb := b.NewMutex("m", MutexOptions{Max: 1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	inside := make(chan struct{})
	release := make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(ma, func(as asyncsteps.AsyncSteps, _ ...any) {
		_, ok := ma.Token(as)
		tr.add("A in, held %v", ok)
		close(inside)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitChan(as, release) })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tok, ok := ma.Token(as)
			tr.add("A after Close: token %d, held %v", tok, ok)
		})
	})
	p := r.Promise()
	<-inside
	wantError(t, (<-enter(l, mb, &tr, "B")).Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	a.Close()
	if res := <-enter(l, mb, &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	close(release)
	if res := <-p; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in, held true", "B onerror DefenseRejected: Mutex queue limit", "C in",
		"A after Close: token 0, held false")
}
