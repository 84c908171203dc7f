package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

var fleetDuration = flag.Duration("fleet", 0, "TestFleet: how long the load runs before the kill, and again after the slots came back (0: a short run for CI; a longer form: -fleet 30s)")

// The fleet's limits, shared through Redis by its three instances.
const (
	fleetConcurrent = 6
	fleetRate       = 100 // a second
	fleetTTL        = time.Second
)

// TestFleet runs three gateway instances (programs of their own) that
// share their limits through one real redis-server (-redis), in front of
// one embedded upstream, driven by vegeta at twice the fleet's rate. Once
// the rate was measured, one instance is killed with SIGKILL. The
// upstream's own counters show that the fleet never had more than
// -concurrent requests upstream at once, and that the rate the upstream
// saw, once the start's burst was spent, is within 5% of -rate; the two
// other instances answer every request with 200, 503 or 504, and go on
// answering 200 after the kill; the killed instance's leases are gone
// after their TTL. Without -redis, three instances would let three times
// the limits through.
//
// The phases are timed by what happened, not by a fixed schedule, so that
// a slow machine stretches the run rather than failing it.
//
//	go test ./cmd/asyncsteps-demo -run TestFleet -v -fleet 30s
func TestFleet(t *testing.T) {
	measure := max(*fleetDuration, 1500*time.Millisecond)
	redisAddr := startRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	const prefix = "fleet"
	holders := prefix + ":{quote/concurrent}:holders"

	bin := buildProgram(t)
	up := startBuilt(t, bin, "-serve-upstream", "-addr", "127.0.0.1:0",
		"-upstream-latency", "20ms", "-upstream-fail", "0", "-seed", "1")
	defer up.stop(t)
	gws := make([]*program, 3)
	for i := range gws {
		gws[i] = startBuilt(t, bin, "-addr", "127.0.0.1:0", "-upstream", up.url, "-loops", "1",
			"-redis", redisAddr, "-redis-prefix", prefix, "-redis-ttl", fleetTTL.String(),
			"-concurrent", strconv.Itoa(fleetConcurrent), "-queue", "32",
			"-rate", strconv.Itoa(fleetRate), "-burst", "32",
			"-timeout", "1s", "-retries", "0")
	}
	survivors, victim := gws[:2], gws[2]
	victimID := clientID(t, victim)

	start := time.Now()
	attacks := make([]*fleetAttack, len(gws))
	for i, gw := range gws {
		attacks[i] = startAttack(gw.url, 2*fleetRate/len(gws))
	}

	// The start's burst (up to -rate at once) is spent after about a
	// second at twice the rate: the rate is measured after it, up to the
	// kill.
	first := burstSpent(t, up.url)
	time.Sleep(measure)
	last := upstreamCounts(t, up.url)

	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	attacks[2].stop() // its requests fail now: they are not counted
	// The victim's leases run out after the TTL.
	time.Sleep(fleetTTL + 500*time.Millisecond)
	leases, err := rdb.ZRange(context.Background(), holders, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range leases {
		if strings.HasPrefix(lease, victimID+":") {
			t.Errorf("the killed instance's lease %s is still held %v after the kill (TTL %v)", lease, time.Since(killed), fleetTTL)
		}
	}
	// The survivors go on with every slot.
	back := time.Now()
	time.Sleep(max(*fleetDuration, 500*time.Millisecond))
	for _, a := range attacks {
		a.stop()
	}

	window := last.at.Sub(first.at)
	rate := float64(last.Prices-first.Prices) / window.Seconds()
	peak := upstreamCounts(t, up.url).PeakInFlight
	t.Logf("upstream: %.1f requests/s over %v (limit %d/s), at most %d at once (limit %d); killed at %v",
		rate, window.Round(time.Millisecond), fleetRate, peak, fleetConcurrent, killed.Sub(start).Round(time.Millisecond))
	if peak > fleetConcurrent {
		t.Errorf("the upstream served %d requests at once: the fleet's limit is %d", peak, fleetConcurrent)
	}
	if rate < 0.95*fleetRate || rate > 1.05*fleetRate {
		t.Errorf("the upstream saw %.1f requests/s: not within 5%% of the fleet's rate %d/s", rate, fleetRate)
	}
	for i, gw := range survivors {
		bad := 0
		codes := map[uint16]int{}
		var afterBack int
		for _, r := range attacks[i].results {
			codes[r.Code]++
			if r.Code == http.StatusOK && r.Timestamp.After(back) {
				afterBack++
			}
			if r.Code != http.StatusOK && r.Code != http.StatusServiceUnavailable && r.Code != http.StatusGatewayTimeout {
				if bad++; bad <= 5 {
					t.Errorf("instance %d answered %d (%s)", i, r.Code, r.Error)
				}
			}
		}
		t.Logf("instance %d: %d requests, by status %v, %d answered 200 once the slots were back", i, len(attacks[i].results), codes, afterBack)
		if afterBack == 0 {
			t.Errorf("instance %d answered no request with 200 once the killed instance's slots were back", i)
		}
		// Nothing lost: the instance counted every request as answered.
		st := idleStats(t, gw.url)
		if st.Started != int64(len(attacks[i].results)) || st.Cancelled != 0 || st.LimiterQueue != 0 {
			t.Errorf("instance %d: sent %d; started %d, cancelled %d, in flight %d, queued %d",
				i, len(attacks[i].results), st.Started, st.Cancelled, st.InFlight, st.LimiterQueue)
		}
		gw.stop(t)
	}
}

// burstSpent waits until the upstream sees the fleet's rate, no more:
// the Throttle's credit for a burst at the start is spent.
func burstSpent(t *testing.T, base string) countsAt {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	prev := upstreamCounts(t, base)
	for {
		time.Sleep(500 * time.Millisecond)
		now := upstreamCounts(t, base)
		rate := float64(now.Prices-prev.Prices) / now.at.Sub(prev.at).Seconds()
		if rate <= 1.05*fleetRate {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream still sees %.1f requests/s after 15s", rate)
		}
		prev = now
	}
}

// idleStats returns an instance's /stats once it has no request in
// flight (an answer may reach the client just before it is counted).
func idleStats(t *testing.T, base string) statsSnapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st statsSnapshot
		getJSON(t, base+"/stats", &st)
		if st.InFlight == 0 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clientID reads the redissync Client's ID from a gateway's log.
func clientID(t *testing.T, p *program) string {
	t.Helper()
	_, rest, ok := strings.Cut(p.logs.String(), `msg="limits shared through Redis"`)
	_, rest, ok2 := strings.Cut(rest, " id=")
	id, _, _ := strings.Cut(rest, "\n")
	if !ok || !ok2 || id == "" {
		t.Fatalf("no redissync client id in the log: %s", p.logs)
	}
	return id
}

// fleetAttack is vegeta driving one instance until stopped.
type fleetAttack struct {
	attacker *vegeta.Attacker
	done     chan struct{}
	results  []*vegeta.Result // complete once done is closed
}

func (a *fleetAttack) stop() {
	a.attacker.Stop()
	<-a.done
}

// buildProgram builds the command without the race detector, once per
// test: four programs of a test binary built with -race do not keep up
// with the load on a busy 2-core machine. The other tests run the same
// code under the race detector.
func buildProgram(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not found on PATH, to build the program: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "asyncsteps-demo")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBuilt runs the command built at bin with args, as startProgram
// runs the test binary.
func startBuilt(t *testing.T, bin string, args ...string) *program {
	t.Helper()
	return startCommand(t, exec.Command(bin, args...))
}

// startAttack drives base with vegeta at perSecond, one-symbol quotes
// (one upstream request each), until stopped.
func startAttack(base string, perSecond int) *fleetAttack {
	var targets []vegeta.Target
	for _, s := range knownSymbols {
		targets = append(targets, vegeta.Target{Method: http.MethodGet, URL: base + "/quote?symbols=" + s})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	a := &fleetAttack{attacker: vegeta.NewAttacker(vegeta.Client(client), vegeta.Timeout(10*time.Second)), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer client.CloseIdleConnections()
		for r := range a.attacker.Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: perSecond, Per: time.Second}, 0, base) {
			a.results = append(a.results, r)
		}
	}()
	return a
}

