package main

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The upstream contract, which -upstream URL must follow (README):
//
//	GET /price?symbol=SYM
//	200 {"symbol": "SYM", "price": 123.45}   a known symbol
//	404                                      an unknown symbol
//	5xx                                      a failure: the gateway retries
//
// Any latency is allowed; the gateway bounds each attempt with a timeout.

// knownSymbols are the symbols the embedded upstream quotes.
var knownSymbols = []string{
	"AAPL", "ADBE", "AMD", "AMZN", "CRM", "CSCO", "GOOG", "IBM",
	"INTC", "META", "MSFT", "NFLX", "NVDA", "ORCL", "QCOM", "TSLA",
}

// quote is one symbol's price, as the upstream and the gateway give it.
type quote struct {
	Symbol string  `json:"symbol"`
	Price  float64 `json:"price"`
}

// priceOf is a known symbol's price: fixed, so that answers repeat.
func priceOf(symbol string) float64 {
	h := fnv.New32a()
	h.Write([]byte(symbol))
	return float64(1000+h.Sum32()%99000) / 100
}

// upstreamOptions configures the embedded upstream.
type upstreamOptions struct {
	Latency  time.Duration // each answer takes a random time in [Latency/2, 3*Latency/2)
	FailRate float64       // the share of requests answered 500
	Seed     uint64        // seeds the random latency and failures
}

// upstream is the embedded price service: random latency and failures,
// seeded so that a run repeats. It is safe for concurrent use.
type upstream struct {
	opts upstreamOptions

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand

	requests  atomic.Int64 // requests received
	cancelled atomic.Int64 // requests cancelled before the answer: their client went away, or the server shut down

	// The fleet test reads these on /counters: /price requests received,
	// being served, and the most served at once.
	prices, inFlight, peakInFlight atomic.Int64
}

// upstreamCounters is the JSON of the embedded upstream's /counters.
type upstreamCounters struct {
	Prices       int64 `json:"prices"`
	InFlight     int64 `json:"in_flight"`
	PeakInFlight int64 `json:"peak_in_flight"`
}

// serveCounters answers /counters.
func (u *upstream) serveCounters(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(upstreamCounters{ //nolint:errcheck // the client may be gone
		Prices: u.prices.Load(), InFlight: u.inFlight.Load(), PeakInFlight: u.peakInFlight.Load(),
	})
}

// enter counts a /price request being served; the function returned
// counts its end.
func (u *upstream) enter() func() {
	u.prices.Add(1)
	n := u.inFlight.Add(1)
	for peak := u.peakInFlight.Load(); n > peak && !u.peakInFlight.CompareAndSwap(peak, n); peak = u.peakInFlight.Load() {
	}
	return func() { u.inFlight.Add(-1) }
}

func newUpstream(opts upstreamOptions) *upstream {
	return &upstream{opts: opts, rnd: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
}

// draw returns this request's latency and whether it fails.
func (u *upstream) draw() (time.Duration, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var d time.Duration
	if u.opts.Latency > 0 {
		d = u.opts.Latency/2 + time.Duration(u.rnd.Int64N(int64(u.opts.Latency)))
	}
	return d, u.rnd.Float64() < u.opts.FailRate
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/counters" {
		u.serveCounters(w)
		return
	}
	u.requests.Add(1)
	if req.URL.Path != "/price" {
		http.NotFound(w, req)
		return
	}
	defer u.enter()()
	symbol := req.URL.Query().Get("symbol")
	latency, fail := u.draw()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			u.cancelled.Add(1)
			// Cancelled by a shutdown whose grace is over (a client gone
			// reads nothing): a 5xx, which the gateway retries. A handler
			// that writes nothing is answered 200 with no body by
			// net/http, which the gateway takes for a broken answer, not
			// retried (502).
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
	}
	switch {
	case fail:
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case !slices.Contains(knownSymbols, symbol):
		http.Error(w, "unknown symbol", http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(quote{Symbol: symbol, Price: priceOf(symbol)}) //nolint:errcheck // the client may be gone
	}
}
