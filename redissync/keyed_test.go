package redissync

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// twoInstances returns two Clients on one Redis and Prefix, as two
// processes of a service have, with opts otherwise.
func twoInstances(t *testing.T, opts Options) (*Client, *Client, *redis.Client) {
	t.Helper()
	opts.Prefix = fmt.Sprintf("keyed%d-%d", prefixSeq.Add(1), time.Now().UnixNano())
	addr := sharedRedis(t)
	c1, rdb := newClient(t, addr, opts)
	c2, _ := newClient(t, addr, opts)
	return c1, c2, rdb
}

// keyQueued returns the number of this process's flows waiting for key.
func keyQueued(km *KeyedMutex, key string) int {
	km.kc.mu.Lock()
	k := km.kc.keys[escapeKey(key)]
	km.kc.mu.Unlock()
	if k == nil {
		return 0
	}
	return queued(&k.gateQueue)
}

// TestKeyedMutexTwoInstances: two instances contend on one key, not on
// another: a flow of the second instance waits for the key the first
// holds, while a flow on another key enters at once; the waiter enters
// once the holder leaves, with a larger token, and both instances drop
// their keys.
func TestKeyedMutexTwoInstances(t *testing.T) {
	c1, c2, _ := twoInstances(t, Options{})
	km1 := c1.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	km2 := c2.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	var tokenA atomic.Int64
	var tokenB int64
	ra := asyncsteps.New(asyncsteps.WithTool(l))
	ra.Sync(km1.Key("a"), func(as asyncsteps.AsyncSteps, _ ...any) {
		tok, _ := km1.Token(as, "a")
		tr.add("A in")
		tokenA.Store(tok)
		asyncsteps.AwaitChan(as, release)
	}).Add(func(asyncsteps.AsyncSteps, ...any) { tr.add("A out") })
	a := ra.Promise()
	waitFor(t, "A inside", func() bool { return tokenA.Load() != 0 })

	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(km2.Key("a"), func(as asyncsteps.AsyncSteps, _ ...any) {
		tokenB, _ = km2.Token(as, "a")
		tr.add("B in")
	})
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return keyQueued(km2, "a") == 1 })
	if res := <-enter(l, km2.Key("b"), &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	close(release)
	for _, p := range []<-chan asyncsteps.Result{a, b} {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	tr.check(t, "A in", "C in", "A out", "B in")
	if tokenB <= tokenA.Load() {
		t.Errorf("B's token %d, A's %d", tokenB, tokenA.Load())
	}
	waitFor(t, "no key in use", func() bool { return km1.Len() == 0 && km2.Len() == 0 })
}

// TestKeyedMutexOneKeyPerInstance: the same key in two instances
// admits one flow at a time (Max 1): many flows of each instance on a few
// keys never overlap on a key.
func TestKeyedMutexOneKeyPerInstance(t *testing.T) {
	c1, c2, _ := twoInstances(t, Options{})
	kms := []*KeyedMutex{
		c1.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1}),
		c2.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1}),
	}
	loops := newLoops(t, 2)
	var inside [3]atomic.Int32
	var overlaps atomic.Int32
	var promises []<-chan asyncsteps.Result
	for i := range 60 {
		key := i % 3
		r := asyncsteps.New(asyncsteps.WithTool(loops[i%2]))
		r.Sync(kms[i%2].Key(fmt.Sprint(key)), func(as asyncsteps.AsyncSteps, _ ...any) {
			if inside[key].Add(1) != 1 {
				overlaps.Add(1)
			}
			as.Await(func(context.Context) (any, error) {
				time.Sleep(time.Millisecond)
				inside[key].Add(-1)
				return nil, nil
			})
		})
		promises = append(promises, r.Promise())
	}
	for _, p := range promises {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d entries found the key held", n)
	}
}

