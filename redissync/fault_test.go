package redissync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestUnreachableAtStart: New fails within OpTimeout with a CommError
// when nothing listens at the address. go-redis's own retries of the
// refused dial outlast OpTimeout: the info says "timed out"; it does not
// name the address, which the cause's text does.
func TestUnreachableAtStart(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // closed again: nothing listens
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	opts := Options{OpTimeout: time.Second}
	start := time.Now()
	c, err := New(context.Background(), rdb, opts)
	took := time.Since(start)
	if c != nil {
		c.Close()
	}
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: timed out" {
		t.Fatalf("New: %v, want CommError: redis: timed out", err)
	}
	if want := "redis " + addr + ": "; !strings.HasPrefix(errors.Unwrap(e).Error(), want) {
		t.Errorf("cause %q, want it to start with %q", errors.Unwrap(e), want)
	}
	if took > opts.OpTimeout+2*time.Second {
		t.Errorf("New took %v, its bound is OpTimeout %v", took, opts.OpTimeout)
	}
}

// TestRedisLostWhileWaiting: Redis is killed while flows hold and wait.
// The waiters of a Mutex and of a fail-closed Throttle fail with a
// CommError within the bound, "timed out": go-redis's retries of the
// refused dial outlast OpTimeout; the waiter of a
// fail-open Throttle enters; the holder's section runs to its end.
func TestRedisLostWhileWaiting(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 300 * time.Millisecond, Recheck: 300 * time.Millisecond}
	c, _ := newClient(t, srv.addr, opts)
	m := c.NewMutex("m", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Second})
	closed := c.NewThrottle("closed", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: -1})
	open := c.NewThrottle("open", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: -1, FailOpen: true})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	holder := holdOpen(t, l, m, &tr, "holder", release)
	for _, th := range []*Throttle{closed, open} {
		if res := <-enter(l, th, &tr, "first"); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	mw := enter(l, m, &tr, "mutex waiter")
	cw := enter(l, closed, &tr, "closed waiter")
	ow := enter(l, open, &tr, "open waiter")
	waitFor(t, "the waiters to queue", func() bool {
		return queued(&m.gateQueue) == 1 && queued(&closed.gateQueue) == 1 && queued(&open.gateQueue) == 1
	})

	lost := time.Now()
	srv.kill()
	bound := opts.OpTimeout + opts.Recheck + 2*time.Second // slack for a loaded machine
	for name, p := range map[string]<-chan asyncsteps.Result{"mutex waiter": mw, "closed waiter": cw} {
		res := <-p
		var e *asyncsteps.Error
		if !errors.As(res.Err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: timed out" {
			t.Fatalf("%s: %v, want CommError: redis: timed out", name, res.Err)
		}
		if cause := goCause(res.Err); cause == nil || !strings.HasPrefix(cause.Error(), "redis "+srv.addr+": ") {
			t.Errorf("%s: cause %v, want it to name %s", name, cause, srv.addr)
		}
	}
	if res := <-ow; res.Err != nil {
		t.Fatalf("open waiter: %v", res.Err)
	}
	if took := time.Since(lost); took > bound {
		t.Errorf("the waiters took %v to end, the bound is %v", took, bound)
	}
	close(release)
	if res := <-holder; res.Err != nil {
		t.Fatalf("holder: %v", res.Err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	want := map[string]bool{"holder in": true, "first in": true, "open waiter in": true, "holder out": true,
		"mutex waiter onerror CommError: redis: timed out": true, "closed waiter onerror CommError: redis: timed out": true}
	for _, ev := range tr.events {
		if !want[ev] {
			t.Errorf("unexpected event %q in %q", ev, tr.events)
		}
	}
}

// TestRedisRestarted: after Redis restarts empty on the same address, the
// Syncers work again without a new Client: flows enter, a waiter is woken
// by a notification (the subscription came back), and fencing tokens go
// on growing.
func TestRedisRestarted(t *testing.T) {
	srv := startRedis(t)
	// A Recheck far longer than the test: only a notification wakes a waiter.
	c, _ := newClient(t, srv.addr, Options{OpTimeout: 500 * time.Millisecond, Recheck: time.Hour})
	m := c.NewMutex("m", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	th := c.NewThrottle("t", ThrottleOptions{Rate: 1000, MaxQueue: -1})
	l := newLoops(t, 1)[0]

	tokenOnce := func() (int64, error) {
		var tok int64
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tok, _ = m.Token(as) })
		r.Sync(th, func(asyncsteps.AsyncSteps, ...any) {})
		_, err := r.Run(context.Background())
		return tok, err
	}
	before, err := tokenOnce()
	if err != nil {
		t.Fatal(err)
	}
	srv.restart(t)
	var after int64
	waitFor(t, "a Sync to work again", func() bool {
		after, err = tokenOnce()
		return err == nil
	})
	if after <= before {
		t.Errorf("token %d after the restart, %d before", after, before)
	}

	var tr tracer
	release := make(chan struct{})
	holder := holdOpen(t, l, m, &tr, "holder", release)
	waiter := enter(l, m, &tr, "waiter")
	waitFor(t, "the waiter to queue", func() bool { return queued(&m.gateQueue) == 1 })
	close(release)
	for _, p := range []<-chan asyncsteps.Result{holder, waiter} {
		select {
		case res := <-p:
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not woken after the restart")
		}
	}
	tr.check(t, "holder in", "holder out", "waiter in")
}

// TestManyWaitersShareRoundTrips: 1,000 flows of one loop that enter a
// Throttle and a Mutex at once cost a few round trips, not 1,000 each.
// How many depends on how the flows and the round trips interleave: under
// the race detector runs gave 42 to 113 script calls, where one round trip
// per flow and Syncer would make 2,000. The bound, an average of at least
// eight flows per round trip, tells the two apart without that noise.
func TestManyWaitersShareRoundTrips(t *testing.T) {
	srv := startRedis(t)
	c, rdb := newClient(t, srv.addr, Options{})
	m := c.NewMutex("m", MutexOptions{Max: 1000, MaxQueue: -1})
	th := c.NewThrottle("t", ThrottleOptions{Rate: 1_000_000, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	const flows = 1000
	results := make([]<-chan asyncsteps.Result, flows)
	for i := range results {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(th, func(asyncsteps.AsyncSteps, ...any) {})
		r.Sync(m, func(asyncsteps.AsyncSteps, ...any) {})
		results[i] = r.Promise()
	}
	for _, p := range results {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	calls := scriptCalls(t, rdb)
	t.Logf("%d flows through a Throttle and a Mutex: %d script calls", flows, calls)
	if calls > 2*flows/8 {
		t.Errorf("%d script calls for %d flows: round trips are not shared", calls, flows)
	}
}

// scriptCalls returns the number of EVAL and EVALSHA calls the server has
// run.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			rest := line[strings.Index(line, "calls=")+len("calls="):]
			n := 0
			for _, ch := range rest {
				if ch < '0' || ch > '9' {
					break
				}
				n = n*10 + int(ch-'0')
			}
			total += n
		}
	}
	return total
}

// TestRedisGoneBeforeAsking: flows that first ask after Redis was lost
// (their first round trip fails) are not forgotten: those of a Mutex and
// of a fail-closed Throttle fail with a CommError, "timed out",
// that of a fail-open Throttle enters. The round trip had taken them out
// of the fresh list, where the failure did not look for them, and they
// waited forever.
func TestRedisGoneBeforeAsking(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 300 * time.Millisecond, Recheck: time.Hour}
	c, _ := newClient(t, srv.addr, opts)
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1})
	closed := c.NewThrottle("closed", ThrottleOptions{MaxQueue: -1})
	open := c.NewThrottle("open", ThrottleOptions{MaxQueue: -1, FailOpen: true})
	l := newLoops(t, 1)[0]
	srv.kill()
	var tr tracer
	results := map[string]<-chan asyncsteps.Result{
		"mutex": enter(l, m, &tr, "mutex"), "closed": enter(l, closed, &tr, "closed"),
		"open": enter(l, open, &tr, "open")}
	for _, name := range []string{"mutex", "closed", "open"} {
		select {
		case res := <-results[name]:
			var e *asyncsteps.Error
			if name == "open" {
				if res.Err != nil {
					t.Errorf("open: %v, want entered", res.Err)
				}
			} else if !errors.As(res.Err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: timed out" {
				t.Errorf("%s: %v, want CommError: redis: timed out", name, res.Err)
			}
		case <-time.After(opts.OpTimeout + 5*time.Second):
			t.Fatalf("%s: the flow still waits after Redis failed", name)
		}
	}
}

