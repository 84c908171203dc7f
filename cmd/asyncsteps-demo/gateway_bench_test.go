package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// BenchmarkGatewayQuote serves /quote requests one after another through
// each gateway's handler, called directly, against the embedded upstream
// (no latency, no failures) on loopback: the three requests of TestCompare
// in turn, one op each (and plainInAwait, see BenchmarkGatewayInMemory).
// Its allocations per op are exact, and its
// instructions per op under callgrind (docs/PERFORMANCE.md) do not depend
// on the machine's load, unlike TestCompare's timings.
func BenchmarkGatewayQuote(b *testing.B) {
	for _, impl := range append(impls, plainInAwait) {
		b.Run(impl, func(b *testing.B) {
			up := httptest.NewServer(newUpstream(upstreamOptions{}))
			defer up.Close()
			cfg := defaultConfig()
			cfg.Upstream = up.URL
			cfg.Limits.Concurrent = 1 << 20
			cfg.Loops = 1
			gw, closeGateway := newBenchGateway(impl, cfg, upstreamClient())
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

// BenchmarkGatewayInMemory is the gateways' own cost per request: each
// serves GET /quote?symbols=AAPL,MSFT,GOOG, called directly from 16
// goroutines per core, with an upstream that answers at once from memory
// (inMemoryUpstream): no sockets, no upstream server. What is left is
// what differs between the two: the flows and the Await functions against
// errgroup's goroutines and contexts, and the allocations of each. Its
// ns/op is wall time with every core busy, so CPU time per request is
// about ns/op times the cores. It also reports the collector's CPU time
// per request (gc-ns/op, the runtime's estimate, which counts marking on
// otherwise idle CPU too) and the heap the last
// collection during the run found live (live-KB): a heap in use that is
// larger, and denser in pointers, costs every cycle more marking.
//
// A third case, plain-in-await, splits the difference: the plain
// gateway's own code, errgroup and all, run as the single Await function
// of one flow per request, through asynchttp.Handler on a LoopGroup as
// the flows gateway is. It costs what entering a flow and coming back
// costs (the Handler, the Root, RunHelping, one Await), with none of the
// flows gateway's steps.
func BenchmarkGatewayInMemory(b *testing.B) {
	for _, impl := range append(impls, plainInAwait) {
		b.Run(impl, func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Upstream = "http://upstream.invalid"
			cfg.Limits.Concurrent = 1 << 20
			client := &http.Client{Transport: inMemoryUpstream{}}
			gw, closeGateway := newBenchGateway(impl, cfg, client)
			defer closeGateway()
			b.ReportAllocs()
			b.SetParallelism(16)
			gcBefore := readGCMetrics()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/quote?symbols=AAPL,MSFT,GOOG", nil)
				for pb.Next() {
					w := httptest.NewRecorder()
					gw.handler.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Errorf("%s: status %d, %s", impl, w.Code, w.Body)
						return
					}
				}
			})
			gcAfter := readGCMetrics()
			b.ReportMetric((gcAfter.cpu-gcBefore.cpu)*1e9/float64(b.N), "gc-ns/op")
			b.ReportMetric((gcAfter.assist-gcBefore.assist)*1e9/float64(b.N), "assist-ns/op")
			b.ReportMetric(float64(gcAfter.cycles-gcBefore.cycles)*1e3/float64(b.N), "gcs/1k-op")
			b.ReportMetric(float64(gcAfter.live)/1024, "live-KB")
		})
	}
}

// plainInAwait names the case of BenchmarkGatewayInMemory that runs the
// plain gateway inside one Await of a flow.
const plainInAwait = "plain-in-await"

// newBenchGateway is newGatewayWith, and also builds plainInAwait.
func newBenchGateway(impl string, cfg config, client *http.Client) (*gateway, func()) {
	logger := slog.New(slog.DiscardHandler)
	if impl != plainInAwait {
		return newGatewayWith(impl, cfg, logger, client)
	}
	cfg.decode = decodeQuote
	st := newStats(func() int64 { return 0 })
	plain, _ := newPlainGateway(cfg, st, client, logger)
	loops := asyncsteps.NewLoopGroup(cfg.Loops)
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loops.Next() },
		Logger: logger,
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			as.Await(func(ctx context.Context) (any, error) {
				reply, err := plain.quote(ctx, req)
				if err != nil {
					return nil, err
				}
				return &reply, nil
			})
		},
	}
	return &gateway{handler: routes(h, st, &atomic.Bool{}, nil, errorWriter(cfg, logger), cfg.writeTimeout()), stats: st}, func() {
		loops.Close()
		client.CloseIdleConnections()
	}
}

// inMemoryUpstream answers each price request as the embedded upstream
// does, at once, without a connection.
type inMemoryUpstream struct{}

func (inMemoryUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	symbol := req.URL.Query().Get("symbol")
	body := []byte(`{"symbol":"` + symbol + `","price":` + strconv.FormatFloat(priceOf(symbol), 'f', 2, 64) + "}\n")
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// gcMetrics are the runtime's figures of its collector that
// BenchmarkGatewayInMemory reports.
type gcMetrics struct {
	cpu    float64 // seconds of CPU spent collecting, estimated, since the start
	assist float64 // of which in mark assists: allocating goroutines made to mark
	cycles uint64  // collections completed since the start
	live   uint64  // bytes of heap the last collection found live
}

func readGCMetrics() gcMetrics {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	return gcMetrics{
		cpu:    s[0].Value.Float64(),
		assist: s[1].Value.Float64(),
		cycles: s[2].Value.Uint64(),
		live:   s[3].Value.Uint64(),
	}
}
