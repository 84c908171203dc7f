// This file is long on purpose: the runner, its table of targets and its
// report are one program with no dependency, read from top to bottom.

// Command compare runs the performance workloads of asyncsteps (bench/) and
// the same workloads on the JavaScript reference implementation (bench/js),
// alternately for a number of rounds, and prints a Markdown table of the
// medians against the targets of docs/PERFORMANCE.md. Every ratio in the
// table is one of two figures of the same run: the engine against the
// reference, or against the floor (BenchmarkFloor: a step body called
// through the AsyncSteps interface, no engine).
//
// From the repository root:
//
//	go run ./bench/compare                 # 5 rounds, about 5 minutes
//	go run ./bench/compare -rounds 7 -bench . -queued-limit 0
//
// It installs the reference with npm in bench/js if needed, builds the Go
// benchmarks once (go test -c), then in each round runs the Go benchmarks
// (-benchmem -count=1) and node workloads.js, the two in turns of order
// (Go first in odd rounds, JavaScript first in even ones) so that a change of
// load on the machine hits both sides alike. Each run records the 1-minute
// load average and the CPU that other processes used while it ran.
package main

// This file is long on purpose: the command is one script (build, run,
// parse, compare, print), read from top to bottom.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.rounds, "rounds", 5, "number of rounds; each runs the Go benchmarks and the JavaScript workloads once")
	flag.StringVar(&cfg.bench, "bench", headline, "regexp of the Go benchmarks to run (go test -bench); . runs the variants too")
	flag.StringVar(&cfg.benchtime, "benchtime", "", "go test -benchtime of each Go benchmark (default: go test's, 1s)")
	flag.Float64Var(&cfg.jsMinTime, "js-min-time", 1, "seconds each JavaScript workload runs at least")
	flag.DurationVar(&cfg.queuedLimit, "queued-limit", 20*time.Second, "time limit of the JavaScript seq-queued-1M run, shown as a note (the reference degrades quadratically); past it a lower bound is reported; 0 skips it")
	flag.IntVar(&cfg.queuedRounds, "queued-rounds", 1, "in how many rounds (the first ones) the JavaScript seq-queued-1M runs")
	flag.BoolVar(&cfg.noJS, "no-js", false, "run the Go benchmarks only")
	flag.StringVar(&cfg.raw, "raw", "", "also write every measurement to this file, one JSON object per line")
	flag.Parse()
	if flag.NArg() > 0 || cfg.rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := compare(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

type config struct {
	rounds       int
	bench        string
	benchtime    string
	jsMinTime    float64
	queuedLimit  time.Duration
	queuedRounds int
	noJS         bool
	raw          string
}

// A sample is one measured figure of one run.
type sample struct {
	Round      int     `json:"round"`
	Side       string  `json:"side"` // "go" or "js"
	Name       string  `json:"name"` // benchmark (without -GOMAXPROCS) or JS workload name
	Metric     string  `json:"metric"`
	Value      float64 `json:"value"`
	LowerBound bool    `json:"lower_bound,omitempty"`
}

// A runInfo tells the load the machine had during one run.
type runInfo struct {
	Round  int           `json:"round"`
	Side   string        `json:"side"`
	Wall   time.Duration `json:"wall_ns"`
	Load1  float64       `json:"load1"`  // 1-minute load average at the start
	Others float64       `json:"others"` // cores that other processes kept busy during the run
	Err    string        `json:"error,omitempty"`
}

type results struct {
	samples []sample
	runs    []runInfo
}

func compare(cfg config, w io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	benchDir := filepath.Join(root, "bench")
	jsDir := filepath.Join(benchDir, "js")

	tmp, err := os.MkdirTemp("", "asyncsteps-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	testBin := filepath.Join(tmp, "bench.test")
	progress("building the Go benchmarks")
	engine := engineVersion(root) // what is built, before the tree can change
	if err := command(root, nil, "go", "test", "-c", "-o", testBin, "./bench").Run(); err != nil {
		return fmt.Errorf("go test -c ./bench: %w", err)
	}
	if !cfg.noJS {
		if err := installJS(jsDir); err != nil {
			return err
		}
	}

	var res results
	var raw io.Writer = io.Discard
	if cfg.raw != "" {
		f, err := os.Create(cfg.raw)
		if err != nil {
			return err
		}
		defer f.Close()
		raw = f
	}
	enc := json.NewEncoder(raw)

	started := time.Now()
	load0 := loadAvg()
	for round := 1; round <= cfg.rounds; round++ {
		sides := []string{"go", "js"}
		if round%2 == 0 {
			sides = []string{"js", "go"}
		}
		for _, side := range sides {
			var ss []sample
			var info runInfo
			switch side {
			case "go":
				args := []string{"-test.run", "^$", "-test.bench", cfg.bench, "-test.benchmem", "-test.count", "1"}
				if cfg.benchtime != "" {
					args = append(args, "-test.benchtime", cfg.benchtime)
				}
				progress("round %d/%d: Go benchmarks", round, cfg.rounds)
				ss, info = measure(benchDir, nil, testBin, args, parseGo)
			case "js":
				if cfg.noJS {
					continue
				}
				env := []string{"NODE_ENV=production"}
				args := []string{"--expose-gc", "workloads.js", "--min-time=" + strconv.FormatFloat(cfg.jsMinTime, 'f', -1, 64)}
				progress("round %d/%d: JavaScript workloads", round, cfg.rounds)
				ss, info = measure(jsDir, env, "node", args, parseJS)
				if cfg.queuedLimit > 0 && round <= cfg.queuedRounds {
					progress("round %d/%d: JavaScript seq-queued-1M (limit %v)", round, cfg.rounds, cfg.queuedLimit)
					args := []string{"--expose-gc", "workloads.js", "--limit=" + strconv.FormatFloat(cfg.queuedLimit.Seconds(), 'f', -1, 64), "seq-queued-1M"}
					ss1, info1 := measure(jsDir, env, "node", args, parseJS)
					info1.Round, info1.Side = round, "js seq-queued-1M"
					res.runs = append(res.runs, info1)
					_ = enc.Encode(info1)
					ss = append(ss, ss1...)
				}
			}
			info.Round, info.Side = round, side
			res.runs = append(res.runs, info)
			_ = enc.Encode(info)
			for i := range ss {
				ss[i].Round, ss[i].Side = round, side
				_ = enc.Encode(ss[i])
			}
			res.samples = append(res.samples, ss...)
		}
	}
	ended := time.Now()

	printReport(w, cfg, &res, report{
		started: started, ended: ended, load0: load0, load1: loadAvg(),
		goVersion: output(root, "go", "version"),
		node:      output(jsDir, "node", "--version"),
		reference: referenceVersion(jsDir),
		engine:    engine,
	})
	return nil
}

type report struct {
	started, ended  time.Time
	load0, load1    string
	goVersion, node string
	reference       string
	engine          string
}

// engineVersion names the commit of the work tree the Go benchmarks were
// built from, and whether it had changes not committed.
func engineVersion(root string) string {
	commit := output(root, "git", "rev-parse", "--short", "HEAD")
	status := output(root, "git", "status", "--porcelain", "--untracked-files=no")
	if status == "" {
		return "commit " + commit
	}
	return fmt.Sprintf("commit %s with %d changed files not committed", commit, len(strings.Split(status, "\n")))
}

// measure runs one command and parses its output, recording the machine's
// load around it.
func measure(dir string, env []string, name string, args []string, parse func([]byte) ([]sample, error)) ([]sample, runInfo) {
	var info runInfo
	info.Load1 = load1()
	busy0, _ := cpuBusy()
	start := time.Now()
	cmd := command(dir, env, name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	info.Wall = time.Since(start)
	if busy1, ok := cpuBusy(); ok && cmd.ProcessState != nil {
		own := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		info.Others = math.Max(0, (busy1-busy0-own).Seconds()/info.Wall.Seconds())
	}
	ss, perr := parse(out.Bytes())
	if err == nil {
		err = perr
	}
	if err != nil {
		info.Err = err.Error()
		progress("  %s: %v", name, err)
	}
	return ss, info
}

// benchLine matches a result line of go test -bench.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func parseGo(out []byte) ([]sample, error) {
	var ss []sample
	sc := bufio.NewScanner(bytes.NewReader(out))
	failed := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			failed = true
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			ss = append(ss, sample{Name: m[1], Metric: f[i+1], Value: v})
		}
	}
	if failed {
		return ss, errors.New("a Go benchmark failed")
	}
	if len(ss) == 0 {
		return nil, errors.New("no Go benchmark result")
	}
	return ss, nil
}

