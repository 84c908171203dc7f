package redissync

// KeyedThrottle against a real redis-server: two instances contending on
// one key and not on another, a Throttle of the key's name sharing its
// rate, the queue limit and a waiter's cancel, a Hold on one key, Redis
// lost (fail closed and FailOpen), the keys of a round going in one
// pipeline, 10,000 keys used once leaving nothing behind, and no timer
// kept for a key dropped.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// keyRateOf returns the state of key of kt, if the key is in use.
func keyRateOf(kt *KeyedThrottle, key string) *keyRate {
	k, _ := kt.kc.lookup(escapeKey(key))
	return k
}

// keyRateQueued returns the number of this process's flows waiting for
// key.
func keyRateQueued(kt *KeyedThrottle, key string) int {
	if k := keyRateOf(kt, key); k != nil {
		return queued(&k.gateQueue)
	}
	return 0
}

// coreState sums up the local state of a keyed Syncer.
func coreState[K keyNode](kc *keyedCore[K]) string {
	kc.mu.Lock()
	keys := len(kc.keys)
	kc.mu.Unlock()
	kc.dueMu.Lock()
	listed := len(kc.due)
	kc.dueMu.Unlock()
	return fmt.Sprintf("keys %d, listed %d, idle %v", keys, listed, kc.idle.Load())
}

// TestKeyedThrottleTwoInstances: two instances share each key's rate (2
// per minute, no queue): once the first has used key "a"'s two entries,
// the second's flow on "a" is refused, while its flows on "b" enter. A
// Throttle named ThrottleName("b") of either instance, with the same
// options, shares "b"'s rate, and a key that needs escaping shares its
// rate with the Throttle of its escaped name.
func TestKeyedThrottleTwoInstances(t *testing.T) {
	c1, c2, _ := twoInstances(t, Options{})
	opts := ThrottleOptions{Rate: 2, Period: time.Minute}
	kt1, kt2 := c1.NewKeyedThrottle("api", opts), c2.NewKeyedThrottle("api", opts)
	if got := kt1.ThrottleName("c/{x}%"); got != "api/c%2F%7Bx%7D%25" {
		t.Errorf("ThrottleName %q", got)
	}
	l := newLoops(t, 1)[0]
	var tr tracer
	steps := []struct {
		s    asyncsteps.Syncer
		name string
	}{
		{kt1.Key("a"), "1a1"}, {kt1.Key("a"), "1a2"}, {kt2.Key("a"), "2a1"},
		{kt2.Key("b"), "2b1"}, {kt2.Key("b"), "2b2"},
		{c1.NewThrottle(kt1.ThrottleName("b"), opts), "T-b"},
		{c2.NewThrottle(kt2.ThrottleName("c/{x}%"), opts), "T-c1"},
		{c2.NewThrottle("api/c%2F%7Bx%7D%25", opts), "T-c2"},
		{kt1.Key("c/{x}%"), "1c"},
		{kt1.Key("c/{x}"), "1c'"},
	}
	for _, s := range steps {
		<-enter(l, s.s, &tr, s.name)
	}
	tr.check(t, "1a1 in", "1a2 in", "2a1 onerror DefenseRejected: Throttle queue limit",
		"2b1 in", "2b2 in", "T-b onerror DefenseRejected: Throttle queue limit",
		"T-c1 in", "T-c2 in", "1c onerror DefenseRejected: Throttle queue limit", "1c' in")
	waitFor(t, "no key in use", func() bool { return kt1.Len() == 0 && kt2.Len() == 0 })
}