// TestKeyedMutexQueueLimitAndCancel: per key, the queue limit refuses
// with DefenseRejected and the Mutex's info, a waiter cancelled leaves
// the queue and makes room, and the flows of the queue enter first in,
// first out. Another key's queue is its own.
func TestKeyedMutexQueueLimitAndCancel(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	km := c.NewKeyedMutex("q", MutexOptions{Max: 1, MaxQueue: 2, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, km.Key("k"), &tr, "A", release)
	b := enter(l, km.Key("k"), &tr, "B")
	waitFor(t, "B to queue", func() bool { return keyQueued(km, "k") == 1 })
	rc := asyncsteps.New(asyncsteps.WithTool(l))
	rc.Sync(km.Key("k"), func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("C in") })
	cp := rc.Promise()
	waitFor(t, "C to queue", func() bool { return keyQueued(km, "k") == 2 })
	res := <-enter(l, km.Key("k"), &tr, "D")
	wantError(t, res.Err, asyncsteps.DefenseRejected, "Mutex queue limit")
	if res := <-enter(l, km.Key("other"), &tr, "E"); res.Err != nil {
		t.Fatal(res.Err)
	}
	rc.Cancel()
	if res := <-cp; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("C ended with %v, want a cancel", res.Err)
	}
	f := enter(l, km.Key("k"), &tr, "F")
	waitFor(t, "F to queue", func() bool { return keyQueued(km, "k") == 2 })
	close(release)
	for _, p := range []<-chan asyncsteps.Result{a, b, f} {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	tr.check(t, "A in", "D onerror DefenseRejected: Mutex queue limit", "E in", "A out", "B in", "F in")
	waitFor(t, "no key in use", func() bool { return km.Len() == 0 })
}

// TestKeyedMutexReentersAndTokens: a flow that holds a key enters it again
// at once, with the same token; a Mutex named MutexName of the key
// shares its lock, and its token follows the key's.
func TestKeyedMutexReentersAndTokens(t *testing.T) {
	c1, c2, _ := twoInstances(t, Options{})
	km := c1.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	m := c2.NewMutex(km.MutexName("x/{y}"), MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	if want := "acct/x%2F%7By%7D"; m.name != want {
		t.Fatalf("MutexName %q, want %q", m.name, want)
	}
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	var outer, inner int64
	inside := make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(km.Key("x/{y}"), func(as asyncsteps.AsyncSteps, _ ...any) {
		outer, _ = km.Token(as, "x/{y}")
		km.Sync(as, "x/{y}", func(as asyncsteps.AsyncSteps, _ ...any) {
			inner, _ = km.Token(as, "x/{y}")
			tr.add("A in twice")
			close(inside)
			asyncsteps.AwaitChan(as, release)
		})
	})
	a := r.Promise()
	<-inside
	var mutexToken int64
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		mutexToken, _ = m.Token(as)
		tr.add("B in")
	})
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return queued(&m.gateQueue) == 1 })
	close(release)
	for _, p := range []<-chan asyncsteps.Result{a, b} {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	tr.check(t, "A in twice", "B in")
	if outer == 0 || inner != outer || mutexToken != outer+1 {
		t.Errorf("tokens: outer %d, inner %d, the Mutex's %d", outer, inner, mutexToken)
	}
	if km.Key("k") != km.Key("k") || km.Key("k") == km.Key("l") {
		t.Error("Key's Syncers compare wrong")
	}
}

// TestKeyedMutexHolderClientClosed: the Client of a holder closes: its
// lease is given back at once (the TTL is a minute), the other
// instance's waiter enters, and the holder's section, which runs on,
// reports no token.
func TestKeyedMutexHolderClientClosed(t *testing.T) {
	c1, c2, _ := twoInstances(t, Options{})
	km1 := c1.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	km2 := c2.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release, closed := make(chan struct{}), make(chan struct{})
	var inside atomic.Bool
	// A's token after Close is kept apart from the trace: B may enter
	// before or after A's section reads it, for Close gave A's lease back
	// before A was told of it.
	tokenAfterClose := make(chan bool, 1)
	ra := asyncsteps.New(asyncsteps.WithTool(l))
	ra.Sync(km1.Key("a"), func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A in")
		inside.Store(true)
		asyncsteps.AwaitChan(as, closed)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			_, ok := km1.Token(as, "a")
			tokenAfterClose <- ok
			asyncsteps.AwaitChan(as, release)
		})
	})
	a := ra.Promise()
	waitFor(t, "A inside", inside.Load)
	b := enter(l, km2.Key("a"), &tr, "B")
	waitFor(t, "B to queue", func() bool { return keyQueued(km2, "a") == 1 })
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	close(closed)
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	close(release)
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	if <-tokenAfterClose {
		t.Error("A's section has a token after Close")
	}
	tr.check(t, "A in", "B in")
	// A flow that comes after Close is refused.
	res := <-enter(l, km1.Key("a"), &tr, "C")
	wantError(t, res.Err, asyncsteps.CommError, "redissync: client closed")
	if n := km1.Len(); n != 0 {
		t.Errorf("%d keys in use after Close", n)
	}
}

