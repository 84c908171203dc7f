package main

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Each upstream request is counted once, by its outcome, alike in both
// gateways: a request of each kind adds exactly these counts to /stats
// (and so to /metrics, which reads the same counters).
func TestUpstreamRequestsCountedByOutcome(t *testing.T) {
	cfg := testConfig()
	cfg.Retries = 1                             // each retried failure is 2 attempts
	cfg.AttemptTimeout = 300 * time.Millisecond // only HOLD runs out of it: the others answer at once
	p := newGatewayPair(t, cfg)
	refused := refusingGatewayPair(t, cfg)
	cases := []struct {
		name, query string
		pair        *gatewayPair
		status      int
		want        map[string]int64
	}{
		{"a price", "AAPL,MSFT", p, 200, map[string]int64{"ok": 2}},
		{"an unknown symbol", symbol404, p, 400, map[string]int64{"not_found": 1}},
		{"a 5xx retried", symbol500, p, 502, map[string]int64{"server_error": 2}},
		{"a 5xx, then a price after the retries", symbolFlaky, p, 502, map[string]int64{"server_error": 2}},
		{"a body that is not JSON", symbolJunk, p, 502, map[string]int64{"bad_answer": 1}},
		{"another symbol's price", symbolOther, p, 502, map[string]int64{"bad_answer": 1}},
		{"a body over 1 MiB, retried", symbolHuge, p, 502, map[string]int64{"bad_answer": 2}},
		{"a status outside the contract", symbolUpgr, p, 502, map[string]int64{"bad_answer": 1}},
		{"a body cut short, retried", symbolCut, p, 502, map[string]int64{"connect_error": 2}},
		{"a connection refused, retried", "AAPL", refused, 502, map[string]int64{"connect_error": 2}},
		{"no answer within the attempt's timeout", symbolHold, p, 504, map[string]int64{"timeout": 2}},
		// LATE answers 404 once HOLD is asked: HOLD's request is in flight
		// when the request fails, which cancels it.
		{"a symbol cancelled by another's failure", symbolHold + "," + symbolLate, p, 400, map[string]int64{"not_found": 1, "cancelled": 1}},
	}
	for _, impl := range impls {
		for _, c := range cases {
			before := settledStats(t, c.pair.urls[impl]).Upstream
			c.pair.up.reset()
			resp, err := http.Get(c.pair.urls[impl] + "/quote?symbols=" + c.query)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("%s, %s: %d, want %d", impl, c.name, resp.StatusCode, c.status)
			}
			if got := upstreamCountsMoved(t, c.pair.urls[impl], before, c.want); !maps.Equal(got, c.want) {
				t.Errorf("%s, %s: upstream requests %v, want %v", impl, c.name, got, c.want)
			}
		}
	}
}

// refusingGatewayPair is a pair of gateways whose upstream refuses
// connections: a port listened on once, then closed.
func refusingGatewayPair(t *testing.T, cfg config) *gatewayPair {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream = "http://" + ln.Addr().String()
	ln.Close()
	return newGatewayPair(t, cfg)
}

// upstreamCountsMoved returns what the upstream counts of the gateway at
// url added since before, once they are want or a few seconds have
// passed: the flows gateway counts an upstream request cancelled when its
// call returns, which may be just after the answer.
func upstreamCountsMoved(t *testing.T, url string, before, want map[string]int64) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := settledStats(t, url).Upstream
		if len(after) != len(upstreamOutcomeNames) {
			t.Fatalf("/stats upstream %v: want every outcome, %v", after, upstreamOutcomeNames)
		}
		moved := map[string]int64{}
		for k, n := range after {
			if n != before[k] {
				moved[k] = n - before[k]
			}
		}
		if maps.Equal(moved, want) || time.Now().After(deadline) {
			return moved
		}
		time.Sleep(time.Millisecond)
	}
}

// Every outcome's series is on /metrics from the start, at 0, as in
// /stats, whatever the upstream answers: the set is bounded.
func TestUpstreamOutcomeSeriesExistFromStart(t *testing.T) {
	st := newStats(func() int64 { return 0 })
	st.countUpstream(upstreamOK)
	st.countUpstream(upstreamOK)
	st.countUpstream(statusOutcome(http.StatusTeapot))
	got := metricsLines(t, st, func(line string) bool { return strings.HasPrefix(line, "gateway_upstream_requests_total") })
	want := []string{
		`gateway_upstream_requests_total{outcome="bad_answer"} 1`,
		`gateway_upstream_requests_total{outcome="cancelled"} 0`,
		`gateway_upstream_requests_total{outcome="connect_error"} 0`,
		`gateway_upstream_requests_total{outcome="not_found"} 0`,
		`gateway_upstream_requests_total{outcome="ok"} 2`,
		`gateway_upstream_requests_total{outcome="server_error"} 0`,
		`gateway_upstream_requests_total{outcome="timeout"} 0`,
	}
	if strings.Join(got, "") != strings.Join(want, "\n")+"\n" {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, "\n"))
	}
	if got, want := fmt.Sprint(st.snapshot().Upstream), "map[bad_answer:1 cancelled:0 connect_error:0 not_found:0 ok:2 server_error:0 timeout:0]"; got != want {
		t.Errorf("/stats upstream %s, want %s", got, want)
	}
}
