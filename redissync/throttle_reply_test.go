package redissync

import (
	"context"
	"errors"
	"testing"

	"github.com/asyncsteps/asyncsteps"
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
