package main

import (
	"math/bits"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
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
	upstreamCancelled atomic.Int64                   // upstream requests cut short: attempt timed out, or request ended
	upstream          [upstreamOutcomes]atomic.Int64 // upstream requests by outcome
	queueLen          func() int64                   // the limiter's waiting requests

	mu       sync.Mutex // guards the maps
	byCode   map[string]int64
	byStatus map[int]int64

	latency  *latencyWindow       // of finished requests, for /stats
	duration prometheus.Histogram // of finished requests, for /metrics
}

// okCode is the outcome code of a request answered without an error.
const okCode = "OK"

func newStats(queueLen func() int64) *stats {
	return &stats{queueLen: queueLen, byCode: map[string]int64{}, byStatus: map[int]int64{},
		latency: newLatencyWindow(time.Now()), duration: newDurationHistogram()}
}

// durationBuckets are the upper bounds, in seconds, of the latency
// histogram of /metrics: from a request answered at once (a 400) to one
// that outlives the default request timeout of a second.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// newDurationHistogram returns the latency histogram of /metrics, which
// a fleet of gateways can add up (the quantiles of /stats, a window of
// one gateway's, cannot be).
func newDurationHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gateway_request_duration_seconds",
		Help:    "Latency of the answered quote requests.",
		Buckets: durationBuckets,
	})
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
	s.latency.record(time.Now(), took)
	s.duration.Observe(took.Seconds())
}

func (s *stats) cancel() { s.cancelled.Add(1) }

// countUpstream counts an upstream request that ended with o.
func (s *stats) countUpstream(o upstreamOutcome) { s.upstream[o].Add(1) }

// statsSnapshot is the JSON of /stats.
type statsSnapshot struct {
	Started           int64            `json:"started"`
	Finished          map[string]int64 `json:"finished"`
	ByStatus          map[string]int64 `json:"by_status"`
	Cancelled         int64            `json:"cancelled"`
	InFlight          int64            `json:"in_flight"`
	LimiterQueue      int64            `json:"limiter_queue"`
	UpstreamCancelled int64            `json:"upstream_cancelled"`
	Upstream          map[string]int64 `json:"upstream"`
	LatencyMs         latencySummary   `json:"latency_ms"`
}

// latencySummary gives the quantiles in milliseconds, from whole
// microseconds as recorded: one division, exact to the last digit shown.
type latencySummary struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func newLatencySummary(p50Us, p99Us uint64) latencySummary {
	return latencySummary{P50: float64(p50Us) / 1e3, P99: float64(p99Us) / 1e3}
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
	snap.Upstream = make(map[string]int64, upstreamOutcomes)
	for o, name := range upstreamOutcomeNames {
		snap.Upstream[name] = s.upstream[o].Load()
	}
	p50, p99 := s.latency.quantiles(time.Now(), 0.50, 0.99)
	snap.LatencyMs = newLatencySummary(p50, p99)
	return snap
}

// metricsHandler serves the counters in the Prometheus text format, with
// the Go runtime's own metrics (go_*) and the process's (process_*: CPU,
// memory, open file descriptors).
func (s *stats) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), statsCollector{s}, s.duration)
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
	descUpstreams = prometheus.NewDesc("gateway_upstream_requests_total", "Upstream requests (attempts) ended, by outcome.", []string{"outcome"}, nil)
)

// statsCollector exposes a stats to Prometheus: the values are read when
// scraped, so /metrics and /stats always agree.
type statsCollector struct{ s *stats }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStarted, descFinished, descAnswered, descCancelled, descInFlight, descQueue, descUpstream, descUpstreams} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.snapshot()
	ch <- prometheus.MustNewConstMetric(descStarted, prometheus.CounterValue, float64(snap.Started))
	for code, n := range withKnown(snap.Finished, knownCodes) {
		ch <- prometheus.MustNewConstMetric(descFinished, prometheus.CounterValue, float64(n), code)
	}
	for status, n := range withKnown(snap.ByStatus, knownStatuses) {
		ch <- prometheus.MustNewConstMetric(descAnswered, prometheus.CounterValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(descCancelled, prometheus.CounterValue, float64(snap.Cancelled))
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(snap.InFlight))
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(snap.LimiterQueue))
	ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(snap.UpstreamCancelled))
	for outcome, n := range snap.Upstream {
		ch <- prometheus.MustNewConstMetric(descUpstreams, prometheus.CounterValue, float64(n), outcome)
	}
}

