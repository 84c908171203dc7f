package redissync

// Throttle.Hold and Limiter.Hold against a real redis-server: the script
// that keeps a hold and names its end as the wait, exactly; two Clients,
// one holding, the other's flows entering at the hold's end; a shorter
// hold that does nothing; the hold key expiring by itself; Redis down
// while a hold is made.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// holdCall runs the GCRA script of th for want entries as its call
// number call, with a hold of holdUs µs (0: none), and returns the
// number admitted and the wait Redis named, in µs.
func holdCall(t *testing.T, c *Client, th *Throttle, holdKey string, want, call int, holdUs int64) (admitted, wait int64) {
	t.Helper()
	keys := []string{th.keys[0], th.keys[1], holdKey}
	res, err := c.call(gcraScript, keys, th.interval, th.slack, want, call, th.keep, holdUs)
	if err != nil {
		t.Fatal(err)
	}
	return toInt(res[0]), toInt(res[1])
}

// TestThrottleHoldScript: while a hold lives, the script admits nothing
// and names the hold's rest as the wait, to the µs; a shorter hold leaves
// the end as it is, a longer one moves it on; a call run again (go-redis
// sending it after a lost reply) does not move it; once the hold is gone,
// Rate enter at once, the hold having counted no entry, and the wait is
// the GCRA's again.
func TestThrottleHoldScript(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("script", ThrottleOptions{Rate: 2, Period: time.Minute})
	hold := c.key("script", "hold")
	ctx := context.Background()
	var trace []string
	step := func(what string, want, call int, holdUs int64) {
		n, wait := holdCall(t, c, th, hold, want, call, holdUs)
		trace = append(trace, fmt.Sprintf("%s: %d admitted, wait %d", what, n, wait))
	}
	step("hold 1s", 2, 1, 1_000_000)
	end := rdb.Get(ctx, hold).Val()
	if ttl := rdb.PTTL(ctx, hold).Val(); ttl <= 0 || ttl > 1001*time.Millisecond {
		t.Errorf("the hold key expires in %v, want in (0, 1.001s]", ttl)
	}
	n, wait := holdCall(t, c, th, hold, 1, 2, 500_000)
	if n != 0 || wait <= 500_000 || wait > 1_000_000 {
		t.Errorf("a shorter hold: %d admitted, wait %d µs, want 0, the first hold's rest", n, wait)
	}
	if got := rdb.Get(ctx, hold).Val(); got != end {
		t.Errorf("a shorter hold moved the end from %s to %s", end, got)
	}
	step("hold 2s", 1, 3, 2_000_000)
	longer := rdb.Get(ctx, hold).Val()
	if a, b := mustInt(t, end), mustInt(t, longer); b <= a {
		t.Errorf("a longer hold left the end at %d, was %d", b, a)
	}
	if n, wait := holdCall(t, c, th, hold, 1, 3, 3_000_000); n != 0 || wait > 2_000_000 {
		t.Errorf("call 3 run again: %d admitted, wait %d µs, want 0, the 2s hold's rest", n, wait)
	}
	if got := rdb.Get(ctx, hold).Val(); got != longer {
		t.Errorf("a call run again moved the end from %s to %s", longer, got)
	}
	rdb.Del(ctx, hold) // as it expires
	step("no hold", 3, 4, 0)
	want := []string{
		"hold 1s: 0 admitted, wait 1000000",
		"hold 2s: 0 admitted, wait 2000000",
		"no hold: 2 admitted, wait 30000000", // the next entry's: Rate 2 per minute

	}
	if !slices.Equal(trace, want) {
		t.Errorf("calls:\n  %q\nwant:\n  %q", trace, want)
	}
}

// mustInt parses s, a µs count that the script wrote.
func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is no µs count", s)
	}
	return n
}

// sharedPrefix returns a Prefix of its own for Clients that stand for
// the processes of one service.
func sharedPrefix() string { return fmt.Sprintf("h%d-%d", os.Getpid(), prefixSeq.Add(1)) }

