package redissync

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// failingMutexCalls is a go-redis hook that fails every call of the
// Mutex's script while failing is set, as a Redis that does not answer,
// and counts the leases given back by the calls made once it is cleared,
// up to the first one that takes a lease: a call that gives back only
// leases (a wake-up of the Mutex's goroutine) counts too.
type failingMutexCalls struct {
	failing  atomic.Bool
	releases atomic.Int64 // the sum of ARGV[3] since failing was cleared
	taken    atomic.Bool  // a call since failing was cleared took a lease
}

func (h *failingMutexCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failingMutexCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *failingMutexCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) >= 20 {
			// evalsha, sha, numkeys, 6 keys, then ARGV: limit, TTL, the
			// numbers of leases to give back and to renew, 7 more, then
			// the leases.
			release, _ := args[11].(int)
			renew, _ := args[12].(int)
			if h.failing.Load() {
				err := errors.New("injected: no answer")
				cmd.SetErr(err)
				return err
			}
			if !h.taken.Load() {
				h.releases.Add(int64(release))
				h.taken.Store(len(args)-20-release-renew > 0)
			}
		}
		return next(ctx, cmd)
	}
}

// TestOwedLeasesStayFew: while the leases of a failed round trip are
// owed (Redis may have given them all the same), the flows that ask are
// tried only once a round trip has given those back, so a round trip that
// fails adds no leases to owe: after 20 flows failed one by one, the round
// trips once Redis answers give back one lease, the first flow's, before
// the next flow takes one. Each failed round trip added its flows' leases
// to those that every round trip sends, so that an outage of hours made
// every round trip carry a list that only grew, in the process's memory
// and in the call Redis runs when it comes back.
func TestOwedLeasesStayFew(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	loadScripts(t, rdb)
	hook := new(failingMutexCalls)
	c.rdb.(*redis.Client).AddHook(hook)
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: 50 * time.Millisecond})
	l := newLoops(t, 1)[0]
	try := func() error {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(m, func(asyncsteps.AsyncSteps, ...any) {})
		_, err := r.Run(context.Background())
		return err
	}
	hook.failing.Store(true)
	for range 20 {
		if err := try(); err == nil {
			t.Fatal("a flow entered while every round trip failed")
		}
	}
	hook.failing.Store(false)
	if err := try(); err != nil {
		t.Fatal(err)
	}
	if n := hook.releases.Load(); n != 1 {
		t.Errorf("the round trips once Redis answered gave back %d leases of the failed ones, want 1", n)
	}
	waitFor(t, "no lease owed", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return len(m.owed) == 0 })
}
