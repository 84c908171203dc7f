package redissync

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestRedisPausedMidway: Redis stops answering (paused, its connections
// open) with the go-redis client's default options. A flow that asks a
// Mutex or a Throttle fails with a CommError "redis: timed out" within
// about OpTimeout, as the package promises: the round trip's deadline
// bounds the socket reads, not go-redis's ReadTimeout (3s by default,
// then retried).
func TestRedisPausedMidway(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 300 * time.Millisecond, Recheck: time.Hour}
	c, _ := newClient(t, srv.addr, opts)
	m := c.NewMutex("m", MutexOptions{})
	th := c.NewThrottle("t", ThrottleOptions{})
	l := newLoops(t, 1)[0]
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	var tr tracer
	for name, s := range map[string]asyncsteps.Syncer{"mutex": m, "throttle": th} {
		start := time.Now()
		res := <-enter(l, s, &tr, name)
		took := time.Since(start)
		var e *asyncsteps.Error
		if !errors.As(res.Err, &e) || e.Code != asyncsteps.CommError || e.Info != "redis: timed out" {
			t.Errorf("%s: %v, want CommError: redis: timed out", name, res.Err)
		}
		if bound := opts.OpTimeout + 1500*time.Millisecond; took > bound {
			t.Errorf("%s: failed after %v, the bound is about OpTimeout %v", name, took, opts.OpTimeout)
		}
	}
}

// TestOwnClientMakesItsOwnProcessor: the client New makes for its round
// trips, a copy of the user's options, sets up go-redis's notification
// handlers of its own. It shared the processor that NewClient had stored
// in the user's options, so go-redis logged "failed to initialize
// maintnotifications: ... cannot overwrite existing handler" (and would
// panic in New for a client that requires maintenance notifications).
func TestOwnClientMakesItsOwnProcessor(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	own, ok := c.rdb.(*redis.Client)
	if !ok || own == rdb {
		t.Fatal("New uses the user's client, which ignores context deadlines")
	}
	if own.Options().PushNotificationProcessor == rdb.Options().PushNotificationProcessor {
		t.Error("the Client's own go-redis client shares the user's notification processor")
	}
	if own.Options().MaintNotificationsConfig == rdb.Options().MaintNotificationsConfig {
		t.Error("the Client's own go-redis client shares the user's MaintNotificationsConfig")
	}
}

// TestNewOnRing: on a *redis.Ring without ContextTimeoutEnabled, the
// Syncers' round trips go through a Ring of the Client's own, and work.
func TestNewOnRing(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": sharedRedis(t)}})
	defer ring.Close()
	c, err := New(context.Background(), ring, Options{Prefix: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if own, ok := c.rdb.(*redis.Ring); !ok || own == ring || !own.Options().ContextTimeoutEnabled {
		t.Fatalf("round trips on %T %p, want a Ring of the Client's own with ContextTimeoutEnabled", c.rdb, c.rdb)
	}
	var tr tracer
	if res := <-enter(newLoops(t, 1)[0], c.NewMutex("m", MutexOptions{}), &tr, "A"); res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A in")
}

// TestReleaseRetriedAfterFailedRoundTrip: a lease given back while Redis
// does not answer is given back once it answers again, not left to run
// out after its TTL. The round trip that failed dropped it, so one
// transient failure kept the Mutex full for a whole TTL.
func TestReleaseRetriedAfterFailedRoundTrip(t *testing.T) {
	srv := startRedis(t)
	opts := Options{OpTimeout: 200 * time.Millisecond, Recheck: 300 * time.Millisecond}
	c, _ := newClient(t, srv.addr, opts)
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, m, &tr, "A", release)
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	close(release)
	<-a
	// B's round trip, after the one that gives A's lease back or with it,
	// fails: Redis was asked while paused.
	var b tracer
	if res := <-enter(l, m, &b, "B"); res.Err == nil {
		t.Fatal("B entered while Redis was paused")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-enter(l, m, &tr, "C"):
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("C still waits: A's lease was not given back after Redis answered again")
	}
	tr.check(t, "A in", "A out", "C in")
}
