package main

// The chaos test: each gateway, a process of its own, in front of an
// upstream that misbehaves at random (seeded), driven on 127.0.0.1 by
// clients that misbehave too; then SIGTERM in the middle of more of the
// same.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var chaosDuration = flag.Duration("chaos", 2*time.Second, "TestChaos: how long misbehaving clients drive each gateway before its counters are checked; the run stopped by SIGTERM after it is shorter (the long form: -chaos 30s)")

// The gateway's settings in the chaos test, and the load: attempts time
// out well before the request does, so that a request survives a few
// misbehaving attempts; the grace period is shorter than a request may
// last, so that the shutdown both lets flows end and cancels some.
const (
	chaosTimeout        = time.Second
	chaosAttemptTimeout = 100 * time.Millisecond
	chaosGrace          = 150 * time.Millisecond
	chaosConcurrent     = 6
	chaosQueue          = 6
	chaosGatewayRate    = 100 // -rate: about the good queries' rate, so that some wait for the next period
	chaosBurst          = 10
	chaosRate           = 150 // requests started per second, at most
	chaosClients        = 32  // requests at once, at most: more than the limiter lets in or queues
	chaosInFlight       = 6   // requests in flight when SIGTERM is sent, at least
	chaosClientDeadline = 10 * time.Second
	// An answer's head comes within -timeout of its request, and this
	// more: a busy machine's delays, under the race detector.
	chaosLatencySlack = 2 * time.Second
)

// TestChaos drives each gateway, a program of its own, in front of an
// upstream that misbehaves at random, seeded (chaosUpstream), with
// clients that misbehave at random too (chaosGenerator): they leave
// before, during and after their answer, send half a request, reuse
// their connection, send bad queries. It checks every answer read whole
// against the gateway's contract (status, and the exact JSON body where
// it is known); the counters of /stats against what the clients saw: each
// request sent whole started, each either finished under the status its
// client read or, for a client that left before its answer, finished or
// cancelled (cancelled for those that left while the upstream held their
// symbol), every outcome code under its status, no 500; then goroutines
// and heap back to idle, and no upstream request left running. Then it
// loads the gateway again, sends SIGTERM with requests in flight, and
// checks the answers still read, that the process exits 0 within its
// grace period plus closeDelay and a margin, and that its log holds no
// panic, data race or error. The long form:
//
//	go test ./cmd/asyncsteps-demo -run TestChaos -v -chaos 30s
func TestChaos(t *testing.T) {
	up := newChaosUpstream(1)
	srv := httptest.NewServer(up)
	defer srv.Close()
	for i, impl := range impls {
		t.Run(impl, func(t *testing.T) { chaosOne(t, impl, srv.URL, up, uint64(10*i)) })
	}
	t.Logf("upstream: %v", up.drawn())
}

func chaosOne(t *testing.T, impl, upstreamURL string, up *chaosUpstream, seed uint64) {
	gw := startLogged(t, "-impl", impl, "-addr", "127.0.0.1:0", "-upstream", upstreamURL, "-debug",
		"-timeout", chaosTimeout.String(), "-attempt-timeout", chaosAttemptTimeout.String(),
		"-concurrent", strconv.Itoa(chaosConcurrent), "-queue", strconv.Itoa(chaosQueue),
		"-rate", strconv.Itoa(chaosGatewayRate), "-burst", strconv.Itoa(chaosBurst), "-grace", chaosGrace.String())
	idle := readMemory(t, gw.url)
	upstreamAddr := strings.TrimPrefix(upstreamURL, "http://")

	load := newChaosGenerator(gw.url, up, upstreamAddr, seed+1)
	load.run(*chaosDuration)
	load.report(t, "load")
	st := settledStats(t, gw.url)
	checkChaosCounters(t, load, st)
	after := waitIdle(t, gw.url, idle, uint64(load.sent.Load()))
	waitUpstreamIdle(t, up)
	t.Logf("%s: gateway finished %v, by status %v, cancelled %d; goroutines idle %d, after %d; heap idle %.2f MiB, after %.2f MiB",
		impl, st.Finished, st.ByStatus, st.Cancelled, idle.Goroutines, after.Goroutines, mib(idle.HeapAlloc), mib(after.HeapAlloc))

	stopped := newChaosGenerator(gw.url, up, upstreamAddr, seed+2)
	stopped.shutdown = true
	done := make(chan struct{})
	go func() { defer close(done); stopped.run(chaosClientDeadline) }()
	// The load under way, well inside the generator's run: with a long
	// -chaos, a quarter of it would outlast the run and leave nothing in
	// flight to shut down.
	time.Sleep(min(*chaosDuration, chaosClientDeadline) / 4)
	waitInFlight(t, gw.url, stopped, chaosInFlight)
	took, err := stopWithin(gw, chaosGrace+closeDelay+3*time.Second, stopped)
	stopped.stop()
	<-done
	stopped.report(t, "SIGTERM")
	if err != nil {
		t.Errorf("after SIGTERM: %v; log:\n%s", err, gw.logs)
	}
	t.Logf("%s: exited %v after SIGTERM (grace %v); %d requests in flight at the signal answered after it",
		impl, took.Round(time.Millisecond), chaosGrace, stopped.endedAfterSignal.Load())
	if stopped.endedAfterSignal.Load() == 0 {
		t.Error("no request in flight at the signal was answered after it: the shutdown was not tried with flows in flight")
	}
	checkChaosLog(t, gw.logs.String())
}

