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
	srv := httptest.NewServer(st.metricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "gateway_request_duration_seconds") {
			got = append(got, line)
		}
	}
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
