package main

// This file is long on purpose: every behaviour of the gateway (each
// status, the counters, cancel, shutdown) is tested here side by side
// against both implementations, flows and plain.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every behavioural test runs against both gateways: they must answer
// alike.
var impls = []string{"flows", "plain"}

// fakeUpstream is an upstream price service the test controls: per
// symbol, statuses to answer before the price, and a gate that holds its
// requests until it is closed (or the request is cancelled).
type fakeUpstream struct {
	mu        sync.Mutex
	script    map[string][]int
	hold      map[string]chan struct{}
	requests  map[string]int
	arrived   chan string // a symbol per request received
	cancelled chan string // a symbol per held request whose client went away
}

func newFakeUpstream() *fakeUpstream {
	return &fakeUpstream{script: map[string][]int{}, hold: map[string]chan struct{}{}, requests: map[string]int{},
		arrived: make(chan string, 1000), cancelled: make(chan string, 1000)}
}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	symbol := req.URL.Query().Get("symbol")
	u.mu.Lock()
	u.requests[symbol]++
	status := 0
	if s := u.script[symbol]; len(s) > 0 {
		status, u.script[symbol] = s[0], s[1:]
	}
	hold := u.hold[symbol]
	u.mu.Unlock()
	u.arrived <- symbol
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			u.cancelled <- symbol
			return
		}
	}
	switch {
	case status != 0:
		w.WriteHeader(status)
	case !slices.Contains(knownSymbols, symbol):
		http.NotFound(w, req)
	default:
		json.NewEncoder(w).Encode(quote{Symbol: symbol, Price: priceOf(symbol)})
	}
}

func (u *fakeUpstream) holdSymbol(symbol string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := make(chan struct{})
	u.hold[symbol] = ch
	return ch
}

func (u *fakeUpstream) answer(symbol string, statuses ...int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.script[symbol] = statuses
}

func (u *fakeUpstream) count(symbol string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests[symbol]
}

// testGateway is a gateway on a test server, in front of a fakeUpstream.
type testGateway struct {
	t    *testing.T
	url  string
	up   *fakeUpstream
	gw   *gateway
	logs *syncBuffer
	srv  *httptest.Server // nil if the test did not keep it
}

func testConfig() config {
	cfg := defaultConfig()
	cfg.Timeout = 10 * time.Second // tests that want a timeout set it
	cfg.AttemptTimeout = 10 * time.Second
	cfg.Loops = 2
	return cfg
}

