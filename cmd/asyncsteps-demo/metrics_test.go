package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// /stats gives the latency quantiles in milliseconds as recorded, in
// whole microseconds, with no float noise (262.143, not
// 262.14299999999997); /metrics gives every latency in a histogram whose
// buckets a fleet of gateways can add up.
func TestLatencyInStatsAndMetrics(t *testing.T) {
	st := newStats(func() int64 { return 0 })
	for _, us := range []time.Duration{262143, 262143, 524287, 800, 3_000_000} {
		st.finish("", http.StatusOK, us*time.Microsecond)
	}
	got := metricsLines(t, st, func(line string) bool {
		return strings.HasPrefix(line, "gateway_request_duration_seconds")
	})
	want := []string{
		"gateway_request_duration_seconds_bucket{le=\"0.001\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.0025\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.005\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.01\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.025\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.05\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.1\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.25\"} 1\n",
		"gateway_request_duration_seconds_bucket{le=\"0.5\"} 3\n",
		"gateway_request_duration_seconds_bucket{le=\"1\"} 4\n",
		"gateway_request_duration_seconds_bucket{le=\"2.5\"} 4\n",
		"gateway_request_duration_seconds_bucket{le=\"5\"} 5\n",
		"gateway_request_duration_seconds_bucket{le=\"+Inf\"} 5\n",
		"gateway_request_duration_seconds_sum 4.049373\n",
		"gateway_request_duration_seconds_count 5\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
	stats, _ := json.Marshal(st.snapshot().LatencyMs)
	if want := `{"p50":262.143,"p99":3145.727}`; string(stats) != want {
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
		"# TYPE gateway_request_duration_seconds histogram\n",
		"# HELP gateway_requests_answered_total Quote requests answered, by HTTP status.\n",
		"# TYPE gateway_requests_answered_total counter\n",
		"# HELP gateway_requests_cancelled_total Quote requests cancelled before their end.\n",
		"# TYPE gateway_requests_cancelled_total counter\n",
		"# HELP gateway_requests_finished_total Quote requests answered, by outcome code.\n",
		"# TYPE gateway_requests_finished_total counter\n",
		"# HELP gateway_requests_in_flight Quote requests started and not yet ended.\n",
		"# TYPE gateway_requests_in_flight gauge\n",
		"# HELP gateway_requests_started_total Quote requests started.\n",
		"# TYPE gateway_requests_started_total counter\n",
		"# HELP gateway_upstream_cancelled_total Upstream requests cut short: by their attempt's timeout, or by the end of their quote request.\n",
		"# TYPE gateway_upstream_cancelled_total counter\n",
		"# HELP gateway_upstream_requests_total Upstream requests (attempts) ended, by outcome.\n",
		"# TYPE gateway_upstream_requests_total counter\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
}

// The series of the outcome codes and statuses a gateway answers exist
// from the start, at 0, beside those counted; and /metrics has the Go
// runtime's and the process's own metrics.
func TestMetricsSeriesExistFromStart(t *testing.T) {
	st := newStats(func() int64 { return 0 })
	st.finish("", http.StatusOK, time.Millisecond)
	st.finish("SomeOtherCode", http.StatusTeapot, time.Millisecond)
	got := metricsLines(t, st, func(line string) bool {
		return strings.HasPrefix(line, "gateway_requests_finished_total") || strings.HasPrefix(line, "gateway_requests_answered_total")
	})
	want := []string{
		`gateway_requests_answered_total{status="200"} 1` + "\n",
		`gateway_requests_answered_total{status="400"} 0` + "\n",
		`gateway_requests_answered_total{status="405"} 0` + "\n",
		`gateway_requests_answered_total{status="418"} 1` + "\n",
		`gateway_requests_answered_total{status="500"} 0` + "\n",
		`gateway_requests_answered_total{status="502"} 0` + "\n",
		`gateway_requests_answered_total{status="503"} 0` + "\n",
		`gateway_requests_answered_total{status="504"} 0` + "\n",
		`gateway_requests_finished_total{code="CommError"} 0` + "\n",
		`gateway_requests_finished_total{code="ConnectError"} 0` + "\n",
		`gateway_requests_finished_total{code="DefenseRejected"} 0` + "\n",
		`gateway_requests_finished_total{code="InternalError"} 0` + "\n",
		`gateway_requests_finished_total{code="InvalidRequest"} 0` + "\n",
		`gateway_requests_finished_total{code="MethodNotAllowed"} 0` + "\n",
		`gateway_requests_finished_total{code="OK"} 1` + "\n",
		`gateway_requests_finished_total{code="SomeOtherCode"} 1` + "\n",
		`gateway_requests_finished_total{code="Timeout"} 0` + "\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if lines := metricsLines(t, st, func(line string) bool { return strings.HasPrefix(line, name+" ") }); len(lines) != 1 {
			t.Errorf("/metrics has %d lines of %s, want 1", len(lines), name)
		}
	}
	if snap := st.snapshot(); len(snap.Finished) != 2 || len(snap.ByStatus) != 2 {
		t.Errorf("/stats finished %v, by status %v: want only what was counted", snap.Finished, snap.ByStatus)
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

// The latency quantiles of /stats and /metrics are those of the requests
// answered in the last 60 seconds: a slow minute is forgotten a minute
// later. The histogram of /metrics counts every request.
func TestLatencyQuantilesCoverTheLastMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStats(func() int64 { return 0 })
		check := func(when string, p50, p99 float64) {
			t.Helper()
			if got := st.snapshot().LatencyMs; got.P50 != p50 || got.P99 != p99 {
				t.Errorf("%s: p50 %v, p99 %v; want %v, %v", when, got.P50, got.P99, p50, p99)
			}
		}
		record := func(n int, us time.Duration) {
			for range n {
				st.finish("", http.StatusOK, us*time.Microsecond)
			}
		}
		check("no request", 0, 0)
		record(10, 524287) // slow: 524.287 ms, the top of its bucket
		time.Sleep(30 * time.Second)
		record(30, 1023) // fast: 1.023 ms
		check("at 30 s", 1.023, 524.287)
		time.Sleep(29*time.Second + 999*time.Millisecond)
		check("at 59.999 s", 1.023, 524.287)
		time.Sleep(time.Millisecond)
		check("at 60 s, the slow ones gone", 1.023, 1.023)
		time.Sleep(30 * time.Second)
		check("at 90 s, all gone", 0, 0)
		record(1, 15)
		check("at 90 s, a new one", 0.015, 0.015)
		reg := prometheus.NewRegistry() // gathered without a server: no I/O in the bubble
		reg.MustRegister(st.duration)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if n := mfs[0].GetMetric()[0].GetHistogram().GetSampleCount(); n != 41 {
			t.Errorf("the histogram counted %d requests, want every request: 41", n)
		}
	})
}

// A histogram of the ring is cleared for its new second once, by the first
// request of that second, while others record in it: none is lost.
func TestLatencyWindowRecordsConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLatencyWindow(time.Now())
		time.Sleep(59 * time.Second)
		w.record(time.Now(), time.Millisecond) // in the histogram reused at 119 s
		time.Sleep(60 * time.Second)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					w.record(time.Now(), 2*time.Millisecond)
				}
			})
		}
		wg.Wait()
		if p50, p99 := w.quantiles(time.Now(), 0.5, 0.99); p50 != 2047 || p99 != 2047 {
			t.Errorf("p50 %d us, p99 %d us; want 2047, 2047 (the 1 ms of 59 s gone)", p50, p99)
		}
		var n uint64
		for i := range w.ring[119%windowSeconds].buckets {
			n += w.ring[119%windowSeconds].buckets[i].Load()
		}
		if n != 800 {
			t.Errorf("%d requests counted in second 119, want 800", n)
		}
	})
}
