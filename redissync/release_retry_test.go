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
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) >= 12 {
			// evalsha, sha, numkeys, 3 keys, then ARGV: limit, TTL, the
			// numbers of leases to give back and to renew, ...
			release, _ := args[8].(int)
			renew, _ := args[9].(int)
			if h.failing.Load() {
				err := errors.New("injected: no answer")
				cmd.SetErr(err)
				return err
			}
			if !h.taken.Load() {
				h.releases.Add(int64(release))
				h.taken.Store(len(args)-12-release-renew > 0)
			}
		}
		return next(ctx, cmd)
	}
}

// TestFailedLeasesNotRetriedPastTTL: the leases of the round trips that
// failed while Redis did not answer (which Redis may have given all the
// same) go back with the next round trips for a TTL, not for ever: by
// then a lease Redis gave has run out. Each failed round trip added its
// flows' leases to those that every round trip sends, so that an outage of
// hours made every round trip carry a list that only grew, in the
// process's memory and in the call Redis runs when it comes back.
func TestFailedLeasesNotRetriedPastTTL(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	loadScripts(t, rdb)
	hook := new(failingMutexCalls)
	c.rdb.(*redis.Client).AddHook(hook)
	const ttl = 50 * time.Millisecond
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: ttl})
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
	time.Sleep(ttl) // every lease a failed round trip may have taken has run out
	hook.failing.Store(false)
	if err := try(); err != nil {
		t.Fatal(err)
	}
	if n := hook.releases.Load(); n != 0 {
		t.Errorf("the round trips after a TTL gave back %d leases of the failed ones, want 0", n)
	}
}
