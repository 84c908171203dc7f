package redissync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// TestFailOpenThrottleRefusedByRedis: a FailOpen Throttle whose key holds
// what its script cannot read (a string that is no number, a hash) fails
// its flows with the CommError Redis answered, as a fail-closed one does.
// It let them in without a limit, as if Redis were lost, for as long as
// the key stayed wrong.
func TestFailOpenThrottleRefusedByRedis(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	rdb.Set(ctx, c.key("str", "tat"), "x", 0)
	rdb.HSet(ctx, c.key("hash", "tat"), "a", "b")
	var tr tracer
	for _, name := range []string{"str", "hash"} {
		th := c.NewThrottle(name, ThrottleOptions{Rate: 1, FailOpen: true})
		res := <-enter(l, th, &tr, name)
		var e *asyncsteps.Error
		if res.Err == nil || !errors.As(res.Err, &e) || e.Code != asyncsteps.CommError {
			t.Fatalf("%s: %v, want a CommError", name, res.Err)
		}
		tr.add("%s end %s", name, e.Code)
	}
	// The info names the reply by its error code alone: Redis's words after
	// it (a Lua error's text, the script's line) differ between versions.
	tr.check(t,
		"str onerror CommError: redis: error reply ERR",
		"str end CommError",
		"hash onerror CommError: redis: error reply WRONGTYPE",
		"hash end CommError")
}

// TestFailOpenThrottleNotLetIn: a FailOpen Throttle whose Redis answers
// but does not let its client in fails its flows with the CommError Redis
// answered: an ACL that takes the scripts away (NOPERM), a password set
// that the client does not give (NOAUTH) or gives wrong (WRONGPASS). That
// is no outage: it lasts until someone repairs the configuration, and
// failing open let every flow in without a limit until then.
func TestFailOpenThrottleNotLetIn(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	admin := newAdmin(t, srv) // whom the steps leave in
	for _, step := range []struct {
		code     string // of the refusal
		password string // the client's
		breaks   []any  // the command that keeps the client out
		mends    []any
	}{
		{"NOPERM", "", []any{"ACL", "SETUSER", "default", "-evalsha", "-eval"}, []any{"ACL", "SETUSER", "default", "+@all"}},
		{"NOAUTH", "", []any{"CONFIG", "SET", "requirepass", "secret"}, []any{"CONFIG", "SET", "requirepass", ""}},
		{"WRONGPASS", "old", []any{"CONFIG", "SET", "requirepass", "new"}, []any{"CONFIG", "SET", "requirepass", ""}},
	} {
		if step.password != "" {
			mustDo(t, admin, "CONFIG", "SET", "requirepass", step.password)
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.addr, Password: step.password})
		defer rdb.Close()
		c, err := New(ctx, rdb, Options{Prefix: step.code})
		if err != nil {
			t.Fatal(err)
		}
		th := c.NewThrottle("t", ThrottleOptions{Rate: 1, Period: time.Hour, FailOpen: true})
		l := newLoops(t, 1)[0]
		var tr tracer
		if res := <-enter(l, th, &tr, "first"); res.Err != nil {
			t.Fatal(res.Err)
		}
		mustDo(t, admin, step.breaks...)
		// The round trips' connections are made again, as after a restart.
		mustDo(t, admin, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no")
		<-enter(l, th, &tr, "second")
		mustDo(t, admin, step.mends...)
		c.Close()
		t.Run(step.code, func(t *testing.T) {
			tr.check(t, "first in", "second onerror CommError: redis: error reply "+step.code)
		})
	}
}

// A FailOpen Throttle whose go-redis client the program closed before
// the Client (a shutdown in the wrong order) fails its flows closed: the
// client will not come back, and failing open let every flow in without
// a limit for good.
func TestFailOpenThrottleOfAClosedRedisClient(t *testing.T) {
	srv := startRedis(t)
	// Used as it is, not copied: its calls bound by their context.
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	c, err := New(context.Background(), rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	th := c.NewThrottle("t", ThrottleOptions{Rate: 2, Period: time.Hour, FailOpen: true})
	l := newLoops(t, 1)[0]
	var tr tracer
	if res := <-enter(l, th, &tr, "first"); res.Err != nil {
		t.Fatal(res.Err)
	}
	rdb.Close()
	<-enter(l, th, &tr, "second")
	tr.check(t, "first in", "second onerror CommError: redis: client closed")
}

// mustDo runs a command on rdb and fails the test if Redis refuses it.
func mustDo(t *testing.T, rdb *redis.Client, args ...any) {
	t.Helper()
	if err := rdb.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// newAdmin returns a client of an ACL user of its own on srv, with every
// right, closed with the test: what a test that keeps its other clients
// out of srv repairs srv with.
func newAdmin(t *testing.T, srv *redisServer) *redis.Client {
	t.Helper()
	setup := redis.NewClient(&redis.Options{Addr: srv.addr})
	mustDo(t, setup, "ACL", "SETUSER", "admin", "on", ">admin", "~*", "&*", "+@all")
	setup.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.addr, Username: "admin", Password: "admin"})
	t.Cleanup(func() { admin.Close() })
	return admin
}
