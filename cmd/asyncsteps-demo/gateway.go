package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// config is what both gateways are built from; the flags fill it.
type config struct {
	Upstream       string        // base URL of the price service
	Timeout        time.Duration // bounds a whole request: past it, 504
	AttemptTimeout time.Duration // bounds one upstream request
	Retries        int           // upstream requests retried after the first
	RetryBackoff   time.Duration // the longest wait before the first retry; doubles at each
	MaxSymbols     int           // symbols per request
	Limits         limitOptions
	RetryAfter     time.Duration // what a 503 asks the client to wait
	Loops          int           // event loops; 0: one per core
	Debug          bool          // serve /debug/memory, for the load test and the benchmark

	// writeMargin is how long past Timeout an answer has to be written
	// (see boundWrites): the constant writeMargin; tests shorten it.
	writeMargin time.Duration

	// decode reads an upstream answer; tests replace it (a panicking one
	// stands for a bug in a step).
	decode func(body []byte) (quote, error)

	// jitter returns a random wait from 0 to ceiling, both included:
	// rand.N's; tests make it return ceiling.
	jitter func(ceiling time.Duration) time.Duration

	// tracer traces the requests (-otlp-endpoint); nil: no tracing, and
	// no tracing code in the requests' way.
	tracer trace.TracerProvider
}

func defaultConfig() config {
	return config{
		Timeout:        time.Second,
		AttemptTimeout: 250 * time.Millisecond,
		Retries:        3,
		RetryBackoff:   25 * time.Millisecond,
		MaxSymbols:     10,
		Limits:         limitOptions{Concurrent: 64, Queue: 128},
		RetryAfter:     time.Second,
		writeMargin:    writeMargin,
	}
}

// backoff returns the wait before retry n (1 before the second attempt):
// random ("full jitter"), from 0 to RetryBackoff doubled n-1 times, so
// that the requests retrying a failing upstream together spread their
// retries instead of coming back at once. 0 without RetryBackoff. The
// request's timeout ends a wait as it ends an attempt.
func (cfg *config) backoff(n int) time.Duration {
	if cfg.RetryBackoff <= 0 || n < 1 {
		return 0
	}
	ceiling := cfg.RetryBackoff << min(n-1, maxBackoffDoublings)
	if cfg.jitter != nil {
		return cfg.jitter(ceiling)
	}
	return rand.N(ceiling + 1)
}

// maxBackoffDoublings bounds the ceiling of a retry's wait: -retry-backoff
// (at most maxRetryBackoff) doubled this many times cannot overflow.
const maxBackoffDoublings = 10

// writeMargin is how long past the request timeout the gateway gives its
// answer to be written before it drops the connection (see boundWrites).
// A request answers by its timeout, 504 at the latest, and a client that
// reads takes an answer of a few KiB from the socket in far less; the
// margin leaves room for a gateway slowed down by its load.
const writeMargin = 2 * time.Second

// writeTimeout is how long from its arrival a request's answer has to be
// written: cfg.Timeout and cfg.writeMargin, at most the longest Duration
// (-timeout has no bound).
func (cfg config) writeTimeout() time.Duration {
	if cfg.Timeout > math.MaxInt64-cfg.writeMargin {
		return math.MaxInt64
	}
	return cfg.Timeout + cfg.writeMargin
}

func decodeQuote(body []byte) (quote, error) {
	var q quote
	err := json.Unmarshal(body, &q)
	return q, err
}

// The gateway's own error codes.
const (
	methodNotAllowed = "MethodNotAllowed" // 405, with allowedMethods in Allow
	notFound         = "NotFound"         // 404: a path the gateway does not serve
	shuttingDown     = "ShuttingDown"     // 503 of /readyz: the shutdown has begun
)

// errorCodes maps the gateway's own codes to statuses, for both gateways.
var errorCodes = map[string]int{
	methodNotAllowed: http.StatusMethodNotAllowed,
	notFound:         http.StatusNotFound,
	shuttingDown:     http.StatusServiceUnavailable,
}

// allowedMethods are the methods of every route of the gateway (the Allow
// header of its 405s): GET, and HEAD, which RFC 9110 expects wherever GET
// is served, answered as GET is without the body.
const allowedMethods = "GET, HEAD"