func startGateway(t *testing.T, impl string, cfg config) *testGateway {
	t.Helper()
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	cfg.Upstream = upSrv.URL
	logs := &syncBuffer{}
	gw, closeGateway := newGateway(impl, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(gw.handler)
	t.Cleanup(func() { srv.Close(); closeGateway() })
	return &testGateway{t: t, url: srv.URL, up: up, gw: gw, logs: logs, srv: srv}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// answer is what a client got.
type answer struct {
	status     int
	retryAfter string
	body       string
}

func (g *testGateway) get(query string) answer {
	return g.do(context.Background(), http.MethodGet, query)
}

func (g *testGateway) do(ctx context.Context, method, query string) answer {
	g.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, g.url+"/quote"+query, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{body: "error: " + err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
}

// goGet sends the request on a goroutine of its own.
func (g *testGateway) goGet(query string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- g.get(query) }()
	return ch
}

func waitStats(t *testing.T, st *stats, cond func(statsSnapshot) bool) statsSnapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := st.snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters never reached the state wanted: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// counters are the exact counters a test expects.
type counters struct {
	started, cancelled, upstreamCancelled int64
	finished                              map[string]int64
}

// checkCounters waits until st shows exactly want, with nothing in flight
// or queued: some counts (an upstream request's cancel seen by its
// goroutine) may land just after the answer.
func checkCounters(t *testing.T, st *stats, want counters) {
	t.Helper()
	if want.finished == nil {
		want.finished = map[string]int64{}
	}
	matches := func(got statsSnapshot) bool {
		return got.Started == want.started && got.Cancelled == want.cancelled && got.UpstreamCancelled == want.upstreamCancelled &&
			reflect.DeepEqual(got.Finished, want.finished) && got.InFlight == 0 && got.LimiterQueue == 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := st.snapshot()
		if matches(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("counters %+v, want %+v", got, want)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func wantAnswer(t *testing.T, got answer, status int, retryAfter, body string) {
	t.Helper()
	if got.status != status || got.retryAfter != retryAfter || got.body != body {
		t.Errorf("got %d Retry-After %q %q\nwant %d Retry-After %q %q", got.status, got.retryAfter, got.body, status, retryAfter, body)
	}
}

func quotesBody(symbols ...string) string {
	var r quoteReply
	for _, s := range symbols {
		r.Quotes = append(r.Quotes, quote{Symbol: s, Price: priceOf(s)})
	}
	b, _ := json.Marshal(r)
	return string(b) + "\n"
}

func errBody(code, info string) string {
	b, _ := json.Marshal(map[string]string{"error": code, "info": info})
	return string(b) + "\n"
}

func TestQuoteAnswersEverySymbolInOrder(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			wantAnswer(t, g.get("?symbols=MSFT,AAPL,MSFT,GOOG"), 200, "", quotesBody("MSFT", "AAPL", "GOOG"))
			if n := g.up.count("MSFT"); n != 1 {
				t.Errorf("MSFT asked %d times upstream, want once", n)
			}
			// Repeated parameters are one list, not the first one alone.
			wantAnswer(t, g.get("?symbols=IBM,AAPL&symbols=AAPL,CRM"), 200, "", quotesBody("IBM", "AAPL", "CRM"))
			// A query of the longest length read (maxQueryBytes).
			longest := "?symbols=AAPL&x=" + strings.Repeat("a", 8192-len("symbols=AAPL&x="))
			wantAnswer(t, g.get(longest), 200, "", quotesBody("AAPL"))
			checkCounters(t, g.gw.stats, counters{started: 3, finished: map[string]int64{"OK": 3}})
		})
	}
}

// An upstream 5xx is retried up to 3 times; the fourth failure is the
// answer, a 502.
func TestQuoteRetriesUpstreamFailures(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			g.up.answer("AAPL", 500, 503, 500)
			wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
			if n := g.up.count("AAPL"); n != 4 {
				t.Errorf("AAPL asked %d times, want 4", n)
			}
			g.up.answer("IBM", 500, 500, 500, 502)
			wantAnswer(t, g.get("?symbols=IBM"), 502, "", errBody("CommError", "upstream answered 502 for IBM"))
			if n := g.up.count("IBM"); n != 4 {
				t.Errorf("IBM asked %d times, want 4", n)
			}
			checkCounters(t, g.gw.stats, counters{started: 2, finished: map[string]int64{"OK": 1, "CommError": 1}})
		})
	}
}

// An answer that is no price and no 5xx is final: a 404 is an unknown
// symbol, any other status a broken upstream (502); neither is asked again.
func TestQuoteAnswersNotWorthRetryingAreNot(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			g.up.answer("AAPL", http.StatusTeapot)
			wantAnswer(t, g.get("?symbols=AAPL"), 502, "", errBody("CommError", "upstream answered 418 for AAPL"))
			g.up.answer("IBM", http.StatusNotFound)
			wantAnswer(t, g.get("?symbols=IBM"), 400, "", errBody("InvalidRequest", `unknown symbol "IBM"`))
			for _, symbol := range []string{"AAPL", "IBM"} {
				if n := g.up.count(symbol); n != 1 {
					t.Errorf("%s asked %d times, want once", symbol, n)
				}
			}
		})
	}
}