func parseJS(out []byte) ([]sample, error) {
	var ss []sample
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue
		}
		name, _ := line["name"].(string)
		lb, _ := line["lower_bound"].(bool)
		for k, v := range line {
			f, ok := v.(float64)
			if !ok {
				continue
			}
			metric := k
			switch k {
			case "value":
				metric, _ = line["metric"].(string)
			case "n", "runs", "done":
				continue
			}
			ss = append(ss, sample{Name: name, Metric: metric, Value: f, LowerBound: lb && k == "value"})
		}
	}
	if len(ss) == 0 {
		return nil, errors.New("no JavaScript workload result")
	}
	return ss, nil
}

// installJS installs the reference in jsDir unless the pinned version is
// already there.
func installJS(jsDir string) error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(jsDir, "package.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return fmt.Errorf("bench/js/package.json: %w", err)
	}
	want := pkg.Dependencies["futoin-asyncsteps"]
	if got := referenceVersion(jsDir); got != "" && got == want {
		return nil
	}
	progress("installing futoin-asyncsteps %s with npm in bench/js", want)
	cmd := command(jsDir, nil, "npm", "install", "--no-audit", "--no-fund", "--no-package-lock")
	cmd.Stdout = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install in bench/js: %w", err)
	}
	if got := referenceVersion(jsDir); got != want {
		return fmt.Errorf("bench/js: futoin-asyncsteps %q installed, package.json pins %q", got, want)
	}
	return nil
}