// waitUpstreamIdle waits until up serves no request: once the gateway is
// idle, none of its upstream requests is left running, its connection
// held (which waitIdle's margin of goroutines would not show).
func waitUpstreamIdle(t *testing.T, up *chaosUpstream) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for up.serving.Load() != 0 {
		if time.Now().After(deadline) {
			t.Errorf("the gateway idle, the upstream still serves %d of its requests", up.serving.Load())
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// startLogged runs the command with args, as startProgram does, its
// whole log kept: the exec package copies it, and Wait returns once the
// copy is done, so that the last lines, a panic's, are not lost.
func startLogged(t *testing.T, args ...string) *program {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"))
	p := &program{cmd: cmd, logs: &syncBuffer{}}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	const serving = `msg="gateway serving" addr=`
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, rest, ok := strings.Cut(p.logs.String(), serving); ok {
			addr, _, _ := strings.Cut(rest, " ")
			p.url = "http://" + addr
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program did not start: %s", p.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitInFlight waits until the gateway at base serves at least n
// requests, and g's clients wait for the answers of at least n/2: clients
// that leave have requests in flight too, which no one waits for.
func waitInFlight(t *testing.T, base string, g *chaosGenerator, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st statsSnapshot
		getJSON(t, base+"/stats", &st)
		if st.InFlight >= n && g.awaiting.Load() >= n/2 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("never %d requests in flight, %d awaited: %+v, %d awaited", n, n/2, st, g.awaiting.Load())
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stopWithin sends SIGTERM to p, marking the moment in g, and waits at
// most bound for it to exit; it returns how long that took and an error
// unless it exited 0.
func stopWithin(p *program, bound time.Duration, g *chaosGenerator) (time.Duration, error) {
	exited := make(chan error, 1)
	g.signalled(time.Now())
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		return time.Since(start), err
	case <-time.After(bound):
		return bound, fmt.Errorf("still running %v after SIGTERM", bound)
	}
}

// checkChaosCounters checks the gateway's /stats, settled, against what
// the clients of g saw: every request written whole was started; every
// answer whose head a client read is counted under its status; the rest
// of the statuses counted and the requests cancelled are those of the
// clients that left before their answer's head, all those that left once
// the upstream was asked for their held symbol cancelled; each outcome
// code is counted under its status, and nothing was answered 500.
func checkChaosCounters(t *testing.T, g *chaosGenerator, st statsSnapshot) {
	t.Helper()
	statusOf := map[string]string{"OK": "200", "InvalidRequest": "400", "CommError": "502", "ConnectError": "502",
		"DefenseRejected": "503", "Timeout": "504"}
	byCode := map[string]int64{}
	var finished int64
	for code, n := range st.Finished {
		status, ok := statusOf[code]
		if !ok {
			t.Errorf("the gateway finished %d requests with the code %s", n, code)
		}
		byCode[status] += n
		finished += n
	}
	if !maps.Equal(byCode, st.ByStatus) {
		t.Errorf("outcome codes %v do not add up to the statuses %v", st.Finished, st.ByStatus)
	}
	seen := g.seenByStatus()
	var answered, read int64
	for status, n := range st.ByStatus {
		answered += n
		if n < seen[status] {
			t.Errorf("status %s: the gateway counted %d, the clients read %d", status, n, seen[status])
		}
	}
	for status, n := range seen {
		read += n
		if _, ok := st.ByStatus[status]; !ok {
			t.Errorf("status %s: the clients read %d, the gateway counted none", status, n)
		}
	}
	sent, left, heldLeft := g.sent.Load(), g.left.Load(), g.heldLeft.Load()
	if st.Started != sent || st.Started != finished+st.Cancelled || answered-read+st.Cancelled != left+heldLeft ||
		st.Cancelled < heldLeft || st.InFlight != 0 || st.LimiterQueue != 0 {
		t.Errorf("clients sent %d, read %d heads, left %d before theirs and %d once their held symbol was asked; "+
			"gateway started %d, finished %d, cancelled %d, in flight %d, queued %d",
			sent, read, left, heldLeft, st.Started, finished, st.Cancelled, st.InFlight, st.LimiterQueue)
	}
}

// checkChaosLog checks a gateway's log once it has exited: a shutdown,
// and no panic, data race, error, net/http complaint of a response
// misused, nor connection closed after closeDelay (the clients read their
// answers or leave: none holds a connection open).
func checkChaosLog(t *testing.T, log string) {
	t.Helper()
	if !strings.Contains(log, `msg="shutting down"`) {
		t.Errorf("no shutdown logged:\n%s", log)
	}
	for _, bad := range []string{"panic", "DATA RACE", "fatal error", "level=ERROR", "superfluous", `msg="http: `, "closing the connections"} {
		if strings.Contains(log, bad) {
			t.Errorf("the log holds %q:\n%s", bad, log)
		}
	}
}

// chaosUpstream is a price service that misbehaves at random, seeded: an
// attempt's answer may come late (past the attempt timeout), be a 5xx, a
// connection reset before or in the middle of the answer, a body cut
// short, headers then nothing, or a 200 that is no price. It is safe for
// concurrent use.
type chaosUpstream struct {
	serving atomic.Int64 // requests being answered
	held    sync.Map     // of the held symbols: a channel closed when one is first asked
	holds   atomic.Int64 // held symbols made

	mu    sync.Mutex // guards rnd and count
	rnd   *rand.Rand
	count map[chaosFault]int
}

// chaosFault is how the chaos upstream answers one request.
type chaosFault int

const (
	faultNone       chaosFault = iota // the price, or 404 for an unknown symbol, within 5 ms
	faultLate                         // the same, but past the attempt timeout
	fault5xx                          // 500, 502 or 503
	faultResetEarly                   // the connection reset before any answer
	faultResetMid                     // the head and half the body, then a reset
	faultCutShort                     // the head and half the body, then the connection closed
	faultHang                         // the head, then nothing until the request ends
	faultJunk                         // 200 with a body that is not JSON: a 502, not retried
)

func (f chaosFault) String() string {
	return [...]string{"none", "late", "5xx", "reset-early", "reset-mid", "cut-short", "hang", "junk"}[f]
}

// chaosOdds are the faults' shares, in percent.
var chaosOdds = [...]int{faultNone: 57, faultLate: 8, fault5xx: 10, faultResetEarly: 5, faultResetMid: 6, faultCutShort: 6, faultHang: 6, faultJunk: 2}

func newChaosUpstream(seed uint64) *chaosUpstream {
	return &chaosUpstream{rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), count: map[chaosFault]int{}}
}

// draw returns the next request's fault and a number in [0, 1) that sets
// its latency or status.
func (u *chaosUpstream) draw() (chaosFault, float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.rnd.IntN(100)
	f := faultNone
	for ; n >= chaosOdds[f]; f++ {
		n -= chaosOdds[f]
	}
	u.count[f]++
	return f, u.rnd.Float64()
}

// drawn returns how many requests got each fault.
func (u *chaosUpstream) drawn() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := map[string]int{}
	for f, n := range u.count {
		m[f.String()] = n
	}
	return m
}

func (u *chaosUpstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	u.serving.Add(1)
	defer u.serving.Add(-1)
	symbol := req.URL.Query().Get("symbol")
	if arrived, ok := u.held.LoadAndDelete(symbol); ok || strings.HasPrefix(symbol, heldPrefix) {
		if ok {
			close(arrived.(chan struct{}))
		}
		sleepOrEnd(req, chaosClientDeadline)
		return
	}
	fault, x := u.draw()
	status, body := http.StatusOK, fmt.Sprintf(`{"symbol":%q,"price":%v}`, symbol, priceOf(symbol))
	if !slices.Contains(knownSymbols, symbol) {
		status, body = http.StatusNotFound, "unknown symbol\n"
	}
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n", status, http.StatusText(status), len(body))
	switch fault {
	case faultNone, faultLate:
		latency := time.Duration(x * float64(5*time.Millisecond))
		if fault == faultLate {
			latency = chaosAttemptTimeout * time.Duration(3+4*x) / 2 // 1.5 to 3.5 attempt timeouts
		}
		if !sleepOrEnd(req, latency) {
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		io.WriteString(w, body)
	case fault5xx:
		w.WriteHeader([]int{500, 502, 503}[int(x*3)])
	case faultResetEarly:
		hijacked(w, "", true)
	case faultResetMid:
		hijacked(w, head+body[:len(body)/2], true)
	case faultCutShort:
		hijacked(w, head+body[:len(body)/2], false)
	case faultHang:
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		http.NewResponseController(w).Flush()
		sleepOrEnd(req, chaosClientDeadline)
	case faultJunk:
		io.WriteString(w, "not json")
	}
}

// heldPrefix starts the held symbols, which no known symbol starts with.
const heldPrefix = "X"

// hold returns a new held symbol, whose every request the upstream holds
// until it ends, and a channel closed when it is first asked.
func (u *chaosUpstream) hold() (string, <-chan struct{}) {
	n := u.holds.Add(1) % (26 * 26 * 26 * 26) // four letters after the prefix
	symbol := []byte(heldPrefix + "AAAA")
	for i := len(symbol) - 1; n > 0; i, n = i-1, n/26 {
		symbol[i] = byte('A' + n%26)
	}
	arrived := make(chan struct{})
	u.held.Store(string(symbol), arrived)
	return string(symbol), arrived
}

// sleepOrEnd waits d, or until the request ends; it reports whether d
// passed.
func sleepOrEnd(req *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-req.Context().Done():
		return false
	}
}

// hijacked writes raw on the request's connection, then closes it: reset
// (RST) or closed (FIN).
func hijacked(w http.ResponseWriter, raw string, reset bool) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	rw.WriteString(raw)
	rw.Flush()
	if reset {
		conn.(*net.TCPConn).SetLinger(0)
	}
}

// chaosQuery is a /quote query of the chaos test, with what it may be
// answered.
type chaosQuery struct {
	query   string
	symbols []string // of a good query: distinct known symbols, answered 200 with their prices unless the upstream fails
	bad     string   // of a bad query: the info of the 400 that answers it whatever the upstream does
	unknown string   // a symbol the upstream does not know: 400 if it says so
}

// chaosBadQueries are the bad queries the clients send, one in four.
var chaosBadQueries = []chaosQuery{
	{query: "symbols=aapl", bad: `malformed symbol "aapl": 1 to 5 capital letters`},
	{query: "", bad: "no symbols: use /quote?symbols=AAPL,MSFT"},
	{query: "symbols=,&symbols=", bad: "no symbols: use /quote?symbols=AAPL,MSFT"},
	{query: "symbols=%zz", bad: `malformed query: invalid URL escape "%zz"`},
	{query: "symbols=A,B,C,D,E,F,G,H,I,J,K", bad: "too many symbols: more than 10"},
	{query: "symbols=AAPL,TOOLONG", bad: `malformed symbol "TOOLONG": 1 to 5 capital letters`},
	{query: "symbols=ZZZZ", unknown: "ZZZZ"},
	{query: "symbols=AAPL,ZZZZ", unknown: "ZZZZ"},
}

func drawQuery(rnd *rand.Rand) chaosQuery {
	if rnd.IntN(4) == 0 {
		return chaosBadQueries[rnd.IntN(len(chaosBadQueries))]
	}
	symbols := slices.Clone(knownSymbols)
	rnd.Shuffle(len(symbols), func(i, j int) { symbols[i], symbols[j] = symbols[j], symbols[i] })
	symbols = symbols[:1+rnd.IntN(3)]
	query := "symbols=" + strings.Join(symbols, ",")
	if rnd.IntN(4) == 0 {
		query = messyQuery(rnd, symbols)
	}
	return chaosQuery{query: query, symbols: symbols}
}

// messyQuery lists symbols, in order, as a sloppy client may: with empty
// entries, repeats, spread over several symbols parameters; the gateway
// answers it as the plain list.
func messyQuery(rnd *rand.Rand, symbols []string) string {
	var params, entries []string
	for i, s := range symbols {
		if rnd.IntN(3) == 0 {
			entries = append(entries, "")
		}
		entries = append(entries, s)
		if rnd.IntN(3) == 0 {
			entries = append(entries, symbols[rnd.IntN(i+1)])
		}
		if rnd.IntN(3) == 0 {
			params, entries = append(params, "symbols="+strings.Join(entries, ",")), nil
		}
	}
	return strings.Join(append(params, "symbols="+strings.Join(entries, ",")), "&")
}

// check returns what is wrong with the answer of status, header and body
// to q, or "". The body must be exactly the one known (a 200's quotes, a
// bad query's 400, a 503 or 504: the request's timeout or its upstream's)
// or, for a 502, an error object of
// CommError or ConnectError whose info does not name upstreamAddr. A 503
// "request cancelled" is allowed once the gateway was signalled to stop.
func (q chaosQuery) check(method string, status int, header http.Header, body, upstreamAddr string, signalled bool) string {
	if method == http.MethodHead {
		// As GET, without the body: checked against the length of the
		// body GET would get, which it announces.
		if body != "" {
			return "a body to HEAD"
		}
		if status == http.StatusServiceUnavailable && signalled && header.Get("Content-Length") == strconv.Itoa(len(errBody("DefenseRejected", "request cancelled"))) {
			body = errBody("DefenseRejected", "request cancelled")
		}
	}
	want := ""
	switch {
	case q.bad != "":
		want = errBody("InvalidRequest", q.bad)
	case status == http.StatusOK && q.symbols != nil:
		want = quotesBody(q.symbols...)
	case status == http.StatusBadRequest && q.unknown != "":
		want = errBody("InvalidRequest", fmt.Sprintf("unknown symbol %q", q.unknown))
	case status == http.StatusBadGateway && method == http.MethodHead:
		if header.Get("Content-Type") != "application/json" {
			return "not application/json"
		}
		return "" // its info, which the body would give, is unknown
	case status == http.StatusBadGateway:
		return checkBadGateway(header, body, upstreamAddr)
	case status == http.StatusServiceUnavailable && header.Get("Retry-After") != "1":
		return "a 503 without Retry-After: 1"
	case status == http.StatusServiceUnavailable && signalled && body == errBody("DefenseRejected", "request cancelled"):
		want = body
	case status == http.StatusServiceUnavailable && body == errBody("DefenseRejected", "Throttle queue limit"):
		want = body
	case status == http.StatusServiceUnavailable && method == http.MethodHead && header.Get("Content-Length") == strconv.Itoa(len(errBody("DefenseRejected", "Throttle queue limit"))):
		want = errBody("DefenseRejected", "Throttle queue limit")
	case status == http.StatusServiceUnavailable:
		want = errBody("DefenseRejected", "Mutex queue limit")
	case status == http.StatusGatewayTimeout && body == errBody("Timeout", upstreamTimeoutInfo):
		want = body // every attempt of a symbol late
	case status == http.StatusGatewayTimeout && method == http.MethodHead && header.Get("Content-Length") == strconv.Itoa(len(errBody("Timeout", upstreamTimeoutInfo))):
		want = errBody("Timeout", upstreamTimeoutInfo)
	case status == http.StatusGatewayTimeout:
		want = errBody("Timeout", "request timed out")
	default:
		return "a status outside the contract"
	}
	wantStatus := http.StatusOK
	if q.bad != "" {
		wantStatus = http.StatusBadRequest
	} else if strings.HasPrefix(want, `{"error"`) {
		wantStatus = status
	}
	if method == http.MethodHead {
		body = want
		if header.Get("Content-Length") != strconv.Itoa(len(want)) {
			return fmt.Sprintf("want the Content-Length of %d %q", wantStatus, want)
		}
	}
	if status != wantStatus || body != want || header.Get("Content-Type") != "application/json" {
		return fmt.Sprintf("want %d %q (application/json)", wantStatus, want)
	}
	return ""
}

// checkBadGateway checks a 502's body: an error object of CommError or
// ConnectError with an info that does not name the upstream's address.
func checkBadGateway(header http.Header, body, upstreamAddr string) string {
	var e struct{ Error, Info string }
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	switch {
	case header.Get("Content-Type") != "application/json":
		return "not application/json"
	case dec.Decode(&e) != nil || dec.More() || !strings.HasSuffix(body, "}\n"):
		return "not one JSON error object"
	case e.Error != "CommError" && e.Error != "ConnectError":
		return "a 502 of another code than CommError or ConnectError"
	case e.Info == "" || strings.Contains(e.Info, upstreamAddr):
		return "an info empty or naming the upstream's address"
	}
	return ""
}

// chaosClient is how a client of the chaos test behaves.
type chaosClient int

const (
	clientReads      chaosClient = iota // reads its answer whole
	clientResets                        // reads its answer whole, then resets the connection
	clientLeaves                        // leaves at a random moment: before its answer, after its head, or after it all
	clientHalf                          // sends half its request and leaves: never started
	clientKeepsAlive                    // sends a few requests on one connection, each read whole
	clientHolds                         // asks for a held symbol and leaves once the upstream is asked: its request is cancelled
)

// chaosGenerator sends requests to a gateway from misbehaving clients, at
// most chaosRate a second and chaosClients at once, each drawn from its
// seed and its number, and counts what they saw.
type chaosGenerator struct {
	base, addr   string
	up           *chaosUpstream
	upstreamAddr string
	seed         uint64
	shutdown     bool // the gateway is stopped during the load: requests may be refused, and cancelled

	signal   atomic.Int64 // when SIGTERM was sent, in UnixNano; 0 before
	stopping chan struct{}
	stopOnce sync.Once

	sent             atomic.Int64 // requests written whole: each was started
	half             atomic.Int64 // requests cut off by their client: none was started
	left             atomic.Int64 // clients that left before their answer's head came
	heldLeft         atomic.Int64 // clients of a held symbol that left once it was asked: each cancelled
	refused          atomic.Int64 // requests refused or dropped unanswered during the shutdown
	endedAfterSignal atomic.Int64 // requests sent before the signal and answered after it
	cancelledRead    atomic.Int64 // answers 503 "request cancelled" read: cancelled by the shutdown
	awaiting         atomic.Int64 // requests sent whose clients wait for their answer

	mu       sync.Mutex // guards the fields below
	statuses map[string]int64
	slowest  time.Duration // from a request sent to its answer's head
	faults   []string      // what went wrong, the first few
	faulty   int
}

func newChaosGenerator(base string, up *chaosUpstream, upstreamAddr string, seed uint64) *chaosGenerator {
	return &chaosGenerator{base: base, addr: strings.TrimPrefix(base, "http://"), up: up, upstreamAddr: upstreamAddr, seed: seed,
		stopping: make(chan struct{}), statuses: map[string]int64{}}
}

func (g *chaosGenerator) signalled(at time.Time) { g.signal.Store(at.UnixNano()) }

func (g *chaosGenerator) stop() { g.stopOnce.Do(func() { close(g.stopping) }) }

// run sends requests for d, or until stop, then waits for them to end.
func (g *chaosGenerator) run(d time.Duration) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, chaosClients)
	tick := time.NewTicker(time.Second / chaosRate)
	defer tick.Stop()
	end := time.After(d)
	for i := uint64(0); ; i++ {
		select {
		case <-end:
			g.stop()
		case <-g.stopping:
		case <-tick.C:
		}
		select {
		case <-g.stopping:
			wg.Wait()
			return
		default:
		}
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				g.one(i)
			})
		default: // chaosClients busy: this tick's request is not sent
		}
	}
}