// TestKeyedMutexHolderProcessKilled: a process that holds a key is killed;
// a flow of this process waiting for the key enters once the lease has
// run out, with a larger token.
func TestKeyedMutexHolderProcessKilled(t *testing.T) {
	checkKilledHolder(t, "holdkey", "killkey", func(c *Client) (asyncsteps.Syncer, func(asyncsteps.AsyncSteps) (int64, bool), func() int) {
		km := c.NewKeyedMutex("kill", MutexOptions{Max: 1, MaxQueue: -1, TTL: killTTL})
		token := func(as asyncsteps.AsyncSteps) (int64, bool) { return km.Token(as, "k1") }
		return km.Key("k1"), token, func() int { return keyQueued(km, "k1") }
	}, "kill/k1")
}

// TestKeyedMutexLoopClosed: a Loop closed while a flow of it holds a key
// and another waits for it: the lease is given back at the next re-check
// (the TTL is a minute), a flow of another loop enters, and the key is
// dropped.
func TestKeyedMutexLoopClosed(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: 100 * time.Millisecond})
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	doomed := asyncsteps.NewLoop()
	l := newLoops(t, 1)[0]
	var tr tracer
	holdOpen(t, doomed, km.Key("a"), &tr, "A", make(chan struct{}))
	enter(doomed, km.Key("a"), &tr, "B")
	waitFor(t, "B to queue", func() bool { return keyQueued(km, "a") == 1 })
	doomed.Close()
	if res := <-enter(l, km.Key("a"), &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "C in")
	waitFor(t, "no key in use", func() bool { return km.Len() == 0 })
	waitFor(t, "no lease in Redis", func() bool {
		return rdb.Exists(context.Background(), c.key(km.MutexName("a"), "holders")).Val() == 0
	})
}

// manyKeys is how many keys the tests of keys used once use.
const manyKeys = 10_000

// enterKeysOnce enters the Syncer of each of manyKeys keys once, one flow
// a key, the flows spread over two Loops and run at once, and fails t
// unless every flow entered.
func enterKeysOnce(t *testing.T, key func(i int) asyncsteps.Syncer) {
	t.Helper()
	loops := newLoops(t, 2)
	const n = manyKeys
	var entered atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		r := asyncsteps.New(asyncsteps.WithTool(loops[i%2]))
		r.Sync(key(i), func(as asyncsteps.AsyncSteps, _ ...any) { entered.Add(1) })
		wg.Go(func() {
			if _, err := r.Run(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if entered.Load() != n {
		t.Fatalf("%d entries, want %d", entered.Load(), n)
	}
}

// TestKeyedMutexManyKeysLeaveNothing: 10,000 keys, each used once by
// flows of two loops, leave no state in the process once their sections
// have ended: no key (and the map keeps the room of keptKeys at most),
// no timer, no listed key, the tickers stopped, no goroutine but the
// KeyedMutex's one; and in Redis, after the TTL, no
// lease: only the fence keys and call records, which expire (a day after
// the last lease, two minutes after the last call).
func TestKeyedMutexManyKeysLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 keys")
	}
	c, rdb := newClient(t, sharedRedis(t), Options{})
	const ttl = 300 * time.Millisecond
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: ttl})
	enterKeysOnce(t, func(i int) asyncsteps.Syncer { return km.Key(fmt.Sprintf("acct-%d", i)) })
	waitFor(t, "no key in use", func() bool { return km.Len() == 0 })
	waitFor(t, "the goroutine to settle", func() bool {
		return keyedState(km) == "keys 0, listed 0, idle true"
	})
	km.kc.mu.Lock()
	peak := km.kc.peak
	km.kc.mu.Unlock()
	if peak > keptKeys {
		t.Errorf("the map keeps the room of %d keys", peak)
	}
	if n := countGoroutines("(*KeyedMutex)."); n != 1 {
		t.Errorf("%d goroutines of the KeyedMutex, want its own one", n)
	}
	time.Sleep(ttl + time.Second) // the holders keys expire a second after their last lease
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, c.opts.Prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, key := range keys {
		part := key[strings.LastIndexByte(key, '}')+2:]
		if strings.HasPrefix(part, "call:") {
			part = "call"
		}
		kinds[part]++
		pttl := rdb.PTTL(ctx, key).Val()
		if pttl <= 0 || (part == "call" && pttl > goneFor) || pttl > fenceFor {
			t.Fatalf("%s expires in %v", key, pttl)
		}
	}
	if want := map[string]int{"fence": manyKeys, "fence:server": manyKeys, "call": manyKeys}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("keys in Redis: %v, want %v", kinds, want)
	}
}

