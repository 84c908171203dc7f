package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

var (
	loadDuration = flag.Duration("load", 2*time.Second, "TestLoad: how long the load generator drives each gateway (the recorded run uses 20s)")
	loadCapacity = flag.Int("load-capacity", 50, "TestLoad: the gateway's -rate; the generator sends twice that")
	loadImpls    = flag.String("load-impl", "flows,plain", "TestLoad: the gateways driven, in turn")
)

// TestLoad drives the gateway, running as a program of its own in front of
// the embedded upstream (another process), with vegeta at twice its
// configured rate, then checks the gateway's counters against vegeta's:
// every request answered 200, 400, 503 or 504; as many started as sent, each
// finished with the status vegeta saw (none cancelled); and goroutines and
// heap back to their idle level. The long form, whose summary is in
// docs/PERFORMANCE.md:
//
//	go test ./cmd/asyncsteps-demo -run TestLoad -v -load 20s -load-capacity 200
func TestLoad(t *testing.T) {
	up := startProgram(t, "-serve-upstream", "-addr", "127.0.0.1:0",
		"-upstream-latency", "5ms", "-upstream-fail", "0.01", "-seed", "1")
	defer up.stop(t)
	for impl := range strings.SplitSeq(*loadImpls, ",") {
		t.Run(impl, func(t *testing.T) { loadOne(t, impl, up.url) })
	}
}

func loadOne(t *testing.T, impl, upstreamURL string) {
	capacity := *loadCapacity
	gw := startProgram(t, "-impl", impl, "-addr", "127.0.0.1:0", "-upstream", upstreamURL, "-debug",
		"-rate", fmt.Sprint(capacity), "-burst", fmt.Sprint(max(capacity/10, 1)),
		"-concurrent", "64", "-queue", "64", "-timeout", "1s", "-grace", "5s")
	defer gw.stop(t)
	idle := readMemory(t, gw.url)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	attacker := vegeta.NewAttacker(vegeta.Client(client), vegeta.Timeout(10*time.Second))
	peak := watchMemory(t, gw.url)
	var m vegeta.Metrics
	for res := range attacker.Attack(loadTargets(gw.url), vegeta.Rate{Freq: 2 * capacity, Per: time.Second}, *loadDuration, impl) {
		m.Add(res)
	}
	m.Close()
	peakMem := peak()

	// Its quantiles are of the last 60 s: of the whole run when -load is
	// shorter.
	var st statsSnapshot
	getJSON(t, gw.url+"/stats", &st)
	client.CloseIdleConnections()
	after := waitIdle(t, gw.url, idle, m.Requests)

	t.Logf("%s: %d requests in %v at %.0f/s (capacity %d/s); status %v; latency p50 %v p99 %v max %v; "+
		"gateway: finished %v, cancelled %d, p50 %.1fms p99 %.1fms; peak RSS %.1f MiB, peak heap %.1f MiB; "+
		"goroutines idle %d, peak %d, after %d; heap idle %.2f MiB, after %.2f MiB",
		impl, m.Requests, *loadDuration, m.Rate, capacity, m.StatusCodes, m.Latencies.P50, m.Latencies.P99, m.Latencies.Max,
		st.Finished, st.Cancelled, st.LatencyMs.P50, st.LatencyMs.P99, mib(peakMem.PeakRSS), mib(peakMem.HeapAlloc),
		idle.Goroutines, peakMem.Goroutines, after.Goroutines, mib(idle.HeapAlloc), mib(after.HeapAlloc))

	for code := range m.StatusCodes {
		if !slices.Contains([]string{"200", "400", "503", "504"}, code) {
			t.Errorf("answers with status %s: %d; errors %v", code, m.StatusCodes[code], m.Errors)
		}
	}
	var byStatus int64
	for code, n := range m.StatusCodes {
		byStatus += int64(n)
		if st.ByStatus[code] != int64(n) {
			t.Errorf("status %s: the gateway counted %d, the generator %d", code, st.ByStatus[code], n)
		}
	}
	var finished int64
	for _, n := range st.Finished {
		finished += n
	}
	if st.Started != int64(m.Requests) || st.Started != finished+st.Cancelled || st.Cancelled != 0 ||
		byStatus != int64(m.Requests) || st.InFlight != 0 || st.LimiterQueue != 0 {
		t.Errorf("generator sent %d; gateway started %d, finished %d, cancelled %d, in flight %d, queued %d",
			m.Requests, st.Started, finished, st.Cancelled, st.InFlight, st.LimiterQueue)
	}
	// Twice the capacity shows as 503s from the limiter, or as 504s on a
	// machine too busy to keep up with its own limit.
	if m.StatusCodes["200"] == 0 || m.StatusCodes["400"] == 0 || m.StatusCodes["503"]+m.StatusCodes["504"] == 0 {
		t.Errorf("at twice the capacity, want some 200, 400, and 503 or 504 answers: %v", m.StatusCodes)
	}
}