func referenceVersion(jsDir string) string {
	var pkg struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(jsDir, "node_modules", "futoin-asyncsteps", "package.json"))
	if err != nil || json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

// moduleRoot finds the directory of the asyncsteps go.mod from the working
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/asyncsteps/asyncsteps\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from within the asyncsteps module (no go.mod of github.com/asyncsteps/asyncsteps above the working directory)")
		}
		dir = parent
	}
}

func command(dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

func output(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
}

// loadAvg returns the three load averages of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	v, _ := strconv.ParseFloat(strings.Fields(loadAvg() + " x")[0], 64)
	return v
}

// cpuBusy returns the CPU time all processors spent busy since boot, from
// the first line of /proc/stat (in USER_HZ ticks, 1/100 s on Linux).
func cpuBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond, true
}

// cpuModel returns the model name of the first processor in /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// ---------------------------------------------------------------------------
// The table.

// A figure names one measured value: side ("go" or "js"), benchmark or
// workload name, metric. perUnit, if set, divides the value (allocs/op of a
// benchmark whose op is perUnit units).
type figure struct {
	side, name, metric string
	perUnit            float64
}

// A row compares a Go figure with a reference figure (JavaScript, the
// floor, one loop, or a Go baseline) or checks it alone against a bound.
type row struct {
	workload string
	metric   string
	goF      figure
	ref      figure // zero: no reference
	refLabel string
	higher   bool    // higher values are better (a rate)
	overRef  bool    // the ratio is Go/reference (a cost over a floor), not how much better Go is
	minRatio float64 // target: ratio at least this; 0: none
	maxRatio float64 // target (overRef): Go/reference at most this; 0: none
	maxGo    float64 // target: Go at most this; NaN: none
	target   string
	allocs   figure // Go allocs per unit, shown beside
	extra    bool   // a variant: shown only when measured (-bench .)
}

// headline is the default -bench of the Go side: the workloads of the
// table, their floor and their plain-goroutine baselines.
const headline = "^Benchmark(Floor|FloorNoArgs|Seq|SeqNoArgs|SeqFlat|SeqQueued|Nested|ManyFlows|Parallel|Error|Mutex|Timers|Parked|Scale|ManyGoroutines|MutexGoroutines|TimersGoroutines|ParkedGoroutines|SeqFlatBursts|ManyFlowsBursts|MutexBursts|TimersBursts)$"

// Units per op of the Go benchmarks, as in bench_test.go and
// variants_test.go; used for allocs per unit.
var units = map[string]float64{
	"BenchmarkFloor": 1e6, "BenchmarkFloorNoArgs": 1e6,
	"BenchmarkSeq": 1e6, "BenchmarkSeqNoArgs": 1e6, "BenchmarkSeqFlat": 1e6, "BenchmarkSeqQueued": 1e6,
	"BenchmarkNested":    1e6,
	"BenchmarkManyFlows": 1e5, "BenchmarkManyGoroutines": 1e5, "BenchmarkManyFlowsOnLoop": 1e5,
	"BenchmarkParallel": 1e5, "BenchmarkError": 2e5,
	"BenchmarkMutex": 1e5, "BenchmarkTimers": 1e4,
	"BenchmarkMutexGoroutines": 1e5, "BenchmarkTimersGoroutines": 1e4,
	"BenchmarkSeqFlatBursts": 1e6, "BenchmarkManyFlowsBursts": 1e5, "BenchmarkMutexBursts": 1e5, "BenchmarkTimersBursts": 1e4,
}