// TestKeyedThrottleQueueLimitAndCancel: per key, the queue limit refuses
// with DefenseRejected and the Throttle's info; a waiter cancelled leaves
// the queue and makes room, and its key is dropped; another key
// has a queue of its own; Close fails the waiters with the Client's
// CommError and leaves no key.
func TestKeyedThrottleQueueLimitAndCancel(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("q", ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: 1})
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, kt.Key("a"), &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	waitFor(t, "A's key dropped", func() bool { return kt.Len() == 0 })
	rb := asyncsteps.New(asyncsteps.WithTool(l))
	rb.Sync(kt.Key("a"), func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B in") })
	b := rb.Promise()
	waitFor(t, "B to queue", func() bool { return keyRateQueued(kt, "a") == 1 })
	wantError(t, (<-enter(l, kt.Key("a"), &tr, "C")).Err, asyncsteps.DefenseRejected, "Throttle queue limit")
	if res := <-enter(l, kt.Key("other"), &tr, "D"); res.Err != nil {
		t.Fatal(res.Err)
	}
	rb.Cancel()
	<-b
	waitFor(t, "no key in use once B was cancelled", func() bool { return kt.Len() == 0 })
	e := enter(l, kt.Key("a"), &tr, "E")
	waitFor(t, "E to queue", func() bool { return keyRateQueued(kt, "a") == 1 })
	c.Close()
	wantError(t, (<-e).Err, asyncsteps.CommError, "redissync: client closed")
	wantError(t, (<-enter(l, kt.Key("a"), &tr, "F")).Err, asyncsteps.CommError, "redissync: client closed")
	tr.check(t, "A in", "C onerror DefenseRejected: Throttle queue limit", "D in",
		"E onerror CommError: redissync: client closed", "F onerror CommError: redissync: client closed")
	if n := kt.Len(); n != 0 {
		t.Errorf("%d keys in use after Close", n)
	}
}

// TestKeyedThrottleHoldOneKey: instance A holds key "a"; instance B's
// flows on "a", which come once the hold is in Redis, wait until its
// end, Rate of them at once and the next an interval later, while B's
// flow on "b" enters at once. A's key is dropped once Redis has the hold
// (it fails closed: see KeyedThrottle), and B's once its flows entered.
func TestKeyedThrottleHoldOneKey(t *testing.T) {
	c1, c2, rdb := twoInstances(t, Options{})
	opts := ThrottleOptions{Rate: 2, Period: 200 * time.Millisecond, MaxQueue: -1}
	ktA, ktB := c1.NewKeyedThrottle("api", opts), c2.NewKeyedThrottle("api", opts)
	until := time.Now().Add(time.Second)
	ktA.Hold("a", until)
	hold := c1.key(ktA.ThrottleName("a"), "hold")
	waitFor(t, "the hold in Redis", func() bool { return rdb.Exists(context.Background(), hold).Val() == 1 })
	waitFor(t, "A's key dropped", func() bool { return ktA.Len() == 0 })
	loops := newLoops(t, 2)
	var atB map[string]time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		atB = entryTimes(t, loops[0], ktB.Key("b"), "b1")
	}()
	at := entryTimes(t, loops[1], ktB.Key("a"), "a1", "a2", "a3")
	<-done
	if !atB["b1"].Before(until) {
		t.Errorf("b1 entered %v after the hold's end of key a", atB["b1"].Sub(until))
	}
	order := slices.SortedFunc(maps.Keys(at), func(x, y string) int { return at[x].Compare(at[y]) })
	for i, name := range order {
		wantEntryIn(t, at, name, until.Add(time.Duration(max(i-1, 0))*100*time.Millisecond))
	}
	waitFor(t, "no key in use", func() bool { return ktA.Len() == 0 && ktB.Len() == 0 })
}

