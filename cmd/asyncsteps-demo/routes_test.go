package main

// The answers of the routes themselves, in both gateways: the headers as
// well as the bodies.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reply is a whole answer: its status, the headers that matter to a
// client (Date and the like left out), and its body.
type reply struct {
	status int
	header map[string]string
	body   string
}

// answerHeaders are the headers a reply keeps.
var answerHeaders = []string{"Allow", "Content-Length", "Content-Type", "Retry-After"}

// exchange sends method path (a path and query) to the gateway.
func (g *testGateway) exchange(method, path string) reply {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	return replyOf(resp)
}

// rawExchange sends the request line method target, as written, to the
// gateway: a target http.Client does not write, such as a CONNECT's
// host:port.
func (g *testGateway) rawExchange(method, target string) reply {
	g.t.Helper()
	conn, err := net.Dial("tcp", g.srv.Listener.Addr().String())
	if err != nil {
		g.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		g.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		g.t.Fatal(err)
	}
	return replyOf(resp)
}

// replyOf reads resp, which it closes, into a reply.
func replyOf(resp *http.Response) reply {
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: map[string]string{}, body: string(body)}
	for _, k := range answerHeaders {
		if v, ok := resp.Header[k]; ok {
			r.header[k] = v[0]
		}
	}
	return r
}

// jsonReply is the reply of a JSON body with status.
func jsonReply(status int, body string) reply {
	return reply{status: status, body: body,
		header: map[string]string{"Content-Type": "application/json", "Content-Length": strconv.Itoa(len(body))}}
}

// with returns r with the header k set to v.
func (r reply) with(k, v string) reply {
	h := map[string]string{k: v}
	for k, v := range r.header {
		h[k] = v
	}
	r.header = h
	return r
}

// headOnly returns r as the answer to HEAD: the same headers, no body.
func (r reply) headOnly() reply {
	r.body = ""
	return r
}

func wantReply(t *testing.T, what string, got, want reply) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %d %v %q\nwant %d %v %q", what, got.status, got.header, got.body, want.status, want.header, want.body)
	}
}

// An empty entry of symbols is skipped wherever it is, as a repeated one
// is; a request left with no symbol is answered "no symbols".
func TestQuoteEmptySymbolEntriesAreSkipped(t *testing.T) {
	noSymbols := jsonReply(400, errBody("InvalidRequest", "no symbols: use /quote?symbols=AAPL,MSFT"))
	tests := []struct {
		query string
		want  reply
	}{
		{"?symbols=", noSymbols},
		{"?symbols=&symbols=", noSymbols},
		{"?symbols=,", noSymbols},
		{"?symbols=,,&symbols=,", noSymbols},
		{"?symbols=AAPL,,MSFT", jsonReply(200, quotesBody("AAPL", "MSFT"))},
		{"?symbols=AAPL&symbols=", jsonReply(200, quotesBody("AAPL"))},
		{"?symbols=,IBM,&symbols=,AAPL", jsonReply(200, quotesBody("IBM", "AAPL"))},
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			for _, tc := range tests {
				wantReply(t, "GET "+tc.query, g.exchange(http.MethodGet, "/quote"+tc.query), tc.want)
			}
			checkCounters(t, g.gw.stats, counters{started: 7, finished: map[string]int64{"OK": 3, "InvalidRequest": 4}})
		})
	}
}

// HEAD is answered as GET is, without the body: the same status and
// headers. Any other method is a 405 whose Allow lists exactly GET and
// HEAD, on every route, its info naming the method, clipped; only those
// of /quote are counted as requests.
func TestRoutesServeGetAndHeadOnly(t *testing.T) {
	notAllowed := func(method string) reply {
		return jsonReply(405, errBody("MethodNotAllowed", "method "+method+" not allowed, use GET or HEAD")).with("Allow", "GET, HEAD")
	}
	tests := []struct {
		method, path string
		want         reply
	}{
		{"HEAD", "/quote?symbols=AAPL,MSFT", jsonReply(200, quotesBody("AAPL", "MSFT")).headOnly()},
		{"HEAD", "/quote?symbols=zz", jsonReply(400, errBody("InvalidRequest", `malformed symbol "zz": 1 to 5 capital letters`)).headOnly()},
		{"POST", "/quote?symbols=AAPL", notAllowed("POST")},
		{"OPTIONS", "/quote", notAllowed("OPTIONS")},
		{"POST", "/stats", notAllowed("POST")},
		{"DELETE", "/metrics", notAllowed("DELETE")},
		// A method is a client's text, up to a megabyte, clipped as a path is.
		{strings.Repeat("X", 1<<10), "/quote?symbols=AAPL", notAllowed("XXXXXXXXXXXXXXXX...")},
		{strings.Repeat("X", 1<<10), "/stats", notAllowed("XXXXXXXXXXXXXXXX...")},
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			for _, tc := range tests {
				wantReply(t, clip(tc.method)+" "+tc.path, g.exchange(tc.method, tc.path), tc.want)
			}
			for _, path := range []string{"/stats", "/metrics"} {
				if got := g.exchange(http.MethodHead, path); got.status != 200 || got.body != "" {
					t.Errorf("HEAD %s: %d %q, want 200 and no body", path, got.status, got.body)
				}
			}
			checkCounters(t, g.gw.stats, counters{started: 5, finished: map[string]int64{"OK": 1, "InvalidRequest": 1, "MethodNotAllowed": 3}})
		})
	}
}

