package redissync

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestHoldIsTheMutexValues: a flow that holds a Mutex does not re-enter
// another of the same name and prefix on another Redis database (or
// server) without asking that Redis: there the other's holder keeps it
// out. The hold was kept in the flow's State under the prefix and the
// name, so the flow entered at once, beside the other database's holder,
// with that holder's token.
func TestHoldIsTheMutexValues(t *testing.T) {
	addr := sharedRedis(t)
	c0, _ := newClient(t, addr, Options{})
	rdb1 := redis.NewClient(&redis.Options{Addr: addr, DB: 1})
	c1, err := New(context.Background(), rdb1, Options{Prefix: c0.opts.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c1.Close()
		rdb1.Close()
	})
	m0 := c0.NewMutex("db", MutexOptions{Max: 1})
	m1 := c1.NewMutex("db", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, m1, &tr, "B", release)

	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m0, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A in DB 0")
		as.Sync(m1, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A in DB 1")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("A refused in DB 1: %s %s", code, as.State().ErrorInfo)
			as.Success()
		})
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if res := <-held; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "B in", "A in DB 0", "A refused in DB 1: DefenseRejected Mutex queue limit", "B out")
}
