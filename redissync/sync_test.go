package redissync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// tracer records events from callbacks of flows and other goroutines.
type tracer struct {
	mu     sync.Mutex
	events []string
}

func (tr *tracer) add(format string, args ...any) {
	tr.mu.Lock()
	tr.events = append(tr.events, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

func (tr *tracer) check(t *testing.T, want ...string) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if strings.Join(tr.events, "\n") != strings.Join(want, "\n") {
		t.Errorf("trace:\n  %s\nwant:\n  %s", strings.Join(tr.events, "\n  "), strings.Join(want, "\n  "))
	}
}

// wantError checks that err is an *asyncsteps.Error with code and info.
func wantError(t *testing.T, err error, code, info string) {
	t.Helper()
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != code || e.Info != info {
		t.Fatalf("error %v, want %s: %s", err, code, info)
	}
}

// holdOpen starts a flow on l that enters s, traces name, and stays inside
// until release is closed. It returns once the flow is inside.
func holdOpen(t *testing.T, l *asyncsteps.Loop, s asyncsteps.Syncer, tr *tracer, name string, release chan struct{}) <-chan asyncsteps.Result {
	t.Helper()
	var inside atomic.Bool
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("%s in", name)
		inside.Store(true)
		asyncsteps.AwaitChan(as, release)
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("%s out", name)
	})
	p := r.Promise()
	waitFor(t, name+" inside", inside.Load)
	return p
}

// enter starts a flow on l that enters s and traces name; its error
// handler traces what it sees and lets the error go on.
func enter(l *asyncsteps.Loop, s asyncsteps.Syncer, tr *tracer, name string) <-chan asyncsteps.Result {
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("%s in", name)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("%s onerror %s: %s", name, code, as.State().ErrorInfo)
	})
	return r.Promise()
}

func TestMutexQueueLimit(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("q", MutexOptions{Max: 1, MaxQueue: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", release)
	b := enter(l, m, &tr, "B")
	waitFor(t, "B to queue", func() bool { return queued(&m.gateQueue) == 1 })
	res := <-enter(l, m, &tr, "C")
	wantError(t, res.Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "C onerror DefenseRejected: Mutex queue limit", "A out", "B in")
}

func TestThrottleQueueLimit(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("q", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, th, &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B in") })
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return queued(&th.gateQueue) == 1 })
	res := <-enter(l, th, &tr, "C")
	wantError(t, res.Err, asyncsteps.DefenseRejected, "Throttle queue limit")
	// A waiter that is cancelled leaves the queue, and makes room.
	rb.Cancel()
	if res := <-b; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("B ended with %v, want a cancel", res.Err)
	}
	if n := queued(&th.gateQueue); n != 0 {
		t.Fatalf("%d queued after B was cancelled", n)
	}
	d := enter(l, th, &tr, "D")
	waitFor(t, "D to queue", func() bool { return queued(&th.gateQueue) == 1 })
	c.Close()
	wantError(t, (<-d).Err, asyncsteps.CommError, "redissync: client closed")
	tr.check(t, "A in", "C onerror DefenseRejected: Throttle queue limit",
		"D onerror CommError: redissync: client closed")
}

