package redissync

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// notifications counts the messages of a Client's notification channel,
// as another process subscribed to it receives them.
type notifications struct {
	rdb     *redis.Client
	ps      *redis.PubSub
	channel string
	seq     int
}

// listenNotifications subscribes to c's notification channel; the
// subscription is confirmed when it returns.
func listenNotifications(t *testing.T, c *Client, rdb *redis.Client) *notifications {
	t.Helper()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, c.notify)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.ReceiveTimeout(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return &notifications{rdb: rdb, ps: ps, channel: c.notify}
}

// count returns the number of messages received since the last count:
// it publishes a marker of its own and reads up to it, so that every
// message published before is counted, and none twice.
func (n *notifications) count(t *testing.T) int {
	t.Helper()
	n.seq++
	end := fmt.Sprintf("end-of-count-%d", n.seq)
	ctx := context.Background()
	if err := n.rdb.Publish(ctx, n.channel, end).Err(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		msg, err := n.ps.ReceiveTimeout(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := msg.(*redis.Message); ok {
			if m.Payload == end {
				return got
			}
			got++
		}
	}
}

// waitGivenBack waits until no lease of the Mutex named name is in Redis:
// the give-back of the last section has run.
func waitGivenBack(t *testing.T, c *Client, rdb *redis.Client, name string) {
	t.Helper()
	waitFor(t, "the leases of "+name+" to be given back", func() bool {
		return rdb.Exists(context.Background(), c.key(name, "holders")).Val() == 0
	})
}

// within fails the test unless the flow of res ends without an error
// within 5s: a waiter woken by a notification, whose re-check is minutes
// away.
func within(t *testing.T, res <-chan asyncsteps.Result, what string) {
	t.Helper()
	select {
	case r := <-res:
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still waits 5s after the slot came free", what)
	}
}

// TestUncontendedGiveBackPublishesNothing: sections that end while no
// process waits send no notification, for a Mutex, a Limiter's Mutex and
// the keys of a KeyedMutex. Each give-back that left its Mutex under its
// limit published one, to every process of the fleet subscribed to the
// channel, though none of them waited.
func TestUncontendedGiveBackPublishesNothing(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: 10 * time.Minute})
	heard := listenNotifications(t, c, rdb)
	l := newLoops(t, 1)[0]
	var tr tracer
	m := c.NewMutex("m", MutexOptions{Max: 2, MaxQueue: -1})
	for _, name := range []string{"A", "B", "C"} {
		if res := <-enter(l, m, &tr, name); res.Err != nil {
			t.Fatal(res.Err)
		}
		waitGivenBack(t, c, rdb, "m")
	}
	km := c.NewKeyedMutex("acct", MutexOptions{Max: 1, MaxQueue: -1})
	for _, key := range []string{"k1", "k2", "k1"} {
		if res := <-enter(l, km.Key(key), &tr, key); res.Err != nil {
			t.Fatal(res.Err)
		}
		waitGivenBack(t, c, rdb, km.MutexName(key))
	}
	lim := c.NewLimiter("lim", LimiterOptions{Concurrent: 1, MaxQueue: -1, Rate: 1000})
	for _, name := range []string{"L1", "L2"} {
		if res := <-enter(l, lim, &tr, name); res.Err != nil {
			t.Fatal(res.Err)
		}
		waitGivenBack(t, c, rdb, "lim/concurrent")
	}
	tr.check(t, "A in", "B in", "C in", "k1 in", "k2 in", "k1 in", "L1 in", "L2 in")
	if n := heard.count(t); n != 0 {
		t.Errorf("%d notifications for 8 uncontended sections, want 0", n)
	}
}