// keyedState sums up km's local state.
func keyedState(km *KeyedMutex) string {
	km.kc.mu.Lock()
	keys := len(km.kc.keys)
	km.kc.mu.Unlock()
	km.kc.dueMu.Lock()
	listed := len(km.kc.due)
	km.kc.dueMu.Unlock()
	return fmt.Sprintf("keys %d, listed %d, idle %v", keys, listed, km.kc.idle.Load())
}

// countGoroutines returns the number of goroutines whose stack has a
// frame of the package's function fn.
func countGoroutines(fn string) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/asyncsteps/asyncsteps/redissync."+fn) {
			n++
		}
	}
	return n
}

// TestKeyedMutexRenewsInPipelines: the leases of many keys held past
// their TTL are renewed, all in pipelines: each renewal is one pipeline,
// not a round trip per key, and no lease is lost.
func TestKeyedMutexRenewsInPipelines(t *testing.T) {
	var pipelines, singles atomic.Int64
	opts := Options{Prefix: fmt.Sprintf("keyedrenew%d", prefixSeq.Add(1))}
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t), ContextTimeoutEnabled: true})
	defer rdb.Close()
	rdb.AddHook(countHook{&pipelines, &singles})
	c, err := New(context.Background(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const ttl = 600 * time.Millisecond
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, TTL: ttl})
	l := newLoops(t, 1)[0]
	const n = 50
	release := make(chan struct{})
	var inside atomic.Int32
	var lost atomic.Int32
	var promises []<-chan asyncsteps.Result
	for i := range n {
		key := fmt.Sprint(i)
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(km.Key(key), func(as asyncsteps.AsyncSteps, _ ...any) {
			inside.Add(1)
			asyncsteps.AwaitChan(as, release)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				if _, ok := km.Token(as, key); !ok {
					lost.Add(1)
				}
			})
		})
		promises = append(promises, r.Promise())
	}
	waitFor(t, "every flow inside", func() bool { return inside.Load() == n })
	p0, s0 := pipelines.Load(), singles.Load()
	time.Sleep(3 * ttl)
	p1, s1 := pipelines.Load(), singles.Load()
	close(release)
	for _, p := range promises {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if lost.Load() != 0 {
		t.Errorf("%d leases lost", lost.Load())
	}
	// Renewals every TTL/3: about 9 in 3 TTLs; a round trip per key would
	// be 450.
	if renewals := p1 - p0; renewals < 5 || renewals > 12 || s1 != s0 {
		t.Errorf("%d pipelines and %d single calls in 3 TTLs", renewals, s1-s0)
	}
}

