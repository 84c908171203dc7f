package redissync

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// The parallel branches of one flow count as flows of their own in a
// Mutex, as in the in-process one (spec 1.11.4): each asks for a lease of
// its own and reads its own token, nested sections of a branch share its
// hold, and a branch inherits no hold from the flow it was started from.
// Before, the hold was kept in the flow's State, which its branches
// share: a branch entered at once a Mutex its sibling or its flow held,
// and two branches were inside a Max 1 section together.

// until returns an Await function that returns once cond holds: it
// synchronises a flow with the Mutex's goroutine. It fails the step after
// ten seconds, so that a test of a rule broken ends with a trace rather
// than a hang.
func until(what string, cond func() bool) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("timed out waiting for %s", what)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil, nil
	}
}

// runFlow runs r and returns its error, failing the test if it is not
// over in 30 seconds.
func runFlow(t *testing.T, r *asyncsteps.Root) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.Run(ctx)
	return err
}

// wantAllGivenBack waits until Redis holds no lease of m, and checks that
// m keeps no hold, waiter or holder.
func wantAllGivenBack(t *testing.T, rdb *redis.Client, m *Mutex) {
	t.Helper()
	waitFor(t, "no holder in Redis", func() bool {
		return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.holds)+len(m.held)+len(m.branches)+len(m.outerCount)+m.queue.live != 0 {
		t.Errorf("Mutex keeps %d holds, %d holders, %d branch waiters (%d keys counted), %d queued: want none",
			len(m.holds), len(m.held), len(m.branches), len(m.outerCount), m.queue.live)
	}
}

// tokenStep returns a step that traces name and the token of m, relative
// to *base (the first token traced sets it), or that it has none.
func tokenStep(tr *tracer, m *Mutex, base *int64, name string) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, _ ...any) {
		token, ok := m.Token(as)
		if !ok {
			tr.add("%s no token", name)
			return
		}
		if *base == 0 {
			*base = token
		}
		tr.add("%s token +%d", name, token-*base)
	}
}

// TestParallelBranchesTakeTurnsOnAMutex1: two sibling branches on a Max 1
// Mutex are inside one after the other, the second, which asks once the
// first is in, with the next token; a nested section of each enters at
// once with its branch's token.
func TestParallelBranchesTakeTurnsOnAMutex1(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("turns", MutexOptions{Max: 1, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	var base int64
	var b0in, b1in atomic.Bool
	branch := func(name string, wait func(as asyncsteps.AsyncSteps)) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			if name == "b1" {
				// Once its sibling is in: branches that both asked
				// before either was in each got a lease already.
				as.Await(until("b0 to enter", b0in.Load))
			}
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				b0in.Store(true)
				if name == "b1" {
					b1in.Store(true)
				}
				tokenStep(&tr, m, &base, name+" in")(as)
				as.Sync(m, tokenStep(&tr, m, &base, name+" nested"))
				wait(as)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("%s out", name) })
			})
		}
	}
	r := asyncsteps.New(asyncsteps.WithTool(l))
	p := r.Parallel()
	p.Add(branch("b0", func(as asyncsteps.AsyncSteps) {
		as.Await(until("b1 to queue or enter", func() bool { return queued(&m.gateQueue) == 1 || b1in.Load() }))
	}))
	p.Add(branch("b1", func(asyncsteps.AsyncSteps) {}))
	if err := runFlow(t, r); err != nil {
		t.Fatal(err)
	}
	tr.check(t,
		"b0 in token +0", "b0 nested token +0", "b0 out",
		"b1 in token +1", "b1 nested token +1", "b1 out")
	wantAllGivenBack(t, rdb, m)
}

