package asyncsteps_test

// Hostile uses of Mutex, Throttle and Limiter, with exact traces: a Sync
// from an error handler, timeouts and cancels around and inside sections,
// a Limiter that its Throttle refuses or cancels after its Mutex admitted,
// Throttle periods on exact boundaries of virtual time, Sync on a closed
// Loop.

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// at returns the virtual time of tt, in milliseconds since its epoch.
func at(tt *asyncsteps.TestTool) int64 { return tt.Now().Sub(asyncsteps.TestToolEpoch).Milliseconds() }

// holdStep returns a critical section that records name with the time and
// stays inside for d.
func holdStep(tr *tracer, tt *asyncsteps.TestTool, name string, d time.Duration) asyncsteps.StepFunc {
	return func(as steps, _ ...any) {
		tr.addf("%s@%d", name, at(tt))
		as.WaitExternal()
		tt.Deferred(d, func() { as.Success() })
	}
}

// The onerror given to Sync runs while the flow still holds the slot, so
// a Sync from it enters again at once, ahead of the flows queued; an error
// handler around a Sync runs once the section's slot is back (the section's
// cancel handler ran first), so a Sync from it queues behind the flow that
// the slot went to.
func TestSyncFromAnErrorHandler(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1)
	fail := func(name string, after time.Duration) asyncsteps.StepFunc {
		return func(as steps, _ ...any) {
			tr.addf("%s@%d", name, at(tt))
			as.WaitExternal()
			tt.Deferred(after, func() { as.Error(asyncsteps.CommError, name) })
		}
	}
	var results []<-chan asyncsteps.Result
	startAt := func(d time.Duration, r *asyncsteps.Root) {
		tt.Deferred(d, func() { results = append(results, r.Promise()) })
	}

	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Sync(m, fail("a", 10*time.Millisecond), func(as steps, code string) {
		tr.addf("a.onerror:%s@%d", code, at(tt))
		as.Sync(m, holdStep(&tr, tt, "a.nested", 5*time.Millisecond))
	})
	x := asyncsteps.New(asyncsteps.WithTool(tt))
	x.Add(func(as steps, _ ...any) {
		as.Sync(m, fail("x", 0))
	}, func(as steps, code string) {
		tr.addf("x.handler:%s@%d", code, at(tt))
		as.Sync(m, holdStep(&tr, tt, "x.again", time.Millisecond))
	})
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(m, holdStep(&tr, tt, "b", 10*time.Millisecond))
	startAt(0, a)
	startAt(time.Millisecond, x)
	startAt(2*time.Millisecond, b)
	drive(t, tt)

	wantTrace(t, &tr, "a@0,a.onerror:CommError@10,a.nested@10,x@15,x.handler:CommError@15,b@15,x.again@25")
	for _, p := range results {
		wantSuccess(t, result(t, p))
	}
	wantMutexFree(t, m)
}

// wantMutexFree fails the test unless a new flow enters m at once.
func wantMutexFree(t *testing.T, m asyncsteps.Syncer) {
	t.Helper()
	tt := asyncsteps.NewTestTool()
	entered := false
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(m, func(steps, ...any) { entered = true })
	r.Promise()
	tt.Advance(0)
	if !entered {
		t.Error("the Syncer is still held")
	}
}

// A timeout set inside a section fails the section's step: the onerror
// given to Sync sees Timeout while the flow still holds the slot, and the
// slot goes to the next flow once the error has left the section. A
// timeout around a Sync that waits takes the flow out of the queue, which
// has room again at once.
func TestSyncTimeouts(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1, 1)
	var results []<-chan asyncsteps.Result
	startAt := func(d time.Duration, build func(r *asyncsteps.Root)) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		build(r)
		tt.Deferred(d, func() { results = append(results, r.Promise()) })
	}
	startAt(0, func(r *asyncsteps.Root) {
		r.Sync(m, func(as steps, _ ...any) {
			tr.addf("a@%d", at(tt))
			as.SetTimeout(20 * time.Millisecond)
			as.WaitExternal()
		}, func(as steps, code string) { tr.addf("a.onerror:%s@%d", code, at(tt)) })
	})
	startAt(time.Millisecond, func(r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) {
			as.SetTimeout(5 * time.Millisecond)
			as.Sync(m, holdStep(&tr, tt, "impatient", time.Millisecond))
		}, func(as steps, code string) { tr.addf("impatient.handler:%s@%d", code, at(tt)) })
	})
	startAt(2*time.Millisecond, func(r *asyncsteps.Root) { // the queue holds impatient
		r.Sync(m, holdStep(&tr, tt, "full", time.Millisecond), func(as steps, code string) {
			tr.addf("full.onerror:%s:%s@%d", code, as.State().ErrorInfo, at(tt))
		})
	})
	startAt(7*time.Millisecond, func(r *asyncsteps.Root) { // room again
		r.Sync(m, holdStep(&tr, tt, "c", time.Millisecond))
	})
	drive(t, tt)

	wantTrace(t, &tr, "a@0,full.onerror:DefenseRejected:Mutex queue limit@2,"+
		"impatient.handler:Timeout@6,a.onerror:Timeout@20,c@20")
	var got []string
	for _, p := range results {
		got = append(got, errText(result(t, p).Err))
	}
	if want := "Timeout,Timeout,DefenseRejected: Mutex queue limit,"; strings.Join(got, ",") != want {
		t.Errorf("results %q, want %q", strings.Join(got, ","), want)
	}
	wantMutexFree(t, m)
	syncWantIdle(t, tt)
}

