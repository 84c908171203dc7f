package redissync

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/redis/go-redis/v9"
)

// TestGuardAnswersNoAddress: an asynchttp.Handler guarded by a Limiter
// whose Redis has stopped answers its client with a 502 whose info says
// what failed, not where: the address of the Redis server is in the log
// line only. The info was "redis 127.0.0.1:PORT: dial tcp 127.0.0.1:PORT:
// connect: connection refused".
func TestGuardAnswersNoAddress(t *testing.T) {
	srv := startRedis(t)
	// A client that dials once and does not retry: the round trip fails
	// with the refused dial, not with the deadline its retries outlast.
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, Options{Prefix: "guard"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var logs bytes.Buffer
	loop := newLoops(t, 1)[0]
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Guard:  c.NewLimiter("quote", LimiterOptions{Concurrent: 2, Rate: 100}),
		Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("in") },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}
	srv.kill()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/quote", nil))
	const want = `{"error":"CommError","info":"redis: connection refused"}` + "\n"
	if rec.Code != http.StatusBadGateway || rec.Body.String() != want {
		t.Errorf("answer %d %q, want 502 %q", rec.Code, rec.Body, want)
	}
	if cause := "redis " + srv.addr + ": dial tcp " + srv.addr + ": connect: connection refused"; !strings.Contains(logs.String(), cause) {
		t.Errorf("the log does not have the cause %q:\n%s", cause, logs.String())
	}
}