// TestKeyedThrottleRedisLost: Redis is killed. A fail-closed
// KeyedThrottle's flow fails with CommError; a FailOpen one's flow
// enters without a limit, on a key whose rate was used up, and its flow
// on a key this process holds waits for the hold's end, the key kept in
// use until then. Each key's first entry was Redis's.
func TestKeyedThrottleRedisLost(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 300 * time.Millisecond}
	c, _ := newClient(t, srv.addr, opts)
	rate := ThrottleOptions{Rate: 1, Period: time.Minute, MaxQueue: -1}
	closed := c.NewKeyedThrottle("closed", rate)
	rate.FailOpen = true
	open := c.NewKeyedThrottle("open", rate)
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, s := range []asyncsteps.Syncer{closed.Key("k"), open.Key("k")} {
		if res := <-enter(l, s, &tr, "first"); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	srv.kill()
	wantError(t, (<-enter(l, closed.Key("k"), &tr, "C")).Err, asyncsteps.CommError, "redis: timed out")
	if res := <-enter(l, open.Key("k"), &tr, "O"); res.Err != nil {
		t.Fatal(res.Err)
	}
	// O's key is dropped once the round trip that let it in has ended.
	waitFor(t, "no key in use", func() bool { return open.Len() == 0 })
	until := time.Now().Add(time.Second)
	open.Hold("h", until)
	if n := open.Len(); n != 1 {
		t.Errorf("%d keys in use with a hold, want 1", n)
	}
	at := entryTimes(t, l, open.Key("h"), "H")
	if d := at["H"].Sub(until); d < -time.Millisecond || d > opts.OpTimeout+holdSlack {
		t.Errorf("H entered %v after this process's hold's end, want within [0, OpTimeout + %v]", d, holdSlack)
	}
	tr.check(t, "first in", "first in", "C onerror CommError: redis: timed out", "O in")
	waitFor(t, "no key in use", func() bool { return open.Len() == 0 && closed.Len() == 0 })
}

// TestKeyedThrottleKeysGoTogether: the flows of many keys that ask while
// a round trip is under way are tried in the next round, all in one
// pipeline: one call of the script per key, not a round trip per key.
func TestKeyedThrottleKeysGoTogether(t *testing.T) {
	var pipelines, singles atomic.Int64
	c, rdb := newClient(t, sharedRedis(t), Options{})
	// Loaded, so that neither the first call nor the pipeline meets
	// NOSCRIPT and makes a call more.
	if err := gcraScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	h := holdNextRoundTrip(c)
	c.rdb.(*redis.Client).AddHook(countHook{&pipelines, &singles})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 1, Period: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	first := enter(l, kt.Key("first"), &tr, "first")
	<-h.started
	const n = 100
	var results []<-chan asyncsteps.Result
	for i := range n {
		results = append(results, enter(l, kt.Key(fmt.Sprint(i)), &tr, "k"))
	}
	waitFor(t, "every key listed", func() bool { return coreState(&kt.kc) == "keys 101, listed 100, idle false" })
	close(h.release)
	for _, r := range append(results, first) {
		if res := <-r; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if p, s := pipelines.Load(), singles.Load(); p != 1 || s != 1 {
		t.Errorf("%d pipelines and %d single calls, want 1 and 1", p, s)
	}
}

// TestKeyedThrottleManyKeysLeaveNothing: 10,000 keys, each used once by
// flows of two loops, leave no state in the process once they have
// entered: no key (and the map keeps the room of keptKeys at most), no
// timer, no listed key, no goroutine but the KeyedThrottle's one; and in
// Redis, once their times have passed, no key at all: the "tat" of each
// expires once the next entry's time has come, its call record
// 2×OpTimeout after its call. OpTimeout is the default, as for the
// KeyedMutex's test: the first round sends 10,000 calls in pipelines at
// once, which a loaded machine under -race took more than 300ms to
// answer, and the flows failed with "redis: timed out".
func TestKeyedThrottleManyKeysLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 keys")
	}
	c, rdb := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 100, Period: time.Second})
	enterKeysOnce(t, func(i int) asyncsteps.Syncer { return kt.Key(fmt.Sprintf("key-%d", i)) })
	waitFor(t, "the goroutine to settle", func() bool {
		return coreState(&kt.kc) == "keys 0, listed 0, idle true"
	})
	kt.kc.mu.Lock()
	peak := kt.kc.peak
	kt.kc.mu.Unlock()
	if peak > keptKeys {
		t.Errorf("the map keeps the room of %d keys", peak)
	}
	if n := countGoroutines("(*KeyedThrottle)."); n != 1 {
		t.Errorf("%d goroutines of the KeyedThrottle, want its own one", n)
	}
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, c.opts.Prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		pttl := rdb.PTTL(ctx, key).Val()
		if pttl == -2 {
			continue // expired meanwhile
		}
		if pttl < 0 || pttl > 2*c.opts.OpTimeout+time.Millisecond {
			t.Fatalf("%s expires in %v", key, pttl)
		}
	}
	waitFor(t, "every key to expire", func() bool { return len(rdb.Keys(ctx, c.opts.Prefix+":*").Val()) == 0 })
}