func TestQuoteBadInputIs400Or405(t *testing.T) {
	tests := []struct {
		name, method, query string
		status              int
		body                string
	}{
		{"no symbols", "GET", "", 400, errBody("InvalidRequest", "no symbols: use /quote?symbols=AAPL,MSFT")},
		{"empty symbols", "GET", "?symbols=", 400, errBody("InvalidRequest", "no symbols: use /quote?symbols=AAPL,MSFT")},
		{"too many", "GET", "?symbols=A,B,C,D,E,F,G,H,I,J,K", 400, errBody("InvalidRequest", "too many symbols: more than 10")},
		// Read no further than the eleventh: the malformed one after it
		// is never seen.
		{"too many, then more", "GET", "?symbols=A,B,C,D,E,F,G,H,I,J,J,A,K,x", 400, errBody("InvalidRequest", "too many symbols: more than 10")},
		{"too many over two lists", "GET", "?symbols=A,B,C,D,E&symbols=F,G,H,I,J,K", 400, errBody("InvalidRequest", "too many symbols: more than 10")},
		{"long malformed symbol", "GET", "?symbols=AAPL," + strings.Repeat("a", 8000), 400, errBody("InvalidRequest", `malformed symbol "aaaaaaaaaaaaaaaa...": 1 to 5 capital letters`)},
		// Refused unread: the bound is of the query, whatever it holds.
		{"query too long", "GET", "?symbols=AAPL&x=" + strings.Repeat("a", 8192-len("symbols=AAPL&x=")+1), 400, errBody("InvalidRequest", "query too long: more than 8192 bytes")},
		{"query too long, malformed", "GET", "?symbols=%zz," + strings.Repeat("a", 70000), 400, errBody("InvalidRequest", "query too long: more than 8192 bytes")},
		{"empty lists", "GET", "?symbols=&symbols=", 400, errBody("InvalidRequest", "no symbols: use /quote?symbols=AAPL,MSFT")},
		{"malformed symbol", "GET", "?symbols=AAPL,msft", 400, errBody("InvalidRequest", `malformed symbol "msft": 1 to 5 capital letters`)},
		{"commas only", "GET", "?symbols=,,", 400, errBody("InvalidRequest", "no symbols: use /quote?symbols=AAPL,MSFT")},
		{"malformed query", "GET", "?symbols=%zz", 400, errBody("InvalidRequest", `malformed query: invalid URL escape "%zz"`)},
		{"unknown symbol", "GET", "?symbols=AAPL,ZZZZ", 400, errBody("InvalidRequest", `unknown symbol "ZZZZ"`)},
		{"wrong method", "POST", "?symbols=AAPL", 405, errBody("MethodNotAllowed", "method POST not allowed, use GET or HEAD")},
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			g.up.holdSymbol("AAPL") // cancelled when ZZZZ, its sibling, fails
			for _, tc := range tests {
				got := g.do(context.Background(), tc.method, tc.query)
				if got.status != tc.status || got.body != tc.body {
					t.Errorf("%s: got %d %q, want %d %q", tc.name, got.status, got.body, tc.status, tc.body)
				}
			}
			resp, err := http.Post(g.url+"/quote", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("405 with Allow %q, want GET, HEAD", allow)
			}
			checkCounters(t, g.gw.stats, counters{started: 15, upstreamCancelled: 1, finished: map[string]int64{"InvalidRequest": 13, "MethodNotAllowed": 2}})
		})
	}
}

// With one slot and one place in the queue, a third request is answered 503
// with Retry-After while the first is served and the second waits.
func TestQuoteLimiterRejectsWith503(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.Limits = limitOptions{Concurrent: 1, Queue: 1}
			cfg.RetryAfter = 2 * time.Second
			g := startGateway(t, impl, cfg)
			release := g.up.holdSymbol("AAPL")
			first := g.goGet("?symbols=AAPL")
			<-g.up.arrived
			second := g.goGet("?symbols=MSFT")
			waitStats(t, g.gw.stats, func(s statsSnapshot) bool { return s.LimiterQueue == 1 })
			wantAnswer(t, g.get("?symbols=GOOG"), 503, "2", errBody("DefenseRejected", "Mutex queue limit"))
			close(release)
			wantAnswer(t, <-first, 200, "", quotesBody("AAPL"))
			wantAnswer(t, <-second, 200, "", quotesBody("MSFT"))
			checkCounters(t, g.gw.stats, counters{started: 3, finished: map[string]int64{"OK": 2, "DefenseRejected": 1}})
		})
	}
}

// A request whose client goes away while it waits for the limit leaves
// the queue: the count /stats reports goes back to zero at once, not when
// the request ahead of it ends.
func TestQuoteQueuedRequestCancelledLeavesTheQueue(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.Limits = limitOptions{Concurrent: 1, Queue: 1}
			g := startGateway(t, impl, cfg)
			release := g.up.holdSymbol("AAPL")
			first := g.goGet("?symbols=AAPL")
			<-g.up.arrived
			ctx, cancel := context.WithCancel(context.Background())
			second := make(chan answer, 1)
			go func() { second <- g.do(ctx, http.MethodGet, "?symbols=MSFT") }()
			waitStats(t, g.gw.stats, func(s statsSnapshot) bool { return s.LimiterQueue == 1 })
			cancel()
			waitStats(t, g.gw.stats, func(s statsSnapshot) bool { return s.LimiterQueue == 0 && s.Cancelled == 1 })
			if a := <-second; a.status != 0 {
				t.Errorf("the client that left got %+v", a)
			}
			close(release)
			wantAnswer(t, <-first, 200, "", quotesBody("AAPL"))
			checkCounters(t, g.gw.stats, counters{started: 2, cancelled: 1, finished: map[string]int64{"OK": 1}})
			if n := g.up.count("MSFT"); n != 0 {
				t.Errorf("upstream asked for MSFT %d times, want 0", n)
			}
		})
	}
}