// A Limiter whose Throttle refuses a flow that its Mutex admitted gives
// the slot back at once, before the error handler given to Sync runs: a
// refused flow is not inside, also while the handler recovers by waiting.
// So c, which comes while b's handler waits, finds b's slot free and is
// refused by the Throttle, as b was, not by the Mutex's full queue.
func TestLimiterThrottleRefusalGivesTheSlotBack(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 2, MaxQueue: 0, Rate: 1, Period: 100 * time.Millisecond, Burst: 0})
	for i, name := range []string{"a", "b", "c"} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(lim, holdStep(&tr, tt, name, 50*time.Millisecond), func(as steps, code string) {
			tr.addf("%s:%s:%s@%d", name, code, as.State().ErrorInfo, at(tt))
			as.Add(func(as steps, _ ...any) { // recovers after a while
				as.WaitExternal()
				tt.Deferred(20*time.Millisecond, func() { as.Success() })
			})
		})
		tt.Deferred(time.Duration(i)*5*time.Millisecond, func() { r.Execute() })
	}
	drive(t, tt)
	wantTrace(t, &tr, "a@0,b:DefenseRejected:Throttle queue limit@5,c:DefenseRejected:Throttle queue limit@10")
	syncWantIdle(t, tt)
}

// A flow cancelled while it holds a Limiter's slot and waits for its
// Throttle's next period leaves the Throttle's queue and gives the slot
// back: the flow queued for the slot behind it takes it, and the next
// period lets it in.
func TestLimiterCancelWhileHoldingAndQueued(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: 1, Rate: 1, Period: 100 * time.Millisecond, Burst: 1})
	start := func(name string, after time.Duration) *asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) {
			as.SetCancel(func(steps) { tr.addf("%s.cancel@%d", name, at(tt)) })
			as.Sync(lim, holdStep(&tr, tt, name, 10*time.Millisecond))
		})
		tt.Deferred(after, func() { r.Execute() })
		return r
	}
	start("a", 0)
	b := start("b", 5*time.Millisecond) // slot at 10, then waits for the period
	start("c", 20*time.Millisecond)     // waits for the slot b holds
	tt.Deferred(50*time.Millisecond, b.Cancel)
	drive(t, tt)
	wantTrace(t, &tr, "a@0,b.cancel@50,c@100")
	syncWantIdle(t, tt)
	wantMutexFree(t, lim)
}

// A Throttle's period ends exactly when a flow arrives: whichever of the
// two runs first, the flow enters at that instant and opens the next
// period, and the flows after it wait for their own periods; no period
// lets in more than its limit.
func TestThrottlePeriodBoundaries(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	for _, f := range []struct {
		name string
		at   time.Duration
	}{{"a", 0}, {"b", 100}, {"c", 150}, {"d", 200}, {"e", 400}, {"f", 500}} {
		tt.Deferred(f.at*time.Millisecond, func() {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(th, func(steps, ...any) { tr.addf("%s@%d", f.name, at(tt)) })
			r.Execute()
		})
	}
	drive(t, tt)
	// b at 100 opens [100, 200); c waits for 200, d for 300; the
	// Throttle is idle from 400, so e enters at once and f at 500.
	wantTrace(t, &tr, "a@0,b@100,c@200,d@300,e@400,f@500")
	syncWantIdle(t, tt)
}

// Sync on a flow of a closed Loop runs nothing and holds nothing: the flow
// ends with the closed loop's InternalError, and the Syncers stay free.
func TestSyncOnAClosedLoop(t *testing.T) {
	l := asyncsteps.NewLoop()
	l.Close()
	m := asyncsteps.NewMutex(1)
	th := asyncsteps.NewThrottle(1, time.Hour)
	lim := asyncsteps.NewLimiter(asyncsteps.SpecLimiterOptions())
	for _, obj := range []asyncsteps.Syncer{m, th, lim} {
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(obj, tr.step("inside"), tr.handler("onerror"))
		_, err := r.Run(t.Context())
		wantError(t, err, asyncsteps.InternalError, "the flow's loop is closed")
		wantTrace(t, &tr, "")
		wantMutexFree(t, obj)
	}
}