// TestKeyedThrottleZeroAndNil: a nil or zero KeyedThrottle, or one of a
// zero Client, fails its flows with InternalError, and its other methods
// do nothing.
func TestKeyedThrottleZeroAndNil(t *testing.T) {
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, kt := range []*KeyedThrottle{nil, new(KeyedThrottle), new(Client).NewKeyedThrottle("x", ThrottleOptions{})} {
		res := <-enter(l, kt.Key("a"), &tr, "A")
		wantError(t, res.Err, asyncsteps.InternalError, "redissync: the KeyedThrottle was not made by a Client from New")
		kt.Hold("a", time.Now().Add(time.Minute))
		if kt.Len() != 0 {
			t.Error("a key in use")
		}
	}
	var nilKT *KeyedThrottle
	if nilKT.ThrottleName("a") != "" {
		t.Error("a nil KeyedThrottle names a Throttle")
	}
}

// TestKeyedThrottleLoopClosed: a flow waiting for a key whose Loop is
// closed leaves the queue at the key's next round, at the time Redis
// named for the next entry, without being given an entry (no call asks
// Redis for one: the key's call record is still that of B's first try,
// number 2, 0 admitted): the key is dropped, and a flow of a live loop that comes
// next enters.
func TestKeyedThrottleLoopClosed(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 1, Period: 300 * time.Millisecond, MaxQueue: -1})
	doomed := asyncsteps.NewLoop()
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(doomed, kt.Key("a"), &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	enter(doomed, kt.Key("a"), &tr, "B")
	waitFor(t, "B to queue", func() bool { return keyRateQueued(kt, "a") == 1 })
	doomed.Close()
	waitFor(t, "no key in use", func() bool { return kt.Len() == 0 })
	record := c.key(kt.ThrottleName("a"), "call:"+kt.record)
	if got := rdb.Get(context.Background(), record).Val(); got != "2 0" {
		t.Errorf("the key's call record %q, want B's first try's, \"2 0\"", got)
	}
	if res := <-enter(l, kt.Key("a"), &tr, "C"); res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in", "C in")
}

// TestKeyedThrottleRefusedByRedis: a FailOpen KeyedThrottle whose key's
// "tat" holds a hash fails that key's flows with the CommError Redis
// answered, as a FailOpen Throttle does (that is no outage), while its
// other keys work.
func TestKeyedThrottleRefusedByRedis(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 1, FailOpen: true})
	rdb.HSet(context.Background(), c.key(kt.ThrottleName("bad"), "tat"), "a", "b")
	l := newLoops(t, 1)[0]
	var tr tracer
	<-enter(l, kt.Key("bad"), &tr, "bad")
	<-enter(l, kt.Key("good"), &tr, "good")
	tr.check(t, "bad onerror CommError: redis: error reply WRONGTYPE", "good in")
}

// TestKeyedThrottleRedisRestarted: Redis restarts without its data (and
// its scripts): the keys' round trips work again, loading the script
// again (a call alone, or the calls of a pipeline: see Client.pipeline),
// and the rates start afresh.
func TestKeyedThrottleRedisRestarted(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv.addr, Options{OpTimeout: 300 * time.Millisecond})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 1, Period: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	<-enter(l, kt.Key("a"), &tr, "a1")
	<-enter(l, kt.Key("a"), &tr, "a2")
	srv.restart(t)
	var results []<-chan asyncsteps.Result
	for _, key := range []string{"a", "b", "c"} {
		results = append(results, enter(l, kt.Key(key), &tr, key+" after"))
	}
	for _, r := range results {
		<-r
	}
	tr.mu.Lock()
	slices.Sort(tr.events)
	tr.mu.Unlock()
	tr.check(t, "a after in", "a1 in", "a2 onerror DefenseRejected: Throttle queue limit", "b after in", "c after in")
}

