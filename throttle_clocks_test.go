package asyncsteps_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestThrottleRefusesALoopAndATestToolTogether: while a period runs on a
// TestTool's virtual clock, a flow of a Loop fails with InternalError,
// which its error handler sees first, and so does a flow of a TestTool
// while a period runs on a Loop; once the period is over, a flow of
// either opens the next. The Loop's flow, its clock years ahead, found
// the TestTool's period over and ended it: two entries in one period of a
// Throttle of one. The TestTool's flow, its clock years behind, waited
// for the Loop's timer.
func TestThrottleRefusesALoopAndATestToolTogether(t *testing.T) {
	const info = "Throttle: a flow of a Loop and one of a TestTool share it: their clocks differ"
	var mu sync.Mutex
	var trace []string
	add := func(format string, args ...any) {
		mu.Lock()
		trace = append(trace, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	th := asyncsteps.NewThrottle(1, time.Minute)
	enter := func(tool asyncsteps.Tool, name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Sync(th, func(asyncsteps.AsyncSteps, ...any) { add("%s in", name) },
			func(as asyncsteps.AsyncSteps, code string) {
				add("%s onerror %s: %s", name, code, as.State().ErrorInfo)
				as.Success()
			})
		// Run drives a TestTool until the flow ends; a flow left waiting
		// for a timer of a Loop would wait a minute: the deadline ends it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := r.Run(ctx); err != nil {
			add("%s: %v", name, err)
		}
	}
	tt := asyncsteps.NewTestTool()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	enter(tt, "T1") // the period runs on virtual time
	enter(loop, "L1")
	tt.Advance(time.Minute) // it ends
	enter(loop, "L2")       // the next runs on the Loops' clock
	enter(tt, "T2")
	want := fmt.Sprint([]string{"T1 in", "L1 onerror InternalError: " + info, "L2 in", "T2 onerror InternalError: " + info})
	if got := fmt.Sprint(trace); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}

// TestLimiterRefusesALoopAndATestToolTogether: a Limiter's rate limit
// refuses a flow of a Loop in a period on a TestTool as a Throttle does,
// and the slot of its concurrency limit that the flow held goes back: a
// flow of the TestTool enters after it.
func TestLimiterRefusesALoopAndATestToolTogether(t *testing.T) {
	const info = "Throttle: a flow of a Loop and one of a TestTool share it: their clocks differ"
	var mu sync.Mutex
	var trace []string
	add := func(format string, args ...any) {
		mu.Lock()
		trace = append(trace, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: asyncsteps.Unlimited, Rate: 3, Period: time.Minute, Burst: asyncsteps.Unlimited,
	})
	enter := func(tool asyncsteps.Tool, name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Sync(lim, func(asyncsteps.AsyncSteps, ...any) { add("%s in", name) },
			func(as asyncsteps.AsyncSteps, code string) {
				add("%s onerror %s: %s", name, code, as.State().ErrorInfo)
				as.Success()
			})
		// A slot never given back would leave the flow waiting: the
		// deadline ends it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := r.Run(ctx); err != nil {
			add("%s: %v", name, err)
		}
	}
	tt := asyncsteps.NewTestTool()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	enter(tt, "T1")
	enter(loop, "L1")
	enter(tt, "T2")
	want := fmt.Sprint([]string{"T1 in", "L1 onerror InternalError: " + info, "T2 in"})
	if got := fmt.Sprint(trace); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}
