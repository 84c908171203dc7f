package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var compareCallgrind = flag.Duration("compare-callgrind", 0, "TestCompareInstructions: how long each gateway is driven under callgrind (0: skip)")

// TestCompareInstructions counts the instructions each gateway executes
// per request in the configuration of TestCompareTogether's runs, with
// the misses of a simulated cache and branch predictor: a gateway process
// in front of the embedded upstream (in a process of its own, not
// counted), no limits, half of -compare-workers clients sending back to
// back. The gateway runs under valgrind's callgrind, which counts every
// instruction of the process in user space, whatever the machine's load.
// The counters are zeroed after a warm-up and dumped after
// -compare-callgrind of load, so the count covers the requests of that
// run only, the collector and the scheduler included.
//
// Instructions are the work a gateway does; its CPU time per request
// (TestCompare) is that work times what each instruction costs, which
// the misses weigh: where two gateways do the same work at different CPU
// times, the difference is in how the work runs, not in how much of it
// there is (docs/PERFORMANCE.md).
//
//	go test ./cmd/asyncsteps-demo -run TestCompareInstructions -v -compare-callgrind 20s
func TestCompareInstructions(t *testing.T) {
	if *compareCallgrind <= 0 {
		t.Skip("the measurement runs with -compare-callgrind DURATION")
	}
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v (Debian: apt-get install valgrind)", tool, err)
		}
	}
	fast := startProgram(t, "-serve-upstream", "-addr", "127.0.0.1:0", "-upstream-latency", "1ms", "-upstream-fail", "0")
	defer fast.stop(t)
	perRequest := map[string]map[string]float64{}
	for _, impl := range impls {
		perRequest[impl] = eventsPerRequest(t, impl, fast.url)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| per request | flows | plain | flows / plain |\n| --- | --- | --- | --- |\n")
	for _, e := range callgrindEvents {
		flows, plain := perRequest["flows"][e.name], perRequest["plain"][e.name]
		fmt.Fprintf(&out, "| %s | %.0f | %.0f | %.3f |\n", e.what, flows, plain, flows/plain)
	}
	t.Log("\n" + out.String())
}

// callgrindEvents are the figures TestCompareInstructions reports, each
// the sum of callgrind's events in names.
var callgrindEvents = []struct {
	name, what string
	names      []string
}{
	{"Ir", "instructions", []string{"Ir"}},
	{"I1m", "first-level instruction cache misses", []string{"I1mr"}},
	{"D1m", "first-level data cache misses", []string{"D1mr", "D1mw"}},
	{"LLm", "last-level cache misses", []string{"ILmr", "DLmr", "DLmw"}},
	{"Bm", "mispredicted branches (conditional and indirect)", []string{"Bcm", "Bim"}},
}

// eventsPerRequest runs a gateway under callgrind, warms it up, drives it
// for -compare-callgrind and returns callgrindEvents per request over that
// run.
func eventsPerRequest(t *testing.T, impl, upstreamURL string) map[string]float64 {
	dir := t.TempDir()
	out := filepath.Join(dir, "callgrind.out")
	cmd := exec.Command("valgrind", "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
		"--callgrind-out-file="+out, "--log-file="+filepath.Join(dir, "valgrind.log"), os.Args[0])
	args := append([]string{"-impl", impl, "-addr", "127.0.0.1:0", "-upstream", upstreamURL}, unlimited...)
	// Valgrind does not decode RDTSCP, and its signals would preempt
	// goroutines at other points than natively; neither changes the work
	// per request.
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join(args, "\n"), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off")
	// Not stopped with SIGTERM: callgrind 3.19 fails an assertion when a
	// signal reaches Go's handler. The counts are dumped before the test's
	// cleanup kills it.
	gw := startCommand(t, cmd)
	workers := max(*compareWorkers/2, 1)
	pid := strconv.Itoa(gw.cmd.Process.Pid)
	drive(t, impl, gw, workers, 3*time.Second) // connections, pools and stacks made
	callgrindControl(t, "-z", pid)
	r := drive(t, impl, gw, workers, *compareCallgrind)
	callgrindControl(t, "-d", pid)
	if r.requests == 0 {
		t.Fatalf("%s: no request answered under callgrind", impl)
	}
	totals := dumpedEvents(t, out+".1")
	per := map[string]float64{}
	for _, e := range callgrindEvents {
		for _, name := range e.names {
			per[e.name] += float64(totals[name]) / float64(r.requests)
		}
	}
	t.Logf("%s: %d requests, %.0f/s under callgrind", impl, r.requests, r.rps)
	return per
}

// callgrindControl sends a command (-z: zero the counters, -d: dump them)
// to the callgrind running as pid; it returns once callgrind has done it.
func callgrindControl(t *testing.T, command, pid string) {
	t.Helper()
	if out, err := exec.Command("callgrind_control", command, pid).CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control %s %s: %v\n%s", command, pid, err, out)
	}
}

// dumpedEvents reads the totals of a callgrind dump: its "events:" line
// names them, its "summary:" line counts them, in the same order.
func dumpedEvents(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names, counts []string
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "events: "); ok {
			names = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			counts = strings.Fields(v)
		}
	}
	if len(names) == 0 || len(names) != len(counts) {
		t.Fatalf("%s: events %q, summary %q", path, names, counts)
	}
	totals := map[string]uint64{}
	for i, name := range names {
		n, err := strconv.ParseUint(counts[i], 10, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		totals[name] = n
	}
	return totals
}