// countsAt are the upstream's counters and when they were read.
type countsAt struct {
	upstreamCounters
	at time.Time
}

func upstreamCounts(t *testing.T, base string) countsAt {
	t.Helper()
	var c countsAt
	getJSON(t, base+"/counters", &c.upstreamCounters)
	c.at = time.Now()
	return c
}

// startRedisServer starts a real redis-server without persistence on a
// free loopback port, stopped at the end of the test.
func startRedisServer(t *testing.T) string {
	t.Helper()
	addr, _ := startRedisServerOn(t, 0)
	return addr
}

// startRedisServerOn starts a redis-server on port, 0 for a free one, and
// returns its address and its process.
func startRedisServerOn(t *testing.T, port int) (string, *exec.Cmd) {
	t.Helper()
	return startRedisServerWith(t, port)
}

// startRedisServerWith is startRedisServerOn with more arguments of
// redis-server (--requirepass PASSWORD, say). It is ready once it answers
// a PING, be it with an error (NOAUTH).
func startRedisServerWith(t *testing.T, port int, args ...string) (string, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (Debian package redis-server; scripts/test.sh installs it): %v", err)
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	answers := func() bool {
		err := rdb.Ping(context.Background()).Err()
		var reply redis.Error // NOAUTH from a server with a password
		return err == nil || errors.As(err, &reply)
	}
	for !answers() {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s does not answer", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr, cmd
}

// TestRedisUnreachableAtStart: with -redis naming an address where nothing
// listens, the gateway does not start: it exits 1 at once with a
// CommError, which the log line prefixes with the address. go-redis's
// retries of the refused dial outlast redissync's OpTimeout: the info
// says "timed out".
func TestRedisUnreachableAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join([]string{"-addr", "127.0.0.1:0", "-redis", addr}, "\n"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; output:\n%s", err, out)
	}
	if want := `err="connecting to Redis at ` + addr + `: CommError: redis: timed out"`; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to fail", took)
	}
}