// entryTimes starts a flow on l for each name, each entering s, and
// returns when each entered, on this process's clock, once all have.
func entryTimes(t *testing.T, l *asyncsteps.Loop, s asyncsteps.Syncer, names ...string) map[string]time.Time {
	t.Helper()
	var mu sync.Mutex
	at := make(map[string]time.Time)
	var results []<-chan asyncsteps.Result
	for _, name := range names {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(s, func(asyncsteps.AsyncSteps, ...any) {
			mu.Lock()
			at[name] = time.Now()
			mu.Unlock()
		})
		results = append(results, r.Promise())
	}
	for i, res := range results {
		if r := <-res; r.Err != nil {
			t.Fatalf("%s: %v", names[i], r.Err)
		}
	}
	return at
}

// holdSlack bounds how late a flow may enter after the time Redis names
// for it on a loaded machine: a round trip and the wake of a goroutine
// and a loop. No flow may enter before that time: that is exact.
const holdSlack = 500 * time.Millisecond

// wantEntryIn checks that name entered within [from, from+holdSlack].
// Redis's clock and this process's are the same machine's here: the
// lower bound is exact but for a ms of the realtime clock against the
// monotonic one that time.Now and its differences read.
func wantEntryIn(t *testing.T, at map[string]time.Time, name string, from time.Time) {
	t.Helper()
	if d := at[name].Sub(from); d < -time.Millisecond || d > holdSlack {
		t.Errorf("%s entered %v after the time it was due, want within [0, %v]", name, d, holdSlack)
	}
}

// TestThrottleHoldKeepsEveryProcessOut: two Clients on one Prefix, two
// processes of a service. A holds; B's flows, which come once the hold is
// in Redis, wait until its end: Rate of them enter at the hold's end, as
// after an idle spell, and the next one interval later. A's own flow is
// held as well.
func TestThrottleHoldKeepsEveryProcessOut(t *testing.T) {
	addr := sharedRedis(t)
	prefix := sharedPrefix()
	a, rdb := newClient(t, addr, Options{Prefix: prefix})
	b, _ := newClient(t, addr, Options{Prefix: prefix})
	opts := ThrottleOptions{Rate: 2, Period: 200 * time.Millisecond, MaxQueue: -1}
	thA, thB := a.NewThrottle("api", opts), b.NewThrottle("api", opts)
	loops := newLoops(t, 2)
	until := time.Now().Add(600 * time.Millisecond)
	thA.Hold(until)
	waitFor(t, "the hold in Redis", func() bool { return rdb.Exists(context.Background(), thA.keys[2]).Val() == 1 })
	var atA map[string]time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		atA = entryTimes(t, loops[0], thA, "A1")
	}()
	at := entryTimes(t, loops[1], thB, "B1", "B2", "B3")
	<-done
	maps.Copy(at, atA)
	var order []string
	for name := range at {
		order = append(order, name)
	}
	slices.SortFunc(order, func(x, y string) int { return at[x].Compare(at[y]) })
	// Rate 2 at the hold's end, from either process; the next ones an
	// interval (100ms) apart.
	for i, name := range order {
		t.Logf("%s entered %v after the hold's end", name, at[name].Sub(until))
		wantEntryIn(t, at, name, until.Add(time.Duration(max(i-1, 0))*100*time.Millisecond))
	}
}

// holdDue reports whether th has a hold that no round trip has given to
// Redis yet.
func holdDue(th *Throttle) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.holdDue
}

// TestThrottleHoldReachesSleepingWaiters: B's flow waits for the next
// entry, its round trip made, when A holds for longer: it learns of the
// hold when it wakes, and enters at the hold's end, not at the time
// Redis named before.
func TestThrottleHoldReachesSleepingWaiters(t *testing.T) {
	addr := sharedRedis(t)
	prefix := sharedPrefix()
	a, _ := newClient(t, addr, Options{Prefix: prefix})
	b, _ := newClient(t, addr, Options{Prefix: prefix})
	opts := ThrottleOptions{Rate: 1, Period: 300 * time.Millisecond, MaxQueue: -1}
	thA, thB := a.NewThrottle("api", opts), b.NewThrottle("api", opts)
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, thB, &tr, "B1"); res.Err != nil {
		t.Fatal(res.Err)
	}
	var at map[string]time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		at = entryTimes(t, l, thB, "B2")
	}()
	waitFor(t, "B2 to queue", func() bool { return queued(&thB.gateQueue) == 1 })
	until := time.Now().Add(800 * time.Millisecond)
	thA.Hold(until)
	<-done
	wantEntryIn(t, at, "B2", until)
}