func allowed(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// notAllowed is the error that answers a request with method, clipped: a
// method is the client's text, of up to a megabyte (net/http's bound on a
// request line), which the answer need not echo whole.
func notAllowed(method string) *asyncsteps.Error {
	return &asyncsteps.Error{Code: methodNotAllowed, Info: "method " + clip(method) + " not allowed, use GET or HEAD"}
}

// quoteReply is the answer to /quote: one entry per symbol, in the order
// asked.
type quoteReply struct {
	Quotes []quote `json:"quotes"`
}

// parseQuote checks a /quote request and returns its symbols, without
// duplicates, or the error that answers it. The symbols are the
// comma-separated entries of every symbols parameter, in order (symbols=A&
// symbols=B is symbols=A,B); an empty entry is skipped as a repeated one
// is, wherever it is (symbols=, symbols=A,,B, symbols=A&symbols=), and a
// request left with none has no symbols. The list is read up to the first
// symbol past maxSymbols only: a URL of a megabyte lists thousands of
// distinct symbols, whose duplicate check, quadratic, would cost seconds
// of CPU per request. A query longer than maxQueryBytes is refused
// unread.
func parseQuote(req *http.Request, maxSymbols int) ([]string, *asyncsteps.Error) {
	if !allowed(req.Method) {
		return nil, notAllowed(req.Method)
	}
	if len(req.URL.RawQuery) > maxQueryBytes {
		return nil, invalid("query too long: more than %d bytes", maxQueryBytes)
	}
	query, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		return nil, invalid("malformed query: %v", err)
	}
	var symbols []string
	for _, list := range query["symbols"] {
		for s := range strings.SplitSeq(list, ",") {
			if s == "" {
				continue
			}
			if !isSymbol(s) {
				return nil, invalid("malformed symbol %q: 1 to 5 capital letters", clip(s))
			}
			if contains(symbols, s) {
				continue
			}
			if len(symbols) == maxSymbols {
				return nil, invalid("too many symbols: more than %d", maxSymbols)
			}
			symbols = append(symbols, s)
		}
	}
	if len(symbols) == 0 {
		return nil, invalid("no symbols: use /quote?symbols=AAPL,MSFT")
	}
	return symbols, nil
}

// maxQueryBytes bounds the query parseQuote reads: -max-symbols (at
// most 100) symbols of 5 letters, each percent-encoded, with their
// commas, take about 1,800 bytes. net/http reads a request line of up to
// a megabyte, whose query takes milliseconds to parse (3 ms for 9,000
// parameters), on the flow's loop in the flows gateway, where every other
// flow of that loop waits meanwhile; 8 KiB take about 0.1 ms.
const maxQueryBytes = 8 << 10

// clip returns s, or its first bytes and "..." when it is longer than a
// symbol can be by far: a 400 does not echo a megabyte of query back.
func clip(s string) string { return clipTo(s, 16) }

// clipTo returns s, or its first keep bytes and "..." when it is longer,
// less those of a UTF-8 character the cut would split (at most 3 bytes:
// text that is not UTF-8 is cut at keep).
func clipTo(s string, keep int) string {
	if len(s) <= keep {
		return s
	}
	cut := keep
	for cut > keep-(utf8.UTFMax-1) && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = keep
	}
	return s[:cut] + "..."
}

func invalid(format string, args ...any) *asyncsteps.Error {
	return &asyncsteps.Error{Code: asyncsteps.InvalidRequest, Info: fmt.Sprintf(format, args...)}
}