// A request that times out while it waits for the rate limit is answered
// 504 and leaves the queue.
func TestQuoteQueuedRequestTimedOutLeavesTheQueue(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.Timeout = 200 * time.Millisecond
			// A period far longer than the test: the second request waits
			// for the next one until it times out.
			cfg.Limits = limitOptions{Concurrent: 10, Rate: 1, Period: time.Hour, Burst: 1}
			g := startGateway(t, impl, cfg)
			wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
			wantAnswer(t, g.get("?symbols=MSFT"), 504, "", errBody("Timeout", "request timed out"))
			checkCounters(t, g.gw.stats, counters{started: 2, finished: map[string]int64{"OK": 1, "Timeout": 1}})
		})
	}
}

// A request rate above -rate, with no -burst, is answered 503 too.
func TestQuoteRateLimitRejectsWith503(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			// A period far longer than the test: the second request comes
			// within the first period however slow the machine is.
			cfg.Limits = limitOptions{Concurrent: 10, Rate: 1, Period: time.Hour}
			g := startGateway(t, impl, cfg)
			wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
			wantAnswer(t, g.get("?symbols=AAPL"), 503, "1", errBody("DefenseRejected", "Throttle queue limit"))
			checkCounters(t, g.gw.stats, counters{started: 2, finished: map[string]int64{"OK": 1, "DefenseRejected": 1}})
		})
	}
}

// Past the request timeout the answer is 504, and the upstream request
// still running is cancelled.
func TestQuoteRequestTimeoutIs504(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.Timeout = 50 * time.Millisecond
			g := startGateway(t, impl, cfg)
			g.up.holdSymbol("AAPL") // never released
			wantAnswer(t, g.get("?symbols=AAPL,MSFT"), 504, "", errBody("Timeout", "request timed out"))
			if got := <-g.up.cancelled; got != "AAPL" {
				t.Errorf("upstream saw %s cancelled", got)
			}
			checkCounters(t, g.gw.stats, counters{started: 1, upstreamCancelled: 1, finished: map[string]int64{"Timeout": 1}})
			g.srv.Close() // the line is logged once answered
			want := `level=WARN msg="asynchttp: request failed" method=GET path=/quote status=504 code=Timeout info="request timed out"`
			if line := logLine(g.logs.String(), "request failed"); !strings.HasPrefix(line, want) || strings.Contains(line, "cause=") {
				t.Errorf("logged %q, want %q with no cause", line, want)
			}
		})
	}
}

// A request whose every attempt runs out of its own time (-attempt-timeout,
// the upstream too slow) is answered 504 with an info of its own, well
// before the request's timeout, and its log line says which timeout it
// was; the request's own keeps "request timed out".
func TestQuoteAttemptsTimedOutIs504UpstreamTimedOut(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.AttemptTimeout, cfg.Retries = 50*time.Millisecond, 1
			g := startGateway(t, impl, cfg)
			g.up.holdSymbol("AAPL") // never released
			start := time.Now()
			wantAnswer(t, g.get("?symbols=AAPL"), 504, "", errBody("Timeout", "upstream timed out"))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("answered after %v, want about 2 attempts of 50ms", took)
			}
			for range 2 {
				if got := <-g.up.cancelled; got != "AAPL" {
					t.Errorf("upstream saw %s cancelled", got)
				}
			}
			checkCounters(t, g.gw.stats, counters{started: 1, upstreamCancelled: 2, finished: map[string]int64{"Timeout": 1}})
			g.srv.Close() // the line is logged once answered
			want := `level=WARN msg="asynchttp: request failed" method=GET path=/quote status=504 code=Timeout info="upstream timed out"`
			if line := logLine(g.logs.String(), "request failed"); !strings.HasPrefix(line, want) || strings.Contains(line, "cause=") {
				t.Errorf("logged %q, want %q with no cause", line, want)
			}
		})
	}
}