// A path the gateway does not serve is a 404 with its JSON error body,
// whatever the method; it is not counted as a /quote request.
func TestUnknownPathIs404WithTheErrorBody(t *testing.T) {
	notFound := func(path string) reply {
		return jsonReply(404, errBody("NotFound", "no such path "+strconv.Quote(path)+": the gateway serves /quote, /stats, /metrics, /healthz and /readyz"))
	}
	tests := []struct {
		method, path string
		want         reply
	}{
		{"GET", "/", notFound("/")},
		{"GET", "/quotes?symbols=AAPL", notFound("/quotes")},
		{"GET", "/quote/AAPL", notFound("/quote/AAPL")},
		{"POST", "/nowhere", notFound("/nowhere")},
		{"HEAD", "/nowhere", notFound("/nowhere").headOnly()},
		{"GET", "/debug/memory", notFound("/debug/memory")}, // served with -debug only
		{"GET", "/a-path-longer-than-sixteen-bytes", notFound("/a-path-longer-t...")},
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			for _, tc := range tests {
				wantReply(t, tc.method+" "+tc.path, g.exchange(tc.method, tc.path), tc.want)
			}
			checkCounters(t, g.gw.stats, counters{})
		})
	}
}

// A request target that is no path, which ServeMux answers itself, in
// plain text or with no body, is a 404 with the gateway's JSON error body
// too: "*" (but for OPTIONS, which net/http answers itself, 200) and a
// CONNECT's host:port. A CONNECT with a path is routed as any method is.
func TestTargetThatIsNoPathIs404WithTheErrorBody(t *testing.T) {
	notFound := func(target string) reply {
		return jsonReply(404, errBody("NotFound", "no such path "+strconv.Quote(target)+": the gateway serves /quote, /stats, /metrics, /healthz and /readyz"))
	}
	tests := []struct {
		method, target string
		want           reply
	}{
		{"GET", "*", notFound("*")},
		{"HEAD", "*", notFound("*").headOnly()},
		{"POST", "*", notFound("*")},
		{"CONNECT", "example.com:443", notFound("example.com:443")},
		{"CONNECT", "a-host-longer-than-sixteen-bytes:443", notFound("a-host-longer-th...")},
		{"CONNECT", "/nowhere", notFound("/nowhere")},
		{"CONNECT", "/stats", jsonReply(405, errBody("MethodNotAllowed", "method CONNECT not allowed, use GET or HEAD")).with("Allow", "GET, HEAD")},
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			for _, tc := range tests {
				wantReply(t, tc.method+" "+tc.target, g.rawExchange(tc.method, tc.target), tc.want)
			}
			if got := g.rawExchange("OPTIONS", "*"); got.status != 200 || got.body != "" {
				t.Errorf("OPTIONS *: %d %q, want net/http's 200 with no body", got.status, got.body)
			}
			checkCounters(t, g.gw.stats, counters{})
		})
	}
}

// /healthz answers 200 while the gateway serves, /readyz 200 until the
// shutdown begins, then 503 ShuttingDown; neither is counted as a
// request, and both are read-only routes.
func TestHealthAndReadinessProbes(t *testing.T) {
	healthy, ready := jsonReply(200, `{"status":"ok"}`+"\n"), jsonReply(200, `{"status":"ready"}`+"\n")
	stopping := jsonReply(503, errBody("ShuttingDown", "the gateway is shutting down")).with("Retry-After", "1")
	notAllowed := jsonReply(405, errBody("MethodNotAllowed", "method POST not allowed, use GET or HEAD")).with("Allow", "GET, HEAD")
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g := startGateway(t, impl, testConfig())
			check := func(method, path string, want reply) {
				t.Helper()
				if method == http.MethodHead {
					want = want.headOnly()
				}
				wantReply(t, method+" "+path, g.exchange(method, path), want)
			}
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				check(method, "/healthz", healthy)
				check(method, "/readyz", ready)
			}
			check(http.MethodPost, "/healthz", notAllowed)
			check(http.MethodPost, "/readyz", notAllowed)
			g.gw.stopping.Store(true)
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				check(method, "/healthz", healthy)
				check(method, "/readyz", stopping)
			}
			checkCounters(t, g.gw.stats, counters{})
			if got := g.logs.String(); got != "" {
				t.Errorf("logged %q, want nothing", got)
			}
		})
	}
}