// What go-redis logs itself (why each dial failed) goes through the
// gateway's log, in its format and at Warn: with -log-format json, every
// line of the standard error is a JSON object, which a log pipeline
// reads; go-redis's own logger wrote lines of text ("redis: 2026/11/29
// 04:45:21 pool.go:617: ...") among them.
func TestRedisClientLogsInTheFormatOfTheGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ASYNCSTEPS_DEMO_ARGS="+strings.Join([]string{"-addr", "127.0.0.1:0", "-redis", addr, "-log-format", "json"}, "\n"))
	_, err = cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	var redisLines int
	for line := range strings.Lines(string(exit.Stderr)) {
		var entry struct{ Level, Msg, Detail string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a line that is not JSON: %q", line)
			continue
		}
		if entry.Msg == "redis client" {
			redisLines++
			want := "redis: connection pool: failed to dial after 5 attempts: dial tcp " + addr + ": connect: connection refused"
			if entry.Level != "WARN" || entry.Detail != want {
				t.Errorf("logged %q, want level WARN and detail %q", line, want)
			}
		}
	}
	if redisLines == 0 {
		t.Errorf("no line of go-redis's logged:\n%s", exit.Stderr)
	}
}

// go-redis has one logger for the whole process. Two gateways that run in
// one process (as tests run them) share it: its lines go to the log of
// the gateway that started last among those still running, and once that
// one has stopped, to the log of the one that runs on. The second
// gateway's start replaced the first's logger for good: the lines went to
// the log of a gateway that had stopped (here a buffer nobody reads any
// more; in a test, one whose test is over).
func TestRedisClientLogsToAGatewayThatRuns(t *testing.T) {
	redisAddr := startRedisServer(t)
	args := []string{"-upstream-fail", "0", "-upstream-latency", "1ms", "-redis", redisAddr, "-redis-prefix", "logs"}
	_, first := runLogged(t, args...)
	second := &syncBuffer{}
	_, stopSecond := startRun(t, slog.New(slog.NewTextHandler(second, &slog.HandlerOptions{ReplaceAttr: noTime})), args...)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(second.String(), `msg="gateway serving"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the second gateway does not serve: %s", second)
		}
		time.Sleep(time.Millisecond)
	}
	if err := stopSecond(); err != nil {
		t.Fatalf("the second gateway's run: %v", err)
	}
	stopped := second.String()

	// Any client of the process logs through the one logger: this one's
	// dial fails, as the first gateway's would once its Redis is lost.
	addr := closedPort(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}) // one dial's line
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatalf("PING %s answered", addr)
	}
	line := `level=WARN msg="redis client" detail="redis: connection pool: failed to dial after 5 attempts: dial tcp ` +
		addr + `: connect: connection refused"` + "\n"
	if got := strings.Count(first.String(), line); got != 1 {
		t.Errorf("the running gateway logged %q %d times, want once:\n%s", line, got, first)
	}
	if got := second.String(); got != stopped {
		t.Errorf("the stopped gateway logged %q", strings.TrimPrefix(got, stopped))
	}
}