// logLine returns the line of log that holds msg, without its time.
func logLine(log, msg string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, msg) {
			_, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			return rest
		}
	}
	return ""
}

// A deadline that the request's context carries (set by a middleware in
// front of the gateway) is a timeout of the request like the gateway's
// own: 504, counted under Timeout, not a client that went away; its info
// says it was that deadline, not the gateway's -timeout.
func TestQuoteRequestContextDeadlineIs504(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			withDeadline := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				ctx, cancel := context.WithTimeout(req.Context(), 50*time.Millisecond)
				defer cancel()
				g.gw.handler.ServeHTTP(w, req.WithContext(ctx))
			})
			srv := httptest.NewServer(withDeadline)
			t.Cleanup(srv.Close)
			g.url = srv.URL
			g.up.holdSymbol("AAPL") // never released
			wantAnswer(t, g.get("?symbols=AAPL,MSFT"), 504, "", errBody("Timeout", requestDeadlineInfo))
			if got := <-g.up.cancelled; got != "AAPL" {
				t.Errorf("upstream saw %s cancelled", got)
			}
			checkCounters(t, g.gw.stats, counters{started: 1, upstreamCancelled: 1, finished: map[string]int64{"Timeout": 1}})
		})
	}
}

// A panic in a step is a 500, logged; the gateway goes on serving. The
// test runs in a child process: a panic that escaped would end it.
func TestQuotePanicIs500AndTheServerLives(t *testing.T) {
	if inParent(t) {
		return
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := testConfig()
			cfg.decode = func(body []byte) (quote, error) {
				if strings.Contains(string(body), "IBM") {
					panic("decoder bug on IBM")
				}
				return decodeQuote(body)
			}
			g := startGateway(t, impl, cfg)
			wantAnswer(t, g.get("?symbols=IBM"), 500, "", errBody("InternalError", "internal error, see the server log"))
			wantAnswer(t, g.get("?symbols=AAPL"), 200, "", quotesBody("AAPL"))
			if logs := g.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "decoder bug on IBM") {
				t.Errorf("the panic is not logged: %q", logs)
			}
			checkCounters(t, g.gw.stats, counters{started: 2, finished: map[string]int64{"OK": 1, "InternalError": 1}})
		})
	}
}

// A client that goes away cancels its request and the upstream requests it
// started; both are counted.
func TestQuoteClientGoneCancelsUpstream(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			g.up.holdSymbol("AAPL")
			g.up.holdSymbol("MSFT")
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan answer, 1)
			go func() { got <- g.do(ctx, http.MethodGet, "?symbols=AAPL,MSFT") }()
			<-g.up.arrived
			<-g.up.arrived
			cancel()
			seen := []string{<-g.up.cancelled, <-g.up.cancelled}
			slices.Sort(seen)
			if !slices.Equal(seen, []string{"AAPL", "MSFT"}) {
				t.Errorf("upstream saw %v cancelled", seen)
			}
			if a := <-got; a.status != 0 {
				t.Errorf("the client that left got %+v", a)
			}
			checkCounters(t, g.gw.stats, counters{started: 1, cancelled: 1, upstreamCancelled: 2})
		})
	}
}

// /stats and /metrics give the same counters.
func TestStatsAndMetricsAgree(t *testing.T) {
	g := startGateway(t, "flows", testConfig())
	g.get("?symbols=AAPL")
	g.get("?symbols=zz")
	waitStats(t, g.gw.stats, func(s statsSnapshot) bool { return s.InFlight == 0 })
	var snap statsSnapshot
	getJSON(t, g.url+"/stats", &snap)
	if snap.Started != 2 || snap.Finished["OK"] != 1 || snap.Finished["InvalidRequest"] != 1 ||
		snap.ByStatus["200"] != 1 || snap.ByStatus["400"] != 1 || snap.LatencyMs.P99 <= 0 || snap.LatencyMs.P50 > snap.LatencyMs.P99 {
		t.Errorf("/stats: %+v", snap)
	}
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		"gateway_requests_started_total 2",
		`gateway_requests_finished_total{code="OK"} 1`,
		`gateway_requests_finished_total{code="InvalidRequest"} 1`,
		`gateway_requests_answered_total{status="200"} 1`,
		`gateway_requests_answered_total{status="400"} 1`,
		"gateway_requests_cancelled_total 0",
		"gateway_requests_in_flight 0",
		"gateway_limiter_queue_length 0",
		"gateway_request_duration_seconds_count 2",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), "\n"+line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// shutdownGateway serves a gateway with serve, as main does, and returns
