package asyncsteps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// clockMixInfo is the error of a flow refused for its clock.
const clockMixInfo = "Throttle: a flow of a Loop and one of a TestTool share it: their clocks differ"

// clockMix runs flows through s one at a time, each on the tool it is
// given, and returns the function that runs one and the trace they make:
// "NAME in", or what the flow's error handler saw, or the flow's error.
func clockMix(s asyncsteps.Syncer) (enter func(tool asyncsteps.Tool, name string), trace func() string) {
	var mu sync.Mutex
	var lines []string
	add := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	enter = func(tool asyncsteps.Tool, name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Sync(s, func(asyncsteps.AsyncSteps, ...any) { add("%s in", name) },
			func(as asyncsteps.AsyncSteps, code string) {
				add("%s onerror %s: %s", name, code, as.State().ErrorInfo)
				as.Success()
			})
		// Run drives a TestTool until the flow ends; a flow left waiting
		// for a timer of a Loop would wait a minute, or for good for a
		// slot never given back: the deadline ends it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := r.Run(ctx); err != nil {
			add("%s: %v", name, err)
		}
	}
	trace = func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(lines)
	}
	return enter, trace
}

// TestThrottleRefusesALoopAndATestToolTogether: while a period runs on a
// TestTool's virtual clock, a flow of a Loop fails with InternalError,
// which its error handler sees first, and so does a flow of a TestTool
// while a period runs on a Loop; once the period is over, a flow of
// either opens the next. The Loop's flow, its clock years ahead, found
// the TestTool's period over and ended it: two entries in one period of a
// Throttle of one. The TestTool's flow, its clock years behind, waited
// for the Loop's timer.
func TestThrottleRefusesALoopAndATestToolTogether(t *testing.T) {
	enter, trace := clockMix(asyncsteps.NewThrottle(1, time.Minute))
	tt := asyncsteps.NewTestTool()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	enter(tt, "T1") // the period runs on virtual time
	enter(loop, "L1")
	tt.Advance(time.Minute) // it ends
	enter(loop, "L2")       // the next runs on the Loops' clock
	enter(tt, "T2")
	want := fmt.Sprint([]string{"T1 in", "L1 onerror InternalError: " + clockMixInfo, "L2 in", "T2 onerror InternalError: " + clockMixInfo})
	if got := trace(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}

// TestLimiterRefusesALoopAndATestToolTogether: a Limiter's rate limit
// refuses a flow of a Loop in a period on a TestTool as a Throttle does,
// and the slot of its concurrency limit that the flow held goes back: a
// flow of the TestTool enters after it.
func TestLimiterRefusesALoopAndATestToolTogether(t *testing.T) {
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: asyncsteps.Unlimited, Rate: 3, Period: time.Minute, Burst: asyncsteps.Unlimited,
	})
	enter, trace := clockMix(lim)
	tt := asyncsteps.NewTestTool()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	enter(tt, "T1")
	enter(loop, "L1")
	enter(tt, "T2")
	want := fmt.Sprint([]string{"T1 in", "L1 onerror InternalError: " + clockMixInfo, "T2 in"})
	if got := trace(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}
