package redissync

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMutexNotLetIn: a Mutex whose Redis answers but does not let its
// client in (a password set that the client does not give, or gives
// wrong) fails its flows closed with the refusal's CommError, as a
// Throttle does (TestFailOpenThrottleNotLetIn). A Mutex's round trip has
// more than ten arguments, which Redis refuses to an unauthenticated
// client with a protocol error ("ERR Protocol error: unauthenticated
// multibulk length") rather than NOAUTH: the info said "error reply ERR",
// which reads as a broken script, not as the missing password it is.
func TestMutexNotLetIn(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	admin := newAdmin(t, srv)
	for _, step := range []struct {
		code     string // of the refusal
		password string // the client's
		breaks   []any  // the command that keeps the client out
	}{
		{"NOAUTH", "", []any{"CONFIG", "SET", "requirepass", "secret"}},
		{"WRONGPASS", "old", []any{"CONFIG", "SET", "requirepass", "new"}},
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
		m := c.NewMutex("m", MutexOptions{Max: 2})
		l := newLoops(t, 1)[0]
		var tr tracer
		if res := <-enter(l, m, &tr, "first"); res.Err != nil {
			t.Fatal(res.Err)
		}
		mustDo(t, admin, step.breaks...)
		// The round trips' connections are made again, as after a restart.
		mustDo(t, admin, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no")
		res := <-enter(l, m, &tr, "second")
		mustDo(t, admin, "CONFIG", "SET", "requirepass", "")
		c.Close()
		t.Run(step.code, func(t *testing.T) {
			tr.check(t, "first in", "second onerror CommError: redis: error reply "+step.code)
			wantError(t, res.Err, "CommError", "redis: error reply "+step.code)
		})
	}
}
