package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkGatewayInMemorySerial is BenchmarkGatewayInMemory's flows
// gateway with one request at a time from one goroutine: small and
// sequential enough for callgrind, whose instructions per op
// (docs/PERFORMANCE.md) do not depend on the machine's load.
func BenchmarkGatewayInMemorySerial(b *testing.B) {
	cfg := defaultConfig()
	cfg.Upstream = "http://upstream.invalid"
	cfg.Limits.Concurrent = 1 << 20
	client := &http.Client{Transport: inMemoryUpstream{}}
	gw, closeGateway := newGatewayWith("flows", cfg, slog.New(slog.DiscardHandler), client)
	defer closeGateway()
	req := httptest.NewRequest(http.MethodGet, "/quote?symbols=AAPL,MSFT,GOOG", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		gw.handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d, %s", w.Code, w.Body)
		}
	}
}
