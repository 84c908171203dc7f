package redissync

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// The workloads below run on loops of one process, and the same code runs
// in worker processes (this test binary run again with workerEnv set), so
// that the limits are checked across loops and across processes. The
// oracle is independent of the Syncers: a counter in Redis that each
// holder increments on entry and decrements before it leaves.

const (
	workerEnv = "REDISSYNC_WORKER"
	addrEnv   = "REDISSYNC_ADDR"
	prefixEnv = "REDISSYNC_PREFIX"
)

const (
	holdersMax    = 3
	holdersFlows  = 8 // per loop
	holdersRounds = 3
)

// holdersResult is what a holders workload saw.
type holdersResult struct {
	MaxInside int64   // the most holders the oracle counted at once
	Sections  int     // sections run
	Tokens    []int64 // fencing tokens, in the order sections got them
	Err       string
}

// runHolders runs flows on loops that each enter the Mutex "holders" of
// prefix a few times and hold it for a few milliseconds.
func runHolders(addr, prefix string, loops []*asyncsteps.Loop) holdersResult {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, Options{Prefix: prefix})
	if err != nil {
		return holdersResult{Err: err.Error()}
	}
	defer c.Close()
	m := c.NewMutex("holders", MutexOptions{Max: holdersMax, MaxQueue: -1, TTL: 5 * time.Second})
	oracle := prefix + ":inside"

	var mu sync.Mutex
	var res holdersResult
	var wg sync.WaitGroup
	for _, l := range loops {
		for range holdersFlows {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Repeat(holdersRounds, func(as asyncsteps.AsyncSteps, _ int) {
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					token, ok := m.Token(as)
					if !ok {
						as.Error(asyncsteps.InternalError, "no token inside")
					}
					mu.Lock()
					res.Tokens = append(res.Tokens, token)
					res.Sections++
					mu.Unlock()
					as.Await(func(ctx context.Context) (any, error) {
						n, err := rdb.Incr(ctx, oracle).Result()
						if err != nil {
							return nil, err
						}
						mu.Lock()
						res.MaxInside = max(res.MaxInside, n)
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
						return nil, rdb.Decr(ctx, oracle).Err()
					})
				})
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Run(context.Background()); err != nil {
					mu.Lock()
					res.Err = err.Error()
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return res
}

const (
	throttleRate   = 20
	throttlePeriod = 200 * time.Millisecond
	throttleRun    = 600 * time.Millisecond
	throttleFlows  = 6 // per loop
)

// throttleResult is what a throttle workload saw, on the wall clock.
type throttleResult struct {
	Entries int
	Start   int64 // before the first Sync (UnixNano)
	Last    int64 // when the last body ran
	Err     string
}

// runThrottle runs flows on loops that enter the Throttle "rate" of
// prefix as often as it lets them, for throttleRun.
func runThrottle(addr, prefix string, loops []*asyncsteps.Loop) throttleResult {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, Options{Prefix: prefix})
	if err != nil {
		return throttleResult{Err: err.Error()}
	}
	defer c.Close()
	t := c.NewThrottle("rate", ThrottleOptions{Rate: throttleRate, Period: throttlePeriod, MaxQueue: -1})

	var entries, last atomic.Int64
	res := throttleResult{Start: time.Now().UnixNano()}
	stop := time.Now().Add(throttleRun)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, l := range loops {
		for range throttleFlows {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Loop(func(as asyncsteps.AsyncSteps) {
				if time.Now().After(stop) {
					as.Break()
				}
				as.Sync(t, func(as asyncsteps.AsyncSteps, _ ...any) {
					entries.Add(1)
					now := time.Now().UnixNano()
					for {
						old := last.Load()
						if now <= old || last.CompareAndSwap(old, now) {
							break
						}
					}
				})
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Run(context.Background()); err != nil {
					mu.Lock()
					res.Err = err.Error()
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	res.Entries, res.Last = int(entries.Load()), last.Load()
	return res
}

// checkThrottle checks entries against the Throttle's bound over the span
// from the first Sync to the last entry: at most Rate at once plus one per
// interval (and one for the edges), and at least half the rate, so that a
// Throttle that let nobody in would fail too.
func checkThrottle(t *testing.T, entries int, start, last int64) {
	t.Helper()
	span := time.Duration(last - start)
	interval := throttlePeriod / throttleRate
	most := throttleRate + int(span/interval) + 1
	least := int(throttleRun/interval) / 2
	t.Logf("%d entries in %v (at most %d allowed)", entries, span, most)
	if entries > most {
		t.Errorf("%d entries in %v: the cluster-wide limit allows %d", entries, span, most)
	}
	if entries < least {
		t.Errorf("%d entries in %v: fewer than %d, the Throttle lets too few in", entries, span, least)
	}
}

// checkHolders checks a holders workload: the oracle never counted more
// than holdersMax inside (and reached it, so the check can fail), every
// section ran, and the tokens are distinct (each process sees its own in
// increasing order: checked by the caller per process).
func checkHolders(t *testing.T, maxInside int64, sections int, tokens []int64, wantSections int) {
	t.Helper()
	if maxInside != holdersMax {
		t.Errorf("at most %d holders were inside at once, want exactly %d", maxInside, holdersMax)
	}
	if sections != wantSections {
		t.Errorf("%d sections ran, want %d", sections, wantSections)
	}
	seen := make(map[int64]bool)
	for _, tok := range tokens {
		if tok <= 0 || seen[tok] {
			t.Fatalf("token %d given twice or not positive", tok)
		}
		seen[tok] = true
	}
}

func TestMutexHoldersThreeLoops(t *testing.T) {
	addr := sharedRedis(t)
	prefix := fmt.Sprintf("loops%d", prefixSeq.Add(1))
	res := runHolders(addr, prefix, newLoops(t, 3))
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	checkHolders(t, res.MaxInside, res.Sections, res.Tokens, 3*holdersFlows*holdersRounds)
}

func TestThrottleRateThreeLoops(t *testing.T) {
	addr := sharedRedis(t)
	prefix := fmt.Sprintf("loops%d", prefixSeq.Add(1))
	res := runThrottle(addr, prefix, newLoops(t, 3))
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	checkThrottle(t, res.Entries, res.Start, res.Last)
}

func TestMutexHoldersThreeProcesses(t *testing.T) {
	addr := sharedRedis(t)
	prefix := fmt.Sprintf("procs%d", prefixSeq.Add(1))
	var maxInside int64
	var sections int
	var tokens []int64
	for _, out := range runWorkers(t, "holders", addr, prefix, 3) {
		var res holdersResult
		if err := json.Unmarshal(out, &res); err != nil || res.Err != "" {
			t.Fatalf("worker: %v %s: %s", err, res.Err, out)
		}
		maxInside = max(maxInside, res.MaxInside)
		sections += res.Sections
		tokens = append(tokens, res.Tokens...)
	}
	checkHolders(t, maxInside, sections, tokens, 3*holdersFlows*holdersRounds)
}

func TestThrottleRateThreeProcesses(t *testing.T) {
	addr := sharedRedis(t)
	prefix := fmt.Sprintf("procs%d", prefixSeq.Add(1))
	var entries int
	var start, last int64
	for _, out := range runWorkers(t, "throttle", addr, prefix, 3) {
		var res throttleResult
		if err := json.Unmarshal(out, &res); err != nil || res.Err != "" {
			t.Fatalf("worker: %v %s: %s", err, res.Err, out)
		}
		entries += res.Entries
		if start == 0 || res.Start < start {
			start = res.Start
		}
		last = max(last, res.Last)
	}
	checkThrottle(t, entries, start, last)
}

// runWorkers runs n worker processes of kind at once and returns the last
// line each printed.
func runWorkers(t *testing.T, kind, addr, prefix string, n int) [][]byte {
	t.Helper()
	outs := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		cmd := workerCmd(kind, addr, prefix)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("worker %d: %v: %s", i, err, out)
				return
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			outs[i] = []byte(lines[len(lines)-1])
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return outs
}

func workerCmd(kind, addr, prefix string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+kind, addrEnv+"="+addr, prefixEnv+"="+prefix)
	cmd.Stderr = os.Stderr
	return cmd
}

// runWorker is the body of a worker process: it prints its result as one
// line of JSON and returns the exit code.
func runWorker(kind string) int {
	addr, prefix := os.Getenv(addrEnv), os.Getenv(prefixEnv)
	var res any
	switch kind {
	case "holders", "throttle":
		l := asyncsteps.NewLoop()
		defer l.Close()
		if kind == "holders" {
			res = runHolders(addr, prefix, []*asyncsteps.Loop{l})
		} else {
			res = runThrottle(addr, prefix, []*asyncsteps.Loop{l})
		}
	case "hold", "holdkey":
		return holdForever(addr, prefix, kind == "holdkey")
	default:
		fmt.Fprintln(os.Stderr, "unknown worker", kind)
		return 2
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

// holdForever takes the Mutex "kill" of prefix, or with keyed the key
// "k1" of the KeyedMutex "kill", prints "held TOKEN" and holds it until
// the process is killed.
func holdForever(addr, prefix string, keyed bool) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := New(context.Background(), rdb, Options{Prefix: prefix})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var m asyncsteps.Syncer = c.NewMutex("kill", MutexOptions{Max: 1, TTL: killTTL})
	token := m.(*Mutex).Token
	if keyed {
		km := c.NewKeyedMutex("kill", MutexOptions{Max: 1, TTL: killTTL})
		m = km.Key("k1")
		token = func(as asyncsteps.AsyncSteps) (int64, bool) { return km.Token(as, "k1") }
	}
	l := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		token, _ := token(as)
		fmt.Printf("held %d\n", token)
		as.WaitExternal() // until killed
	})
	_, err = r.Run(context.Background())
	fmt.Println("error", err)
	return 1
}

const killTTL = 2 * time.Second

// TestHolderProcessKilled: a process that holds a lease is killed with
// SIGKILL; a flow of this process waiting for the Mutex enters once the
// lease has run out, not before the kill, and gets a larger token.
func TestHolderProcessKilled(t *testing.T) {
	checkKilledHolder(t, "hold", "kill", func(c *Client) (asyncsteps.Syncer, func(asyncsteps.AsyncSteps) (int64, bool), func() int) {
		m := c.NewMutex("kill", MutexOptions{Max: 1, MaxQueue: -1, TTL: killTTL})
		return m, m.Token, func() int { return queued(&m.gateQueue) }
	}, "kill")
}

// checkKilledHolder starts a worker process of kind, which takes a lease
// of the name "kill" under a prefix of its own and says its token; queues
// a flow of this process on the Syncer that syncer makes for that name
// (with the Syncer's Token and its queue's length); kills the worker once
// renewals have kept the lease past one TTL; and checks that the flow
// enters once the last renewal's TTL has run out, not before (Redis's
// expiry of the lease, watched until just after the kill), with a larger
// token. mutexName names the Mutex of the lease. A worker starved of CPU
// may renew too late, its lease run out before the kill: then the flow
// may enter at once, even before the kill.
func checkKilledHolder(t *testing.T, kind, prefixBase string, syncer func(c *Client) (s asyncsteps.Syncer, token func(asyncsteps.AsyncSteps) (int64, bool), queued func() int), mutexName string) {
	t.Helper()
	addr := sharedRedis(t)
	prefix := fmt.Sprintf("%s%d", prefixBase, prefixSeq.Add(1))
	cmd := workerCmd(kind, addr, prefix)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var workerToken int64
	if _, err := fmt.Sscanf(line, "held %d", &workerToken); err != nil {
		t.Fatalf("worker said %q", line)
	}

	c, _ := newClient(t, addr, Options{Prefix: prefix})
	s, tokenOf, queuedOn := syncer(c)
	holders := c.key(mutexName, "holders")
	l := newLoops(t, 1)[0]
	var entered atomic.Int64 // UnixNano
	var token int64
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
		entered.Store(time.Now().UnixNano())
		token, _ = tokenOf(as)
	})
	promise := r.Promise()
	waitFor(t, "the flow to queue", func() bool { return queuedOn() == 1 })
	lease := workerLease(t, c, holders)
	// Held by the worker: renewals keep it held well past one TTL. The
	// lease's expiry is watched meanwhile: a worker starved of CPU renews
	// too late, its lease runs out, and the flow may enter at once then,
	// before the kill or just after.
	var expiry time.Time
	for end := time.Now().Add(killTTL * 3 / 2); time.Now().Before(end) && entered.Load() == 0; {
		if at, ok := leaseExpiry(t, c, holders, lease); ok {
			expiry = at
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if at, ok := leaseExpiry(t, c, holders, lease); ok {
		expiry = at // renewed since the last look
	}
	res := <-promise
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	in := time.Unix(0, entered.Load())
	after := in.Sub(killed)
	t.Logf("entered %v after the kill (TTL %v)", after, killTTL)
	if !expiry.After(killed) {
		t.Logf("the worker's lease ran out %v before the kill", killed.Sub(expiry))
	}
	// The expiry seen is the last renewal's, or one before it: the flow
	// must not enter before it (the clocks agree within a round trip).
	if early := expiry.Sub(in); early > 100*time.Millisecond {
		t.Errorf("entered %v before the worker's lease ran out, %v after the kill", early, after)
	}
	if after > killTTL+2*time.Second {
		t.Errorf("entered %v after the kill, the lease's TTL is %v", after, killTTL)
	}
	if token <= workerToken {
		t.Errorf("token %d after the killed holder's %d", token, workerToken)
	}
}

// workerLease returns the lease in the Mutex's holders key: the worker's,
// the only one while this process's flow waits.
func workerLease(t *testing.T, c *Client, holders string) string {
	t.Helper()
	leases, err := c.rdb.ZRange(context.Background(), holders, 0, -1).Result()
	if err != nil || len(leases) != 1 {
		t.Fatalf("holders %v (%v), want the worker's lease", leases, err)
	}
	return leases[0]
}

// leaseExpiry returns when lease runs out, on this process's clock, read
// from the Mutex's holders key (a sorted set of leases by expiry, in ms of
// Redis's clock), if lease is in it.
func leaseExpiry(t *testing.T, c *Client, holders, lease string) (time.Time, bool) {
	t.Helper()
	ctx := context.Background()
	before := time.Now()
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	skew := now.Sub(before) // Redis's clock ahead of ours, within a round trip
	ms, err := c.rdb.ZScore(ctx, holders, lease).Result()
	if err == redis.Nil {
		return time.Time{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(int64(ms)).Add(-skew), true
}