func isSymbol(s string) bool {
	if len(s) < 1 || len(s) > 5 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// priceURL is the upstream URL of symbol's price.
func priceURL(base, symbol string) string {
	return strings.TrimSuffix(base, "/") + "/price?symbol=" + url.QueryEscape(symbol)
}

// answerError is how both gateways judge an upstream answer that is not a
// price: a 5xx is retried, a 404 is an unknown symbol, anything else is a
// broken upstream.
func answerError(symbol string, status int) (err *asyncsteps.Error, retry bool) {
	switch {
	case isServerError(status):
		return &asyncsteps.Error{Code: asyncsteps.CommError, Info: fmt.Sprintf("upstream answered %d for %s", status, symbol)}, true
	case status == http.StatusNotFound:
		return invalid("unknown symbol %q", symbol), false
	}
	return &asyncsteps.Error{Code: asyncsteps.CommError, Info: fmt.Sprintf("upstream answered %d for %s", status, symbol)}, false
}

// isServerError reports whether status is a 5xx, the upstream's failure
// that the contract has retried: from 500 to 599. net/http reads any
// status of three digits, and one past 599 is no failure the contract
// names, so a broken upstream, as a 429 is.
func isServerError(status int) bool { return status >= 500 && status <= 599 }

// checkQuote returns what is wrong with an upstream answer that parsed
// but is no price of symbol, "" if nothing: another symbol's (it would be
// shown as symbol's) or a price that is not positive, missing ones
// included. A broken upstream, not retried, as an answer that does not
// parse (see malformed).
func checkQuote(symbol string, q quote) string {
	if q.Symbol == symbol && q.Price > 0 {
		return ""
	}
	return fmt.Sprintf("symbol %q, price %v", clipTo(q.Symbol, maxLoggedDetail), q.Price)
}

// judge decodes body, an upstream's 200 for symbol, and returns its quote
// and what is wrong with it, "" if nothing (see checkQuote).
func (cfg *config) judge(symbol string, body []byte) (quote, string) {
	q, err := cfg.decode(body)
	if err != nil {
		return q, err.Error()
	}
	return q, checkQuote(symbol, q)
}

// malformed logs what is wrong with the upstream's answer for symbol,
// detail (a JSON decoder's error, the symbol and price it gave), and
// returns the CommError that answers it, whose info does not say: the
// detail is the upstream's text, of any length (a symbol of 200 KB, a
// decoder's error quoting it), which the client is not to read, and which
// the log gets clipped.
func malformed(logger *slog.Logger, symbol, detail string) *asyncsteps.Error {
	logger.Warn("upstream answer malformed", "symbol", symbol, "detail", clipTo(detail, maxLoggedDetail))
	return &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream answer for " + symbol + " is malformed"}
}

// maxLoggedDetail bounds the upstream's text in a log line: enough to
// tell what is wrong with an answer, not its megabyte.
const maxLoggedDetail = 256

// upstreamTimeoutInfo is the info of the 504 of a request whose symbol's
// last attempt, the retries used up, ran out of its own time
// (-attempt-timeout; the attempts before it may have failed otherwise):
// the upstream too slow, told apart from the request's own timeout,
// "request timed out", which the gateway's -timeout set, and from the
// deadline of the request's context (requestDeadlineInfo).
const upstreamTimeoutInfo = "upstream timed out"

// requestDeadlineInfo is the info of the 504 of a request whose context's
// deadline, set by a middleware in front of the gateway, passed first:
// the info the engine gives the Timeout of the deadline of a flow's
// context, which the plain gateway answers too.
const requestDeadlineInfo = "the flow's context deadline passed"

// retriable reports whether an upstream attempt that failed with code is
// tried again: a transport error, or its own timeout.
func retriable(code string) bool {
	return code == asyncsteps.CommError || code == asyncsteps.ConnectError || code == asyncsteps.Timeout
}

// errorWriter answers errors for both gateways: the JSON body, the
// statuses and Retry-After of asynchttp.
func errorWriter(cfg config, logger *slog.Logger) *asynchttp.Handler {
	return &asynchttp.Handler{Codes: errorCodes, RetryAfter: cfg.RetryAfter, Logger: logger}
}

// routes serves /quote with quotes, /stats and /metrics from st, and the
// probes /healthz and /readyz (see probes), which no counter counts;
// /debug/memory and the profiles of /debug/pprof too, if memory is not
// nil. Any other path, and a target that is no path (see pathTargets), is
// answered 404 with errs' JSON error body, and any method but GET and HEAD
// to the gateway's routes 405 (the 405 of /quote by quotes, which counts
// it); the /debug routes are net/http's own, as they come. Every answer
// but a profile's has writeTimeout from its request's arrival to be
// written (see boundWrites).
func routes(quotes http.Handler, st *stats, stopping *atomic.Bool, memory http.Handler, errs errorAnswers, writeTimeout time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/quote", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowed(req.Method) {
			w.Header().Set("Allow", allowedMethods)
		}
		st.start()
		quotes.ServeHTTP(w, req)
	}))
	mux.Handle("/stats", readOnly(errs, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st.snapshot()) //nolint:errcheck // the client may be gone
	})))
	mux.Handle("/metrics", readOnly(errs, st.metricsHandler()))
	healthz, readyz := probes(stopping, errs)
	mux.Handle("/healthz", readOnly(errs, healthz))
	mux.Handle("/readyz", readOnly(errs, readyz))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) { writeNotFound(errs, w, req.URL.Path) })
	if memory != nil {
		mux.Handle("/debug/memory", memory)
		mux.Handle("/debug/pprof/", unboundedWrites(pprof.Index)) // heap, goroutine, ... profiles
		mux.Handle("/debug/pprof/profile", unboundedWrites(pprof.Profile))
		mux.Handle("/debug/pprof/trace", unboundedWrites(pprof.Trace))
		// For a pprof that symbolizes a profile through the server. Not
		// /debug/pprof/cmdline, which the index links too: it would show
		// the command line, and a password given in -redis or -upstream.
		mux.Handle("/debug/pprof/symbol", unboundedWrites(pprof.Symbol))
	}
	return boundWrites(pathTargets(errs, mux), writeTimeout)
}

