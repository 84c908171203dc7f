package main

// The differential test: the same requests to both gateways, over real
// loopback connections, and their answers compared byte for byte (all of
// the status line, the headers but Date, the body), with the upstream
// requests each one caused, what each added to the counters of /stats
// and the lines each logged.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedUpstream is an upstream whose answer depends on the symbol
// asked: a few symbols name a failure, any other gets its price. Both
// gateways are sent to the same one, a request at a time, so that the
// infos that quote its URL are the same; reset clears what it counts.
type scriptedUpstream struct {
	mu      sync.Mutex
	asked   map[string]int
	release chan struct{} // GATE waits for it
	held    chan struct{} // closed when HOLD is asked
	arrived chan string
}

// The symbols the scripted upstream fails on.
const (
	symbol500   = "EFIVE" // 500, always
	symbol502   = "BADGW" // 502, always
	symbol503   = "UNAVL" // 503, always
	symbolFlaky = "FLAKY" // 503 twice, then its price
	symbol404   = "NOPE"  // 404: unknown
	symbolLate  = "LATE"  // 404 once HOLD is asked
	symbolJunk  = "JUNK"  // 200 with a body that is not JSON
	symbolOther = "OTHER" // 200 with AAPL's price
	symbolHuge  = "HUGE"  // 200 with a body of 1 MiB and a byte
	symbolSlow  = "SLOW"  // 200 with half a body, the rest never sent
	symbolHold  = "HOLD"  // no answer until its request is cancelled
	symbolGate  = "GATE"  // its price once release is closed
	symbolUpgr  = "UPGR"  // 101 Switching Protocols, unasked, then the connection held open
	symbolCut   = "CUT"   // 200 with half the body its Content-Length announces, then the connection closed
	symbolGzip  = "GZIP"  // 200 with a body said to be gzip that is not
	symbolEarly = "EARLY" // 103 Early Hints, then its price
	symbolLong  = "LONG"  // 200 with its price and a header longer than maxUpstreamHeader
)

func newScriptedUpstream() *scriptedUpstream {
	u := &scriptedUpstream{}
	u.reset()
	return u
}

// reset forgets the requests counted and arms GATE again.
func (u *scriptedUpstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asked, u.release, u.held, u.arrived = map[string]int{}, make(chan struct{}), make(chan struct{}), make(chan string, 100)
}

// counts returns the requests received per symbol since reset.
func (u *scriptedUpstream) counts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.asked)
}