// Parallel branches of one flow are flows of their own: in a Mutex(2)
// that the flow holds, one branch takes the second slot, another waits
// for it, and each enters its own nested Sync again at once.
func TestMutexBranchesOfAHolder(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(2)
	branch := func(name string) asyncsteps.StepFunc {
		return func(as steps, _ ...any) {
			as.Sync(m, func(as steps, _ ...any) {
				tr.addf("%s@%d", name, at(tt))
				as.Sync(m, holdStep(&tr, tt, name+".nested", 10*time.Millisecond))
			})
		}
	}
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(m, func(as steps, _ ...any) {
		tr.addf("flow@%d", at(tt))
		p := as.Parallel()
		p.Add(branch("b1"))
		p.Add(branch("b2"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "flow@0,b1@0,b1.nested@0,b2@10,b2.nested@10")
	wantMutexFree(t, m)
}

// One Limiter shared by flows on several Loops, whose Throttle rejects
// some of them after its Mutex admitted them, with a SyncWait hook on
// every loop: never more than Concurrent flows inside, every rejection is
// the Throttle's (the Mutex queue is unlimited), every wait is reported
// with the Limiter as obj, and once the flows have ended the Limiter is
// free. Run under -race, it checks that the slot given back from the gate
// step and the hook's Limiter are safe across loops.
func TestLimiterSharedAcrossLoopsWithRejections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const loops, flowsPerLoop = 3, 30
		lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: 2, MaxQueue: asyncsteps.Unlimited, Rate: 3, Period: 10 * time.Millisecond, Burst: 1})
		var inside, maxInside, entered, waits, foreign atomic.Int32
		var mu sync.Mutex
		rejections := map[string]int{}
		hooks := &asyncsteps.Hooks{SyncWait: func(obj asyncsteps.Syncer, _ time.Duration) {
			waits.Add(1)
			if obj != asyncsteps.Syncer(lim) {
				foreign.Add(1)
			}
		}}
		var results []<-chan asyncsteps.Result
		for range loops {
			l := asyncsteps.NewLoop()
			defer l.Close()
			l.SetHooks(hooks)
			for range flowsPerLoop {
				r := asyncsteps.New(asyncsteps.WithTool(l))
				r.Sync(lim, func(as steps, _ ...any) {
					entered.Add(1)
					n := inside.Add(1)
					for old := maxInside.Load(); n > old && !maxInside.CompareAndSwap(old, n); old = maxInside.Load() {
					}
					as.Await(func(context.Context) (any, error) {
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						return nil, nil
					})
				}, func(as steps, code string) {
					mu.Lock()
					rejections[code+": "+as.State().ErrorInfo]++
					mu.Unlock()
					as.Success()
				})
				results = append(results, r.Promise())
			}
		}
		for _, p := range results {
			if err := (<-p).Err; err != nil {
				t.Errorf("a flow failed: %v", err)
			}
		}
		n := 0
		for info, k := range rejections {
			if info != "DefenseRejected: Throttle queue limit" {
				t.Errorf("%d flows rejected with %q", k, info)
			}
			n += k
		}
		if got := int(entered.Load()) + n; got != loops*flowsPerLoop || n == 0 || entered.Load() == 0 {
			t.Errorf("%d entered and %d rejected, want %d in all, some of each", entered.Load(), n, loops*flowsPerLoop)
		}
		if m := maxInside.Load(); m > 2 {
			t.Errorf("%d flows inside at once, want at most 2", m)
		}
		if f := foreign.Load(); f != 0 {
			t.Errorf("%d of %d waits reported with another obj than the Limiter", f, waits.Load())
		}
		time.Sleep(10 * time.Millisecond) // the last period ends
		probe := asyncsteps.NewTestTool()
		in := false
		r := asyncsteps.New(asyncsteps.WithTool(probe))
		r.Sync(lim, func(steps, ...any) { in = true })
		r.Promise()
		probe.Advance(0)
		if !in {
			t.Error("the Limiter is not free once every flow has ended")
		}
	})
}

