package redissync

import (
	"math"
	"os"
	"os/exec"
	"testing"
	"time"
)

// tinyTTLEnv names the Redis address for the child process of
// TestMutexTinyTTL.
const tinyTTLEnv = "REDISSYNC_TINY_TTL_ADDR"

// TestMutexTinyTTL: a Mutex whose TTL is under a millisecond works, with a
// lease of one millisecond (Redis's unit), and does not crash the process:
// a TTL under 3ns made a renewal ticker of 0, whose panic on the Mutex's
// goroutine no one could recover. So does one within a millisecond of the
// largest Duration ("for ever"), rounded down: rounded up, it overflowed
// into a negative lease, and the same panic. It runs in a child process,
// which such a panic kills.
func TestMutexTinyTTL(t *testing.T) {
	if addr := os.Getenv(tinyTTLEnv); addr != "" {
		tinyTTLChild(t, addr)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMutexTinyTTL$", "-test.count=1")
	cmd.Env = append(os.Environ(), tinyTTLEnv+"="+sharedRedis(t))
	dieWithTest(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}

func tinyTTLChild(t *testing.T, addr string) {
	c, _ := newClient(t, addr, Options{})
	for ttl, want := range map[time.Duration]time.Duration{
		time.Nanosecond: time.Millisecond, 500 * time.Microsecond: time.Millisecond,
		1500 * time.Microsecond: 2 * time.Millisecond,
		math.MaxInt64:           time.Duration(math.MaxInt64).Truncate(time.Millisecond)} {
		m := c.NewMutex("tiny"+ttl.String(), MutexOptions{TTL: ttl})
		if m.ttl != want {
			t.Errorf("TTL %v: lease of %v, want %v", ttl, m.ttl, want)
		}
		var tr tracer
		if res := <-enter(newLoops(t, 1)[0], m, &tr, "A"); res.Err != nil {
			t.Fatalf("TTL %v: %v", ttl, res.Err)
		}
		tr.check(t, "A in")
	}
}

// TestThrottleTinyPeriod: a Throttle whose Period is under a microsecond
// lets flows in. Its Period, truncated to whole microseconds, made an
// emission interval of 0, by which the script divided: 0/0 admitted
// nobody, and the Throttle asked Redis again every 100µs for ever.
func TestThrottleTinyPeriod(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("tiny", ThrottleOptions{Period: 500 * time.Nanosecond, MaxQueue: -1})
	if th.interval != "0.500" || th.slack != "0.000" {
		t.Errorf("interval %s µs, slack %s µs, want 0.500 and 0.000", th.interval, th.slack)
	}
	l := newLoops(t, 1)[0]
	var tr tracer
	for _, name := range []string{"A", "B", "C"} {
		select {
		case res := <-enter(l, th, &tr, name):
			if res.Err != nil {
				t.Fatalf("%s: %v", name, res.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waits to enter a Throttle of 1 per 500ns", name)
		}
	}
	tr.check(t, "A in", "B in", "C in")
}

// TestMutexLongestTTLWait: with a TTL of the longest Duration, a renewal
// whose round trip leaves a flow waiting makes it wait until the lease
// renewed runs out, centuries away, or until a re-check. Redis names that
// expiry in ms, a full TTL away; counted in ns, plus the ms the wait
// rounds up, it overflowed into a negative wait, and the Mutex's
// goroutine asked Redis again at once, a round trip for nothing.
func TestMutexLongestTTLWait(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{Recheck: time.Hour})
	m := c.NewMutex("longest", MutexOptions{Max: 1, MaxQueue: 1, TTL: math.MaxInt64})
	admitted := 0
	// The waiters are handed over as request hands them, without the
	// signal: the Mutex's goroutine stays asleep, and the round trips are
	// the test's own. A enters, B waits, then A's lease is renewed.
	for _, name := range []string{"A", "B"} {
		m.mu.Lock()
		m.fresh = append(m.fresh, &waiter{state: wFresh, lease: c.leaseID(), as: resumed{n: &admitted}})
		m.mu.Unlock()
		if _, waiting := m.round(false, false); waiting != (name == "B") {
			t.Fatalf("%s tried: waiters left %v, want %v", name, waiting, name == "B")
		}
	}
	wait, waiting := m.round(true, true)
	if admitted != 1 || !waiting || queued(&m.gateQueue) != 1 || wait != math.MaxInt64 {
		t.Errorf("%d admitted, %d queued; next round trip in %v (%v), want 1, 1, in %v (true)",
			admitted, queued(&m.gateQueue), wait, waiting, time.Duration(math.MaxInt64))
	}
}

// TestToDurationSaturates: a count of some unit read from Redis that a
// Duration cannot hold becomes the longest, or the most negative,
// Duration, rather than wrap around to the other sign.
func TestToDurationSaturates(t *testing.T) {
	maxMillis := int64(math.MaxInt64 / time.Millisecond)
	for _, tc := range []struct {
		n    int64
		unit time.Duration
		want time.Duration
	}{
		{0, time.Millisecond, 0},
		{-1, time.Millisecond, -time.Millisecond},
		{maxMillis, time.Millisecond, time.Duration(maxMillis) * time.Millisecond},
		{maxMillis + 1, time.Millisecond, math.MaxInt64},
		{math.MaxInt64, time.Millisecond, math.MaxInt64},
		{-maxMillis, time.Millisecond, time.Duration(-maxMillis) * time.Millisecond},
		{-maxMillis - 1, time.Millisecond, math.MinInt64},
		{math.MinInt64, time.Millisecond, math.MinInt64},
		{math.MaxInt64 / 1000, time.Microsecond, time.Duration(math.MaxInt64/1000) * time.Microsecond},
		{math.MaxInt64/1000 + 1, time.Microsecond, math.MaxInt64},
		{math.MaxInt64, time.Nanosecond, math.MaxInt64},
		{math.MinInt64, time.Nanosecond, math.MinInt64},
	} {
		if got := toDuration(tc.n, tc.unit); got != tc.want {
			t.Errorf("toDuration(%d, %v) = %v, want %v", tc.n, tc.unit, got, tc.want)
		}
	}
}
