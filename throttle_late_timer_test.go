package asyncsteps_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A period ends at its end on the clock even when the loop that times it
// is busy then: a flow of another loop that finds the Throttle full after
// that end enters at once, and the late timer, once it runs, times the
// period that flow began, to its end, not a whole period from when it ran.
// Before, the flow waited for the busy loop, and so did the flow queued
// in the next period.
func TestThrottlePeriodOfABusyLoopEndsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var tr tracer
		busy, other := twoLoops(t)
		th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
		var mu sync.Mutex // enter runs on the test's goroutine and on other's
		var results []<-chan asyncsteps.Result
		enter := func(l *asyncsteps.Loop, name string) {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Sync(th, func(steps, ...any) { tr.addf("%s@%d", name, time.Since(start).Milliseconds()) })
			mu.Lock()
			results = append(results, r.Promise())
			mu.Unlock()
		}
		enter(busy, "a") // the period runs until 100, timed on busy
		synctest.Wait()
		busy.Deferred(50*time.Millisecond, func() { time.Sleep(100 * time.Millisecond) }) // busy from 50 to 150
		other.Deferred(120*time.Millisecond, func() { enter(other, "b") })                // the period is over
		other.Deferred(200*time.Millisecond, func() { enter(other, "c") })                // b's runs until 220
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, p := range results {
			if err := (<-p).Err; err != nil {
				t.Errorf("a flow failed: %v", err)
			}
		}
		if got, want := tr.String(), "a@0,b@120,c@220"; got != want {
			t.Errorf("entries: %s, want %s", got, want)
		}
	})
}

// A flow that comes after a period's end, its timer late on a busy loop,
// opens the next period also when the one that is over had room left: b,
// c and d come within 20ms, and a rate of 2 per 100ms lets b and c in.
// Before, b was counted in a's period, which c then found full and
// ended, and d entered beside c.
func TestThrottlePeriodWithRoomOfABusyLoopEndsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var tr tracer
		busy, other := twoLoops(t)
		th := asyncsteps.NewThrottle(2, 100*time.Millisecond, 0)
		enter := func(l *asyncsteps.Loop, name string) {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Sync(th, func(steps, ...any) { tr.addf("%s@%d", name, time.Since(start).Milliseconds()) },
				func(as steps, code string) {
					tr.addf("%s:%s@%d", name, code, time.Since(start).Milliseconds())
					as.Success()
				})
			r.Execute()
		}
		enter(busy, "a") // the period runs until 100, timed on busy
		synctest.Wait()
		busy.Deferred(50*time.Millisecond, func() { time.Sleep(100 * time.Millisecond) }) // busy from 50 to 150
		other.Deferred(120*time.Millisecond, func() { enter(other, "b") })                // the period is over
		other.Deferred(130*time.Millisecond, func() { enter(other, "c") })
		other.Deferred(140*time.Millisecond, func() { enter(other, "d") }) // b's period is full
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := tr.String(), "a@0,b@120,c@130,d:DefenseRejected@140"; got != want {
			t.Errorf("entries: %s, want %s", got, want)
		}
	})
}

// twoLoops returns two new Loops, closed as t ends.
func twoLoops(t *testing.T) (*asyncsteps.Loop, *asyncsteps.Loop) {
	a, b := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// stepTool is the Tool of one flow, as a foreign table's is: it wraps a
// TestTool (in a field: embedded, the engine would use the TestTool
// itself) and, once the test marks it dead (its flow has ended, and a
// foreign table would have freed the step it came from), records every
// use of it in late.
type stepTool struct {
	tt   *asyncsteps.TestTool
	name string
	dead bool
	late *[]string
}

func (s *stepTool) use(m string) {
	if s.dead {
		*s.late = append(*s.late, s.name+"."+m)
	}
}

func (s *stepTool) Immediate(f func()) asyncsteps.Handle {
	s.use("Immediate")
	return s.tt.Immediate(f)
}

func (s *stepTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	s.use("Deferred")
	return s.tt.Deferred(d, f)
}

func (s *stepTool) IsSameThread() bool { s.use("IsSameThread"); return s.tt.IsSameThread() }
func (s *stepTool) Now() time.Time     { s.use("Now"); return s.tt.Now() }

// A flow that comes as a period ends, before its timer runs, times the
// period it opens on its own tool: the timer of the period that is over
// does nothing when it runs. Before, that timer timed the new period on
// the tool of the flow that had opened the old one, long ended: a use
// after free for the Tool of a foreign table's step (cabi), which the
// table frees with the step. Each flow's tool here is marked dead once
// its flow has ended; no dead tool may be used.
func TestThrottleOutrunPeriodIsTimedOnALiveTool(t *testing.T) {
	var tr tracer
	var late []string
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	tools := map[string]*stepTool{}
	ends := map[string]<-chan asyncsteps.Result{}
	enter := func(name string) {
		tool := &stepTool{tt: tt, name: name, late: &late}
		tools[name] = tool
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Sync(th, func(steps, ...any) { tr.addf("%s@%d", name, at(tt)) })
		ends[name] = r.Promise()
	}
	kill := func(name string) {
		if len(ends[name]) != 1 {
			t.Errorf("%s's flow has not ended at %d", name, at(tt))
		}
		tools[name].dead = true
	}
	tt.Deferred(100*time.Millisecond, func() { enter("b") }) // before a's timer, at one instant
	enter("a")                                               // the period runs until 100
	tt.Deferred(50*time.Millisecond, func() { kill("a") })
	tt.Deferred(150*time.Millisecond, func() { kill("b"); enter("c") }) // b's period runs until 200
	tt.Deferred(250*time.Millisecond, func() { kill("c"); enter("d") }) // c's until 300
	tt.Deferred(350*time.Millisecond, func() { kill("d") })
	drive(t, tt)
	if got, want := tr.String(), "a@0,b@100,c@200,d@300"; got != want {
		t.Errorf("entries: %s, want %s", got, want)
	}
	if late != nil {
		t.Errorf("dead tools used: %v", late)
	}
	syncWantIdle(t, tt)
}

// A period begun by a flow is timed from that flow's entry, whether the
// Throttle was idle (the old period's timer ran first at that instant) or
// the flow outran the old period's timer: so a timer armed after that
// entry at the same instant, w's timeout here, falls due after the
// period's end, which lets w in first, at one instant again. Before, the
// timer of an outrun period was armed only as the old timer ran, after
// w's timeout: w timed out in the queue, though it entered when the old
// timer ran first.
func TestThrottleOutrunPeriodIsTimedFromTheEntryThatOpensIt(t *testing.T) {
	for _, arrivalFirst := range []bool{true, false} {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
		enter := entering(tt, th, &tr)
		waiter := func() { // waits for b's period, until 200
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as steps, _ ...any) {
				as.SetTimeout(100 * time.Millisecond)
				th.Sync(as, func(steps, ...any) { tr.addf("w@%d", at(tt)) })
			}, func(as steps, code string) { tr.addf("w:%s@%d", code, at(tt)); as.Success() })
			r.Execute()
		}
		arrive := func() {
			tt.Deferred(100*time.Millisecond, func() { enter("b") })
			tt.Deferred(100*time.Millisecond, waiter)
		}
		if arrivalFirst { // b and w come before the period's timer runs
			arrive()
			enter("a")
		} else {
			enter("a")
			tt.Advance(0)
			arrive()
		}
		drive(t, tt)
		if got, want := tr.String(), "a@0,b@100,w@200"; got != want {
			t.Errorf("arrival first %v:\n got: %s\nwant: %s", arrivalFirst, got, want)
		}
		syncWantIdle(t, tt)
	}
}