// TestTokensGrowAfterOlderData: Redis restarts with an older copy of its
// data (a snapshot, as a crash leaves it with RDB persistence, or a
// replica that lagged taking over): its fence counter is one that tokens
// given since have passed. The tokens given after the restart are still
// above every token given before, also for a client whom the ACL does not
// allow INFO. They went back to the snapshot's counter: the same tokens
// were given twice, and a resource that checks them took a new holder's
// writes for a stale one's.
//
// The snapshot is taken once the first flow's lease is back in Redis:
// the flow ends before its give-back, which the Mutex's goroutine sends
// after, and a snapshot of the lease would keep the Mutex(1) full after
// the restart until the lease ran out, a minute later.
func TestTokensGrowAfterOlderData(t *testing.T) {
	for _, acl := range [][]any{nil, {"ACL", "SETUSER", "default", "-info"}} {
		t.Run(fmt.Sprint("acl", acl), func(t *testing.T) {
			srv := startRedis(t)
			c, rdb := newClient(t, srv.addr, Options{OpTimeout: 500 * time.Millisecond})
			m := c.NewMutex("m", MutexOptions{TTL: time.Minute})
			l := newLoops(t, 1)[0]
			ctx := context.Background()
			tokenOnce := func() (int64, error) {
				var tok int64
				r := asyncsteps.New(asyncsteps.WithTool(l))
				r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tok, _ = m.Token(as) })
				_, err := r.Run(ctx)
				return tok, err
			}
			var tokens []int64
			for i := range 4 {
				if i == 1 {
					waitFor(t, "the first lease to be given back", func() bool {
						return rdb.Exists(ctx, c.key("m", "holders")).Val() == 0
					})
					if acl != nil {
						mustDo(t, rdb, acl...)
					}
					mustDo(t, rdb, "SAVE")
				}
				tok, err := tokenOnce()
				if err != nil {
					t.Fatal(err)
				}
				tokens = append(tokens, tok)
			}
			srv.restart(t) // loads the snapshot taken after the first token
			if acl != nil {
				mustDo(t, rdb, "ACL", "SETUSER", "default", "-info") // the ACL is no data
			}
			waitFor(t, "a Sync to work again", func() bool {
				tok, err := tokenOnce()
				if err == nil {
					tokens = append(tokens, tok)
				}
				return err == nil
			})
			if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
				t.Errorf("tokens %v: the last is after the restart", tokens)
			}
		})
	}
}