// TestKeyedThrottleHoldAsTheClientCloses: a Hold that found its key as
// the Client closed reads whether the key was closed under the key's
// lock: Close's goroutine sets it under that lock, and Hold read it
// without, a data race that -race reported for a Hold made as a service
// shuts down (the test fails only under -race). The key, closed, keeps
// no hold.
func TestKeyedThrottleHoldAsTheClientCloses(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("api", ThrottleOptions{Rate: 1})
	// Until its goroutine has begun, no frame of run is on its stack, and
	// the wait below for run's end would pass before Close closed the key.
	waitFor(t, "the KeyedThrottle's goroutine to begin", func() bool { return countGoroutines("(*KeyedThrottle).run") == 1 })
	found, resume := make(chan *keyRate), make(chan struct{})
	holdFound = func(k *keyRate) {
		found <- k
		<-resume
	}
	defer func() { holdFound = nil }()
	held := make(chan struct{})
	go func() {
		defer close(held)
		kt.Hold("a", time.Now().Add(time.Minute))
	}()
	k := <-found
	// The KeyedThrottle's goroutine closes the key that Hold has found.
	// The test waits for it to end without synchronizing with it (Close's
	// return would), so that -race sees Hold's read of the key's state
	// as it would be in a service, unordered with that write.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.Close()
	}()
	waitFor(t, "the KeyedThrottle's goroutine to end", func() bool { return countGoroutines("(*KeyedThrottle).run") == 0 })
	close(resume)
	<-held
	<-closed
	k.mu.Lock()
	h := k.held
	k.mu.Unlock()
	if !h.IsZero() {
		t.Errorf("the closed key holds until %v", h)
	}
	if n := kt.Len(); n != 0 {
		t.Errorf("%d keys in use after Close", n)
	}
}

// TestKeyedThrottleCancelledKeysKeepNoTimer: a key whose waiter is
// cancelled while its entry is an hour away is dropped, and so is its
// timer: the goroutine keeps no entry of a key that is gone, which would
// hold the key's state until its time.
func TestKeyedThrottleCancelledKeysKeepNoTimer(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	kt := c.NewKeyedThrottle("q", ThrottleOptions{Rate: 1, Period: time.Hour, MaxQueue: -1})
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, key := range []string{"a", "b", "c"} {
		if res := <-enter(l, kt.Key(key), &tr, "A"); res.Err != nil {
			t.Fatal(res.Err)
		}
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(kt.Key(key), func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B in") })
		b := r.Promise()
		waitFor(t, "B to queue", func() bool { return keyRateQueued(kt, key) == 1 })
		r.Cancel()
		<-b
	}
	waitFor(t, "no key, no timer", func() bool { return coreState(&kt.kc) == "keys 0, listed 0, idle true" })
	tr.check(t, "A in", "A in", "A in")
}

// TestKeyTimersDropGoneKeys: the entries of keys dropped are stale: the
// heap of keys churning through an hour-long wait, one key kept, stays
// within twice the kept entries (and 64) however many keys came and went,
// and no dropped key's round is made.
func TestKeyTimersDropGoneKeys(t *testing.T) {
	var timers keyTimers[*keyRate]
	now := time.Now()
	kept := &keyRate{next: now.Add(time.Hour)}
	timers.schedule(kept)
	for range 1000 {
		k := &keyRate{next: now.Add(time.Hour)}
		timers.schedule(k)
		k.dropped.Store(true)
	}
	if n := timers.len(); n > 2*1+64+1 {
		t.Errorf("%d entries for one key in use", n)
	}
	if due := timers.popDue(nil, now.Add(2*time.Hour)); len(due) != 1 || due[0] != kept {
		t.Errorf("%d keys due, want the kept one", len(due))
	}
}
