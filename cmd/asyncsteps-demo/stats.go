package main

import (
	"math/bits"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// stats counts the /quote requests of a gateway: every request started is
// later either finished, with an outcome code and a status, or cancelled
// (its client went away, or the server shut down before it ended). It is
// safe for concurrent use.
type stats struct {
	started           atomic.Int64
	cancelled         atomic.Int64
	upstreamCancelled atomic.Int64 // upstream requests cut short: attempt timed out, or request ended
	queueLen          func() int64 // the limiter's waiting requests

	mu       sync.Mutex // guards the maps
	byCode   map[string]int64
	byStatus map[int]int64

	latency latencyHistogram // of finished requests
}

// okCode is the outcome code of a request answered without an error.
const okCode = "OK"

func newStats(queueLen func() int64) *stats {
	return &stats{queueLen: queueLen, byCode: map[string]int64{}, byStatus: map[int]int64{}}
}

func (s *stats) start() { s.started.Add(1) }

// finish counts a request answered with status; code is "" on success.
func (s *stats) finish(code string, status int, took time.Duration) {
	if code == "" {
		code = okCode
	}
	s.mu.Lock()
	s.byCode[code]++
	s.byStatus[status]++
	s.mu.Unlock()
	s.latency.record(took)
}

func (s *stats) cancel() { s.cancelled.Add(1) }

// statsSnapshot is the JSON of /stats.
type statsSnapshot struct {
	Started           int64            `json:"started"`
	Finished          map[string]int64 `json:"finished"`
	ByStatus          map[string]int64 `json:"by_status"`
	Cancelled         int64            `json:"cancelled"`
	InFlight          int64            `json:"in_flight"`
	LimiterQueue      int64            `json:"limiter_queue"`
	UpstreamCancelled int64            `json:"upstream_cancelled"`
	LatencyMs         latencySummary   `json:"latency_ms"`
}

// latencySummary gives the quantiles in milliseconds, and keeps them in
// whole microseconds, as recorded, for /metrics to give them in seconds:
// each unit is then one division of the integer, exact to the last digit
// shown (dividing milliseconds by 1000 again showed 0.26214299999999996).
type latencySummary struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`

	p50Us, p99Us uint64
}

func newLatencySummary(p50Us, p99Us uint64) latencySummary {
	return latencySummary{P50: float64(p50Us) / 1e3, P99: float64(p99Us) / 1e3, p50Us: p50Us, p99Us: p99Us}
}

func (s *stats) snapshot() statsSnapshot {
	// Read the outcomes before started: a request counted in them was
	// started before, so in flight is never negative.
	s.mu.Lock()
	snap := statsSnapshot{Finished: make(map[string]int64, len(s.byCode)), ByStatus: make(map[string]int64, len(s.byStatus))}
	var finished int64
	for code, n := range s.byCode {
		snap.Finished[code] = n
		finished += n
	}
	for status, n := range s.byStatus {
		snap.ByStatus[strconv.Itoa(status)] = n
	}
	s.mu.Unlock()
	snap.Cancelled = s.cancelled.Load()
	snap.Started = s.started.Load()
	snap.InFlight = snap.Started - finished - snap.Cancelled
	snap.LimiterQueue = s.queueLen()
	snap.UpstreamCancelled = s.upstreamCancelled.Load()
	snap.LatencyMs = newLatencySummary(s.latency.quantile(0.50), s.latency.quantile(0.99))
	return snap
}

// metricsHandler serves the counters in the Prometheus text format, with
// the Go runtime's own metrics.
func (s *stats) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), statsCollector{s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	descStarted   = prometheus.NewDesc("gateway_requests_started_total", "Quote requests started.", nil, nil)
	descFinished  = prometheus.NewDesc("gateway_requests_finished_total", "Quote requests answered, by outcome code.", []string{"code"}, nil)
	descAnswered  = prometheus.NewDesc("gateway_requests_answered_total", "Quote requests answered, by HTTP status.", []string{"status"}, nil)
	descCancelled = prometheus.NewDesc("gateway_requests_cancelled_total", "Quote requests cancelled before their end.", nil, nil)
	descInFlight  = prometheus.NewDesc("gateway_requests_in_flight", "Quote requests started and not yet ended.", nil, nil)
	descQueue     = prometheus.NewDesc("gateway_limiter_queue_length", "Requests waiting to enter the limiter.", nil, nil)
	descUpstream  = prometheus.NewDesc("gateway_upstream_cancelled_total", "Upstream requests cut short: by their attempt's timeout, or by the end of their quote request.", nil, nil)
	descLatency   = prometheus.NewDesc("gateway_request_duration_seconds", "Latency of the answered quote requests.", nil, nil)
)

// statsCollector exposes a stats to Prometheus: the values are read when
// scraped, so /metrics and /stats always agree.
type statsCollector struct{ s *stats }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStarted, descFinished, descAnswered, descCancelled, descInFlight, descQueue, descUpstream, descLatency} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.snapshot()
	ch <- prometheus.MustNewConstMetric(descStarted, prometheus.CounterValue, float64(snap.Started))
	for code, n := range snap.Finished {
		ch <- prometheus.MustNewConstMetric(descFinished, prometheus.CounterValue, float64(n), code)
	}
	for status, n := range snap.ByStatus {
		ch <- prometheus.MustNewConstMetric(descAnswered, prometheus.CounterValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(descCancelled, prometheus.CounterValue, float64(snap.Cancelled))
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(snap.InFlight))
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(snap.LimiterQueue))
	ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(snap.UpstreamCancelled))
	count, sumUs := c.s.latency.totals()
	ch <- prometheus.MustNewConstSummary(descLatency, count, seconds(sumUs), map[float64]float64{
		0.5: seconds(snap.LatencyMs.p50Us), 0.99: seconds(snap.LatencyMs.p99Us),
	})
}

// latencyHistogram counts durations in buckets of 1/8 of a power of two
// of microseconds, so a quantile is known within 12.5% at any scale, with
// no lock and no allocation per record.
type latencyHistogram struct {
	buckets [8 * 40]atomic.Uint64
	count   atomic.Uint64
	sumUs   atomic.Uint64
}

func (h *latencyHistogram) record(d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	h.buckets[min(bucketOf(us), len(h.buckets)-1)].Add(1)
	h.count.Add(1)
	h.sumUs.Add(us)
}

// bucketOf returns the bucket of us: us itself below 16, else 8 per
// doubling, by the 4 leading bits.
func bucketOf(us uint64) int {
	n := bits.Len64(us)
	if n <= 4 {
		return int(us)
	}
	shift := n - 4
	return 8*shift + int(us>>shift)
}

// bucketTop returns the largest value of bucket i, in microseconds.
func bucketTop(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	shift := i/8 - 1
	lead := uint64(i - 8*shift)
	return (lead+1)<<shift - 1
}

// seconds returns us microseconds in seconds, the float nearest to them
// (one division of exact values).
func seconds(us uint64) float64 { return float64(us) / 1e6 }

// quantile returns the q quantile in microseconds (the top of its bucket),
// 0 with no sample.
func (h *latencyHistogram) quantile(q float64) uint64 {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			return bucketTop(i)
		}
	}
	return bucketTop(len(h.buckets) - 1)
}

// totals returns the count of durations recorded and their sum in
// microseconds.
func (h *latencyHistogram) totals() (count, sumUs uint64) {
	return h.count.Load(), h.sumUs.Load()
}