// TestThrottleHoldNeverShortensOne: a hold that ends before one made
// already does nothing: in Redis, made by another process, whose round
// trip leaves the end as it was, and in the process that made the longer
// one, which makes no round trip for it. B's flow enters at the longer
// hold's end.
func TestThrottleHoldNeverShortensOne(t *testing.T) {
	addr := sharedRedis(t)
	prefix := sharedPrefix()
	a, rdb := newClient(t, addr, Options{Prefix: prefix})
	b, _ := newClient(t, addr, Options{Prefix: prefix})
	opts := ThrottleOptions{Rate: 1, Period: 100 * time.Millisecond, MaxQueue: -1}
	thA, thB := a.NewThrottle("api", opts), b.NewThrottle("api", opts)
	ctx := context.Background()
	until := time.Now().Add(800 * time.Millisecond)
	thA.Hold(until)
	waitFor(t, "A's hold in Redis", func() bool { return !holdDue(thA) })
	end := rdb.Get(ctx, thA.keys[2]).Val()
	thA.Hold(until.Add(-100 * time.Millisecond))
	if holdDue(thA) {
		t.Error("A's shorter hold is due for a round trip")
	}
	thB.Hold(time.Now().Add(300 * time.Millisecond))
	waitFor(t, "B's round trip", func() bool { return !holdDue(thB) })
	if rdb.Exists(ctx, thB.keys[1]).Val() != 1 {
		t.Fatal("B made no round trip for its hold")
	}
	if got := rdb.Get(ctx, thA.keys[2]).Val(); got != end {
		t.Errorf("B's shorter hold moved the end from %s to %s", end, got)
	}
	at := entryTimes(t, newLoops(t, 1)[0], thB, "B1")
	wantEntryIn(t, at, "B1", until)
}

// TestThrottleHoldExpiresByItself: the hold key lives as long as the
// hold, and a ms more, then Redis drops it by itself. Meanwhile a flow
// of a Throttle that queues none is refused at once.
func TestThrottleHoldExpiresByItself(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("api", ThrottleOptions{})
	ctx := context.Background()
	until := time.Now().Add(300 * time.Millisecond)
	th.Hold(until)
	waitFor(t, "the hold in Redis", func() bool { return !holdDue(th) })
	if ttl := rdb.PTTL(ctx, th.keys[2]).Val(); ttl <= 0 || ttl > 301*time.Millisecond {
		t.Errorf("the hold key expires in %v, want in (0, 301ms]", ttl)
	}
	// With no queue, a flow that comes during the hold is refused.
	var tr tracer
	res := <-enter(newLoops(t, 1)[0], th, &tr, "A")
	wantError(t, res.Err, asyncsteps.DefenseRejected, "Throttle queue limit")
	waitFor(t, "the hold key to expire", func() bool { return rdb.Exists(ctx, th.keys[2]).Val() == 0 })
	if early := time.Until(until); early > time.Millisecond {
		t.Errorf("the hold key expired %v before the hold's end", early)
	}
	if keys := rdb.Keys(ctx, c.opts.Prefix+":*").Val(); len(keys) != 1 || keys[0] != th.keys[1] {
		t.Errorf("keys %q once the hold expired, want the call record alone, %q", keys, th.keys[1])
	}
}