// TestMutexReleasedHowever: however a section ends, its lease is given
// back at once (the TTL is far longer than the test waits), and the
// section passes its result or error on.
func TestMutexReleasedHowever(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("end", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	cases := []struct {
		name     string
		body     asyncsteps.StepFunc
		onerror  asyncsteps.ErrorFunc
		cancel   bool
		wantCode string
		wantArgs []any
	}{
		{name: "success", body: func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("ok", 1) }, wantArgs: []any{"ok", 1}},
		{name: "error", body: func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom", "info") }, wantCode: "Boom"},
		{name: "handled error", body: func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") },
			onerror: func(as asyncsteps.AsyncSteps, code string) { as.Success("recovered from " + code) }, wantArgs: []any{"recovered from Boom"}},
		{name: "panic", body: func(as asyncsteps.AsyncSteps, _ ...any) { panic("boom") }, wantCode: asyncsteps.InternalError},
		{name: "timeout", body: func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(20 * time.Millisecond) }, wantCode: asyncsteps.Timeout},
		{name: "cancel", body: func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, cancel: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var inside atomic.Bool
			r := asyncsteps.New(asyncsteps.WithTool(l))
			body := func(as asyncsteps.AsyncSteps, args ...any) {
				inside.Store(true)
				tc.body(as, args...)
			}
			if tc.onerror != nil {
				r.Sync(m, body, tc.onerror)
			} else {
				r.Sync(m, body)
			}
			p := r.Promise()
			if tc.cancel {
				waitFor(t, "the flow inside", inside.Load)
				r.Cancel()
			}
			res := <-p
			switch {
			case tc.cancel:
				if !errors.Is(res.Err, context.Canceled) {
					t.Fatalf("ended with %v, want a cancel", res.Err)
				}
			case tc.wantCode != "":
				var e *asyncsteps.Error
				if !errors.As(res.Err, &e) || e.Code != tc.wantCode {
					t.Fatalf("ended with %v, want %s", res.Err, tc.wantCode)
				}
			default:
				if res.Err != nil || fmt.Sprint(res.Args) != fmt.Sprint(tc.wantArgs) {
					t.Fatalf("ended with %v %v, want %v", res.Args, res.Err, tc.wantArgs)
				}
			}
			// The next flow enters long before the lease could run out.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			next := asyncsteps.New(asyncsteps.WithTool(l))
			next.Sync(m, func(asyncsteps.AsyncSteps, ...any) {})
			if _, err := next.Run(ctx); err != nil {
				t.Fatalf("the next flow: %v", err)
			}
			waitFor(t, "no holder in Redis", func() bool {
				return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
			})
		})
	}
}