// TestParallelBranchesHoldLeasesOfTheirOwn: on a Max 2 Mutex, two sibling
// branches are inside together, each with a lease of its own in Redis and
// its own token, which its nested section reads too.
func TestParallelBranchesHoldLeasesOfTheirOwn(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("two", MutexOptions{Max: 2, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var inside atomic.Int32
	bothInside := until("both branches inside", func() bool { return inside.Load() == 2 })
	type seen struct {
		in, nested     int64
		inOK, nestedOK bool
	}
	var branches [2]seen
	counted := make(chan struct{})
	branch := func(b *seen) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				b.in, b.inOK = m.Token(as)
				inside.Add(1)
				as.Await(bothInside)
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { b.nested, b.nestedOK = m.Token(as) })
				asyncsteps.AwaitChan(as, counted)
			})
		}
	}
	var leases int64
	r := asyncsteps.New(asyncsteps.WithTool(l))
	p := r.Parallel()
	p.Add(branch(&branches[0]))
	p.Add(branch(&branches[1]))
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Await(bothInside)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			leases = rdb.ZCard(context.Background(), m.keys[0]).Val()
			close(counted)
		})
	})
	if err := runFlow(t, r); err != nil {
		t.Fatal(err)
	}
	b0, b1 := branches[0], branches[1]
	if !b0.inOK || !b1.inOK || b1.in-b0.in != 1 {
		t.Errorf("tokens of the branches %d, %t and %d, %t: want two, one after the other", b0.in, b0.inOK, b1.in, b1.inOK)
	}
	for i, b := range branches {
		if !b.nestedOK || b.nested != b.in {
			t.Errorf("branch %d: nested section's token %d, %t, want its branch's, %d", i, b.nested, b.nestedOK, b.in)
		}
	}
	if leases != 2 {
		t.Errorf("%d leases in Redis while both branches were inside, want 2", leases)
	}
	wantAllGivenBack(t, rdb, m)
}

// holderWithABranch returns a flow that enters m, traces its token, runs
// a Parallel branch that enters m too, and traces what the branch saw.
func holderWithABranch(l *asyncsteps.Loop, m *Mutex, tr *tracer, base *int64) *asyncsteps.Root {
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tokenStep(tr, m, base, "flow in")(as)
		as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tokenStep(tr, m, base, "branch before")(as)
			as.Sync(m, tokenStep(tr, m, base, "branch in"), func(as asyncsteps.AsyncSteps, code string) {
				tr.add("branch onerror %s: %s", code, as.State().ErrorInfo)
			})
		})
		as.Add(tokenStep(tr, m, base, "flow after"))
	})
	return r
}

// TestBranchOfAHolderDeadlocksOnAMutex1: a branch of a flow that holds
// the only lease would wait for a flow that waits for it: it fails with
// the in-process Mutex's deadlock error, which its error handler sees
// first, and the flow's lease is given back.
func TestBranchOfAHolderDeadlocksOnAMutex1(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("deadlock", MutexOptions{Max: 1, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	var base int64
	err := runFlow(t, holderWithABranch(l, m, &tr, &base))
	wantError(t, err, asyncsteps.InternalError, deadlockInfo)
	tr.check(t,
		"flow in token +0", "branch before no token",
		"branch onerror InternalError: "+deadlockInfo)
	wantAllGivenBack(t, rdb, m)
}

// TestBranchOfAHolderTakesALeaseOfItsOwn: with a second lease free, the
// branch of a holder enters with it, and its token; the flow's own stays
// the flow's.
func TestBranchOfAHolderTakesALeaseOfItsOwn(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("second", MutexOptions{Max: 2})
	l := newLoops(t, 1)[0]
	var tr tracer
	var base int64
	if err := runFlow(t, holderWithABranch(l, m, &tr, &base)); err != nil {
		t.Fatal(err)
	}
	tr.check(t,
		"flow in token +0", "branch before no token",
		"branch in token +1", "flow after token +0")
	wantAllGivenBack(t, rdb, m)
}

// TestBranchesOfTwoHoldersDeadlock: on a Max 2 Mutex held by flows A and
// B, A's branch waits for B's lease; B's branch then completes the cycle
// and fails with the deadlock error. B's error gives its lease back, and
// A's branch enters with it.
func TestBranchesOfTwoHoldersDeadlock(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("cycle", MutexOptions{Max: 2, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	var bIn, a1In atomic.Bool
	b := asyncsteps.New(asyncsteps.WithTool(l))
	b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("B in")
		bIn.Store(true)
		as.Await(until("A's branch to queue or enter", func() bool { return queued(&m.gateQueue) == 1 || a1In.Load() }))
		as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B1 in") },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.add("B1 onerror %s: %s", code, as.State().ErrorInfo)
				})
		})
	})
	bDone := b.Promise()
	waitFor(t, "B inside", bIn.Load)
	a := asyncsteps.New(asyncsteps.WithTool(l))
	a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A in")
		as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				a1In.Store(true)
				tr.add("A1 in")
			})
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("A out") })
	})
	if err := runFlow(t, a); err != nil {
		t.Fatal(err)
	}
	wantError(t, (<-bDone).Err, asyncsteps.InternalError, deadlockInfo)
	tr.check(t, "B in", "A in", "B1 onerror InternalError: "+deadlockInfo, "A1 in", "A out")
	wantAllGivenBack(t, rdb, m)
}