func goF(name, metric string) figure { return figure{side: "go", name: name, metric: metric} }
func jsF(name, metric string) figure { return figure{side: "js", name: name, metric: metric} }
func allocsOf(name string) figure {
	return figure{side: "go", name: name, metric: "allocs/op", perUnit: units[name]}
}

var none = math.NaN()

// rows is the table: first the targets of the issue (seq against the floor
// and its allocations, then each workload against the reference), then
// figures for comparison.
var rows = []row{
	{workload: "seq: Repeat(1M), Success(i)", metric: "ns/step", goF: goF("BenchmarkSeq", "ns/step"), ref: goF("BenchmarkFloor", "ns/step"), refLabel: "floor, Success(i)", overRef: true, maxRatio: 1.5, maxGo: none, target: "≤1.5x floor", allocs: allocsOf("BenchmarkSeq")},
	{workload: "seq: allocations, Success(i)", metric: "allocs/step", goF: allocsOf("BenchmarkSeq"), maxGo: 2.01, target: "≤2 (the floor's)"},
	{workload: "seq: allocations, Success()", metric: "allocs/step", goF: allocsOf("BenchmarkSeqNoArgs"), maxGo: 0.01, target: "0 (<0.01)"},
	{workload: "seq-flat: 100 flows x 10k queued steps", metric: "ns/step", goF: goF("BenchmarkSeqFlat", "ns/step"), ref: jsF("seq-flat", "ns/step"), refLabel: "JS", minRatio: 4, maxGo: none, target: "≥4x JS", allocs: allocsOf("BenchmarkSeqFlat")},
	{workload: "nested: Repeat(1M), one sub-step each", metric: "ns/outer", goF: goF("BenchmarkNested", "ns/outer"), ref: jsF("nested", "ns/outer"), refLabel: "JS", minRatio: 4, maxGo: none, target: "≥4x JS", allocs: allocsOf("BenchmarkNested")},
	{workload: "many-flows: 100k flows of 3 steps, one loop", metric: "flows/s", goF: goF("BenchmarkManyFlows", "flows/s"), ref: jsF("many-flows", "flows/s"), refLabel: "JS", higher: true, minRatio: 8, maxGo: none, target: "≥8x JS", allocs: allocsOf("BenchmarkManyFlows")},
	{workload: "two loops vs one (many-flows)", metric: "flows/s", goF: goF("BenchmarkScale/loops=2", "flows/s"), ref: goF("BenchmarkScale/loops=1", "flows/s"), refLabel: "1 loop", higher: true, minRatio: 1.6, maxGo: none, target: "≥1.6x 1 loop"},
	{workload: "parallel: 1,000 one-step branches x100", metric: "ns/branch", goF: goF("BenchmarkParallel", "ns/branch"), ref: jsF("parallel", "ns/branch"), refLabel: "JS", minRatio: 20, maxGo: none, target: "≥20x JS", allocs: allocsOf("BenchmarkParallel")},
	{workload: "error: Repeat(200k), a failing step each, caught", metric: "ns/error", goF: goF("BenchmarkError", "ns/error"), ref: jsF("error", "ns/error"), refLabel: "JS", minRatio: 10, maxGo: none, target: "≥10x JS", allocs: allocsOf("BenchmarkError")},
	{workload: "mutex: 1,000 flows x 100 Sync, Mutex(10)", metric: "ns/sync", goF: goF("BenchmarkMutex", "ns/sync"), ref: jsF("mutex", "ns/sync"), refLabel: "JS", minRatio: 5, maxGo: none, target: "≥5x JS", allocs: allocsOf("BenchmarkMutex")},
	{workload: "timers: 10k flows, SetTimeout(1s), Immediate", metric: "ns/flow", goF: goF("BenchmarkTimers", "ns/flow"), ref: jsF("timers", "ns/flow"), refLabel: "JS", minRatio: 8, maxGo: none, target: "≥8x JS", allocs: allocsOf("BenchmarkTimers")},
	{workload: "parked: 100k waiting flows, Promise included", metric: "B/flow", goF: goF("BenchmarkParked", "B/flow"), ref: jsF("parked", "B/flow"), refLabel: "JS heapUsed", maxGo: 400, target: "≤400 B"},

	{workload: "seq: Repeat(1M), Success(i)", metric: "ns/step", goF: goF("BenchmarkSeq", "ns/step"), ref: jsF("seq", "ns/step"), refLabel: "JS", maxGo: none, target: "—", allocs: allocsOf("BenchmarkSeq")},
	{workload: "seq: Repeat(1M), Success()", metric: "ns/step", goF: goF("BenchmarkSeqNoArgs", "ns/step"), ref: goF("BenchmarkFloorNoArgs", "ns/step"), refLabel: "floor, Success()", overRef: true, maxGo: none, target: "—", allocs: allocsOf("BenchmarkSeqNoArgs")},
	{workload: "floor: body alone, Success(i)", metric: "ns/step", goF: goF("BenchmarkFloor", "ns/step"), ref: jsF("seq", "ns/step"), refLabel: "JS seq", maxGo: none, target: "—", allocs: allocsOf("BenchmarkFloor")},
	{workload: "floor: body alone, Success()", metric: "ns/step", goF: goF("BenchmarkFloorNoArgs", "ns/step"), maxGo: none, target: "—", allocs: allocsOf("BenchmarkFloorNoArgs")},
	{workload: "seq-flat, Loop.SetBursts(true)", metric: "ns/step", goF: goF("BenchmarkSeqFlatBursts", "ns/step"), ref: jsF("seq-flat", "ns/step"), refLabel: "JS", maxGo: none, target: "(opt-in)", allocs: allocsOf("BenchmarkSeqFlatBursts")},
	{workload: "many-flows, Loop.SetBursts(true)", metric: "flows/s", goF: goF("BenchmarkManyFlowsBursts", "flows/s"), ref: jsF("many-flows", "flows/s"), refLabel: "JS", higher: true, maxGo: none, target: "(opt-in)", allocs: allocsOf("BenchmarkManyFlowsBursts")},
	{workload: "mutex, Loop.SetBursts(true)", metric: "ns/sync", goF: goF("BenchmarkMutexBursts", "ns/sync"), ref: jsF("mutex", "ns/sync"), refLabel: "JS", maxGo: none, target: "(opt-in)", allocs: allocsOf("BenchmarkMutexBursts")},
	{workload: "timers, Loop.SetBursts(true)", metric: "ns/flow", goF: goF("BenchmarkTimersBursts", "ns/flow"), ref: jsF("timers", "ns/flow"), refLabel: "JS", maxGo: none, target: "(opt-in)", allocs: allocsOf("BenchmarkTimersBursts")},
	{workload: "many-flows in plain goroutines", metric: "flows/s", goF: goF("BenchmarkManyGoroutines", "flows/s"), ref: jsF("many-flows", "flows/s"), refLabel: "JS", higher: true, maxGo: none, target: "—", allocs: allocsOf("BenchmarkManyGoroutines")},
	{workload: "mutex in plain goroutines (semaphore)", metric: "ns/sync", goF: goF("BenchmarkMutexGoroutines", "ns/sync"), ref: jsF("mutex", "ns/sync"), refLabel: "JS", maxGo: none, target: "—", allocs: allocsOf("BenchmarkMutexGoroutines")},
	{workload: "timers in plain goroutines", metric: "ns/flow", goF: goF("BenchmarkTimersGoroutines", "ns/flow"), ref: jsF("timers", "ns/flow"), refLabel: "JS", maxGo: none, target: "—", allocs: allocsOf("BenchmarkTimersGoroutines")},
	{workload: "parked goroutines", metric: "B/goroutine", goF: goF("BenchmarkParkedGoroutines", "B/goroutine"), ref: jsF("parked", "B/flow"), refLabel: "JS heapUsed", maxGo: none, target: "—"},
	{workload: "parked: 100k waiting flows", metric: "B/flow", goF: goF("BenchmarkParked", "B/flow"), ref: jsF("parked", "rss_per_unit"), refLabel: "JS rss", maxGo: none, target: "—"},

	{workload: "many-flows, made on the loop", metric: "flows/s", goF: goF("BenchmarkManyFlowsOnLoop", "flows/s"), ref: jsF("many-flows", "flows/s"), refLabel: "JS", higher: true, maxGo: none, target: "—", allocs: allocsOf("BenchmarkManyFlowsOnLoop"), extra: true},
	{workload: "two loops, LoopGroup, one producer", metric: "flows/s", goF: goF("BenchmarkScaleGroup/loops=2", "flows/s"), ref: goF("BenchmarkScaleGroup/loops=1", "flows/s"), refLabel: "1 loop", higher: true, maxGo: none, target: "—", extra: true},
	{workload: "two loops, flows made on the loops", metric: "flows/s", goF: goF("BenchmarkScaleOnLoop/loops=2", "flows/s"), ref: goF("BenchmarkScaleOnLoop/loops=1", "flows/s"), refLabel: "1 loop", higher: true, maxGo: none, target: "—", extra: true},
	{workload: "two loops, 1,000 flows in flight per loop", metric: "flows/s", goF: goF("BenchmarkScaleInFlight/loops=2", "flows/s"), ref: goF("BenchmarkScaleInFlight/loops=1", "flows/s"), refLabel: "1 loop", higher: true, maxGo: none, target: "—", extra: true},
	{workload: "ceiling: many-flows' allocations alone", metric: "flows/s", goF: goF("BenchmarkScaleAllocOnly/goroutines=2", "flows/s"), ref: goF("BenchmarkScaleAllocOnly/goroutines=1", "flows/s"), refLabel: "1 goroutine", higher: true, maxGo: none, target: "—", extra: true},
	{workload: "ceiling: computation alone", metric: "rounds/s", goF: goF("BenchmarkScaleCPUOnly/goroutines=2", "rounds/s"), ref: goF("BenchmarkScaleCPUOnly/goroutines=1", "rounds/s"), refLabel: "1 goroutine", higher: true, maxGo: none, target: "—", extra: true},
}