// The outcome codes and statuses a gateway answers /quote with, which
// /metrics gives from the start, at 0 until counted: a series that
// appears only with its first count hides that first increase from
// rate() and increase(), and an alert on it has nothing to read before.
var (
	knownCodes = []string{okCode, asyncsteps.InvalidRequest, methodNotAllowed, asyncsteps.CommError,
		asyncsteps.ConnectError, asyncsteps.DefenseRejected, asyncsteps.Timeout, asyncsteps.InternalError}
	knownStatuses = []string{"200", "400", "405", "500", "502", "503", "504"}
)

// withKnown returns counts with a 0 for each of known it lacks.
func withKnown(counts map[string]int64, known []string) map[string]int64 {
	for _, k := range known {
		if _, ok := counts[k]; !ok {
			counts[k] = 0
		}
	}
	return counts
}

// latencyWindow keeps the latencies of the requests answered in the last
// windowSeconds seconds, for their quantiles: a quantile of the whole
// lifetime would never forget a slow hour. It is a ring of histograms,
// one per second since start (monotonic, so a step of the wall clock does
// not blank the window), each reused windowSeconds later; recording takes
// no lock but to clear a histogram for its new second, once a second.
type latencyWindow struct {
	start time.Time
	mu    sync.Mutex // clears a histogram for reuse
	ring  [windowSeconds]secondHistogram
}

// windowSeconds is the span of the latency quantiles, in seconds.
const windowSeconds = 60

// secondHistogram counts the durations recorded during one second, in
// buckets of 1/8 of a power of two of microseconds, so a quantile is
// known within 12.5% at any scale.
type secondHistogram struct {
	second  atomic.Int64 // since the window's start; a new histogram's is 0
	buckets [histogramBuckets]atomic.Uint64
}

const histogramBuckets = 8 * 40

func newLatencyWindow(start time.Time) *latencyWindow { return &latencyWindow{start: start} }

// secondOf returns the second since the window's start that now falls in.
func (w *latencyWindow) secondOf(now time.Time) int64 {
	return int64(max(now.Sub(w.start), 0) / time.Second)
}

// record records a request answered at now that took d.
func (w *latencyWindow) record(now time.Time, d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	sec := w.secondOf(now)
	h := &w.ring[sec%windowSeconds]
	if h.second.Load() != sec {
		w.reuse(h, sec)
	}
	h.buckets[min(bucketOf(us), histogramBuckets-1)].Add(1)
}

// reuse clears h, last used windowSeconds ago or more, for the second
// sec. Its new second is set once it is clear, so that a concurrent
// record that sees it counts in a clear histogram.
func (w *latencyWindow) reuse(h *secondHistogram, sec int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.second.Load() >= sec {
		return // reused already by a concurrent record (or now was late)
	}
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.second.Store(sec)
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

// quantiles returns the qa and qb quantiles, in microseconds (the top of
// their bucket), of the durations recorded in the windowSeconds seconds up
// to now; 0 with no sample.
func (w *latencyWindow) quantiles(now time.Time, qa, qb float64) (a, b uint64) {
	var merged [histogramBuckets]uint64
	var n uint64
	sec := w.secondOf(now)
	for i := range w.ring {
		h := &w.ring[i]
		if s := h.second.Load(); s > sec-windowSeconds && s <= sec {
			for j := range h.buckets {
				c := h.buckets[j].Load()
				merged[j] += c
				n += c
			}
		}
	}
	return quantile(&merged, n, qa), quantile(&merged, n, qb)
}

// quantile returns the q quantile of the n durations counts holds, in
// microseconds (the top of its bucket); 0 with no sample.
func quantile(counts *[histogramBuckets]uint64, n uint64, q float64) uint64 {
	if n == 0 {
		return 0
	}
	rank := max(uint64(q*float64(n)+0.5), 1)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return bucketTop(i)
		}
	}
	return bucketTop(histogramBuckets - 1)
}
