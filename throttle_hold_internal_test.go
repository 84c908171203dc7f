package asyncsteps

import (
	"fmt"
	"testing"
	"time"
)

// A Hold made as a period begins, before its timer is armed and its end
// known, makes the period last until the hold's end: the flow that waits
// enters then, not a period after the first entry.
func TestThrottleHoldAsAPeriodBegins(t *testing.T) {
	tt := NewTestTool()
	th := NewThrottle(1, 100*time.Millisecond)
	onPeriodBegun(t, th, func() { th.Hold(tt.Now().Add(time.Second)) })
	var entries []time.Duration
	for range 2 {
		r := New(WithTool(tt))
		r.Sync(th, func(AsyncSteps, ...any) { entries = append(entries, tt.Now().Sub(TestToolEpoch)) })
		r.Execute()
	}
	tt.Run()
	if got, want := fmt.Sprint(entries), "[0s 1s]"; got != want {
		t.Errorf("entries at %s, want %s", got, want)
	}
}

// A hold made while the Throttle is idle runs on the clock of the first
// flow that waits for it: a flow of a Loop that comes while a flow of a
// TestTool waits is refused, as in a period of the TestTool. Without a
// kind of clock, the Loop's flow, its clock years ahead, ended the hold
// at once: it let the TestTool's flow in, and waited for a period timed
// on the Loop.
func TestThrottleHoldWhileIdleTakesTheClockOfItsWaiter(t *testing.T) {
	c := &clockTrace{th: NewThrottle(1, time.Minute)}
	tt := NewTestTool()
	loop := NewLoop()
	defer loop.Close()
	c.th.Hold(TestToolEpoch.Add(time.Minute))
	waiter := c.flow(tt, "T1").Promise()
	tt.Advance(0)
	c.run(loop, "L1")
	tt.Advance(time.Minute)
	if res := <-waiter; res.Err != nil {
		t.Errorf("T1: %v", res.Err)
	}
	want := fmt.Sprint([]string{"L1 onerror InternalError: " + clockMixInfoInternal, "T1 in"})
	if got := c.String(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}
