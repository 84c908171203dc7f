package redissync

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Two parallel branches that both queue for a Mutex(2) before either is
// in: branches share their flow's hold, so the second one in shares the
// first one's lease and token, and each reads that token for as long as
// it is inside (before, the second replaced the first's hold: the first
// then read the second's token, and the second lost its hold when the
// first left).
func TestParallelBranchesShareTheirFlowsHold(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("branches", MutexOptions{Max: 2, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	b1in, b2in := make(chan struct{}), make(chan struct{})
	var first, later [2]int64
	branch := func(i int, mine, other chan struct{}) func(as asyncsteps.AsyncSteps, _ ...any) {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				first[i], _ = m.Token(as)
				close(mine)
				as.Await(func(context.Context) (any, error) { <-other; return nil, nil })
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { later[i], _ = m.Token(as) })
			})
		}
	}
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(branch(0, b1in, b2in))
		p.Add(branch(1, b2in, b1in))
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first[0] == 0 || first[1] != first[0] || later != first {
		t.Errorf("tokens first %v, later %v: want one token, the same in both branches throughout", first, later)
	}
	waitFor(t, "no holder in Redis", func() bool {
		return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
	})
}
