package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkGatewayQuote serves /quote requests one after another through
// each gateway's handler, called directly, against the embedded upstream
// (no latency, no failures) on loopback: the three requests of TestCompare
// in turn, one op each. Its allocations per op are exact, and its
// instructions per op under callgrind (docs/PERFORMANCE.md) do not depend
// on the machine's load, unlike TestCompare's timings.
func BenchmarkGatewayQuote(b *testing.B) {
	for _, impl := range impls {
		b.Run(impl, func(b *testing.B) {
			up := httptest.NewServer(newUpstream(upstreamOptions{}))
			defer up.Close()
			cfg := defaultConfig()
			cfg.Upstream = up.URL
			cfg.Limits.Concurrent = 1 << 20
			cfg.Loops = 1
			gw, closeGateway := newGateway(impl, cfg, slog.New(slog.DiscardHandler))
			defer closeGateway()
			reqs := []*http.Request{
				httptest.NewRequest(http.MethodGet, "/quote?symbols=AAPL,MSFT,GOOG", nil),
				httptest.NewRequest(http.MethodGet, "/quote?symbols=IBM", nil),
				httptest.NewRequest(http.MethodGet, "/quote?symbols=NVDA,TSLA", nil),
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w := httptest.NewRecorder()
				gw.handler.ServeHTTP(w, reqs[i%len(reqs)])
				if w.Code != http.StatusOK {
					b.Fatalf("%s: status %d, %s", impl, w.Code, w.Body)
				}
				i++
			}
		})
	}
}