// TestContendedGiveBackWakesAtOnce: a flow of another process that waits
// for the slot is woken by the give-back's notification, not by its
// re-check (minutes away), for a Mutex and a key of a KeyedMutex; one of
// the same process enters with the give-back's own round trip. Each
// give-back while the wait is recent publishes: the holder's, and the
// waiter's own when it leaves.
func TestContendedGiveBackWakesAtOnce(t *testing.T) {
	a, b, rdb := twoInstances(t, Options{Recheck: 10 * time.Minute})
	heard := listenNotifications(t, a, rdb)
	l := newLoops(t, 1)[0]
	opts := MutexOptions{Max: 1, MaxQueue: -1, TTL: 10 * time.Minute}
	kmA, kmB := a.NewKeyedMutex("acct", opts), b.NewKeyedMutex("acct", opts)
	for _, s := range []struct {
		name         string
		holder, same asyncsteps.Syncer
		waiter       asyncsteps.Syncer
		queued       func() int // the other process's flows waiting
		sameQueued   func() int // the holder's process's
	}{
		{"m", b.NewMutex("m", opts), nil, nil, nil, nil},
		{"acct/k", kmB.Key("k"), kmB.Key("k"), kmA.Key("k"),
			func() int { return keyQueued(kmA, "k") }, func() int { return keyQueued(kmB, "k") }},
	} {
		if s.same == nil {
			s.same, s.waiter = s.holder, a.NewMutex("m", opts)
			mA, mB := s.waiter.(*Mutex), s.holder.(*Mutex)
			s.queued = func() int { return queued(&mA.gateQueue) }
			s.sameQueued = func() int { return queued(&mB.gateQueue) }
		}
		t.Run(s.name, func(t *testing.T) {
			var tr tracer
			release := make(chan struct{})
			held := holdOpen(t, l, s.holder, &tr, "H", release)
			other := enter(l, s.waiter, &tr, "other")
			waitFor(t, "the other process's flow to queue", func() bool { return s.queued() == 1 })
			close(release)
			if res := <-held; res.Err != nil {
				t.Fatal(res.Err)
			}
			within(t, other, "the other process's flow")
			waitGivenBack(t, a, rdb, s.name)
			if n := heard.count(t); n != 2 {
				t.Errorf("%d notifications, want 2: the holder's give-back and the waiter's", n)
			}

			release = make(chan struct{})
			held = holdOpen(t, l, s.holder, &tr, "H2", release)
			same := enter(l, s.same, &tr, "same")
			waitFor(t, "the same process's flow to queue", func() bool { return s.sameQueued() == 1 })
			close(release)
			within(t, held, "the holder")
			within(t, same, "the same process's flow")
			waitGivenBack(t, a, rdb, s.name)
			if n := heard.count(t); n != 1 {
				t.Errorf("%d notifications, want 1: the give-back of the flow that waited", n)
			}
			tr.check(t, "H in", "H out", "other in", "H2 in", "H2 out", "same in")
		})
	}
}

// TestWaitMarkerExpires: the key that tells that a process waits expires
// 2×(Recheck+2×OpTimeout) after the last call that left a flow waiting,
// leaving no key of its own behind, and give-backs publish nothing again.
func TestWaitMarkerExpires(t *testing.T) {
	opts := Options{Recheck: 100 * time.Millisecond, OpTimeout: time.Second}
	a, b, rdb := twoInstances(t, opts)
	heard := listenNotifications(t, a, rdb)
	l := newLoops(t, 1)[0]
	mopts := MutexOptions{Max: 1, MaxQueue: -1, TTL: 10 * time.Second}
	mA, mB := a.NewMutex("m", mopts), b.NewMutex("m", mopts)
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, mB, &tr, "H", release)
	waiter := enter(l, mA, &tr, "W")
	waitFor(t, "W to queue", func() bool { return queued(&mA.gateQueue) == 1 })
	ctx := context.Background()
	marker := a.key("m", "waiting")
	most := 2 * (opts.Recheck + 2*opts.OpTimeout)
	if pttl := rdb.PTTL(ctx, marker).Val(); pttl <= 0 || pttl > most {
		t.Errorf("the marker expires in %v, want in (0, %v]", pttl, most)
	}
	close(release)
	within(t, held, "the holder")
	within(t, waiter, "W")
	waitGivenBack(t, a, rdb, "m")
	waitFor(t, "the marker to expire", func() bool { return rdb.Exists(ctx, marker).Val() == 0 })
	for _, key := range rdb.Keys(ctx, a.opts.Prefix+":*").Val() {
		if strings.HasSuffix(key, ":waiting") {
			t.Errorf("key %s left", key)
		}
	}
	heard.count(t)
	if res := <-enter(l, mB, &tr, "U"); res.Err != nil {
		t.Fatal(res.Err)
	}
	waitGivenBack(t, a, rdb, "m")
	if n := heard.count(t); n != 0 {
		t.Errorf("%d notifications for an uncontended section after the marker expired, want 0", n)
	}
	tr.check(t, "H in", "H out", "W in", "U in")
}

