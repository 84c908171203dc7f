package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

var (
	compareRounds   = flag.Int("compare", 0, "TestCompare: rounds of the side-by-side benchmark, flows against plain (0: skip)")
	compareDuration = flag.Duration("compare-duration", 3*time.Second, "TestCompare: length of each saturation run")
	compareWorkers  = flag.Int("compare-workers", 64, "TestCompare: concurrent clients of a saturation run")
	compareInFlight = flag.Int("compare-inflight", 1000, "TestCompare: requests held in flight to weigh their memory")
	togetherRounds  = flag.Int("compare-together", 0, "TestCompareTogether: rounds in which both gateways are driven at once (0: skip)")
	compareLatency  = flag.String("compare-latency", "1ms", "TestCompare, TestCompareTogether: the upstream's mean latency in the saturation runs")
	compareFail     = flag.String("compare-fail", "0", "TestCompare, TestCompareTogether: the share of upstream requests it answers 500 in the saturation runs")
)

// compareRun is what one run of one gateway measured.
type compareRun struct {
	requests     uint64        // requests sent in the saturation run
	rps          float64       // successful requests per second at saturation
	p99          time.Duration // their 99th percentile latency
	cpuPerReq    time.Duration // the gateway process's CPU time per request at saturation
	bytesPerFlow float64       // heap and stack per request in flight
	heapPerFlow  float64       // of which heap
	goroutines   float64       // goroutines per request in flight
}

