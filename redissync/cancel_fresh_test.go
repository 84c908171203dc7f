package redissync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// roundTripHold is a go-redis hook that makes one script call wait: a
// Redis that has not answered yet.
type roundTripHold struct {
	armed   chan struct{} // holds one token while the next call is to wait
	started chan struct{}
	release chan struct{}
}

func (h *roundTripHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTripHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *roundTripHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			select {
			case <-h.armed:
				close(h.started)
				<-h.release
			default:
			}
		}
		return next(ctx, cmd)
	}
}

// holdNextRoundTrip makes the next round trip of c's Syncers wait, once
// started, until the hook's release is closed. Call it before the
// Syncers are made: go-redis's hooks are not for a client in use.
func holdNextRoundTrip(c *Client) *roundTripHold {
	h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
	h.armed <- struct{}{}
	c.rdb.(*redis.Client).AddHook(h)
	return h
}

// TestCancelledBeforeItsRoundTrip: a flow cancelled after it asked, while
// the round trip of an earlier flow is under way, asks Redis for nothing:
// a Throttle counts no entry for it, a Mutex gives it no lease (no fencing
// token is used up). Left in the list of flows to try, it was tried all
// the same: the Throttle lost an entry of its rate to a flow that never
// entered, and the Mutex held a lease for it until the next round trip.
func TestCancelledBeforeItsRoundTrip(t *testing.T) {
	t.Run("Throttle", func(t *testing.T) {
		c, _ := newClient(t, sharedRedis(t), Options{})
		h := holdNextRoundTrip(c)
		th := c.NewThrottle("t", ThrottleOptions{Rate: 2, Period: time.Minute})
		var tr tracer
		l := newLoops(t, 1)[0]
		a := enter(l, th, &tr, "A")
		cancelWhileAsking(t, l, th, &th.gateQueue, h, &tr)
		if res := <-a; res.Err != nil {
			t.Fatal(res.Err)
		}
		// The rate's second entry is C's.
		if res := <-enter(l, th, &tr, "C"); res.Err != nil {
			t.Error(res.Err)
		}
		tr.check(t, "A in", "C in")
	})
	t.Run("Mutex", func(t *testing.T) {
		c, rdb := newClient(t, sharedRedis(t), Options{})
		h := holdNextRoundTrip(c)
		m := c.NewMutex("m", MutexOptions{Max: 2, TTL: time.Minute})
		var tr tracer
		l := newLoops(t, 1)[0]
		release := make(chan struct{})
		var tokens []int64
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tok, _ := m.Token(as)
			tokens = append(tokens, tok)
			tr.add("A in")
			asyncsteps.AwaitChan(as, release)
		})
		a := r.Promise()
		cancelWhileAsking(t, l, m, &m.gateQueue, h, &tr)
		waitFor(t, "A inside", func() bool { return rdb.ZCard(context.Background(), m.keys[0]).Val() == 1 })
		rc := asyncsteps.New(asyncsteps.WithTool(l))
		rc.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tok, _ := m.Token(as)
			tokens = append(tokens, tok)
			tr.add("C in")
		})
		if _, err := rc.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(release)
		if res := <-a; res.Err != nil {
			t.Fatal(res.Err)
		}
		tr.check(t, "A in", "C in")
		if len(tokens) != 2 || tokens[1] != tokens[0]+1 {
			t.Errorf("tokens %v, want C's right after A's: a lease was given out between", tokens)
		}
		waitFor(t, "no lease left", func() bool { return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0 })
	})
}

// cancelWhileAsking starts a flow B that enters s while h holds the round
// trip under way, cancels it before its own first round trip, then lets
// the held round trip go on.
func cancelWhileAsking(t *testing.T, l *asyncsteps.Loop, s asyncsteps.Syncer, q *gateQueue, h *roundTripHold, tr *tracer) {
	t.Helper()
	<-h.started
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B in") })
	b := rb.Promise()
	waitFor(t, "B to ask", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.fresh) == 1
	})
	rb.Cancel()
	if res := <-b; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("B ended with %v, want a cancel", res.Err)
	}
	close(h.release)
}
