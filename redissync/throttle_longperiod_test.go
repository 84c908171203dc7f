package redissync

import (
	"math"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// resumed is a waiting step that counts its completions: round completes
// the waiters it admits.
type resumed struct {
	asyncsteps.AsyncSteps
	n *int
}

func (r resumed) Success(...any) { *r.n++ }

// TestThrottleLongestPeriodWait: with a Period of the longest Duration,
// the round trip that admits one of two flows on an idle Throttle makes
// the other wait for the next entry, centuries away. Redis names that
// entry a µs beyond what a Duration holds (the interval is rounded up);
// the wait wrapped around to a negative, became the 100 µs floor, and the
// Throttle's goroutine asked Redis again at once.
func TestThrottleLongestPeriodWait(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("longest", ThrottleOptions{Rate: 1, Period: math.MaxInt64, MaxQueue: 1})
	admitted := 0
	// The waiters are handed over as request hands them, without the
	// signal: the Throttle's goroutine stays asleep, and the round trip
	// is the test's own.
	th.mu.Lock()
	for range 2 {
		th.fresh = append(th.fresh, &waiter{state: wFresh, as: resumed{n: &admitted}})
	}
	th.mu.Unlock()
	wait, waiting := th.round()
	if admitted != 1 || !waiting || queued(&th.gateQueue) != 1 || wait != math.MaxInt64 {
		t.Errorf("%d admitted, %d queued; next round trip in %v (%v), want 1, 1, in %v (true)",
			admitted, queued(&th.gateQueue), wait, waiting, time.Duration(math.MaxInt64))
	}
}