// TestCompare is the side-by-side benchmark of the flows gateway and the
// plain-Go one (docs/PERFORMANCE.md): in alternating runs, each on a fresh
// gateway process in front of the embedded upstream, it measures the
// requests per second at saturation (vegeta with a fixed number of
// clients, no limits), their p99 latency, and the memory per request in
// flight (heap and stacks of the gateway holding -compare-inflight requests
// on a slow upstream, less its idle level); it prints the medians, and the
// median of the ratios of the two runs of each round. Run it
// without -race:
//
//	go test ./cmd/asyncsteps-demo -run TestCompare -v -compare 5
func TestCompare(t *testing.T) {
	if *compareRounds <= 0 {
		t.Skip("the benchmark runs with -compare N")
	}
	fast := startProgram(t, "-serve-upstream", "-addr", "127.0.0.1:0", "-upstream-latency", *compareLatency, "-upstream-fail", *compareFail)
	defer fast.stop(t)
	slow := startProgram(t, "-serve-upstream", "-addr", "127.0.0.1:0", "-upstream-latency", "20s", "-upstream-fail", "0")
	defer slow.stop(t)

	runs := map[string][]compareRun{}
	for round := range *compareRounds {
		order := []string{"flows", "plain"}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, impl := range order {
			r := compareRun{}
			r.rps, r.p99, r.cpuPerReq = saturate(t, impl, fast.url)
			r.bytesPerFlow, r.heapPerFlow, r.goroutines = inFlightMemory(t, impl, slow.url)
			t.Logf("round %d %s: %.0f req/s, p99 %v, CPU %v per request, %.0f bytes (%.0f of heap) and %.2f goroutines per request in flight",
				round+1, impl, r.rps, r.p99, r.cpuPerReq, r.bytesPerFlow, r.heapPerFlow, r.goroutines)
			runs[impl] = append(runs[impl], r)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "medians of %d alternating runs:\n", *compareRounds)
	fmt.Fprintf(&out, "| gateway | requests/s at saturation | p99 | CPU per request | bytes per request in flight | of which heap | goroutines per request in flight |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, impl := range []string{"flows", "plain"} {
		rs := runs[impl]
		fmt.Fprintf(&out, "| %s | %.0f | %v | %v | %.0f | %.0f | %.2f |\n", impl,
			median(rs, func(r compareRun) float64 { return r.rps }),
			time.Duration(median(rs, func(r compareRun) float64 { return float64(r.p99) })).Round(10*time.Microsecond),
			time.Duration(median(rs, func(r compareRun) float64 { return float64(r.cpuPerReq) })).Round(time.Microsecond),
			median(rs, func(r compareRun) float64 { return r.bytesPerFlow }),
			median(rs, func(r compareRun) float64 { return r.heapPerFlow }),
			median(rs, func(r compareRun) float64 { return r.goroutines }))
	}
	// The machine's speed drifts between rounds; the two runs of a round
	// are next to each other, so their ratio drifts less than the medians.
	ratio := func(f func(compareRun) float64) float64 {
		flows, plain := runs["flows"], runs["plain"]
		var v []float64
		for i := range flows {
			v = appendRatio(v, f(flows[i]), f(plain[i]))
		}
		return medianOf(v)
	}
	fmt.Fprintf(&out, "median of the rounds' ratios, flows / plain: requests/s %.2f, p99 %.2f, CPU per request %.2f, bytes per request in flight %.2f\n",
		ratio(func(r compareRun) float64 { return r.rps }), ratio(func(r compareRun) float64 { return float64(r.p99) }),
		ratio(func(r compareRun) float64 { return float64(r.cpuPerReq) }), ratio(func(r compareRun) float64 { return r.bytesPerFlow }))
	t.Log("\n" + out.String())
}

func median(rs []compareRun, f func(compareRun) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

// appendRatio appends flows/plain to v, unless either is 0: a figure
// that could not be measured (a CPU time /proc did not give).
func appendRatio(v []float64, flows, plain float64) []float64 {
	if flows == 0 || plain == 0 {
		return v
	}
	return append(v, flows/plain)
}

// medianOf returns the median of v, which it sorts; NaN for no value.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// unlimited are the flags that take the limiter and the timeouts out of the
// way of a benchmark.
var unlimited = []string{"-concurrent", "1000000", "-queue", "0", "-rate", "0", "-timeout", "60s", "-attempt-timeout", "60s", "-grace", "0s"}

// saturate drives a fresh gateway with a fixed number of clients that send
// their next request as soon as the last is answered, and returns the
// successful requests per second, their p99 latency, and the gateway
// process's CPU time per request (0 where /proc cannot tell it): on a busy
// machine a steadier figure than the rate, which the other processes'
// load moves.
func saturate(t *testing.T, impl, upstreamURL string) (float64, time.Duration, time.Duration) {
	gw := startProgram(t, append([]string{"-impl", impl, "-addr", "127.0.0.1:0", "-upstream", upstreamURL}, unlimited...)...)
	defer gw.stop(t)
	r := drive(t, impl, gw, *compareWorkers, *compareDuration)
	return r.rps, r.p99, r.cpuPerReq
}

// drive sends requests to gw from workers clients, each sending its next
// request as soon as the last is answered, for d, and returns the
// requests sent, the successful ones per second, their p99 latency and the
// gateway process's CPU time per request.
func drive(t *testing.T, impl string, gw *program, workers int, d time.Duration) compareRun {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	n := uint64(workers)
	attacker := vegeta.NewAttacker(vegeta.Client(client), vegeta.Timeout(30*time.Second), vegeta.Workers(n), vegeta.MaxWorkers(n))
	targets := vegeta.NewStaticTargeter(
		vegeta.Target{Method: http.MethodGet, URL: gw.url + "/quote?symbols=AAPL,MSFT,GOOG"},
		vegeta.Target{Method: http.MethodGet, URL: gw.url + "/quote?symbols=IBM"},
		vegeta.Target{Method: http.MethodGet, URL: gw.url + "/quote?symbols=NVDA,TSLA"},
	)
	var m vegeta.Metrics
	cpu0, known0 := processCPU(gw.cmd.Process.Pid)
	for res := range attacker.Attack(targets, vegeta.Rate{}, d, impl) {
		m.Add(res)
	}
	cpu1, known1 := processCPU(gw.cmd.Process.Pid)
	m.Close()
	if m.Success < 0.999 {
		t.Errorf("%s: success ratio %.4f, status %v, errors %v", impl, m.Success, m.StatusCodes, m.Errors)
	}
	r := compareRun{requests: m.Requests, rps: m.Throughput, p99: m.Latencies.P99}
	// A fresh gateway may have used less than a clock tick before the
	// run: cpu0 is then 0, a reading like any other.
	if m.Requests > 0 && known0 && known1 {
		r.cpuPerReq = (cpu1 - cpu0) / time.Duration(m.Requests)
	}
	return r
}

// TestCompareTogether measures the two gateways as TestCompare does their
// requests per second, p99 and CPU per request, but drives both at once,
// each from half the clients: the machine's drift, which moves
// TestCompare's rounds by more than the gateways differ, then moves both
// alike, and each round's ratio is steadier (one gateway driven this way
// against a copy of itself gave ratios of 0.98 to 1.01). The two gateways
// share the machine as two processes under the same load, so the ratio of
// their requests per second is that of their efficiency, not of what
// either does with the whole machine.
//
//	go test ./cmd/asyncsteps-demo -run TestCompareTogether -v -compare-together 5
func TestCompareTogether(t *testing.T) {
	if *togetherRounds <= 0 {
		t.Skip("the benchmark runs with -compare-together N")
	}
	fast := startProgram(t, "-serve-upstream", "-addr", "127.0.0.1:0", "-upstream-latency", *compareLatency, "-upstream-fail", *compareFail)
	defer fast.stop(t)
	var ratios [3][]float64 // requests/s, p99, CPU per request: flows over plain
	for round := range *togetherRounds {
		runs := driveTogether(t, fast.url, round%2 == 1)
		flows, plain := runs["flows"], runs["plain"]
		t.Logf("round %d: flows %.0f req/s, p99 %v, CPU %v per request; plain %.0f req/s, p99 %v, CPU %v per request",
			round+1, flows.rps, flows.p99, flows.cpuPerReq, plain.rps, plain.p99, plain.cpuPerReq)
		ratios[0] = append(ratios[0], flows.rps/plain.rps)
		ratios[1] = append(ratios[1], float64(flows.p99)/float64(plain.p99))
		ratios[2] = appendRatio(ratios[2], float64(flows.cpuPerReq), float64(plain.cpuPerReq))
	}
	t.Logf("median of %d rounds' ratios, flows / plain, both gateways driven at once: requests/s %.3f (rounds %s), p99 %.2f, CPU per request %.3f",
		*togetherRounds, medianOf(slices.Clone(ratios[0])), formatRatios(ratios[0]), medianOf(ratios[1]), medianOf(ratios[2]))
}

// driveTogether starts both gateways, warms them up, then drives both at
// once, each from half of -compare-workers clients; plainFirst says which
// starts first.
func driveTogether(t *testing.T, upstreamURL string, plainFirst bool) map[string]compareRun {
	impls := []string{"flows", "plain"}
	if plainFirst {
		slices.Reverse(impls)
	}
	gws := map[string]*program{}
	for _, impl := range impls {
		gws[impl] = startProgram(t, append([]string{"-impl", impl, "-addr", "127.0.0.1:0", "-upstream", upstreamURL}, unlimited...)...)
		defer gws[impl].stop(t)
	}
	for _, impl := range impls { // the connections and the gateways' pools made
		resp, err := http.Get(gws[impl].url + "/quote?symbols=AAPL,MSFT,GOOG")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	runs := map[string]compareRun{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, impl := range impls {
		wg.Go(func() {
			r := drive(t, impl, gws[impl], max(*compareWorkers/2, 1), *compareDuration)
			mu.Lock()
			runs[impl] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return runs
}

// formatRatios lists ratios with two decimals, in the order measured.
func formatRatios(v []float64) string {
	s := make([]string, len(v))
	for i, r := range v {
		s[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}

// processCPU returns the user and system CPU time process pid has used,
// from /proc/pid/stat (Linux), in clock ticks of 10 ms; known is false if
// it cannot be read.
func processCPU(pid int) (cpu time.Duration, known bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold any character: state is the first, utime and stime the 12th and
	// 13th.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux port Go supports
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, true
}

// inFlightMemory holds requests in flight on a fresh gateway, against an
// upstream that answers after seconds, and returns the gateway's heap and
// stack per request, above its idle level, the heap alone, and its
// goroutines per request.
func inFlightMemory(t *testing.T, impl, slowURL string) (float64, float64, float64) {
	gw := startProgram(t, append([]string{"-impl", impl, "-addr", "127.0.0.1:0", "-upstream", slowURL, "-debug"}, unlimited...)...)
	idle := readMemory(t, gw.url)
	n := *compareInFlight
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := client.Get(gw.url + "/quote?symbols=AAPL")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st statsSnapshot
		getJSON(t, gw.url+"/stats", &st)
		if st.InFlight == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d requests in flight, want %d", impl, st.InFlight, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // for every request to reach the upstream
	held := readMemory(t, gw.url)
	gw.stop(t) // -grace 0s: the requests held are cancelled
	wg.Wait()
	per := func(held, idle uint64) float64 { return (float64(held) - float64(idle)) / float64(n) }
	return per(held.HeapAlloc+held.StackInuse, idle.HeapAlloc+idle.StackInuse), per(held.HeapAlloc, idle.HeapAlloc),
		per(uint64(held.Goroutines), uint64(idle.Goroutines))
}
