package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
)

// With Redis lost, a request the shared limits cannot let in is answered
// 503 DefenseRejected with Retry-After, not a 502 naming Redis; once Redis
// is back, requests are served again without a restart.
func TestQuoteRedisLostIs503(t *testing.T) {
	redisAddr, redisCmd := startRedisServerOn(t, 0)
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	c, closeCluster, err := connectCluster(context.Background(), clusterOptions{Addr: redisAddr, Prefix: t.Name(), TTL: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeCluster)
	cfg := testConfig()
	cfg.Upstream = upSrv.URL
	cfg.Limits.Cluster, cfg.Limits.TTL = c, time.Second
	gw, closeGateway := newGateway("flows", cfg, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(gw.handler)
	t.Cleanup(func() { srv.Close(); closeGateway() })
	g := &testGateway{t: t, url: srv.URL, up: up, gw: gw}
	wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
	redisCmd.Process.Kill()
	redisCmd.Wait()
	wantAnswer(t, g.get("?symbols=AAPL"), 503, "1", errBody("DefenseRejected", redisLostInfo))
	startRedisServerOn(t, redisPort(t, redisAddr))
	deadline := time.Now().Add(10 * time.Second)
	for a := g.get("?symbols=MSFT"); a.status != 200; a = g.get("?symbols=MSFT") {
		if a.status != 503 || time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %+v", a)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := up.count("AAPL"); n != 1 {
		t.Errorf("AAPL asked %d times upstream, want once: the request Redis could not let in is not served", n)
	}
}

func redisPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An instance started with -rate and one without share -concurrent: both
// hold its slots under one name, as during a rolling restart that adds
// -rate. The one without took its slots under a name of its own, and the
// fleet let -concurrent requests in through each kind of instance.
func TestClusterConcurrencySharedWithAndWithoutRate(t *testing.T) {
	redisAddr, _ := startRedisServerOn(t, 0)
	loop := asyncsteps.NewLoop()
	t.Cleanup(func() { loop.Close() })
	instance := func(rate int) asyncsteps.Syncer {
		c, closeCluster, err := connectCluster(context.Background(), clusterOptions{Addr: redisAddr, Prefix: t.Name(), TTL: time.Minute}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeCluster)
		return clusterLimit(c, limitOptions{Concurrent: 1, Rate: rate, Period: time.Hour, TTL: time.Minute})
	}
	for _, rates := range [][2]int{{0, 100}, {100, 0}} {
		holder, other := instance(rates[0]), instance(rates[1])
		release := make(chan struct{})
		held := make(chan struct{})
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Sync(holder, func(as asyncsteps.AsyncSteps, _ ...any) {
			close(held)
			asyncsteps.AwaitChan(as, release)
		})
		holding := r.Promise()
		<-held
		r = asyncsteps.New(asyncsteps.WithTool(loop))
		r.Sync(other, func(asyncsteps.AsyncSteps, ...any) {})
		_, err := r.Run(context.Background())
		var e *asyncsteps.Error
		if !errors.As(err, &e) || e.Code != asyncsteps.DefenseRejected || e.Info != "Mutex queue limit" {
			t.Errorf("-rate %d while -rate %d holds the slot: %v, want DefenseRejected: Mutex queue limit", rates[1], rates[0], err)
		}
		close(release)
		if res := <-holding; res.Err != nil {
			t.Fatal(res.Err)
		}
	}
}

// A lease that the Client cannot give back as the gateway stops (Redis
// lost) is logged at Warn with what Close reports, the Mutex and its
// leases left: other instances wait for their TTL, and the operator must
// learn why. The error was dropped.
func TestClusterCloseLogsTheLeasesLeft(t *testing.T) {
	redisAddr, redisCmd := startRedisServerOn(t, 0)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime}))
	c, closeCluster, err := connectCluster(context.Background(), clusterOptions{Addr: redisAddr, Prefix: t.Name(), TTL: time.Minute}, logger)
	if err != nil {
		t.Fatal(err)
	}
	loop := asyncsteps.NewLoop()
	t.Cleanup(func() { loop.Close() })
	m := c.NewMutex("held", redissync.MutexOptions{Max: 1, TTL: time.Minute})
	inside, release := make(chan struct{}), make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		close(inside)
		asyncsteps.AwaitChan(as, release)
	})
	p := r.Promise()
	<-inside
	redisCmd.Process.Kill()
	redisCmd.Wait()
	closeCluster()
	close(release)
	<-p
	got := logs.String()
	want := `level=WARN msg="leases left in Redis until their TTL runs out" err=`
	if !strings.Contains(got, want) || !strings.Contains(got, "held") || !strings.Contains(got, "ttl=1m0s") {
		t.Errorf("log:\n%s\nwant a line with %q naming the Mutex \"held\" and ttl=1m0s", got, want)
	}
}