// loadTargets are the requests of the load: quotes of one to three known
// symbols, and one request in ten a bad one (an unknown or malformed
// symbol, no symbols), drawn from a fixed seed.
func loadTargets(base string) vegeta.Targeter {
	rnd := rand.New(rand.NewPCG(1, 2))
	bad := []string{"symbols=ZZZZ", "symbols=aapl", "", "symbols=AAPL,msft"}
	var targets []vegeta.Target
	for i := range 1000 {
		query := bad[i/10%len(bad)]
		if i%10 != 0 {
			n := 1 + rnd.IntN(3)
			symbols := make([]string, n)
			for j := range symbols {
				symbols[j] = knownSymbols[rnd.IntN(len(knownSymbols))]
			}
			query = "symbols=" + strings.Join(symbols, ",")
		}
		targets = append(targets, vegeta.Target{Method: http.MethodGet, URL: base + "/quote?" + query})
	}
	return vegeta.NewStaticTargeter(targets...)
}

func readMemory(t *testing.T, base string) memoryReport {
	t.Helper()
	var m memoryReport
	getJSON(t, base+"/debug/memory", &m)
	return m
}

// watchMemory samples the gateway's memory until the function it returns
// is called, which returns the peaks.
func watchMemory(t *testing.T, base string) func() memoryReport {
	var peak memoryReport
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var ms memoryReport
			resp, err := http.Get(base + "/debug/memory")
			if err != nil {
				continue
			}
			json.NewDecoder(resp.Body).Decode(&ms)
			resp.Body.Close()
			mu.Lock()
			peak.HeapAlloc = max(peak.HeapAlloc, ms.HeapAlloc)
			peak.Goroutines = max(peak.Goroutines, ms.Goroutines)
			peak.PeakRSS = max(peak.PeakRSS, ms.PeakRSS)
			mu.Unlock()
		}
	}()
	return func() memoryReport {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		peak.PeakRSS = max(peak.PeakRSS, readMemory(t, base).PeakRSS)
		return peak
	}
}

// waitIdle waits until the gateway's goroutines and heap are back to
// about idle: a few goroutines more (the runtime's, the connection asking)
// and at most 4 MiB more heap, for what warmed up (pools, maps, buffers),
// plus 256 bytes per request, far less than a request left behind holds.
func waitIdle(t *testing.T, base string, idle memoryReport, requests uint64) memoryReport {
	t.Helper()
	heapLimit := idle.HeapAlloc + 4<<20 + 256*requests
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := readMemory(t, base)
		if m.Goroutines <= idle.Goroutines+2 && m.HeapAlloc <= heapLimit {
			return m
		}
		if time.Now().After(deadline) {
			t.Errorf("not back to idle: goroutines %d (idle %d), heap %d (idle %d)", m.Goroutines, idle.Goroutines, m.HeapAlloc, idle.HeapAlloc)
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