// queuedNote tells the quadratic shape of the first measurements: kept out
// of the table, as its ratio measures the reference's array queue.
var queuedNote = row{workload: "seq-queued: 1M steps queued up front", metric: "ns/step", goF: goF("BenchmarkSeqQueued", "ns/step"), ref: jsF("seq-queued-1M", "ns/step"), refLabel: "JS"}

// stat is the median of the samples of one figure, with their range.
type stat struct {
	n           int
	med, lo, hi float64
	lowerBound  bool // some sample is only a lower bound
}

func (r *results) stat(f figure) stat {
	var vs []float64
	var st stat
	for _, s := range r.samples {
		if s.Side != f.side || s.Name != f.name || s.Metric != f.metric {
			continue
		}
		v := s.Value
		if f.perUnit > 0 {
			v /= f.perUnit
		}
		vs = append(vs, v)
		st.lowerBound = st.lowerBound || s.LowerBound
	}
	st.n = len(vs)
	if st.n == 0 {
		return st
	}
	slices.Sort(vs)
	st.lo, st.hi = vs[0], vs[len(vs)-1]
	if len(vs)%2 == 1 {
		st.med = vs[len(vs)/2]
	} else {
		st.med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return st
}

func (s stat) String() string {
	if s.n == 0 {
		return "n/a"
	}
	gt := ""
	if s.lowerBound {
		gt = "> "
	}
	if s.n == 1 || s.lo == s.hi {
		return gt + num(s.med)
	}
	return fmt.Sprintf("%s%s (%s–%s)", gt, num(s.med), num(s.lo), num(s.hi))
}

// num formats a value with about three significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

func printReport(w io.Writer, cfg config, res *results, rep report) {
	fmt.Fprintf(w, "machine: %d CPUs (nproc), %s; %s; node %s, futoin-asyncsteps %s\n",
		runtime.NumCPU(), cpuModel(), rep.goVersion, rep.node, rep.reference)
	fmt.Fprintf(w, "engine: %s (built at the start)\n", rep.engine)
	fmt.Fprintf(w, "run: %s to %s, rounds: %d, load average %s at start, %s at end\n",
		rep.started.Format("2006-01-02 15:04"), rep.ended.Format("15:04"), cfg.rounds, rep.load0, rep.load1)
	fmt.Fprintln(w, loadSummary(res.runs))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | metric | Go | compared with | reference | ratio | Go allocs/unit | target | met |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		g := res.stat(r.goF)
		if r.extra && g.n == 0 {
			continue
		}
		c := res.compare(r)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.workload, r.metric, g, c.refLabel, c.refText, c.ratioText, res.allocsText(r), r.target, res.met(r, c))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Go and reference: median (min–max) over the rounds; \"> x\": the JS run hit its time limit, x is a lower bound.")
	fmt.Fprintln(w, "ratio: reference/Go for times and bytes, Go/reference for rates (how many times Go is better); \"Go/floor\": the step's time over the floor's.")
	if g := res.stat(queuedNote.goF); g.n > 0 {
		c := res.compare(queuedNote)
		fmt.Fprintf(w, "\nNote, not a target: %s, Go %s %s, JS %s (ratio %s). The reference's queue is an array whose shift() copies it past about 16k entries, so its time per step grows with the queue: this ratio measures that, not the engine.\n",
			queuedNote.workload, g, queuedNote.metric, c.refText, c.ratioText)
	}
}

