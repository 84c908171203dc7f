package asyncsteps

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// clockMixInfoInternal is the error of a flow refused for its clock.
const clockMixInfoInternal = "Throttle: a flow of a Loop and one of a TestTool share it: their clocks differ"

// clockTrace runs flows through th, each on the tool it is given, and
// traces "NAME in", or what the flow's error handler saw, or the flow's
// error.
type clockTrace struct {
	th    *Throttle
	mu    sync.Mutex
	lines []string
}

func (c *clockTrace) add(format string, args ...any) {
	c.mu.Lock()
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

// flow returns a Root on tool whose step passes through th.
func (c *clockTrace) flow(tool Tool, name string) *Root {
	r := New(WithTool(tool))
	r.Sync(c.th, func(AsyncSteps, ...any) { c.add("%s in", name) },
		func(as AsyncSteps, code string) {
			c.add("%s onerror %s: %s", name, code, as.State().ErrorInfo)
			as.Success()
		})
	return r
}

// run runs a flow on tool to its end; a flow left waiting ends with the
// deadline.
func (c *clockTrace) run(tool Tool, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.flow(tool, name).Run(ctx); err != nil {
		c.add("%s: %v", name, err)
	}
}

func (c *clockTrace) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.lines)
}

// onPeriodBegun runs f once, the first time a period of th begins, before
// its timer is armed, until the test ends.
func onPeriodBegun(t *testing.T, th *Throttle, f func()) {
	var once sync.Once
	h := func(of *Throttle) {
		if of == th {
			once.Do(f)
		}
	}
	testHookPeriodBegun.Store(&h)
	t.Cleanup(func() { testHookPeriodBegun.Store(nil) })
}

// A flow of a Loop that comes as a period opened by a flow of a TestTool
// begins, before its timer is armed, is refused as in the rest of the
// period. Before, the check read the tool of the period's timer, not
// known yet: the Loop's flow entered a period on virtual time.
func TestThrottleRefusesTheOtherClockAsAPeriodBegins(t *testing.T) {
	c := &clockTrace{th: NewThrottle(2, time.Minute)}
	tt := NewTestTool()
	loop := NewLoop()
	defer loop.Close()
	onPeriodBegun(t, c.th, func() { c.run(loop, "L1") })
	c.run(tt, "T1")
	want := fmt.Sprint([]string{"L1 onerror InternalError: " + clockMixInfoInternal, "T1 in"})
	if got := c.String(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}

// A flow of a Loop that comes as the next period of a TestTool begins, its
// waiters let in, before its timer is armed, is refused as in the rest of
// the period. Before, the check read the tool of the period's timer,
// forgotten as the period before ended: the Loop's flow entered.
func TestThrottleRefusesTheOtherClockBetweenPeriods(t *testing.T) {
	c := &clockTrace{th: NewThrottle(2, time.Minute)}
	tt := NewTestTool()
	loop := NewLoop()
	defer loop.Close()
	c.run(tt, "T1")
	c.run(tt, "T2")
	waiter := c.flow(tt, "T3").Promise() // waits for the next period
	tt.Advance(0)
	onPeriodBegun(t, c.th, func() { c.run(loop, "L1") })
	tt.Advance(time.Minute)
	if res := <-waiter; res.Err != nil {
		t.Errorf("T3: %v", res.Err)
	}
	want := fmt.Sprint([]string{"T1 in", "T2 in", "L1 onerror InternalError: " + clockMixInfoInternal, "T3 in"})
	if got := c.String(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}

// A period timed on a Loop that closed runs on untimed, on the clock of
// Loops: a flow of a TestTool that comes then is refused. Before, with no
// timer, the check found no tool to compare: the TestTool's flow, its
// clock years behind, queued and timed the period's rest on virtual time,
// then waited years of it for an end the Loops' clock set.
func TestThrottleRefusesTheOtherClockInAnUntimedPeriod(t *testing.T) {
	c := &clockTrace{th: NewThrottle(1, time.Minute)}
	tt := NewTestTool()
	doomed := NewLoop()
	c.run(doomed, "L1")
	doomed.Close()
	c.run(tt, "T1")
	want := fmt.Sprint([]string{"L1 in", "T1 onerror InternalError: " + clockMixInfoInternal})
	if got := c.String(); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left on the TestTool, want 0", n)
	}
}