// TestFencingTokens: sections of one flow get consecutive tokens; of
// flows that run at once, each gets larger ones each time and none is
// given twice.
func TestFencingTokens(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("fence", MutexOptions{Max: 2, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	tokens := make([][]int64, 3)
	var wg sync.WaitGroup
	for i := range tokens {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Repeat(10, func(as asyncsteps.AsyncSteps, _ int) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				tok, _ := m.Token(as)
				tokens[i] = append(tokens[i], tok)
			})
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Run(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := make(map[int64]bool)
	for i, list := range tokens {
		for j, tok := range list {
			if seen[tok] {
				t.Fatalf("token %d given twice", tok)
			}
			seen[tok] = true
			if j > 0 && tok <= list[j-1] {
				t.Fatalf("flow %d got token %d after %d", i, tok, list[j-1])
			}
		}
	}
	// One flow alone: consecutive tokens.
	var alone []int64
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Repeat(5, func(as asyncsteps.AsyncSteps, _ int) {
		as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tok, _ := m.Token(as)
			alone = append(alone, tok)
		})
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for j := 1; j < len(alone); j++ {
		if alone[j] != alone[j-1]+1 {
			t.Fatalf("tokens %v are not consecutive", alone)
		}
	}
}

// TestMutexReentrant: a flow that holds the Mutex enters it again at once,
// with the same token, and gives the lease back when the outer section
// ends.
func TestMutexReentrant(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("re", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		outer, _ := m.Token(as)
		as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			inner, _ := m.Token(as)
			tr.add("inner same token %v", inner == outer)
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			_, held := m.Token(as)
			tr.add("after inner held %v", held)
		})
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		_, held := m.Token(as)
		tr.add("after outer held %v", held)
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.check(t, "inner same token true", "after inner held true", "after outer held false")
	waitFor(t, "no holder in Redis", func() bool {
		return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
	})
}

// TestLimiter: flows on three loops see at most Concurrent inside at once
// and no more than the rate allows.
func TestLimiter(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	const concurrent, rate, period, flows = 2, 10, 200 * time.Millisecond, 24
	lim := c.NewLimiter("lim", LimiterOptions{Concurrent: concurrent, MaxQueue: -1, Rate: rate, Period: period, Burst: -1})
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	var last atomic.Int64
	for i, l := range newLoops(t, 3) {
		for range flows / 3 {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Sync(lim, func(as asyncsteps.AsyncSteps, _ ...any) {
				n := inside.Add(1)
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				last.Store(time.Now().UnixNano())
				as.Await(func(context.Context) (any, error) {
					time.Sleep(5 * time.Millisecond)
					inside.Add(-1)
					return nil, nil
				})
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Run(context.Background()); err != nil {
					t.Errorf("loop %d: %v", i, err)
				}
			}()
		}
	}
	wg.Wait()
	if most.Load() > concurrent {
		t.Errorf("%d inside at once, the limit is %d", most.Load(), concurrent)
	}
	// rate at once, then one per interval.
	least := time.Duration(flows-rate-1) * (period / rate)
	if span := time.Duration(last.Load() - start.UnixNano()); span < least {
		t.Errorf("%d entries in %v: the rate allows them in no less than %v", flows, span, least)
	}
}

// TestLimiterRefusals: a Limiter refuses with the info of the limit that
// is full, and a flow refused by the rate gives its concurrency slot back.
func TestLimiterRefusals(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	lim := c.NewLimiter("ref", LimiterOptions{Concurrent: 1, Rate: 1, Period: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, lim, &tr, "A", release)
	wantError(t, (<-enter(l, lim, &tr, "B")).Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	wantError(t, (<-enter(l, lim, &tr, "C")).Err, asyncsteps.DefenseRejected, "Throttle queue limit")
	tr.check(t, "A in", "B onerror DefenseRejected: Mutex queue limit", "A out",
		"C onerror DefenseRejected: Throttle queue limit")
	waitFor(t, "no holder in Redis", func() bool {
		return rdb.ZCard(context.Background(), lim.mutex.keys[0]).Val() == 0
	})
}

// TestLimiterRateRefusalGivesTheSlotBackAtOnce: a flow that the rate
// limit refuses after the concurrency limit let it in is not inside: its
// slot goes back before the error handler given to Sync sees the
// refusal, and stays back while that handler recovers by waiting.
func TestLimiterRateRefusalGivesTheSlotBackAtOnce(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	lim := c.NewLimiter("refback", LimiterOptions{Concurrent: 1, Rate: 1, Period: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	close(release)
	if res := <-holdOpen(t, l, lim, &tr, "A", release); res.Err != nil { // spends the period's entry
		t.Fatal(res.Err)
	}
	inHandler, recovered := make(chan struct{}), make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(lim, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("B in")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("B onerror %s: %s", code, as.State().ErrorInfo)
		close(inHandler)
		asyncsteps.AwaitChan(as, recovered) // recovers by waiting
	})
	b := r.Promise()
	<-inHandler
	waitFor(t, "B's slot back in Redis while its handler waits", func() bool {
		return rdb.ZCard(context.Background(), lim.mutex.keys[0]).Val() == 0
	})
	close(recovered)
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "A out", "B onerror DefenseRejected: Throttle queue limit")
}

// TestClientCloseGivesBack: closing the Client fails its waiters and gives
// back the leases its flows hold.
func TestClientCloseGivesBack(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("close", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", release)
	b := enter(l, m, &tr, "B")
	waitFor(t, "B to queue", func() bool { return queued(&m.gateQueue) == 1 })
	c.Close()
	wantError(t, (<-b).Err, asyncsteps.CommError, "redissync: client closed")
	if n := rdb.ZCard(context.Background(), m.keys[0]).Val(); n != 0 {
		t.Fatalf("%d leases left in Redis after Close", n)
	}
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	// A flow that asks after Close is refused at once.
	wantError(t, (<-enter(l, m, &tr, "C")).Err, asyncsteps.CommError, "redissync: client closed")
	tr.check(t, "A in", "B onerror CommError: redissync: client closed", "A out",
		"C onerror CommError: redissync: client closed")
}

// TestSyncersMadeWhileClosing: Syncers made while the Client closes, or
// after, start no goroutine that Close would not wait for (the race
// detector checks the WaitGroup), and refuse their flows once it has
// closed.
func TestSyncersMadeWhileClosing(t *testing.T) {
	l := newLoops(t, 1)[0]
	for round := range 20 {
		c, _ := newClient(t, sharedRedis(t), Options{})
		made := make(chan threeSyncers, 1)
		go func() {
			name := fmt.Sprintf("closing-%d", round)
			made <- threeSyncers{
				c.NewMutex(name, MutexOptions{Max: 1}),
				c.NewThrottle(name, ThrottleOptions{Rate: 10, Period: time.Second}),
				c.NewLimiter(name, LimiterOptions{Concurrent: 1}),
			}
		}()
		c.Close()
		var tr tracer
		for i, s := range <-made {
			wantError(t, (<-enter(l, s, &tr, fmt.Sprint(i))).Err, asyncsteps.CommError, "redissync: client closed")
		}
		// Close waits for every goroutine it counted; made after it, a
		// Syncer starts none.
		c.Close()
		tr.check(t, "0 onerror CommError: redissync: client closed",
			"1 onerror CommError: redissync: client closed",
			"2 onerror CommError: redissync: client closed")
	}
}

// threeSyncers are a Mutex, a Throttle and a Limiter.
type threeSyncers [3]asyncsteps.Syncer

// TestMutexWaiterCancelled: a waiter cancelled while queued leaves the
// queue and never holds the Mutex.
func TestMutexWaiterCancelled(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("wc", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", release)
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(m, func(asyncsteps.AsyncSteps, ...any) { tr.add("B in") })
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return queued(&m.gateQueue) == 1 })
	rb.Cancel()
	if res := <-b; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("B ended with %v, want a cancel", res.Err)
	}
	if n := queued(&m.gateQueue); n != 0 {
		t.Fatalf("%d queued after B was cancelled", n)
	}
	close(release)
	<-a
	if res := <-enter(l, m, &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "A out", "C in")
	waitFor(t, "no holder in Redis", func() bool {
		return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
	})
}

// TestMutexCancelsAtEveryStage: flows time out at every stage of a
// section (asking, queued, admitted in flight, inside); afterwards no
// lease is left in Redis, none is held or queued here, and the Mutex
// still works.
func TestMutexCancelsAtEveryStage(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("every", MutexOptions{Max: 2, MaxQueue: -1, TTL: time.Minute})
	loops := newLoops(t, 2)
	var wg sync.WaitGroup
	var timeouts, inside atomic.Int64
	for i := range 200 {
		r := asyncsteps.New(asyncsteps.WithTool(loops[i%2]))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if i%4 != 0 { // the others get through
				as.SetTimeout(time.Duration(i%10) * 3 * time.Millisecond)
			}
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Await(func(ctx context.Context) (any, error) {
					time.Sleep(time.Millisecond)
					return nil, nil
				})
				as.Add(func(asyncsteps.AsyncSteps, ...any) { inside.Add(1) })
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.Timeout {
				timeouts.Add(1)
				as.Success()
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Run(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of 200 flows timed out, %d ran their section to its end", timeouts.Load(), inside.Load())
	if timeouts.Load() == 0 || inside.Load() == 0 {
		t.Error("no flow timed out, or none got through: the test does not test cancels at every stage")
	}
	waitFor(t, "no lease left", func() bool {
		m.mu.Lock()
		local := len(m.held) + m.queue.live + len(m.fresh)
		m.mu.Unlock()
		return local == 0 && rdb.ZCard(context.Background(), m.keys[0]).Val() == 0
	})
	if res := <-enter(loops[0], m, &tracer{}, "after"); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// TestMutexLoopClosedGivesBack: a flow whose loop is closed while it holds
// the Mutex runs no cancel handler; its lease is given back at the next
// re-check, long before its TTL.
func TestMutexLoopClosedGivesBack(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{Recheck: 100 * time.Millisecond})
	m := c.NewMutex("closed", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	doomed := asyncsteps.NewLoop()
	var tr tracer
	holdOpen(t, doomed, m, &tr, "A", make(chan struct{}))
	l := newLoops(t, 1)[0]
	b := enter(l, m, &tr, "B")
	waitFor(t, "B to queue", func() bool { return queued(&m.gateQueue) == 1 })
	doomed.Close()
	select {
	case res := <-b:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lease of a flow whose loop was closed was not given back")
	}
	tr.check(t, "A in", "B in")
}