// A comparison is a row's reference figure and ratio.
type comparison struct {
	refLabel, refText, ratioText string
	ratio                        float64
	known, bound                 bool // ratio measured; only a bound (the JS run hit its limit)
}

func (res *results) compare(r row) comparison {
	c := comparison{refLabel: "—", refText: "—", ratioText: "—"}
	if r.ref.side == "" {
		return c
	}
	g, ref := res.stat(r.goF), res.stat(r.ref)
	c.refLabel, c.refText = r.refLabel, ref.String()
	if g.n == 0 || ref.n == 0 || g.med <= 0 || ref.med <= 0 {
		return c
	}
	switch {
	case r.overRef:
		c.ratio = g.med / ref.med
		c.ratioText = "Go/floor " + num(c.ratio) + "x"
	case r.higher:
		c.ratio = g.med / ref.med
		c.ratioText = num(c.ratio) + "x"
	default:
		c.ratio = ref.med / g.med
		c.ratioText = num(c.ratio) + "x"
	}
	c.known, c.bound = true, ref.lowerBound && !r.higher && !r.overRef
	if c.bound {
		c.ratioText = "> " + c.ratioText
	}
	return c
}

func (res *results) allocsText(r row) string {
	if r.allocs.side == "" {
		return "—"
	}
	if a := res.stat(r.allocs); a.n > 0 {
		return num(a.med)
	}
	return "—"
}