// countHook counts the pipelines and the single commands of a client.
type countHook struct{ pipelines, singles *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.Contains([]string{"evalsha", "eval"}, cmd.Name()) {
			h.singles.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// TestKeyedMutexZeroAndNil: a nil or zero KeyedMutex, or one of a zero
// Client, fails its flows with InternalError.
func TestKeyedMutexZeroAndNil(t *testing.T) {
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, km := range []*KeyedMutex{nil, new(KeyedMutex), new(Client).NewKeyedMutex("x", MutexOptions{})} {
		res := <-enter(l, km.Key("a"), &tr, "A")
		wantError(t, res.Err, asyncsteps.InternalError, "redissync: the KeyedMutex was not made by a Client from New")
	}
}

// TestKeyedMutexCancelledWhileItsRoundTripRuns: a flow cancelled while
// the round trip that admits it is under way: the key stays in use, so a
// flow that asks meanwhile joins the same key's queue (a key has one
// state at a time), and the lease taken for the cancelled flow is given
// back before the next flow gets its own.
func TestKeyedMutexCancelledWhileItsRoundTripRuns(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	h := holdNextRoundTrip(c)
	released := false
	t.Cleanup(func() { // before Close, which waits for the round trip held
		if !released {
			close(h.release)
		}
	})
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	ra := asyncsteps.New(asyncsteps.WithTool(l))
	ra.Sync(km.Key("k"), func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("A in") })
	a := ra.Promise()
	<-h.started
	km.kc.mu.Lock()
	first := km.kc.keys["k"]
	km.kc.mu.Unlock()
	ra.Cancel()
	if res := <-a; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("A ended with %v, want a cancel", res.Err)
	}
	var token int64
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(km.Key("k"), func(as asyncsteps.AsyncSteps, _ ...any) {
		token, _ = km.Token(as, "k")
		tr.add("B in")
	})
	b := rb.Promise()
	waitFor(t, "B to ask", func() bool { return km.Len() == 1 && keyQueued(km, "k")+len(keyFresh(km, "k")) == 1 })
	km.kc.mu.Lock()
	same := km.kc.keys["k"] == first
	km.kc.mu.Unlock()
	if !same {
		t.Fatal("the key was dropped while its round trip ran")
	}
	released = true
	close(h.release)
	if res := <-b; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "B in")
	fence := int64Key(t, rdb, c.key(km.MutexName("k"), "fence"))
	if token != fence || token <= 0 {
		t.Errorf("B's token %d, the counter %d", token, fence)
	}
	waitFor(t, "no key in use", func() bool { return km.Len() == 0 })
	if n := rdb.Exists(context.Background(), c.key(km.MutexName("k"), "holders")).Val(); n != 0 {
		t.Error("a lease left in Redis")
	}
}

// keyFresh returns the flows that asked for key since its last round.
func keyFresh(km *KeyedMutex, key string) []*waiter {
	km.kc.mu.Lock()
	k := km.kc.keys[escapeKey(key)]
	km.kc.mu.Unlock()
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.fresh)
}

// TestKeyedMutexBranchDeadlock: a flow that holds a key and waits for a
// parallel branch that syncs on the same key: the branch fails with the
// Mutex's deadlock, and another key is free to the branch. Each branch
// has a trace of its own: the other key's entry, told by the goroutine,
// may come before the deadlock is found.
func TestKeyedMutexBranchDeadlock(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr, trOther tracer
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(km.Key("k"), func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			km.Sync(as, "other", func(as asyncsteps.AsyncSteps, _ ...any) { trOther.add("other in") })
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			km.Sync(as, "k", func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("k in") },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.add("k onerror %s: %s", code, as.State().ErrorInfo)
					as.Success()
				})
		})
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.check(t, "k onerror InternalError: "+deadlockInfo)
	trOther.check(t, "other in")
	waitFor(t, "no key in use", func() bool { return km.Len() == 0 })
}