// its URL, the gateway, and a function that starts the shutdown and
// returns serve's result channel.
func shutdownGateway(t *testing.T, impl string, grace time.Duration) (string, *fakeUpstream, *gateway, func() <-chan error) {
	return delayedShutdownGateway(t, impl, grace, 0)
}

// delayedShutdownGateway is shutdownGateway with -shutdown-delay delay.
func delayedShutdownGateway(t *testing.T, impl string, grace, delay time.Duration) (string, *fakeUpstream, *gateway, func() <-chan error) {
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	cfg := testConfig()
	cfg.Upstream = upSrv.URL
	gw, closeGateway := newGateway(impl, cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(closeGateway)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, ln, gw.handler, grace, slog.New(slog.DiscardHandler), &readiness{stopping: gw.stopping, delay: delay})
	}()
	return "http://" + ln.Addr().String(), up, gw, func() <-chan error { stop(); return served }
}

func getAsync(url string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			ch <- answer{body: "error: " + err.Error()}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
	}()
	return ch
}

// A shutdown stops accepting and lets the requests in flight end.
func TestShutdownLetsRequestsInFlightEnd(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			url, up, gw, shutdown := shutdownGateway(t, impl, time.Minute)
			release := up.holdSymbol("AAPL")
			a := getAsync(url + "/quote?symbols=AAPL")
			b := getAsync(url + "/quote?symbols=AAPL,MSFT")
			<-up.arrived
			<-up.arrived
			<-up.arrived
			served := shutdown()
			waitRefused(t, url)
			close(release)
			wantAnswer(t, <-a, 200, "", quotesBody("AAPL"))
			wantAnswer(t, <-b, 200, "", quotesBody("AAPL", "MSFT"))
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
			checkCounters(t, gw.stats, counters{started: 2, finished: map[string]int64{"OK": 2}})
		})
	}
}

// Requests still in flight when the grace period ends are cancelled:
// their upstream requests too, and they are answered 503.
func TestShutdownCancelsRequestsAfterGrace(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			url, up, gw, shutdown := shutdownGateway(t, impl, 50*time.Millisecond)
			up.holdSymbol("AAPL") // never released
			a := getAsync(url + "/quote?symbols=AAPL")
			b := getAsync(url + "/quote?symbols=AAPL")
			<-up.arrived
			<-up.arrived
			served := shutdown()
			cancelled := errBody("DefenseRejected", "request cancelled")
			wantAnswer(t, <-a, 503, "1", cancelled)
			wantAnswer(t, <-b, 503, "1", cancelled)
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
			<-up.cancelled
			<-up.cancelled
			checkCounters(t, gw.stats, counters{started: 2, cancelled: 2, upstreamCancelled: 2})
		})
	}
}

// waitRefused waits until url refuses connections.
func waitRefused(t *testing.T, url string) {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after the shutdown began")
		}
		time.Sleep(time.Millisecond)
	}
}

// inParent runs the calling test again in a child process, for a test
// that could crash its process, and reports whether the caller is that
// parent (then it returns at once: the child did the work).
func inParent(t *testing.T) bool {
	t.Helper()
	if os.Getenv("ASYNCSTEPS_DEMO_CHILD") == t.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Errorf("child process: %v\n%s", err, out)
	}
	return true
}

// The program itself: it serves the embedded upstream's quotes, and on
// SIGTERM it shuts down, closes its loops, waits until no Await function
// of theirs runs, and exits 0.
func TestMainServesAndExitsZeroOnSIGTERM(t *testing.T) {
	p := startProgram(t, "-addr", "127.0.0.1:0", "-upstream-fail", "0", "-upstream-latency", "1ms")
	resp, err := http.Get(p.url + "/quote?symbols=AAPL,MSFT,GOOG")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := quotesBody("AAPL", "MSFT", "GOOG"); resp.StatusCode != 200 || string(body) != want {
		t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, want)
	}
	p.stop(t, `level=INFO msg="all requests ended"`+"\n", `level=INFO msg="loops closed: every Await function has returned" took=`)
}