// TestWaitMarkerKeepsTheLongerExpiry: a process with a short Recheck
// that waits does not shorten the marker set by one with a longer
// Recheck, which may still wait after the first is served.
func TestWaitMarkerKeepsTheLongerExpiry(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{Recheck: 100 * time.Millisecond})
	l := newLoops(t, 1)[0]
	m := c.NewMutex("m", MutexOptions{Max: 1, MaxQueue: -1})
	ctx := context.Background()
	marker := c.key("m", "waiting")
	rdb.Set(ctx, marker, "1", time.Hour) // a process whose Recheck is half an hour waits
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, m, &tr, "H", release)
	waiter := enter(l, m, &tr, "W")
	waitFor(t, "W to queue", func() bool { return queued(&m.gateQueue) == 1 })
	if pttl := rdb.PTTL(ctx, marker).Val(); pttl < 59*time.Minute {
		t.Errorf("the marker expires in %v, want about an hour", pttl)
	}
	close(release)
	within(t, held, "H")
	within(t, waiter, "W")
}

// TestWaiterWithoutMarkerServedByItsRecheck: a waiting process whose
// marker expired (or of a version that sets none) is not notified of a
// give-back, and enters at its own next call, its re-check: a give-back
// without a marker publishes nothing, as a notification lost on the way
// would, and costs latency only.
func TestWaiterWithoutMarkerServedByItsRecheck(t *testing.T) {
	a, b, rdb := twoInstances(t, Options{Recheck: 200 * time.Millisecond})
	h := &roundTripHold{armed: make(chan struct{}, 1), started: make(chan struct{}), release: make(chan struct{})}
	a.rdb.(*redis.Client).AddHook(h)
	heard := listenNotifications(t, a, rdb)
	l := newLoops(t, 1)[0]
	mopts := MutexOptions{Max: 1, MaxQueue: -1, TTL: 10 * time.Second}
	mA, mB := a.NewMutex("m", mopts), b.NewMutex("m", mopts)
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, mB, &tr, "H", release)
	var entered atomic.Bool
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(mA, func(asyncsteps.AsyncSteps, ...any) { tr.add("W in"); entered.Store(true) })
	waiter := r.Promise()
	waitFor(t, "W to queue", func() bool { return queued(&mA.gateQueue) == 1 })
	h.armed <- struct{}{} // W's next re-check waits
	<-h.started
	rdb.Del(context.Background(), a.key("m", "waiting")) // expired
	close(release)
	within(t, held, "H")
	waitGivenBack(t, a, rdb, "m")
	if n := heard.count(t); n != 0 {
		t.Errorf("%d notifications of a give-back with no marker, want 0", n)
	}
	if entered.Load() {
		t.Fatal("W entered before its re-check")
	}
	close(h.release)
	within(t, waiter, "W")
	tr.check(t, "H in", "H out", "W in")
}

// TestContendedGiveBackWakesAtOnceOnACluster: on a Redis Cluster, which
// refuses a script whose keys are in different slots, a waiter marks its
// Mutex (the mark shares the slot of the Mutex's other keys) and is woken
// by the holder's give-back, not by its re-check, minutes away.
func TestContendedGiveBackWakesAtOnceOnACluster(t *testing.T) {
	addr := startOneNodeCluster(t)
	var clients [2]*Client
	for i := range clients {
		cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		t.Cleanup(func() { cluster.Close() })
		c, err := New(context.Background(), cluster, Options{Prefix: "app", Recheck: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	l := newLoops(t, 1)[0]
	opts := MutexOptions{Max: 1, MaxQueue: -1, TTL: 10 * time.Minute}
	holder, waiter := clients[0].NewMutex("m", opts), clients[1].NewMutex("m", opts)
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, holder, &tr, "H", release)
	other := enter(l, waiter, &tr, "W")
	waitFor(t, "W to queue", func() bool { return queued(&waiter.gateQueue) == 1 })
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer rdb.Close()
	if n := rdb.Exists(context.Background(), clients[1].key("m", "waiting")).Val(); n != 1 {
		t.Errorf("the mark: %d keys, want 1", n)
	}
	close(release)
	within(t, held, "H")
	within(t, other, "W")
	tr.check(t, "H in", "H out", "W in")
}
