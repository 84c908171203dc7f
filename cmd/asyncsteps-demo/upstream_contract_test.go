package main

import (
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// An upstream that breaks its contract with a 200 is answered 502
// CommError, and not asked again: a body that is not JSON, or empty, or
// JSON that is no price of the symbol asked (another symbol's, a missing,
// zero or negative price), which the gateway would otherwise show as the
// symbol's price. The client gets a fixed info; what is wrong, the
// upstream's text, goes to the log only, clipped.
func TestQuoteUpstreamBrokenAnswerIs502(t *testing.T) {
	huge := strings.Repeat("A", 200<<10)
	bodies := map[string]string{
		"AAPL": `{"symbol":"MSFT","price":12.5}`,
		"IBM":  `{"symbol":"IBM","price":-3}`,
		"CRM":  `{"symbol":"CRM"}`,
		"AMD":  `{"price":7}`,
		"INTC": `{"symbol":"INTC","price":"7"}`,
		"META": `not json`,
		"CSCO": ``,
		"NVDA": `{"symbol":"NVDA","price":1e999}`,
		"ORCL": `{"symbol":"` + huge + `","price":1}`,
	}
	details := map[string]string{
		"AAPL": `"symbol \"MSFT\", price 12.5"`,
		"IBM":  `"symbol \"IBM\", price -3"`,
		"CRM":  `"symbol \"CRM\", price 0"`,
		"AMD":  `"symbol \"\", price 7"`,
		"INTC": `"json: cannot unmarshal string into Go struct field quote.price of type float64"`,
		"META": `"invalid character 'o' in literal null (expecting 'u')"`,
		"CSCO": `"unexpected end of JSON input"`,
		"NVDA": `"json: cannot unmarshal number 1e999 into Go struct field quote.price of type float64"`,
		"ORCL": `"symbol \"` + huge[:maxLoggedDetail-len(`symbol "`)] + `..."`,
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g, asked := gatewayBeforeUpstream(t, impl, func(w http.ResponseWriter, _ *http.Request, symbol string) {
				w.Write([]byte(bodies[symbol]))
			})
			var want []string
			for symbol, detail := range details {
				info := "upstream answer for " + symbol + " is malformed"
				wantAnswer(t, g.get("?symbols="+symbol), 502, "", errBody("CommError", info))
				if n := asked()[symbol]; n != 1 {
					t.Errorf("%s asked %d times, want once", symbol, n)
				}
				want = append(want,
					`level=WARN msg="upstream answer malformed" symbol=`+symbol+` detail=`+detail,
					`level=WARN msg="asynchttp: request failed" method=GET path=/quote status=502 code=CommError info="`+info+`"`)
			}
			g.srv.Close() // waits for the requests, logged once answered
			wantLogLines(t, g.logs.String(), want)
			checkCounters(t, g.gw.stats, counters{started: int64(len(details)), finished: map[string]int64{"CommError": int64(len(details))}})
		})
	}
}

// wantLogLines checks that log holds exactly the lines want, in any
// order: a request's line is logged once it is answered, which its client
// may read before.
func wantLogLines(t *testing.T, log string, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A redirect is not followed: the upstream contract has none, so it is a
// broken upstream, 502, asked once. A body longer than 1 MiB is a
// CommError retried, in both gateways alike; one announced so fails
// before its bytes come, even if they never do.
func TestQuoteUpstreamRedirectAndHugeBody(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			g, asked := gatewayBeforeUpstream(t, impl, func(w http.ResponseWriter, req *http.Request, symbol string) {
				switch symbol {
				case "LOOP":
					http.Redirect(w, req, req.URL.String(), http.StatusFound)
				case "HELD":
					w.Header().Set("Content-Length", strconv.Itoa(1<<20+1))
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					<-req.Context().Done()
				default:
					w.Write(make([]byte, 1<<20+1))
				}
			})
			wantAnswer(t, g.get("?symbols=LOOP"), 502, "", errBody("CommError", "upstream answered 302 for LOOP"))
			wantAnswer(t, g.get("?symbols=BIG"), 502, "", errBody("CommError", "asynchttp: response body longer than MaxBody"))
			wantAnswer(t, g.get("?symbols=HELD"), 502, "", errBody("CommError", "asynchttp: response body longer than MaxBody"))
			if n := asked(); n["LOOP"] != 1 || n["BIG"] != 4 || n["HELD"] != 4 {
				t.Errorf("asked %v, want LOOP once, BIG and HELD 4 times", n)
			}
			checkCounters(t, g.gw.stats, counters{started: 3, finished: map[string]int64{"CommError": 3}})
		})
	}
}

// A status of three digits past 599, which net/http reads as it reads
// any, is no 5xx of the contract: a broken upstream, 502 and asked once,
// counted bad_answer, as a 429 is; only 500 to 599 are failures retried.
func TestQuoteUpstreamStatusPast5xxIsNotRetried(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			statuses := map[string]int{"SIX": 600, "NINE": 999}
			g, asked := gatewayBeforeUpstream(t, impl, func(w http.ResponseWriter, _ *http.Request, symbol string) {
				w.WriteHeader(statuses[symbol])
			})
			for symbol, status := range statuses {
				wantAnswer(t, g.get("?symbols="+symbol), 502, "", errBody("CommError", "upstream answered "+strconv.Itoa(status)+" for "+symbol))
				if n := asked()[symbol]; n != 1 {
					t.Errorf("%s asked %d times, want once", symbol, n)
				}
			}
			checkCounters(t, g.gw.stats, counters{started: 2, finished: map[string]int64{"CommError": 2}})
			if got := g.gw.stats.snapshot().Upstream; got["bad_answer"] != 2 || got["server_error"] != 0 {
				t.Errorf("upstream outcomes %v, want bad_answer 2, server_error 0", got)
			}
		})
	}
}

// gatewayBeforeUpstream starts impl's gateway in front of an upstream on
// loopback whose answers answer writes, and returns it with a function
// that says how many times each symbol has been asked of the upstream.
func gatewayBeforeUpstream(t *testing.T, impl string, answer func(w http.ResponseWriter, req *http.Request, symbol string)) (*testGateway, func() map[string]int) {
	var mu sync.Mutex
	asked := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		symbol := req.URL.Query().Get("symbol")
		mu.Lock()
		asked[symbol]++
		mu.Unlock()
		answer(w, req, symbol)
	}))
	t.Cleanup(up.Close)
	cfg := testConfig()
	cfg.Upstream = up.URL
	logs := &syncBuffer{}
	gw, closeGateway := newGateway(impl, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime})))
	srv := httptest.NewServer(gw.handler)
	t.Cleanup(func() { srv.Close(); closeGateway() })
	return &testGateway{t: t, url: srv.URL, gw: gw, logs: logs, srv: srv}, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(asked)
	}
}
