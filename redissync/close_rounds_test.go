package redissync

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptCounter is a go-redis hook that counts the script calls that
// start while counting is set.
type scriptCounter struct {
	counting atomic.Bool
	calls    atomic.Int64
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && h.counting.Load() {
			h.calls.Add(1)
		}
		return next(ctx, cmd)
	}
}

// TestCloseMakesNoRoundMore: a Syncer whose round trip is under way when
// its Client closes makes no round trip after it but the last one of its
// shutdown (a Mutex's, giving its leases back), also when its timers and
// wake-up are due by then. Its goroutine took any due case of its select
// as likely as the Client's closing: with Redis slow or gone, each round
// more cost Close up to OpTimeout, so Close took a few of them at random.
func TestCloseMakesNoRoundMore(t *testing.T) {
	for range 10 {
		t.Run("Mutex", func(t *testing.T) {
			// The re-check and the renewal are due whenever the held round
			// trip ends; a waiter makes each of them a round trip.
			c, count, hold := countedClient(t, Options{Recheck: time.Millisecond})
			m := c.NewMutex("m", MutexOptions{Max: 1, MaxQueue: -1, TTL: 30 * time.Millisecond})
			l := newLoops(t, 1)[0]
			var tr tracer
			release := make(chan struct{})
			defer close(release)
			holdOpen(t, l, m, &tr, "H", release)
			enter(l, m, &tr, "W")
			waitFor(t, "W to queue", func() bool { return queued(&m.gateQueue) == 1 })
			hold.armed <- struct{}{}
			closeWhileHeld(t, c, count, hold, 20*time.Millisecond)
			if n := count.calls.Load(); n != 1 {
				t.Errorf("%d round trips after Close began, want 1: the shutdown's", n)
			}
		})
		t.Run("Throttle", func(t *testing.T) {
			c, count, hold := countedClient(t, Options{})
			th := c.NewThrottle("t", ThrottleOptions{Rate: 1, Period: time.Hour, MaxQueue: -1})
			l := newLoops(t, 1)[0]
			var tr tracer
			hold.armed <- struct{}{}
			enter(l, th, &tr, "A")
			waitFor(t, "A's round trip to start", func() bool { return len(hold.armed) == 0 })
			enter(l, th, &tr, "B") // wakes the Throttle for a round trip after A's
			waitFor(t, "B to ask", func() bool { th.mu.Lock(); defer th.mu.Unlock(); return len(th.fresh) == 1 })
			closeWhileHeld(t, c, count, hold, 0)
			if n := count.calls.Load(); n != 0 {
				t.Errorf("%d round trips after Close began, want none", n)
			}
		})
	}
}

// countedClient returns a Client whose script calls are counted by a
// scriptCounter, and a roundTripHold that holds the first script call
// made once a token is put in its armed.
func countedClient(t *testing.T, opts Options) (*Client, *scriptCounter, *roundTripHold) {
	t.Helper()
	c, rdb := newClient(t, sharedRedis(t), opts)
	loadScripts(t, rdb) // no EVAL after a NOSCRIPT
	count := new(scriptCounter)
	c.rdb.(*redis.Client).AddHook(count) // outermost: it sees a call start
	hold := holdNextRoundTrip(c)
	<-hold.armed // disarmed until the test arms it
	return c, count, hold
}

// closeWhileHeld waits until hold holds a round trip, closes c, counts the
// script calls that start once c is closing, waits for due (the Syncers'
// timers to come due), lets the held round trip go on, and returns when
// Close has.
func closeWhileHeld(t *testing.T, c *Client, count *scriptCounter, hold *roundTripHold, due time.Duration) {
	t.Helper()
	<-hold.started
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.Close()
	}()
	<-c.done
	count.counting.Store(true)
	time.Sleep(due) // makes the old bug likelier; the fixed code ignores it
	close(hold.release)
	<-closed
}