// TestThrottleHoldWhileRedisIsLost: Redis is killed, then holds are
// made. A fail-closed Throttle's flow fails with CommError at once, as
// in any outage; a FailOpen Throttle's flow waits for the end of this
// process's hold, then enters without a limit. The fail-closed
// Throttle's hold, whose round trips fail, goes to Redis once it is
// back, with the rest it has then, and keeps the flows out until its
// end.
func TestThrottleHoldWhileRedisIsLost(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 200 * time.Millisecond}
	c, rdb := newClient(t, srv.addr, opts)
	closed := c.NewThrottle("closed", ThrottleOptions{MaxQueue: -1})
	open := c.NewThrottle("open", ThrottleOptions{MaxQueue: -1, FailOpen: true})
	l := newLoops(t, 1)[0]
	srv.kill()
	openUntil := time.Now().Add(time.Second)
	closedUntil := time.Now().Add(3 * time.Second)
	open.Hold(openUntil)
	closed.Hold(closedUntil)
	var tr tracer
	res := <-enter(l, closed, &tr, "C1")
	wantError(t, res.Err, asyncsteps.CommError, "redis: timed out")
	at := entryTimes(t, l, open, "O1")
	if d := at["O1"].Sub(openUntil); d < -time.Millisecond || d > opts.OpTimeout+holdSlack {
		t.Errorf("O1 entered %v after this process's hold's end, want within [0, OpTimeout + %v]", d, holdSlack)
	}
	if !holdDue(closed) {
		t.Fatal("the hold made while Redis was lost is no longer due")
	}

	srv.restart(t)
	ctx := context.Background()
	waitFor(t, "the hold in Redis", func() bool { return rdb.Exists(ctx, closed.keys[2]).Val() == 1 })
	// The end in µs of Redis's clock, this machine's: later than the
	// hold's by the time its call took to reach Redis.
	late := time.Duration(mustInt(t, rdb.Get(ctx, closed.keys[2]).Val())-closedUntil.UnixMicro()) * time.Microsecond
	if late < -time.Millisecond || late > opts.OpTimeout {
		t.Errorf("the hold ends %v after its instant in Redis, want within [0, OpTimeout]", late)
	}
	at = entryTimes(t, l, closed, "C2")
	wantEntryIn(t, at, "C2", closedUntil)
	tr.check(t, "C1 onerror CommError: redis: timed out")
}

// TestLimiterHold: a Limiter's Hold holds its rate limit, in Redis under
// the key of the Throttle "N/rate", for every process.
func TestLimiterHold(t *testing.T) {
	addr := sharedRedis(t)
	prefix := sharedPrefix()
	a, rdb := newClient(t, addr, Options{Prefix: prefix})
	b, _ := newClient(t, addr, Options{Prefix: prefix})
	opts := LimiterOptions{Concurrent: 2, MaxQueue: -1, Rate: 10, Burst: -1}
	limA, limB := a.NewLimiter("api", opts), b.NewLimiter("api", opts)
	until := time.Now().Add(300 * time.Millisecond)
	limA.Hold(until)
	key := prefix + ":{api/rate}:hold"
	waitFor(t, "the hold in Redis", func() bool { return rdb.Exists(context.Background(), key).Val() == 1 })
	at := entryTimes(t, newLoops(t, 1)[0], limB, "B1")
	wantEntryIn(t, at, "B1", until)
	var nilLimiter *Limiter
	nilLimiter.Hold(until) // does nothing
	new(Throttle).Hold(until)
}

// TestThrottleHoldOnACluster: on a Redis Cluster, the hold key shares
// the hash tag of the Throttle's other keys: the script that takes them
// together runs (it would fail with CROSSSLOT), holds, and lets the flow
// in at the hold's end.
func TestThrottleHoldOnACluster(t *testing.T) {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{startOneNodeCluster(t)}})
	defer cluster.Close()
	c, err := New(context.Background(), cluster, Options{Prefix: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	th := c.NewThrottle("api", ThrottleOptions{MaxQueue: -1})
	until := time.Now().Add(300 * time.Millisecond)
	th.Hold(until)
	waitFor(t, "the hold in Redis", func() bool { return !holdDue(th) })
	at := entryTimes(t, newLoops(t, 1)[0], th, "A")
	wantEntryIn(t, at, "A", until)
}