// one runs client i, of its drawing: one request, or a few on a
// keep-alive connection.
func (g *chaosGenerator) one(i uint64) {
	rnd := rand.New(rand.NewPCG(g.seed, i))
	client, requests := chaosClient(rnd.IntN(6)), 1
	if client == clientKeepsAlive {
		requests = 2 + rnd.IntN(2)
	}
	conn, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		g.refusedOr("dial: %v", err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(chaosClientDeadline))
	counted := &countingReader{r: conn}
	br := bufio.NewReader(counted)
	if client == clientHolds {
		g.holdAndLeave(conn, br)
		return
	}
	for k := range requests {
		if !g.exchange(rnd, conn, counted, br, client, k == requests-1) {
			return
		}
	}
}

// exchange sends one request of client on conn, of rnd's drawing, and
// reads its answer as client does; it reports whether conn may carry
// another.
func (g *chaosGenerator) exchange(rnd *rand.Rand, conn net.Conn, counted *countingReader, br *bufio.Reader, client chaosClient, last bool) bool {
	q, method := drawQuery(rnd), http.MethodGet
	if rnd.IntN(8) == 0 {
		method = http.MethodHead
	}
	wait := time.Duration(rnd.IntN(4)) * time.Duration(rnd.Int64N(int64(150*time.Millisecond)))
	readBody := rnd.IntN(2) == 0
	request := method + " /quote?" + q.query + " HTTP/1.1\r\nHost: gateway\r\n"
	if last {
		request += "Connection: close\r\n"
	}
	request += "\r\n"
	if client == clientHalf {
		io.WriteString(conn, request[:len(request)/2])
		g.half.Add(1)
		return false
	}
	if _, err := io.WriteString(conn, request); err != nil {
		g.refusedOr("write: %v", err)
		return false
	}
	sentAt, before := time.Now(), counted.n
	if client != clientLeaves {
		g.awaiting.Add(1)
		defer g.awaiting.Add(-1)
	}
	g.sent.Add(1)
	if client == clientLeaves {
		conn.SetReadDeadline(time.Now().Add(wait))
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if client == clientLeaves && errors.Is(err, os.ErrDeadlineExceeded) {
		g.left.Add(1) // before the head, or in its middle: the gateway may have answered, or not
		reset(conn)
		return false
	}
	if err != nil && counted.n == before {
		// After the signal, net/http closes unanswered the connections
		// whose request it reads once the shutdown has begun, and the
		// idle keep-alive ones.
		g.refusedOr("%s %s: no answer: %v", method, q.query, err)
		return false
	}
	if err != nil {
		g.fault("%s %s: %v after %d bytes", method, q.query, err, counted.n-before) // a head cut short
		return false
	}
	defer resp.Body.Close()
	conn.SetReadDeadline(time.Now().Add(chaosClientDeadline))
	g.answered(resp.StatusCode, sentAt)
	if client == clientLeaves && !readBody {
		if !slices.Contains([]int{200, 400, 502, 503, 504}, resp.StatusCode) {
			g.fault("%s %s: status %d", method, q.query, resp.StatusCode)
		}
		reset(conn) // after its head
		return false
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		g.fault("%s %s: %d, body cut short: %v after %q", method, q.query, resp.StatusCode, err, body)
		return false
	}
	if problem := q.check(method, resp.StatusCode, resp.Header, string(body), g.upstreamAddr, g.signal.Load() != 0); problem != "" {
		g.fault("%s %s: %d Retry-After %q Content-Length %q %q: %s", method, q.query, resp.StatusCode,
			resp.Header.Get("Retry-After"), resp.Header.Get("Content-Length"), body, problem)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(body, []byte("request cancelled")) {
		g.cancelledRead.Add(1)
	}
	if client == clientResets {
		reset(conn)
	}
	return !resp.Close
}

// holdAndLeave asks on conn for a held symbol and leaves once the
// upstream is asked for it: the gateway cannot have answered (the
// upstream holds each attempt until it times out: the 504 of the last
// one comes 1+retries attempt timeouts after the first is asked), so its
// request is cancelled. A
// request answered before it reaches the upstream, refused by the limiter
// or timed out while it waits for it, is read whole.
func (g *chaosGenerator) holdAndLeave(conn net.Conn, br *bufio.Reader) {
	symbol, arrived := g.up.hold()
	if _, err := io.WriteString(conn, "GET /quote?symbols="+symbol+" HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n"); err != nil {
		g.refusedOr("write: %v", err)
		return
	}
	sentAt := time.Now()
	g.sent.Add(1)
	type head struct {
		resp *http.Response
		err  error
	}
	heads := make(chan head, 1)
	go func() {
		resp, err := http.ReadResponse(br, nil)
		heads <- head{resp, err}
	}()
	select {
	case <-arrived:
		g.heldLeft.Add(1)
		reset(conn)
		conn.Close()
		<-heads
	case h := <-heads:
		switch {
		case h.err != nil:
			g.refusedOr("%s: no answer: %v", symbol, h.err)
		default:
			// Refused by the limiter, or timed out while it waited for
			// it: a 503 or a 504, a held symbol having no price.
			g.answered(h.resp.StatusCode, sentAt)
			body, err := io.ReadAll(h.resp.Body)
			q := chaosQuery{query: "symbols=" + symbol}
			if problem := q.check(http.MethodGet, h.resp.StatusCode, h.resp.Header, string(body), g.upstreamAddr, g.signal.Load() != 0); err != nil || problem != "" {
				g.fault("%s: %d %q before the upstream was asked: %v %s", symbol, h.resp.StatusCode, body, err, problem)
			}
		}
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// reset makes conn's Close a reset (RST): the way a client that crashes,
// or leaves with bytes unread, goes away.
func reset(conn net.Conn) { conn.(*net.TCPConn).SetLinger(0) }

// answered counts an answer's head read.
func (g *chaosGenerator) answered(status int, sentAt time.Time) {
	took := time.Since(sentAt)
	if at := g.signal.Load(); at != 0 && sentAt.UnixNano() < at {
		g.endedAfterSignal.Add(1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.statuses[strconv.Itoa(status)]++
	g.slowest = max(g.slowest, took)
}

// refusedOr counts a request refused or dropped unanswered, which only
// the shutdown may do, once the signal was sent; anything else is a fault.
func (g *chaosGenerator) refusedOr(format string, args ...any) {
	if g.signal.Load() != 0 {
		g.refused.Add(1)
		return
	}
	g.fault(format, args...)
}

// fault records what went wrong.
func (g *chaosGenerator) fault(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faulty++
	if len(g.faults) < 10 {
		g.faults = append(g.faults, fmt.Sprintf(format, args...))
	}
}

func (g *chaosGenerator) seenByStatus() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.statuses)
}

// report logs what the clients saw and fails t on any fault, or on a load
// that did not try the contract: no 200, 400 or 502, or no client that
// left before its answer.
func (g *chaosGenerator) report(t *testing.T, what string) {
	t.Helper()
	seen := g.seenByStatus()
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("%s: %d requests sent whole, %d half; heads read by status %v (%d 503s of requests cancelled), the slowest after %v; "+
		"%d clients left before their head, %d once their held symbol was asked; %d refused after the signal",
		what, g.sent.Load(), g.half.Load(), seen, g.cancelledRead.Load(), g.slowest.Round(time.Millisecond),
		g.left.Load(), g.heldLeft.Load(), g.refused.Load())
	if g.slowest > chaosTimeout+chaosLatencySlack {
		t.Errorf("%s: an answer's head came %v after its request, past -timeout %v and a margin of %v", what, g.slowest, chaosTimeout, chaosLatencySlack)
	}
	if g.faulty > 0 {
		t.Errorf("%s: %d answers break the contract; the first:\n%s", what, g.faulty, strings.Join(g.faults, "\n"))
	}
	if !g.shutdown && (seen["200"] == 0 || seen["400"] == 0 || seen["502"] == 0 || g.left.Load() == 0 || g.heldLeft.Load() == 0 || g.half.Load() == 0) {
		t.Errorf("%s: want some 200, 400 and 502 answers, clients that left, held or not, and half requests", what)
	}
}