// TestKeyedMutexRedisRestarted: Redis restarts without its data while
// two keys are held: the renewal that follows, two keys' calls in one
// pipeline refused for a script Redis has lost, loads the script again
// and finds both leases gone (their sections report no token); a waiter
// on another key held by nobody now is let in, and Redis lost for good
// fails a waiter with CommError.
func TestKeyedMutexRedisRestarted(t *testing.T) {
	s := startRedis(t)
	c, _ := newClient(t, s.addr, Options{OpTimeout: 500 * time.Millisecond, Recheck: 200 * time.Millisecond})
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: 1500 * time.Millisecond})
	l := newLoops(t, 1)[0]
	release := make(chan struct{})
	var promises []<-chan asyncsteps.Result
	var inside atomic.Int32
	var lost sync.Map
	for _, key := range []string{"a", "b"} {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(km.Key(key), func(as asyncsteps.AsyncSteps, _ ...any) {
			inside.Add(1)
			as.Loop(func(as asyncsteps.AsyncSteps) {
				if _, ok := km.Token(as, key); !ok {
					lost.Store(key, true)
				}
				select {
				case <-release:
					as.Break()
				default:
				}
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					asyncsteps.AwaitChan(as, time.After(20*time.Millisecond))
				})
			})
		})
		promises = append(promises, r.Promise())
	}
	waitFor(t, "both inside", func() bool { return inside.Load() == 2 })
	s.restart(t)
	waitFor(t, "both leases found gone", func() bool {
		_, a := lost.Load("a")
		_, b := lost.Load("b")
		return a && b
	})
	var tr tracer
	if res := <-enter(l, km.Key("c"), &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	close(release)
	for _, p := range promises {
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	s.kill()
	res := <-enter(l, km.Key("d"), &tr, "D")
	var e *asyncsteps.Error
	if !errors.As(res.Err, &e) || e.Code != asyncsteps.CommError {
		t.Fatalf("D ended with %v, want a CommError", res.Err)
	}
	tr.check(t, "C in", "D onerror CommError: "+e.Info)
}

// TestKeyedMutexPipelinesGoTogether: a KeyedMutex's round of more calls
// than one pipeline takes (the renewals of 1,536 keys held) sends its
// pipelines at once, each bounded by OpTimeout, so that a stalled Redis
// fails all of them within one OpTimeout, as it fails the round trips of
// as many Mutexes. They went one after the other: the renewals of 10,000
// keys took 20 OpTimeouts, during which the KeyedMutex's goroutine served
// no flow of any key.
func TestKeyedMutexPipelinesGoTogether(t *testing.T) {
	const pipelines = 3
	hook := &stallHook{want: pipelines, all: make(chan struct{})}
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t), ContextTimeoutEnabled: true})
	defer rdb.Close()
	rdb.AddHook(hook)
	opts := Options{Prefix: fmt.Sprintf("keyedstall%d", prefixSeq.Add(1)), OpTimeout: 2 * time.Second}
	c, err := New(context.Background(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := make([]scriptCall, pipelines*pipelineMax)
	for i := range calls {
		calls[i] = scriptCall{keys: c.mutexKeys(fmt.Sprint("acct/", i), "r"), args: []any{i}}
	}
	for i, r := range c.callAll(mutexScript, calls) {
		if !errors.Is(r.err, errStalled) {
			t.Fatalf("call %d: %v, want the stall", i, r.err)
		}
	}
	if got := hook.peak.Load(); got != pipelines {
		t.Errorf("%d pipelines in flight at once, want %d", got, pipelines)
	}
}

// errStalled is the failure of a pipeline that stallHook held.
var errStalled = errors.New("stalled")

// stallHook holds every pipeline as a stalled Redis does, until its
// OpTimeout or until want pipelines are in flight at once, then fails it,
// and records the most in flight at once. Other pipelines (New's) pass.
type stallHook struct {
	want           int32
	all            chan struct{} // closed once want are in flight
	inFlight, peak atomic.Int32
}

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		if n > h.peak.Load() {
			h.peak.Store(n)
		}
		if n == h.want {
			close(h.all)
		}
		select {
		case <-h.all:
		case <-ctx.Done():
		}
		for _, cmd := range cmds {
			cmd.SetErr(errStalled)
		}
		return errStalled
	}
}

// TestKeyedMutexClosedWhileItsRoundTripRuns: Close comes while the round
// trip that takes a key's lease for a flow is under way. The lease it
// takes goes back with the KeyedMutex's shutdown, as a Mutex's does:
// the flow enters, Close reports no lease lost, and none is left in
// Redis.
func TestKeyedMutexClosedWhileItsRoundTripRuns(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	h := holdNextRoundTrip(c)
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	a := enter(l, km.Key("k"), &tr, "A")
	<-h.started
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	waitFor(t, "Close to begin", c.closing)
	close(h.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if res := <-a; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in") // its lease came, then went back with Close
	if n := km.Len(); n != 0 {
		t.Errorf("%d keys in use after Close", n)
	}
	if n := rdb.Exists(context.Background(), c.key(km.MutexName("k"), "holders")).Val(); n != 0 {
		t.Error("a lease left in Redis")
	}
}