// The README shows the answer of its curl line: it is the answer.
func TestREADMEShowsTheCurlAnswer(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const curl = "curl 'http://127.0.0.1:8080/quote?symbols=AAPL,MSFT,GOOG'"
	_, after, found := strings.Cut(string(readme), curl)
	_, shown, _ := strings.Cut(after, "`{")
	shown, _, _ = strings.Cut(shown, "`")
	want := strings.TrimSuffix(quotesBody("AAPL", "MSFT", "GOOG"), "\n")
	if !found || "{"+shown != want {
		t.Errorf("README: curl line found %v, answer shown %q, want %q", found, "{"+shown, want)
	}
}

// program is the command running in a child process: the test binary
// itself, which runs main when ASYNCSTEPS_DEMO_ARGS is set (see TestMain).
type program struct {
	cmd  *exec.Cmd
	url  string      // where it serves
	logs *syncBuffer // its log lines after the first
}

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("ASYNCSTEPS_DEMO_ARGS"); ok {
		os.Args = append([]string{"asyncsteps-demo"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startProgram runs the command with args and waits until it serves.
func startProgram(t *testing.T, args ...string) *program {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))
	return startCommand(t, cmd)
}

// startCommand starts cmd, a gateway or an upstream, and waits until its
// log says where it serves.
func startCommand(t *testing.T, cmd *exec.Cmd) *program {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	p := &program{cmd: cmd, logs: &syncBuffer{}}
	for p.url == "" && lines.Scan() {
		fmt.Fprintln(p.logs, lines.Text())
		for _, msg := range []string{`msg="gateway serving" addr=`, `msg="serving the upstream price service" addr=`} {
			if _, rest, ok := strings.Cut(lines.Text(), msg); ok {
				addr, _, _ := strings.Cut(rest, " ")
				p.url = "http://" + addr
			}
		}
	}
	if p.url == "" {
		t.Fatalf("the program did not start: %s", p.logs)
	}
	go io.Copy(p.logs, stderr)
	return p
}

// stop sends SIGTERM and checks that the program exits 0, having logged
// a line containing each of lines.
func (p *program) stop(t *testing.T, lines ...string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Read before Wait, which closes the pipe they come by.
	for _, line := range lines {
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.logs.String(), line); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("no line with %s logged 10s after SIGTERM; log:\n%s", line, p.logs)
				break
			}
		}
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit status 0; log:\n%s", err, p.logs)
	}
}

// TestDebugServesMemoryAndProfiles checks the routes -debug adds: the
// memory report, the profile index, a profile it serves (goroutines) and
// the execution trace, which has a route of its own. The CPU profile's
// route is not fetched: it would cost the test another second.
func TestDebugServesMemoryAndProfiles(t *testing.T) {
	cfg := testConfig()
	cfg.Debug = true
	g := startGateway(t, "flows", cfg)
	for _, c := range []struct{ path, prefix string }{
		{"/debug/memory", "{"},
		{"/debug/pprof/", "<html>"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile: total "},
		{"/debug/pprof/trace?seconds=1", "go 1."},
		{"/debug/pprof/symbol", "num_symbols: 1\n"},
	} {
		resp, err := http.Get(g.url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), c.prefix) {
			t.Errorf("GET %s: %d, %.40q; want 200 and a body starting %q", c.path, resp.StatusCode, body, c.prefix)
		}
	}
	// The command line may hold a password (-redis, -upstream).
	resp, err := http.Get(g.url + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), os.Args[0]) {
		t.Errorf("GET /debug/pprof/cmdline: %d %.80q; want a 404 without the command line", resp.StatusCode, body)
	}
}

// clipTo keeps a UTF-8 character whole, cutting before it, and cuts text
// that is not UTF-8 where asked, keeping all it may.
func TestClipToKeepsCharactersWhole(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"abcdef", "abcdef"},
		{"abcdefgh", "abcdef..."},
		{"abcde" + "é" + "xyz", "abcde..."},
		{"ab" + "😀" + "xyz", "ab😀..."},
		{"abc" + "😀" + "xyz", "abc..."},
		{"\x80\x80\x80\x80\x80\x80\x80\x80", "\x80\x80\x80\x80\x80\x80..."},
	} {
		if got := clipTo(c.s, 6); got != c.want {
			t.Errorf("clipTo(%q, 6) = %q, want %q", c.s, got, c.want)
		}
	}
}