// met tells whether the row's target is met: "yes", "**no**", "—" (no
// target), or why it cannot be told.
func (res *results) met(r row, c comparison) string {
	g := res.stat(r.goF)
	switch {
	case g.n == 0:
		return "no data"
	case r.minRatio > 0 || r.maxRatio > 0:
		switch {
		case !c.known:
			return "no data"
		case r.minRatio > 0 && c.ratio >= r.minRatio, r.maxRatio > 0 && c.ratio <= r.maxRatio:
			return "yes"
		case c.bound:
			return "unknown" // the true ratio is higher than this bound
		}
		return "**no**"
	case !math.IsNaN(r.maxGo):
		if g.med > r.maxGo {
			return "**no**"
		}
		return "yes"
	}
	return "—"
}

// loadSummary tells the range of load of the Go and the JavaScript runs.
func loadSummary(runs []runInfo) string {
	var b strings.Builder
	for _, side := range []string{"go", "js", "js seq-queued-1M"} {
		var loads, others []float64
		var wall time.Duration
		for _, r := range runs {
			if r.Side != side {
				continue
			}
			loads = append(loads, r.Load1)
			others = append(others, r.Others)
			wall += r.Wall
			if r.Err != "" {
				fmt.Fprintf(&b, "round %d %s failed: %s\n", r.Round, side, r.Err)
			}
		}
		if len(loads) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s runs: %d, %.0f s in all; 1-min load average at start %s; other processes kept %s of %d cores busy\n",
			side, len(loads), wall.Seconds(), span(loads), span(others), runtime.NumCPU())
	}
	return strings.TrimRight(b.String(), "\n")
}

func span(vs []float64) string {
	lo, hi := slices.Min(vs), slices.Max(vs)
	if hi-lo < 0.05 {
		return strconv.FormatFloat(lo, 'f', 1, 64)
	}
	return strconv.FormatFloat(lo, 'f', 1, 64) + "–" + strconv.FormatFloat(hi, 'f', 1, 64)
}