func (u *scriptedUpstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	symbol := req.URL.Query().Get("symbol")
	u.mu.Lock()
	u.asked[symbol]++
	n, release, held, arrived := u.asked[symbol], u.release, u.held, u.arrived
	if symbol == symbolHold && n == 1 {
		close(held)
	}
	u.mu.Unlock()
	arrived <- symbol
	price := fmt.Sprintf(`{"symbol":%q,"price":%v}`, symbol, priceOf(symbol))
	switch symbol {
	case symbol500:
		w.WriteHeader(http.StatusInternalServerError)
	case symbol502:
		w.WriteHeader(http.StatusBadGateway)
	case symbol503:
		w.WriteHeader(http.StatusServiceUnavailable)
	case symbolFlaky:
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, price)
	case symbol404:
		http.NotFound(w, req)
	case symbolLate:
		select {
		case <-held:
			http.NotFound(w, req)
		case <-req.Context().Done():
		}
	case symbolJunk:
		io.WriteString(w, "not json")
	case symbolOther:
		fmt.Fprintf(w, `{"symbol":"AAPL","price":%v}`, priceOf("AAPL"))
	case symbolHuge:
		w.Write(make([]byte, maxUpstreamBody+1))
	case symbolSlow:
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"symbol":`)
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	case symbolHold:
		<-req.Context().Done()
	case symbolUpgr:
		switchProtocols(w)
	case symbolCut:
		w.Header().Set("Content-Length", strconv.Itoa(2*len(price)))
		io.WriteString(w, price)
	case symbolGzip:
		w.Header().Set("Content-Encoding", "gzip")
		io.WriteString(w, price)
	case symbolLong:
		w.Header().Set("X-Long", strings.Repeat("x", maxUpstreamHeader))
		io.WriteString(w, price)
	case symbolEarly:
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, price)
	case symbolGate:
		select {
		case <-release:
			io.WriteString(w, price)
		case <-req.Context().Done():
		}
	default:
		io.WriteString(w, price)
	}
}

// switchProtocols answers 101 Switching Protocols, which the request did
// not ask for, and keeps the connection open, silent, until the other
// side closes it: net/http gives the client the connection itself as the
// answer's body, which no context cancels and no Content-Length ends. A
// gateway that read it to its end would wait for upstreamHold.
func switchProtocols(w http.ResponseWriter) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(upstreamHold))
	buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: price\r\n\r\n")
	if buf.Flush() == nil {
		io.Copy(io.Discard, conn) //nolint:errcheck // ends when the client closes
	}
}

// upstreamHold bounds how long the scripted upstream keeps a connection
// it answered with 101: longer than rawExchange waits for an answer, so
// that a gateway that waits for the connection to end fails the case
// rather than hang the test.
const upstreamHold = 30 * time.Second

// gatewayPair is both gateways, built from one config, in front of one
// scripted upstream.
type gatewayPair struct {
	up       *scriptedUpstream
	upstream string            // the base URL both are sent to
	urls     map[string]string // of each gateway, by impl
	logs     map[string]*syncBuffer
}

// newGatewayPair starts both gateways with cfg; an empty cfg.Upstream
// puts them in front of a new scripted upstream.
func newGatewayPair(t testing.TB, cfg config) *gatewayPair {
	t.Helper()
	p := &gatewayPair{up: newScriptedUpstream(), urls: map[string]string{}, logs: map[string]*syncBuffer{}}
	if cfg.Upstream == "" {
		upSrv := httptest.NewServer(p.up)
		t.Cleanup(upSrv.Close)
		cfg.Upstream = upSrv.URL
	}
	p.upstream = cfg.Upstream
	for _, impl := range impls {
		logs := &syncBuffer{}
		gw, closeGateway := newGateway(impl, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		srv := httptest.NewServer(gw.handler)
		t.Cleanup(func() { srv.Close(); closeGateway() })
		p.urls[impl], p.logs[impl] = srv.URL, logs
	}
	return p
}

// logNoise is what a log line of one gateway may hold that the other's
// does not: its time; the text of a panic's stack (both log one, each of
// its own goroutine: its presence is compared, as "stack="); and the
// async_stack of the flows gateway, which names the steps its flow was
// in, where the plain gateway has no steps. The cause of an error is the
// same Go error in both (net/http's, which names the upstream), as
// asynchttp.Handler logs it.
var logNoise = regexp.MustCompile(`(?m)^time=\S+ |( stack=)"(?:[^"\\]|\\.)*"| async_stack=(?:"(?:[^"\\]|\\.)*"|\S+)`)

// dateHeader is the one header line that differs from one answer to the
// next.
var dateHeader = regexp.MustCompile(`(?m)^Date: [^\r]*\r\n`)

// rawExchange sends method target (a path and query) on a connection of
// its own and returns the whole answer as it came, its Date line left
// out.
func rawExchange(t *testing.T, url, method, target string) string {
	t.Helper()
	return rawSend(t, url, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n", method, target))
}

// rawSend writes request, one or more requests as they go on the wire, on
// a connection of its own, and returns all that comes back until the
// gateway closes it, its Date lines left out.
func rawSend(t *testing.T, url, request string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Errorf("%q: %v after %q", request, err, b)
	}
	return dateHeader.ReplaceAllString(string(b), "")
}

// settledStats waits until gw has nothing in flight nor queued and
// returns its /stats, latencies left out: the only counts that depend on
// the machine's speed.
func settledStats(t *testing.T, url string) statsSnapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var snap statsSnapshot
		getJSON(t, url+"/stats", &snap)
		if snap.InFlight == 0 && snap.LimiterQueue == 0 {
			snap.LatencyMs = latencySummary{}
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still busy: %+v", url, snap)
		}
		time.Sleep(time.Millisecond)
	}
}

// differentialCase is a request sent to each gateway in turn, or, when
// run is set, what run does with each; body, if set, is the body both
// must answer.
type differentialCase struct {
	name           string
	method, target string
	run            func(t *testing.T, p *gatewayPair, url string) string
	body           string
	check          func(t *testing.T, impl, answer string) // if set, reports what is wrong with each answer
}

// exchange runs c on the gateway at url and returns what it answered.
func (c differentialCase) exchange(t *testing.T, p *gatewayPair, url string) string {
	if c.run != nil {
		return c.run(t, p, url)
	}
	return rawExchange(t, url, c.method, c.target)
}

// outcome is what one gateway did with a case.
type outcome struct {
	answer string
	asked  map[string]int
	logged string // the lines logged, less their logNoise
}

// minus returns what s counts that before did not: the counters a case
// added. The gauges (in flight, queue) are those of s.
func (s statsSnapshot) minus(before statsSnapshot) statsSnapshot {
	delta := func(after, before map[string]int64) map[string]int64 {
		d := map[string]int64{}
		for k, n := range after {
			if n != before[k] {
				d[k] = n - before[k]
			}
		}
		return d
	}
	s.Started -= before.Started
	s.Cancelled -= before.Cancelled
	s.UpstreamCancelled -= before.UpstreamCancelled
	s.Finished, s.ByStatus = delta(s.Finished, before.Finished), delta(s.ByStatus, before.ByStatus)
	s.Upstream = delta(s.Upstream, before.Upstream)
	return s
}

// compareGateways runs each case on the flows gateway, then on the plain
// one, and reports every difference in the answers, in the upstream
// requests made, in the lines logged and in what the case added to the
// counters.
func compareGateways(t *testing.T, p *gatewayPair, cases []differentialCase) {
	t.Helper()
	before := map[string]statsSnapshot{}
	for _, impl := range impls {
		before[impl] = settledStats(t, p.urls[impl])
	}
	for _, c := range cases {
		got := map[string]outcome{}
		for _, impl := range impls {
			p.up.reset()
			logged := len(p.logs[impl].String())
			answer := c.exchange(t, p, p.urls[impl])
			settledStats(t, p.urls[impl])
			lines := logNoise.ReplaceAllString(p.logs[impl].String()[logged:], "$1")
			got[impl] = outcome{answer: answer, asked: p.up.counts(), logged: lines}
		}
		flows, plain := got["flows"], got["plain"]
		for impl, o := range got {
			checkAnswer(t, c, p, impl, o.answer)
		}
		if flows.answer != plain.answer {
			t.Errorf("%s: the answers differ:\nflows %s\nplain %s", c.name, clipAnswer(flows.answer), clipAnswer(plain.answer))
		}
		if !reflect.DeepEqual(flows.asked, plain.asked) {
			t.Errorf("%s: the upstream was asked differently: flows %v, plain %v", c.name, flows.asked, plain.asked)
		}
		if flows.logged != plain.logged {
			t.Errorf("%s: the log lines differ:\nflows %q\nplain %q", c.name, flows.logged, plain.logged)
		}
		counts := countersMoved(t, c.name, p, before)
		if testing.Verbose() {
			t.Logf("%s: %s, upstream asked %v, counters %+v", c.name, clipAnswer(flows.answer), flows.asked, counts)
		}
	}
}

// checkAnswer reports an answer of impl to c that names where the
// upstream is (its address, or any loopback address: the answers have
// none of their own), or whose body is not the one c wants.
func checkAnswer(t *testing.T, c differentialCase, p *gatewayPair, impl, answer string) {
	t.Helper()
	for _, leak := range []string{strings.TrimPrefix(p.upstream, "http://"), "127.0.0.1"} {
		if strings.Contains(answer, leak) {
			t.Errorf("%s: %s answered %q, which names %q", c.name, impl, clipAnswer(answer), leak)
		}
	}
	if _, body, _ := strings.Cut(answer, "\r\n\r\n"); c.body != "" && body != c.body {
		t.Errorf("%s: %s answered the body %q, want %q", c.name, impl, body, c.body)
	}
	if c.check != nil {
		c.check(t, impl, answer)
	}
}

// countersMoved waits until both gateways' counters have moved alike since
// before, which it then moves on, and returns what they added; it reports
// a difference still there after a few seconds. Waited for: the flows
// gateway may count an upstream request cancelled just after its answer
// (one run by a goroutine of the loop's, which asynchttp.Handler does not
// wait for), where errgroup waits for every fetch of the plain one.
func countersMoved(t *testing.T, name string, p *gatewayPair, before map[string]statsSnapshot) statsSnapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := map[string]statsSnapshot{}
		for _, impl := range impls {
			after[impl] = settledStats(t, p.urls[impl])
		}
		flows, plain := after["flows"].minus(before["flows"]), after["plain"].minus(before["plain"])
		if reflect.DeepEqual(flows, plain) || time.Now().After(deadline) {
			if !reflect.DeepEqual(flows, plain) {
				t.Errorf("%s: the counters moved differently:\nflows %+v\nplain %+v", name, flows, plain)
			}
			maps.Copy(before, after)
			return flows
		}
		time.Sleep(time.Millisecond)
	}
}

// clipAnswer quotes an answer, up to its first 600 bytes.
func clipAnswer(s string) string {
	if len(s) > 600 {
		return fmt.Sprintf("%q... (%d bytes)", s[:600], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// get and head are the cases of a plain request.
func get(name, target string) differentialCase {
	return differentialCase{name: "GET " + name, method: http.MethodGet, target: target}
}

func head(name, target string) differentialCase {
	return differentialCase{name: "HEAD " + name, method: http.MethodHead, target: target}
}

// raw is the case of request, as it goes on the wire.
func raw(name, request string) differentialCase {
	return differentialCase{name: name, run: func(t *testing.T, _ *gatewayPair, url string) string { return rawSend(t, url, request) }}
}

// clientGone returns the run of a case whose client sends target, which
// asks for HOLD, and goes away once the upstream has been asked for it;
// its answer is what the client read before: nothing.
func clientGone(target string) func(t *testing.T, p *gatewayPair, url string) string {
	return func(t *testing.T, p *gatewayPair, url string) string {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p.up.mu.Lock()
		held := p.up.held
		p.up.mu.Unlock()
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: g\r\n\r\n", target); err != nil {
			t.Fatal(err)
		}
		<-held
		conn.Close()
		return ""
	}
}

// distinctSymbols returns n symbols of two letters the scripted upstream
// quotes: AA, AB, ...
func distinctSymbols(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = string([]byte{'A' + byte(i/26), 'A' + byte(i%26)})
	}
	return s
}

// Every answer of the request's own making: the 400s of a bad request,
// the 404 and 405 of the routes, HEAD, and what the upstream answers,
// each retried or not as the README says.
func TestGatewaysAnswerAlikeToRequestsAndUpstreamAnswers(t *testing.T) {
	p := newGatewayPair(t, testConfig())
	eleven := strings.Join(distinctSymbols(11), ",")
	cases := []differentialCase{
		get("quotes", "/quote?symbols=AAPL,MSFT,GOOG"),
		head("quotes", "/quote?symbols=AAPL,MSFT,GOOG"),
		get("duplicates", "/quote?symbols=MSFT,AAPL,MSFT,GOOG,AAPL"),
		get("repeated parameters", "/quote?symbols=IBM,AAPL&symbols=AAPL,CRM"),
		get("empty entries", "/quote?symbols=,IBM,,&symbols=&symbols=,AAPL"),
		get("other parameters", "/quote?x=1&symbols=IBM&y"),
		get("no query", "/quote"),
		get("no symbols parameter", "/quote?symbol=AAPL"),
		get("empty symbols", "/quote?symbols="),
		get("only empty entries", "/quote?symbols=,,&symbols=,"),
		get("too many", "/quote?symbols="+eleven),
		get("too many over two lists", "/quote?symbols=AA,AB,AC,AD,AE&symbols=AF,AG,AH,AI,AJ,AK"),
		get("ten with duplicates", "/quote?symbols="+eleven+","+eleven[:2]+"&symbols=AA"),
		get("malformed symbol", "/quote?symbols=AAPL,msft"),
		get("too long a symbol", "/quote?symbols=ABCDEF"),
		get("long malformed symbol", "/quote?symbols=AAPL,"+strings.Repeat("a", 70000)),
		get("escaped malformed symbol", "/quote?symbols=A%00B"),
		get("malformed query", "/quote?symbols=%zz"),
		get("semicolon", "/quote?symbols=AAPL;MSFT"),
		head("malformed symbol", "/quote?symbols=zz"),
		get("unknown symbol", "/quote?symbols="+symbol404),
		get("unknown symbol and a held one", "/quote?symbols="+symbolHold+","+symbolLate),
		get("upstream 500", "/quote?symbols="+symbol500),
		get("upstream 502", "/quote?symbols="+symbol502),
		get("upstream 503", "/quote?symbols="+symbol503), // alone: a sibling would race the retries
		get("upstream 503 twice, then a price", "/quote?symbols="+symbolFlaky),
		get("upstream bad JSON", "/quote?symbols="+symbolJunk),
		get("upstream wrong symbol", "/quote?symbols="+symbolOther),
		get("upstream huge body", "/quote?symbols="+symbolHuge),
		get("upstream switching protocols", "/quote?symbols="+symbolUpgr),
		get("upstream body cut short", "/quote?symbols="+symbolCut),
		get("upstream body not the gzip it says", "/quote?symbols="+symbolGzip),
		get("upstream early hints", "/quote?symbols="+symbolEarly),
		{name: "GET upstream header too long", method: http.MethodGet, target: "/quote?symbols=" + symbolLong,
			body: `{"error":"CommError","info":"asynchttp: GET: answer header too long"}` + "\n"},
		head("upstream 502", "/quote?symbols="+symbol502),
		{name: "POST /quote", method: http.MethodPost, target: "/quote?symbols=AAPL"},
		{name: "PUT /quote", method: http.MethodPut, target: "/quote"},
		{name: "DELETE /stats", method: http.MethodDelete, target: "/stats"},
		{name: "PATCH /metrics", method: http.MethodPatch, target: "/metrics"},
		get("unknown path", "/quotes?symbols=AAPL"),
		get("long unknown path", "/a-path-longer-than-sixteen-bytes"),
		head("unknown path", "/nowhere"),
		{name: "POST unknown path", method: http.MethodPost, target: "/nowhere"},
		raw("pipelined", "GET /quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\n\r\nHEAD /quote?symbols=zz HTTP/1.1\r\nHost: g\r\n\r\n"+
			"GET /quote?symbols="+symbol502+" HTTP/1.1\r\nHost: g\r\n\r\nGET /quote?symbols=IBM HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		raw("GET with a body, then another", "GET /quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\n\r\nhello"+
			"GET /quote?symbols=IBM HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		raw("GET with a chunked body", "GET /quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
		raw("100-continue and its body", "GET /quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"),
		raw("HTTP/1.0", "GET /quote?symbols=AAPL HTTP/1.0\r\n\r\n"),
		raw("absolute URL", "GET http://elsewhere/quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		raw("escaped path", "GET /%71uote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		{name: "client gone", run: clientGone("/quote?symbols=" + symbolHold)},
		raw("unclean path", "GET //quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		raw("dot segment", "GET /stats/../quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
		raw("CONNECT", "CONNECT /quote?symbols=AAPL HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"),
	}
	compareGateways(t, p, cases)
}

// A bug in a step, here a decoder that panics on one symbol's answer: a
// 500, and the same log line, its info the panic's value and its cause
// the panic.
func TestGatewaysAnswerAlikeToAPanic(t *testing.T) {
	cfg := testConfig()
	cfg.decode = func(body []byte) (quote, error) {
		if strings.Contains(string(body), "BOOM") {
			panic("decoder bug")
		}
		return decodeQuote(body)
	}
	p := newGatewayPair(t, cfg)
	compareGateways(t, p, []differentialCase{
		{name: "GET panic", method: http.MethodGet, target: "/quote?symbols=BOOM",
			body: `{"error":"InternalError","info":"internal error, see the server log"}` + "\n"},
		head("panic", "/quote?symbols=BOOM"),
	})
}

// An answer too long for net/http to count before it sends it: with
// -max-symbols 100, a hundred quotes.
func TestGatewaysAnswerAlikeWithManySymbols(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSymbols = 100
	p := newGatewayPair(t, cfg)
	hundred := "/quote?symbols=" + strings.Join(distinctSymbols(100), ",")
	compareGateways(t, p, []differentialCase{get("a hundred symbols", hundred), head("a hundred symbols", hundred)})
}

// The answers of the gateway's own limits: the request timeout (504),
// an upstream that refuses connections or closes them without an answer
// (502 after the retries, its info naming the failure, not the
// upstream), and a full limit, of concurrency or of rate (503 with
// Retry-After).
func TestGatewaysAnswerAlikeAtTheirLimits(t *testing.T) {
	t.Run("request timeout", func(t *testing.T) {
		cfg := testConfig()
		// Long enough for HOLD to be asked by both, on a loaded machine
		// and under the race detector: the upstream's counts are compared.
		cfg.Timeout = time.Second
		p := newGatewayPair(t, cfg)
		compareGateways(t, p, []differentialCase{
			get("held", "/quote?symbols=AAPL,"+symbolHold),
			head("held", "/quote?symbols="+symbolHold),
		})
	})
	t.Run("attempt timeout", func(t *testing.T) {
		cfg := testConfig()
		// Each attempt at SLOW's body: the default, long enough for each to
		// reach the upstream.
		cfg.AttemptTimeout = defaultConfig().AttemptTimeout
		p := newGatewayPair(t, cfg)
		compareGateways(t, p, []differentialCase{get("upstream slow body", "/quote?symbols="+symbolSlow)})
	})
	t.Run("connection refused", func(t *testing.T) {
		cfg := testConfig()
		cfg.Upstream = "http://" + closedPort(t)
		p := newGatewayPair(t, cfg)
		refused := get("refused", "/quote?symbols=AAPL")
		refused.body = `{"error":"ConnectError","info":"asynchttp: GET: connection refused"}` + "\n"
		compareGateways(t, p, []differentialCase{refused})
	})
	t.Run("connection closed", func(t *testing.T) {
		cfg := testConfig()
		closing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // the request read, no answer
			}
		}))
		t.Cleanup(closing.Close)
		cfg.Upstream = closing.URL
		p := newGatewayPair(t, cfg)
		closed := get("closed", "/quote?symbols=AAPL")
		closed.body = `{"error":"CommError","info":"asynchttp: GET: connection closed before the answer"}` + "\n"
		compareGateways(t, p, []differentialCase{closed})
	})
	t.Run("queue full", func(t *testing.T) {
		cfg := testConfig()
		cfg.Limits = limitOptions{Concurrent: 1, Queue: 0}
		cfg.RetryAfter = 1500 * time.Millisecond
		p := newGatewayPair(t, cfg)
		compareGateways(t, p, []differentialCase{{name: "queue full", run: whileGateHeld("/quote?symbols=AAPL")}})
	})
	t.Run("rate spent", func(t *testing.T) {
		cfg := testConfig()
		// A period far longer than the test: the second request comes
		// within the first period however slow the machine is; each
		// gateway has a limit of its own.
		cfg.Limits = limitOptions{Concurrent: 10, Rate: 1, Period: time.Hour}
		p := newGatewayPair(t, cfg)
		compareGateways(t, p, []differentialCase{
			get("first", "/quote?symbols=AAPL"),
			get("over the rate", "/quote?symbols=AAPL"),
			head("over the rate", "/quote?symbols=AAPL"),
		})
	})
}

// whileGateHeld returns the run of a case that sends target while a
// request for GATE holds the gateway's only slot, then lets GATE's
// answer go; the answers are both, in order.
func whileGateHeld(target string) func(t *testing.T, p *gatewayPair, url string) string {
	return func(t *testing.T, p *gatewayPair, url string) string {
		first := make(chan string, 1)
		go func() { first <- rawExchange(t, url, http.MethodGet, "/quote?symbols="+symbolGate) }()
		p.up.mu.Lock()
		arrived, release := p.up.arrived, p.up.release
		p.up.mu.Unlock()
		if s := <-arrived; s != symbolGate {
			t.Fatalf("the upstream got %s first", s)
		}
		rejected := rawExchange(t, url, http.MethodGet, target)
		close(release)
		return <-first + "\n" + rejected
	}
}

// The /metrics of both, once both have served the same requests: the
// same names, help and values, but for the latencies and the Go
// runtime's own.
func TestGatewaysCountAlikeInMetrics(t *testing.T) {
	cfg := testConfig()
	p := newGatewayPair(t, cfg)
	metrics := map[string]string{}
	for _, impl := range impls {
		for _, target := range []string{"/quote?symbols=AAPL", "/quote?symbols=zz", "/quote?symbols=" + symbol502, "/quote?symbols=" + symbol404} {
			rawExchange(t, p.urls[impl], http.MethodGet, target)
		}
		settledStats(t, p.urls[impl])
		resp, err := http.Get(p.urls[impl] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		var kept []string
		for line := range strings.Lines(body) {
			if strings.Contains(line, "gateway_") && !strings.HasPrefix(line, "gateway_request_duration_seconds") {
				kept = append(kept, line)
			}
		}
		slices.Sort(kept)
		metrics[impl] = strings.Join(kept, "")
	}
	if metrics["flows"] != metrics["plain"] {
		t.Errorf("/metrics differ:\nflows\n%s\nplain\n%s", metrics["flows"], metrics["plain"])
	}
}

// Any request to /quote, whatever its method and query, is answered
// alike by both gateways, with a status of the request's own making (a
// quote, a bad request, a method not allowed) and a JSON body, never a
// 500. The upstream quotes every symbol at once, so that every answer is
// the request's. (An upstream that failed two symbols would leave which
// of the two the answer names to the race of their requests, in both.)
func FuzzGatewaysAnswerAlike(f *testing.F) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		symbol := req.URL.Query().Get("symbol")
		fmt.Fprintf(w, `{"symbol":%q,"price":%v}`, symbol, priceOf(symbol))
	}))
	f.Cleanup(up.Close)
	cfg := testConfig()
	cfg.Upstream = up.URL
	p := newGatewayPair(f, cfg)
	for _, seed := range []string{
		"symbols=AAPL,MSFT", "symbols=AAPL&symbols=MSFT,AAPL", "symbols=%41APL", "symbols=AAPL%2CMSFT",
		"symbols=A+B", "symbols=%FF%FE", "symbols=\xff\xfe", "symbols=\xc3\xa9", "symbols=%C3%A9" + strings.Repeat("Z", 20),
		"symbols=AAPL;MSFT", "symbols=%", "symbols=%zz", "symbols", "=AAPL", "&&&", "symbols=,,,", "symbols=XXXXX",
		"Symbols=AAPL", "symbols=AAPL#frag", "symbols=AAPL?x", "symbols=" + strings.Repeat("A", 5000),
		strings.Repeat("symbols=AA&", 10001),
	} {
		f.Add(uint8(0), seed)
	}
	f.Add(uint8(1), "symbols=AAPL") // HEAD
	f.Add(uint8(2), "symbols=AAPL") // POST
	f.Fuzz(func(t *testing.T, method uint8, query string) {
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Skip("not a request target: net/http refuses the request line")
		}
		c := differentialCase{name: "fuzz", method: fuzzMethods[int(method)%len(fuzzMethods)], target: "/quote?" + query}
		c.check = func(t *testing.T, impl, answer string) { checkFuzzAnswer(t, c, impl, answer) }
		compareGateways(t, p, []differentialCase{c})
	})
}

// fuzzMethods are the methods FuzzGatewaysAnswerAlike sends.
var fuzzMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodOptions}

// checkFuzzAnswer reports an answer to c that is not a complete HTTP/1.1
// answer with a status of the request's making and, but to HEAD, a JSON
// body of its Content-Length.
func checkFuzzAnswer(t *testing.T, c differentialCase, impl, answer string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), &http.Request{Method: c.method})
	if err != nil {
		t.Fatalf("%s %s: %s answered %s: %v", c.method, c.target, impl, clipAnswer(answer), err)
	}
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		t.Errorf("%s %s: %s answered a body cut short: %v", c.method, c.target, impl, err)
	case !slices.Contains([]int{http.StatusOK, http.StatusBadRequest, http.StatusMethodNotAllowed}, resp.StatusCode):
		t.Errorf("%s %s: %s answered %s", c.method, c.target, impl, clipAnswer(answer))
	case resp.Header.Get("Content-Type") != "application/json":
		t.Errorf("%s %s: %s answered a Content-Type %q", c.method, c.target, impl, resp.Header.Get("Content-Type"))
	case c.method != http.MethodHead && !json.Valid(body):
		t.Errorf("%s %s: %s answered a body that is not JSON: %q", c.method, c.target, impl, body)
	}
}

// Any answer of the upstream, as bytes on the wire before it closes the
// connection, is judged alike by both gateways: the same answer, the
// same upstream requests, log lines and counts.
func FuzzGatewaysJudgeAnyUpstreamAnswerAlike(f *testing.F) {
	var answer atomic.Pointer[[]byte]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.Write(*answer.Load())
		buf.Flush()
	}))
	f.Cleanup(up.Close)
	cfg := testConfig()
	cfg.Upstream, cfg.Retries = up.URL, 1
	p := newGatewayPair(f, cfg)
	price := fmt.Sprintf(`{"symbol":"AAPL","price":%v}`, priceOf("AAPL"))
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(price)) + "\r\n\r\n" + price,
		"HTTP/1.1 200 OK\r\n\r\n" + price,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"sym\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + price,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + price,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n" + price,
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n" + price,
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n" + price,
		"HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\n\r\n" + price,
		"HTTP/1.1 302 Found\r\nLocation: /price?symbol=AAPL\r\n\r\n",
		"HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n" + price,
		"HTTP/1.1 200\r\n\r\n" + price,
		"HTTP/1.1 999 What\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: \x00\r\n\r\n" + price,
		"SSH-2.0-OpenSSH\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		answer.Store(&b)
		compareGateways(t, p, []differentialCase{get("fuzzed upstream answer", "/quote?symbols=AAPL")})
	})
}
