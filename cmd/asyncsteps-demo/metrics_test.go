package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// /metrics gives the latencies in seconds as recorded, in whole
// microseconds, with no float noise (0.262143, not 0.26214299999999996),
// and /stats the same quantiles in milliseconds.
func TestMetricsLatencyHasNoFloatNoise(t *testing.T) {
	st := newStats(func() int64 { return 0 })
	for _, us := range []time.Duration{262143, 262143, 524287} { // tops of their buckets
		st.finish("", http.StatusOK, us*time.Microsecond)
	}
	got := metricsLines(t, st, func(line string) bool {
		return strings.HasPrefix(line, "gateway_request_duration_seconds")
	})
	want := []string{
		"gateway_request_duration_seconds{quantile=\"0.5\"} 0.262143\n",
		"gateway_request_duration_seconds{quantile=\"0.99\"} 0.524287\n",
		"gateway_request_duration_seconds_sum 1.048573\n",
		"gateway_request_duration_seconds_count 3\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
	stats, _ := json.Marshal(st.snapshot().LatencyMs)
	if want := `{"p50":262.143,"p99":524.287}`; string(stats) != want {
		t.Errorf("/stats latency_ms %s, want %s", stats, want)
	}
}

// /metrics names each counter of the gateway, with the help an operator
// reads, true of both gateways: not every request is a flow, and an
// upstream request is cut short by its own timeout as well as by its
// request's end.
func TestMetricsNamesAndHelp(t *testing.T) {
	got := metricsLines(t, newStats(func() int64 { return 0 }), func(line string) bool {
		return strings.HasPrefix(line, "# HELP gateway_") || strings.HasPrefix(line, "# TYPE gateway_")
	})
	want := []string{
		"# HELP gateway_limiter_queue_length Requests waiting to enter the limiter.\n",
		"# TYPE gateway_limiter_queue_length gauge\n",
		"# HELP gateway_request_duration_seconds Latency of the answered quote requests.\n",
		"# TYPE gateway_request_duration_seconds summary\n",
		"# HELP gateway_requests_cancelled_total Quote requests cancelled before their end.\n",
		"# TYPE gateway_requests_cancelled_total counter\n",
		"# HELP gateway_requests_in_flight Quote requests started and not yet ended.\n",
		"# TYPE gateway_requests_in_flight gauge\n",
		"# HELP gateway_requests_started_total Quote requests started.\n",
		"# TYPE gateway_requests_started_total counter\n",
		"# HELP gateway_upstream_cancelled_total Upstream requests cut short: by their attempt's timeout, or by the end of their quote request.\n",
		"# TYPE gateway_upstream_cancelled_total counter\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
}

// metricsLines serves st's /metrics over loopback and returns the lines of
// the answer that keep accepts, each with its newline.
func metricsLines(t *testing.T, st *stats, keep func(line string) bool) []string {
	t.Helper()
	srv := httptest.NewServer(st.metricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(string(body)) {
		if keep(line) {
			got = append(got, line)
		}
	}
	return got
}