// TestBranchErrorGivesBackTheLeasesOfEveryBranch: a branch that fails
// inside the Mutex cancels its sibling, which asked once it was in: one
// that waits in the queue
// leaves it without a lease (Max 1), one inside gives its own back (Max
// 2). No lease stays in Redis.
func TestBranchErrorGivesBackTheLeasesOfEveryBranch(t *testing.T) {
	for _, max := range []int{1, 2} {
		t.Run(fmt.Sprint("Max", max), func(t *testing.T) {
			c, rdb := newClient(t, sharedRedis(t), Options{})
			m := c.NewMutex("fail", MutexOptions{Max: max, MaxQueue: -1})
			l := newLoops(t, 1)[0]
			var tr tracer
			var b0in, b1in atomic.Bool
			var leases int64
			r := asyncsteps.New(asyncsteps.WithTool(l))
			p := r.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("b0 in")
					b0in.Store(true)
					as.Await(until("b1 to queue or enter", func() bool { return queued(&m.gateQueue) == 1 || b1in.Load() }))
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						leases = rdb.ZCard(context.Background(), m.keys[0]).Val()
						as.Error("Boom", "b0 failed")
					})
				})
			})
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Await(until("b0 to enter", b0in.Load))
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("b1 in")
					b1in.Store(true)
					as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("b1 cancelled inside") })
				})
			})
			wantError(t, runFlow(t, r), "Boom", "b0 failed")
			want := []string{"b0 in"}
			if max == 2 {
				want = append(want, "b1 in", "b1 cancelled inside")
			}
			tr.check(t, want...)
			if leases != int64(max) {
				t.Errorf("%d leases in Redis as b0 failed, want %d", leases, max)
			}
			wantAllGivenBack(t, rdb, m)
		})
	}
}

// TestNestedSyncThroughAnOpaqueDecoratorIsNotReentrant: a decorator that
// does not unwrap hides the flow from the Mutex, as from the in-process
// one: its nested Sync is a holder of its own, which finds the Mutex full
// (here refused, with no queue). Through the flow's State, which the
// flow's branches share, the Mutex could not tell them apart.
func TestNestedSyncThroughAnOpaqueDecoratorIsNotReentrant(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("opaque", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(opaque{as}, func(as asyncsteps.AsyncSteps, _ ...any) {
			_, ok := m.Token(as)
			tr.add("in, token %t", ok)
			m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("nested in") },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.add("nested onerror %s: %s", code, as.State().ErrorInfo)
					as.Success()
				})
		})
	})
	if err := runFlow(t, r); err != nil {
		t.Fatal(err)
	}
	tr.check(t, "in, token false", "nested onerror DefenseRejected: Mutex queue limit")
	wantAllGivenBack(t, rdb, m)
}