// writeNotFound answers a request for target, which the gateway does not
// serve, 404 with errs' JSON error body.
func writeNotFound(errs errorAnswers, w http.ResponseWriter, target string) {
	errs.WriteError(w, notFound, fmt.Sprintf("no such path %q: the gateway serves /quote, /stats, /metrics, /healthz and /readyz", clip(target)))
}

// pathTargets returns mux, but for the requests whose target is no path,
// which it answers 404 with errs' JSON error body, as it answers a path
// it does not serve: "*" (net/http answers OPTIONS * itself) and a
// CONNECT's host:port. ServeMux answers those itself, outside the
// gateway's error answers: "*" a 400 with no body, a host:port a
// text/plain 404.
func pathTargets(errs errorAnswers, mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.RequestURI == "*":
			writeNotFound(errs, w, req.RequestURI)
		case req.Method == http.MethodConnect && req.URL.Path == "":
			writeNotFound(errs, w, req.URL.Host)
		default:
			mux.ServeHTTP(w, req)
		}
	})
}

// The bodies of the probes' 200s.
const (
	healthyBody = `{"status":"ok"}` + "\n"
	readyBody   = `{"status":"ready"}` + "\n"
)

// probes returns the handlers of /healthz, 200 while the process serves
// (a liveness probe), and /readyz, 200 until stopping is set, when the
// shutdown begins, then 503 ShuttingDown (a readiness probe: a load
// balancer sends the gateway no more requests).
func probes(stopping *atomic.Bool, errs errorAnswers) (healthz, readyz http.Handler) {
	healthz = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeProbe(w, healthyBody) })
	readyz = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if stopping.Load() {
			errs.WriteError(w, shuttingDown, "the gateway is shutting down")
			return
		}
		writeProbe(w, readyBody)
	})
	return healthz, readyz
}

// writeProbe answers a probe 200 with body, its length set as every
// answer of the gateway has it.
func writeProbe(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, body) //nolint:errcheck // the client may be gone
}

// boundWrites returns h with a write deadline, timeout after the request's
// arrival, on each request's connection. A client that sends requests and
// never reads their answers fills the socket's buffers, and the write of
// an answer then blocks: with no deadline it held the connection, and its
// goroutine, for good, long after the request's flow or handler ended.
// Past the deadline the write fails and net/http closes the connection;
// it clears the deadline once an answer is written, before it reads the
// next request. Set here, before the mux, it also bounds the redirects
// the mux answers itself. (No WriteTimeout on the server: it would cut
// the profiles too, see unboundedWrites.)
func boundWrites(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Refused only by a writer that cannot: nothing to bound then.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
		h.ServeHTTP(w, req)
	})
}

// unboundedWrites returns h with no write deadline (see boundWrites): a
// profile of /debug/pprof is written after as many seconds as it is
// asked for (?seconds=30), later than any answer of the gateway.
func unboundedWrites(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		h(w, req)
	})
}

// readOnly serves h to GET and HEAD, and answers any other method 405.
func readOnly(errs errorAnswers, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowed(req.Method) {
			w.Header().Set("Allow", allowedMethods)
			bad := notAllowed(req.Method)
			errs.WriteError(w, bad.Code, bad.Info)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// memoryReport is the JSON of /debug/memory.
type memoryReport struct {
	HeapAlloc  uint64 `json:"heap_alloc"`  // bytes of live heap objects, after a GC
	StackInuse uint64 `json:"stack_inuse"` // bytes of goroutine stacks
	Goroutines int    `json:"goroutines"`
	PeakRSS    uint64 `json:"peak_rss"` // the process's peak resident memory (VmHWM), 0 if unknown
}

// memoryHandler serves /debug/memory: it drops the idle upstream
// connections (a cache, which would hide whether goroutines were left
// behind), collects garbage and reports the memory in use.
func memoryHandler(closeIdle func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		closeIdle()
		runtime.GC()
		runtime.GC() // the first one's finalizers and pools released
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(memoryReport{ //nolint:errcheck // the client may be gone
			HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse, Goroutines: runtime.NumGoroutine(), PeakRSS: peakRSS(),
		})
	})
}

// peakRSS reads VmHWM from /proc/self/status (Linux), in bytes; 0 if it
// cannot.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
