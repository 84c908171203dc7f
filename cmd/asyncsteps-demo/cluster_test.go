package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// With Redis lost, a request the shared limits cannot let in is answered
// 503 DefenseRejected with Retry-After, not a 502 naming Redis; once Redis
// is back, requests are served again without a restart.
func TestQuoteRedisLostIs503(t *testing.T) {
	redisAddr, redisCmd := startRedisServerOn(t, 0)
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	c, closeCluster, err := connectCluster(context.Background(), clusterOptions{Addr: redisAddr, Prefix: t.Name(), TTL: time.Second})
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