// A nested Sync on a Limiter that the flow holds enters its Mutex again
// at once, but counts for the rate: with no Burst the Throttle rejects
// it, and the flow, which recovers, still holds the slot from the outer
// Sync until it breaks out of its loop from inside the section, which
// gives the slot back: the flow queued for it gets it then, and is
// rejected by the Throttle in its turn.
func TestLimiterNestedRejectionKeepsTheOuterSlot(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 1, MaxQueue: asyncsteps.Unlimited, Rate: 1, Period: 100 * time.Millisecond, Burst: 0})
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Repeat(3, func(as steps, i int) {
		as.Sync(lim, func(as steps, _ ...any) {
			tr.addf("a%d@%d", i, at(tt))
			as.Sync(lim, tr.step("nested"), func(as steps, code string) {
				tr.addf("nested:%s:%s", code, as.State().ErrorInfo)
				as.Success()
			})
			as.Add(func(as steps, _ ...any) {
				as.WaitExternal()
				tt.Deferred(10*time.Millisecond, func() { as.Success() })
			})
			as.Add(func(as steps, _ ...any) { as.Break() })
		}, func(as steps, code string) { tr.addf("a.onerror:%s@%d", code, at(tt)) })
	})
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(lim, tr.step("b"), func(as steps, code string) {
		tr.addf("b:%s:%s@%d", code, as.State().ErrorInfo, at(tt))
	})
	ra := a.Promise()
	var rb <-chan asyncsteps.Result
	tt.Deferred(time.Millisecond, func() { rb = b.Promise() })
	drive(t, tt)
	wantTrace(t, &tr, "a0@0,nested:DefenseRejected:Throttle queue limit,a.onerror:LoopBreak@10,"+
		"b:DefenseRejected:Throttle queue limit@10")
	wantSuccess(t, result(t, ra))
	wantCode(t, result(t, rb).Err, asyncsteps.DefenseRejected)
	syncWantIdle(t, tt)
}

// A period ends at its end on the clock, whichever comes first at that
// instant: its timer, or a flow that arrives. With no queue, a flow that
// arrives exactly as the period ends enters, whether its event runs
// before the timer's or after it; it was refused when it ran first, as it
// still would be a nanosecond earlier. So is a flow whose loop runs the
// timer late: the period is over by the clock all the same.
func TestThrottleFlowAtThePeriodsEndEntersWithNoQueue(t *testing.T) {
	for _, arrivalFirst := range []bool{true, false} {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, 100*time.Millisecond, 0)
		enter := entering(tt, th, &tr)
		if arrivalFirst { // b's event is queued before the period's timer
			tt.Deferred(100*time.Millisecond, func() { enter("b") })
			tt.Deferred(100*time.Millisecond-time.Nanosecond, func() { enter("early") })
			enter("a")
		} else {
			enter("a")
			tt.Advance(0)
			tt.Deferred(100*time.Millisecond, func() { enter("b") })
			tt.Deferred(100*time.Millisecond-time.Nanosecond, func() { enter("early") })
		}
		tt.Deferred(150*time.Millisecond, func() { enter("c") }) // b's period runs until 200
		tt.Deferred(200*time.Millisecond, func() { enter("d") })
		drive(t, tt)
		want := "a@0,early:DefenseRejected@99,b@100,c:DefenseRejected@150,d@200"
		if got := tr.String(); got != want {
			t.Errorf("arrival first %v:\n got: %s\nwant: %s", arrivalFirst, got, want)
		}
		syncWantIdle(t, tt)
	}
}

// A flow that comes as a period with room left ends is not counted in
// that period, whichever of its arrival and the period's timer runs first
// at that instant: it opens the next one. Counted in the old period, it
// was forgotten when the timer ended that period, and the next two flows
// entered in a new one: b, c and d within 60ms, with a rate of 2 per
// 100ms, and e, which the rate lets in, rejected.
func TestThrottleFlowAtTheEndOfAPeriodWithRoomOpensTheNext(t *testing.T) {
	for _, arrivalFirst := range []bool{true, false} {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(2, 100*time.Millisecond, 0)
		enter := entering(tt, th, &tr)
		if arrivalFirst { // b's event is queued before the period's timer
			tt.Deferred(100*time.Millisecond, func() { enter("b") })
			enter("a")
		} else {
			enter("a")
			tt.Advance(0)
			tt.Deferred(100*time.Millisecond, func() { enter("b") })
		}
		tt.Deferred(150*time.Millisecond, func() { enter("c") }) // b's period runs until 200
		tt.Deferred(160*time.Millisecond, func() { enter("d") })
		tt.Deferred(200*time.Millisecond, func() { enter("e") })
		drive(t, tt)
		want := "a@0,b@100,c@150,d:DefenseRejected@160,e@200"
		if got := tr.String(); got != want {
			t.Errorf("arrival first %v:\n got: %s\nwant: %s", arrivalFirst, got, want)
		}
		syncWantIdle(t, tt)
	}
}

// entering returns a function that runs, on tt, a flow named name that
// syncs on th and traces its entry, or the code it fails with, at tt's
// time in milliseconds.
func entering(tt *asyncsteps.TestTool, th asyncsteps.Syncer, tr *tracer) func(name string) {
	return func(name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(th, func(steps, ...any) { tr.addf("%s@%d", name, at(tt)) },
			func(as steps, code string) { tr.addf("%s:%s@%d", name, code, at(tt)); as.Success() })
		r.Execute()
	}
}
