package asyncsteps_test

// This file is long on purpose: the rules of Mutex, Throttle and Limiter,
// which share one critical section, are tested side by side.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// syncCrowd is a group of flows that share one Syncer on one TestTool and
// record what happens at the door of the critical section.
type syncCrowd struct {
	tt  *asyncsteps.TestTool
	obj asyncsteps.Syncer

	mu        sync.Mutex
	inside    int
	maxInside int
	entered   []time.Duration // virtual time of each entry
	rejected  []string        // "code: info" seen by onerror
	held      []asyncsteps.AsyncSteps
	results   []<-chan asyncsteps.Result
}

func newSyncCrowd(tt *asyncsteps.TestTool, obj asyncsteps.Syncer) *syncCrowd {
	return &syncCrowd{tt: tt, obj: obj}
}

// section returns a critical section that records the entry, runs hold
// (which may make it wait) and records the exit.
func (c *syncCrowd) section(hold func(c *syncCrowd, as asyncsteps.AsyncSteps)) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, _ ...any) {
		c.mu.Lock()
		c.inside++
		c.maxInside = max(c.maxInside, c.inside)
		c.entered = append(c.entered, c.tt.Now().Sub(asyncsteps.TestToolEpoch))
		c.mu.Unlock()
		if hold != nil {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { hold(c, as) })
		}
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			c.mu.Lock()
			c.inside--
			c.mu.Unlock()
		})
	}
}

// onerror records the error it sees; with recover it then succeeds, so
// that a rejected parallel branch does not cancel its siblings.
func (c *syncCrowd) onerror(recover bool) asyncsteps.ErrorFunc {
	return func(as asyncsteps.AsyncSteps, code string) {
		c.mu.Lock()
		c.rejected = append(c.rejected, code+": "+as.State().ErrorInfo)
		c.mu.Unlock()
		if recover {
			as.Success()
		}
	}
}

// start runs n flows, each a root of its own on c.tt.
func (c *syncCrowd) start(n int, hold func(c *syncCrowd, as asyncsteps.AsyncSteps)) {
	for range n {
		r := asyncsteps.New(asyncsteps.WithTool(c.tt))
		r.Sync(c.obj, c.section(hold), c.onerror(false))
		c.results = append(c.results, r.Promise())
	}
}

// counts returns how many flows have entered and how many were rejected.
func (c *syncCrowd) counts() (entered, rejected int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entered), len(c.rejected)
}

// syncHoldFor returns a hold that waits d of virtual time.
func syncHoldFor(d time.Duration) func(c *syncCrowd, as asyncsteps.AsyncSteps) {
	return func(c *syncCrowd, as asyncsteps.AsyncSteps) {
		as.WaitExternal()
		as.Tool().Deferred(d, func() { as.Success() })
	}
}

// syncHoldUntilReleased waits until the test calls releaseAll.
func syncHoldUntilReleased(c *syncCrowd, as asyncsteps.AsyncSteps) {
	as.WaitExternal()
	c.mu.Lock()
	c.held = append(c.held, as)
	c.mu.Unlock()
}

func (c *syncCrowd) releaseAll() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	for _, as := range held {
		as.Success()
	}
}

// wantCounts checks the entries and rejections so far.
func (c *syncCrowd) wantCounts(t *testing.T, at string, entered, rejected int) {
	t.Helper()
	if e, r := c.counts(); e != entered || r != rejected {
		t.Errorf("at %s: %d entered, %d rejected; want %d entered, %d rejected", at, e, r, entered, rejected)
	}
}

// wantRejections checks that every rejection is code: info.
func (c *syncCrowd) wantRejections(t *testing.T, code, info string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rejected {
		if r != code+": "+info {
			t.Errorf("onerror saw %q, want %q", r, code+": "+info)
			return
		}
	}
}

// syncWantIdle checks that no event is left on the tool: no flow waits and no
// timer stays armed.
func syncWantIdle(t *testing.T, tt *asyncsteps.TestTool) {
	t.Helper()
	if n := tt.Pending(); n != 0 || tt.HasEvents() {
		t.Errorf("tool still has %d events", n)
	}
}

// entryTimes formats entry times in milliseconds.
func (c *syncCrowd) entryTimes() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := make([]string, len(c.entered))
	for i, d := range c.entered {
		s[i] = fmt.Sprint(d.Milliseconds())
	}
	return strings.Join(s, ",")
}

// Figures from the reference implementations' suites.

func TestMutexLetsAtMostMaxFlowsInside(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewMutex(3))
	c.start(10, syncHoldFor(10*time.Millisecond))
	drive(t, tt)

	if c.maxInside != 3 {
		t.Errorf("at most %d flows inside at once, want 3", c.maxInside)
	}
	c.wantCounts(t, "end", 10, 0)
	if got, want := c.entryTimes(), "0,0,0,10,10,10,20,20,20,30"; got != want {
		t.Errorf("entry times %s, want %s", got, want)
	}
	for _, ch := range c.results {
		wantSuccess(t, result(t, ch))
	}
	syncWantIdle(t, tt)
}

func TestMutexQueueLimitRejectsAtOnce(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewMutex(2, 5))
	c.start(10, syncHoldFor(10*time.Millisecond))
	tt.Advance(0)
	c.wantCounts(t, "0 ms", 2, 3)
	drive(t, tt)
	c.wantCounts(t, "end", 7, 3)
	c.wantRejections(t, asyncsteps.DefenseRejected, "Mutex queue limit")
	if c.maxInside != 2 {
		t.Errorf("at most %d flows inside at once, want 2", c.maxInside)
	}
	failed := 0
	for _, ch := range c.results {
		if res := result(t, ch); res.Err != nil {
			wantError(t, res.Err, asyncsteps.DefenseRejected, "Mutex queue limit")
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d flows failed, want 3", failed)
	}
	syncWantIdle(t, tt)
}

func TestMutexParallelBranchesAreSeparateFlows(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewMutex(2, 5))
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	p := r.Parallel()
	for range 10 {
		p.Sync(c.obj, c.section(syncHoldFor(10*time.Millisecond)), c.onerror(true))
	}
	wantSuccess(t, run(t, r, tt))
	c.wantCounts(t, "end", 7, 3)
	c.wantRejections(t, asyncsteps.DefenseRejected, "Mutex queue limit")
	if c.maxInside != 2 {
		t.Errorf("at most %d branches inside at once, want 2", c.maxInside)
	}
	if got, want := c.entryTimes(), "0,0,10,10,20,20,30"; got != want {
		t.Errorf("entry times %s, want %s", got, want)
	}
}

func TestThrottleLetsMaxFlowsInPerPeriod(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewThrottle(10, 100*time.Millisecond))
	c.start(100, nil)
	tt.Advance(450 * time.Millisecond)
	c.wantCounts(t, "450 ms", 50, 0)
	drive(t, tt)
	c.wantCounts(t, "end", 100, 0)
	if got := syncElapsed(tt); got != time.Second {
		t.Errorf("idle at %v, want 1s (last period 900-1000 ms)", got)
	}
	for _, ch := range c.results {
		wantSuccess(t, result(t, ch))
	}
	syncWantIdle(t, tt)
}

func TestThrottleQueueLimitRejectsAtOnce(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewThrottle(10, 100*time.Millisecond, 33))
	c.start(100, nil)
	tt.Advance(0)
	c.wantCounts(t, "0 ms", 10, 57)
	tt.Advance(450 * time.Millisecond)
	c.wantCounts(t, "450 ms", 43, 57)
	drive(t, tt)
	c.wantCounts(t, "end", 43, 57)
	c.wantRejections(t, asyncsteps.DefenseRejected, "Throttle queue limit")
	syncWantIdle(t, tt)
}

func TestLimiterIsMutexThenThrottle(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	c := newSyncCrowd(tt, asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 20,
		MaxQueue:   77,
		Rate:       5,
		Period:     100 * time.Millisecond,
		Burst:      12,
	}))
	c.start(100, syncHoldUntilReleased)
	tt.Advance(75 * time.Millisecond)
	c.wantCounts(t, "75 ms", 5, 83)
	tt.Advance(75 * time.Millisecond)
	c.wantCounts(t, "150 ms", 10, 83)
	tt.Advance(200 * time.Millisecond)
	c.wantCounts(t, "350 ms", 17, 83)
	tt.Advance(time.Second)
	c.wantCounts(t, "1350 ms", 17, 83)
	syncWantIdle(t, tt) // every flow waits for releaseAll: no timer is armed

	c.releaseAll()
	drive(t, tt)
	if c.maxInside != 17 {
		t.Errorf("at most %d flows inside at once, want 17", c.maxInside)
	}
	var rejected []string
	for _, ch := range c.results {
		if res := result(t, ch); res.Err != nil {
			rejected = append(rejected, res.Err.(*asyncsteps.Error).Info)
		}
	}
	if n := len(rejected); n != 83 {
		t.Errorf("%d flows failed, want 83", n)
	}
	mutexRejected := 0
	for _, info := range rejected {
		if info == "Mutex queue limit" {
			mutexRejected++
		} else if info != "Throttle queue limit" {
			t.Errorf("rejected with %q", info)
		}
	}
	if mutexRejected != 3 {
		t.Errorf("%d flows rejected by the Mutex, want 3", mutexRejected)
	}
	syncWantIdle(t, tt)
}

// syncElapsed returns the virtual time of tt: the time elapsed since its
// epoch.
func syncElapsed(tt *asyncsteps.TestTool) time.Duration {
	return tt.Now().Sub(asyncsteps.TestToolEpoch)
}

// Release whatever way the critical section ends.

func TestMutexReleasedHoweverSectionEnds(t *testing.T) {
	// A enters at 0 and stays 10 ms before its section ends in its own
	// way; B asks at 5 ms, so it waits in the queue until A gives the lock
	// back.
	pause := func(d time.Duration) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.Tool().Deferred(d, func() { as.Success() })
		}
	}
	tests := []struct {
		name string
		// add adds the steps of flow A; cancel cancels A at 30 ms.
		add    func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer)
		cancel bool
		trace  string
		err    string // code of A's result; "" for a cancel, "-" for none
		at     time.Duration
	}{
		{
			name: "error",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:in")
					as.Add(pause(10 * time.Millisecond))
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
				}, tr.handler("A:onerror"))
			},
			trace: "A:in,A:onerror:Boom,B:in",
			err:   "Boom",
			at:    10 * time.Millisecond,
		},
		{
			name: "panic",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:in")
					as.Add(pause(10 * time.Millisecond))
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("oops") })
				}, tr.handler("A:onerror"))
			},
			trace: "A:in,A:onerror:InternalError,B:in",
			err:   asyncsteps.InternalError,
			at:    10 * time.Millisecond,
		},
		{
			name: "timeout of the section",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:in")
					as.SetCancel(tr.cancel("A:cancel"))
					as.SetTimeout(30 * time.Millisecond)
				}, tr.handler("A:onerror"))
			},
			trace: "A:in,A:cancel,A:onerror:Timeout,B:in",
			err:   asyncsteps.Timeout,
			at:    30 * time.Millisecond,
		},
		{
			name: "timeout of an outer step",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(30 * time.Millisecond)
					as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
						tr.add("A:in")
						as.SetCancel(tr.cancel("A:cancel"))
					}, tr.handler("A:section onerror"))
				}, tr.handler("A:outer onerror"))
			},
			trace: "A:in,A:cancel,A:outer onerror:Timeout,B:in",
			err:   asyncsteps.Timeout,
			at:    30 * time.Millisecond,
		},
		{
			name: "cancel of the flow",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:in")
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetCancel(tr.cancel("A:cancel"))
					})
				}, tr.handler("A:onerror"))
			},
			cancel: true,
			trace:  "A:in,A:cancel,B:in",
			at:     30 * time.Millisecond,
		},
		{
			name: "break out of a loop",
			add: func(r *asyncsteps.Root, m *asyncsteps.Mutex, tr *tracer) {
				r.Loop(func(as asyncsteps.AsyncSteps) {
					as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
						tr.add("A:in")
						as.Add(pause(10 * time.Millisecond))
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Break() })
					}, tr.handler("A:onerror"))
				})
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("A:after loop")
					as.WaitExternal()
				})
			},
			trace: "A:in,A:onerror:LoopBreak,B:in,A:after loop",
			err:   "-", // A waits forever after its loop
			at:    10 * time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			m := asyncsteps.NewMutex(1)
			tr := &tracer{}
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			tc.add(a, m, tr)
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			var bAt time.Duration
			b.Add(pause(5 * time.Millisecond))
			b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				bAt = syncElapsed(tt)
				tr.add("B:in")
			})
			aRes, bRes := a.Promise(), b.Promise()
			tt.Advance(30 * time.Millisecond)
			if tc.cancel {
				a.Cancel()
			}
			tt.Advance(time.Second)
			wantTrace(t, tr, tc.trace)
			if bAt != tc.at {
				t.Errorf("B entered at %v, want %v", bAt, tc.at)
			}
			wantSuccess(t, result(t, bRes))
			switch tc.err {
			case "-":
				noResult(t, aRes)
			case "":
				if res := result(t, aRes); !errors.Is(res.Err, context.Canceled) {
					t.Errorf("A ended with %v, want a cancel", res.Err)
				}
			default:
				wantCode(t, result(t, aRes).Err, tc.err)
			}
		})
	}
}

func TestSyncCancelledWaiterLeavesQueue(t *testing.T) {
	// A holds, B and C wait (the queue holds one more, so C could not queue
	// if B stayed), B is cancelled, C takes B's place, A leaves, C enters.
	tests := []struct {
		name  string
		obj   func() asyncsteps.Syncer
		hold  bool // whether A must be released for C to enter
		trace string
	}{
		{"Mutex", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1, 1) }, true,
			"A:in,B:cancelled,A:out,C:in@10ms"},
		{"KeyedMutex", func() asyncsteps.Syncer { return asyncsteps.NewKeyedMutex[string](1, 1).Key("a") }, true,
			"A:in,B:cancelled,A:out,C:in@10ms"},
		{"Throttle", func() asyncsteps.Syncer { return asyncsteps.NewThrottle(1, 100*time.Millisecond, 1) }, false,
			"A:in,B:cancelled,C:in@100ms"},
		{"KeyedThrottle", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedThrottle[string](1, 100*time.Millisecond, 1).Key("a")
		}, false, "A:in,B:cancelled,C:in@100ms"},
		{"Limiter waiting for concurrency", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, Rate: 10, MaxQueue: 1})
		}, true, "A:in,B:cancelled,A:out,C:in@10ms"},
		{"Limiter waiting for rate", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 3, Rate: 1, Period: 100 * time.Millisecond, Burst: 1})
		}, false, "A:in,B:cancelled,C:in@100ms"},
		{"KeyedLimiter waiting for concurrency", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, Rate: 10, MaxQueue: 1}).Key("a")
		}, true, "A:in,B:cancelled,A:out,C:in@10ms"},
		{"KeyedLimiter waiting for rate", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 3, Rate: 1, Period: 100 * time.Millisecond, Burst: 1}).Key("a")
		}, false, "A:in,B:cancelled,C:in@100ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			obj := tc.obj()
			tr := &tracer{}
			var held asyncsteps.AsyncSteps
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			a.Sync(obj, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("A:in")
				if tc.hold {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						held = as
						as.WaitExternal()
					})
					as.Add(tr.step("A:out"))
				}
			})
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("B:cancelled"))
				as.Sync(obj, tr.step("B:in"), tr.handler("B:onerror"))
			})
			c := asyncsteps.New(asyncsteps.WithTool(tt))
			c.Sync(obj, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.addf("C:in@%v", syncElapsed(tt))
			}, tr.handler("C:onerror"))

			aRes, bRes := a.Promise(), b.Promise()
			tt.Advance(5 * time.Millisecond)
			b.Cancel()
			tt.Advance(0)
			cRes := c.Promise()
			tt.Advance(5 * time.Millisecond)
			if held != nil {
				held.Success()
			}
			drive(t, tt)
			wantTrace(t, tr, tc.trace)
			wantSuccess(t, result(t, aRes))
			if res := result(t, bRes); !errors.Is(res.Err, context.Canceled) {
				t.Errorf("B ended with %v, want a cancel", res.Err)
			}
			wantSuccess(t, result(t, cRes))
			syncWantIdle(t, tt)
			wantKeysInUse(t, obj, 0)
		})
	}
}

// Reentrance and deadlock.

func TestMutexIsReentrantWithinOneFlow(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1)
	tr := &tracer{}
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A:level 1")
		as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A:level 2")
			as.Sync(m, tr.step("A:level 3"))
		})
		as.Add(tr.step("A:back at level 1"))
	})
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(m, tr.step("B:in"))
	aRes, bRes := a.Promise(), b.Promise()
	drive(t, tt)
	wantTrace(t, tr, "A:level 1,A:level 2,A:level 3,A:back at level 1,B:in")
	wantSuccess(t, result(t, aRes))
	wantSuccess(t, result(t, bRes))
}

func TestMutexBranchesInheritNoLock(t *testing.T) {
	// Mutex(2): the flow holds one slot, so its two branches take turns
	// with the other one.
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(2)
	tr := &tracer{}
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("flow:in")
		p := as.Parallel()
		for _, name := range []string{"b1", "b2"} {
			p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add(name + ":in")
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					as.Tool().Deferred(10*time.Millisecond, func() { as.Success() })
				})
				as.Add(tr.step(name + ":out"))
			})
		}
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "flow:in,b1:in,b1:out,b2:in,b2:out")
}

func TestThrottleIsNotReentrant(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	tr := &tracer{}
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.addf("outer@%v", syncElapsed(tt))
		as.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("inner@%v", syncElapsed(tt))
		})
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "outer@0s,inner@100ms")
	syncWantIdle(t, tt)
}

func TestMutexDeadlockEndsWithInternalError(t *testing.T) {
	const info = "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"
	for name, m := range map[string]asyncsteps.Syncer{
		"Mutex":        asyncsteps.NewMutex(1),
		"KeyedMutex":   asyncsteps.NewKeyedMutex[string](1).Key("a"),
		"KeyedLimiter": asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited}).Key("a"),
	} {
		t.Run(name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			tr := &tracer{}
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("flow:in")
				as.Parallel().Sync(m, tr.step("branch:in"), func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("branch:onerror:%s:%s", code, as.State().ErrorInfo)
				})
			}, tr.handler("flow:onerror"))
			res := run(t, r, tt)
			wantError(t, res.Err, asyncsteps.InternalError, info)
			wantTrace(t, tr, "flow:in,branch:onerror:InternalError:"+info+",flow:onerror:InternalError")
			wantKeysInUse(t, m, 0)

			// The lock was given back.
			r2 := asyncsteps.New(asyncsteps.WithTool(tt))
			r2.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("free") })
			wantSuccess(t, run(t, r2, tt), "free")
			wantKeysInUse(t, m, 0)
		})
	}
}

func TestMutexDeadlockAcrossFlows(t *testing.T) {
	// Mutex(2) held by X and Y; X's branch waits (Y may still leave); then
	// Y's branch waits too: neither can ever leave, Y's branch fails, Y
	// leaves and X's branch enters.
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(2)
	tr := &tracer{}
	flow := func(name string) *asyncsteps.Root {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add(name + ":in")
			as.Parallel().Sync(m, tr.step(name+"/branch:in"), tr.handler(name+"/branch:onerror"))
		})
		return r
	}
	x, y := flow("X"), flow("Y")
	xRes, yRes := x.Promise(), y.Promise()
	drive(t, tt)
	wantTrace(t, tr, "X:in,Y:in,Y/branch:onerror:InternalError,X/branch:in")
	wantSuccess(t, result(t, xRes))
	wantCode(t, result(t, yRes).Err, asyncsteps.InternalError)
}

func TestLimiterDetectsDeadlock(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	l := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 10, Rate: 10})
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(l, func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Parallel().Sync(l, func(as asyncsteps.AsyncSteps, _ ...any) {})
	})
	wantCode(t, run(t, r, tt).Err, asyncsteps.InternalError)
	syncWantIdle(t, tt)
}

// Args and rejections.

// foreignSteps is an AsyncSteps that is not the package's own: its steps
// receive it in place of the engine's handle, as with another
// implementation of the interface.
type foreignSteps struct{ asyncsteps.AsyncSteps }

func (w foreignSteps) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) { fn(foreignSteps{as}, args...) }, onerror...)
	return w
}

// The section's step passes its args to f and f's result on (spec 1.11.3),
// whether the section is added with AsyncSteps.Sync, with the Syncer's own
// Sync, or by an AsyncSteps that is not the package's; and the second flow
// enters only once the first has left.
func TestSyncPassesArgsThroughTheSection(t *testing.T) {
	syncers := []struct {
		name  string
		obj   func() asyncsteps.Syncer
		trace string
	}{
		// B enters as soon as A leaves, before A's next step.
		{"Mutex", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) },
			"A:section[A 1],A:inside,B:section[B 1],B:inside,A:next[A-out 2],B:next[B-out 2]"},
		{"KeyedMutex", func() asyncsteps.Syncer { return asyncsteps.NewKeyedMutex[string](1).Key("a") },
			"A:section[A 1],A:inside,B:section[B 1],B:inside,A:next[A-out 2],B:next[B-out 2]"},
		// B enters a period after A.
		{"Throttle", func() asyncsteps.Syncer { return asyncsteps.NewThrottle(1, time.Second) },
			"A:section[A 1],A:inside,A:next[A-out 2],B:section[B 1],B:inside,B:next[B-out 2]"},
		{"KeyedThrottle", func() asyncsteps.Syncer { return asyncsteps.NewKeyedThrottle[string](1, time.Second).Key("a") },
			"A:section[A 1],A:inside,A:next[A-out 2],B:section[B 1],B:inside,B:next[B-out 2]"},
		{"Limiter", func() asyncsteps.Syncer {
			opts := asyncsteps.SpecLimiterOptions()
			opts.MaxQueue, opts.Burst = 1, 1
			return asyncsteps.NewLimiter(opts)
		}, "A:section[A 1],A:inside,A:next[A-out 2],B:section[B 1],B:inside,B:next[B-out 2]"},
	}
	adders := []struct {
		name string
		sync func(r *asyncsteps.Root, obj asyncsteps.Syncer, f asyncsteps.StepFunc)
	}{
		{"AsyncSteps.Sync", func(r *asyncsteps.Root, obj asyncsteps.Syncer, f asyncsteps.StepFunc) { r.Sync(obj, f) }},
		{"Syncer.Sync", func(r *asyncsteps.Root, obj asyncsteps.Syncer, f asyncsteps.StepFunc) { obj.Sync(r, f) }},
		{"foreign", func(r *asyncsteps.Root, obj asyncsteps.Syncer, f asyncsteps.StepFunc) { obj.Sync(foreignSteps{r}, f) }},
	}
	for _, s := range syncers {
		for _, a := range adders {
			t.Run(s.name+"/"+a.name, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				obj := s.obj()
				tr := &tracer{}
				// Two flows, so that the second one passes through the queue.
				var results []<-chan asyncsteps.Result
				for _, name := range []string{"A", "B"} {
					r := asyncsteps.New(asyncsteps.WithTool(tt))
					r.SuccessStep(name, 1)
					a.sync(r, obj, func(as asyncsteps.AsyncSteps, args ...any) {
						tr.addf("%s:section%v", name, args)
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							tr.addf("%s:inside", name)
							as.Success(name+"-out", 2)
						})
					})
					r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
						tr.addf("%s:next%v", name, args)
						as.Success(args...)
					})
					results = append(results, r.Promise())
				}
				drive(t, tt)
				wantTrace(t, tr, s.trace)
				wantSuccess(t, result(t, results[0]), "A-out", 2)
				wantSuccess(t, result(t, results[1]), "B-out", 2)
				syncWantIdle(t, tt)
				wantKeysInUse(t, obj, 0)
			})
		}
	}
}

func TestSyncOnerrorSeesRejectionFirst(t *testing.T) {
	tests := []struct {
		name string
		obj  asyncsteps.Syncer
		info string
	}{
		{"Mutex", asyncsteps.NewMutex(1, 0), "Mutex queue limit"},
		{"KeyedMutex", asyncsteps.NewKeyedMutex[string](1, 0).Key("a"), "Mutex queue limit"},
		{"Throttle", asyncsteps.NewThrottle(1, time.Second, 0), "Throttle queue limit"},
		{"KeyedThrottle", asyncsteps.NewKeyedThrottle[string](1, time.Second, 0).Key("a"), "Throttle queue limit"},
		{"Limiter concurrency", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, Rate: 2}), "Mutex queue limit"},
		{"Limiter rate", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 2, Rate: 1}), "Throttle queue limit"},
		{"KeyedLimiter concurrency", asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, Rate: 2}).Key("a"), "Mutex queue limit"},
		{"KeyedLimiter rate", asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 2, Rate: 1}).Key("a"), "Throttle queue limit"},
		{"spec Limiter", asyncsteps.NewLimiter(asyncsteps.SpecLimiterOptions()), "Mutex queue limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			tr := &tracer{}
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			a.Sync(tc.obj, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("A:in")
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					as.Tool().Deferred(10*time.Millisecond, func() { as.Success() })
				})
			})
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(tc.obj, tr.step("B:in"), func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("B:onerror:%s:%s", code, as.State().ErrorInfo)
					as.Success("fallback")
				})
			}, tr.handler("B:outer onerror"))
			b.Add(tr.stepArgs("B:next"))
			aRes, bRes := a.Promise(), b.Promise()
			drive(t, tt)
			wantTrace(t, tr, "A:in,B:onerror:DefenseRejected:"+tc.info+",B:next[fallback]")
			wantSuccess(t, result(t, aRes))
			wantSuccess(t, result(t, bRes))
			syncWantIdle(t, tt)
			wantKeysInUse(t, tc.obj, 0)
		})
	}
}

func TestThrottlePeriodStartsAtFirstEntryAfterIdle(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	th := asyncsteps.NewThrottle(2, 100*time.Millisecond)
	tr := &tracer{}
	start := func(name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("%s@%v", name, syncElapsed(tt))
		})
		r.Execute()
	}
	start("a")
	start("b")
	start("c")
	tt.Advance(150 * time.Millisecond)
	if n := tt.Pending(); n != 1 {
		t.Errorf("%d events pending in the second period, want its timer", n)
	}
	tt.Advance(100 * time.Millisecond)
	syncWantIdle(t, tt) // the period 100-200 ms ended with nobody waiting

	tt.Advance(50 * time.Millisecond) // 300 ms
	start("d")
	tt.Advance(20 * time.Millisecond)
	start("e")
	start("f")
	tt.Advance(time.Second)
	wantTrace(t, tr, "a@0s,b@0s,c@100ms,d@300ms,e@320ms,f@400ms")
	syncWantIdle(t, tt)
}

func TestSyncConstructorsRejectBadLimits(t *testing.T) {
	expectPanic(t, "NewMutex(0)", func() { asyncsteps.NewMutex(0) })
	expectPanic(t, "NewThrottle(0, 1s)", func() { asyncsteps.NewThrottle(0, time.Second) })
	expectPanic(t, "NewThrottle(1, 0)", func() { asyncsteps.NewThrottle(1, 0) })
	expectPanic(t, "NewLimiter(Rate: -1)", func() { asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Rate: -1}) })
}

// Loops.

func TestSyncSharedAcrossLoops(t *testing.T) {
	loops := []*asyncsteps.Loop{asyncsteps.NewLoop(), asyncsteps.NewLoop()}
	for _, l := range loops {
		defer l.Close()
	}
	const flowsPerLoop = 40
	const period = 5 * time.Millisecond
	m := asyncsteps.NewMutex(3)
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 10, MaxQueue: 2 * flowsPerLoop, Rate: 20, Period: period, Burst: 2 * flowsPerLoop,
	})

	type gauge struct {
		inside, max atomic.Int32
		entries     sync.Map // time.Time of each entry, by flow
	}
	var mg, lg gauge
	section := func(g *gauge, id int) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, args ...any) {
			g.entries.Store(id, time.Now())
			n := g.inside.Add(1)
			for {
				old := g.max.Load()
				if n <= old || g.max.CompareAndSwap(old, n) {
					break
				}
			}
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				as.Tool().Deferred(time.Millisecond, func() { as.Success() })
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				g.inside.Add(-1)
				as.Success(args...)
			})
		}
	}

	var results []<-chan asyncsteps.Result
	started := time.Now()
	for i := range 2 * flowsPerLoop {
		r := asyncsteps.New(asyncsteps.WithTool(loops[i%2]))
		r.SuccessStep(i)
		r.Sync(m, section(&mg, i))
		r.Sync(lim, section(&lg, i))
		results = append(results, r.Promise())
	}
	guard := time.After(30 * time.Second)
	for i, ch := range results {
		select {
		case res := <-ch:
			wantSuccess(t, res, i)
		case <-guard:
			t.Fatalf("flow %d did not finish", i)
		}
	}

	if n := mg.max.Load(); n < 1 || n > 3 {
		t.Errorf("at most %d flows inside the Mutex(3) at once", n)
	}
	if n := lg.max.Load(); n < 1 || n > 10 {
		t.Errorf("at most %d flows inside the Limiter (Concurrent 10) at once", n)
	}
	// 80 entries at 20 per period need at least 4 periods: the last entry
	// comes at least 3 periods after the start.
	var times []time.Time
	lg.entries.Range(func(_, v any) bool { times = append(times, v.(time.Time)); return true })
	if len(times) != 2*flowsPerLoop {
		t.Fatalf("%d entries into the Limiter, want %d", len(times), 2*flowsPerLoop)
	}
	last := slices.MaxFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if d := last.Sub(started); d < 3*period {
		t.Errorf("last entry into the Limiter after %v, want at least %v", d, 3*period)
	}
}

// BenchmarkMutexSyncUncontended measures a flow that enters and leaves a
// free Mutex, against the same flow with a plain step.
func BenchmarkMutexSyncUncontended(b *testing.B) {
	for _, withMutex := range []bool{false, true} {
		name := "Add"
		if withMutex {
			name = "Sync"
		}
		b.Run(name, func(b *testing.B) {
			tt := asyncsteps.NewTestTool()
			m := asyncsteps.NewMutex(1)
			section := func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(1) }
			b.ReportAllocs()
			for b.Loop() {
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				if withMutex {
					r.Sync(m, section)
				} else {
					r.Add(section)
				}
				r.Execute()
				tt.Run()
			}
		})
	}
}

// BenchmarkThrottlePeriod measures a flow that opens a period of a
// Throttle, whose timer then ends it ("Timer"), or that comes at the end
// of the period before, ahead of its timer, and opens the next one
// itself ("Outrun"), or that comes during a Hold made while the Throttle
// was idle, times its end, and enters then ("Hold").
func BenchmarkThrottlePeriod(b *testing.B) {
	section := func(asyncsteps.AsyncSteps, ...any) {}
	b.Run("Timer", func(b *testing.B) {
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, time.Millisecond)
		b.ReportAllocs()
		for b.Loop() {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(th, section)
			r.Execute()
			tt.Run()
		}
	})
	b.Run("Outrun", func(b *testing.B) {
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, time.Millisecond)
		enter := func() {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(th, section)
			r.Execute()
		}
		b.ReportAllocs()
		for b.Loop() {
			tt.Deferred(time.Millisecond, enter) // due with the period's timer, armed before it
			enter()
			tt.Advance(time.Millisecond)
		}
		tt.Run()
	})
	b.Run("Hold", func(b *testing.B) {
		tt := asyncsteps.NewTestTool()
		th := asyncsteps.NewThrottle(1, time.Millisecond)
		b.ReportAllocs()
		for b.Loop() {
			th.Hold(tt.Now().Add(time.Millisecond))
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Sync(th, section)
			r.Execute()
			tt.Run()
		}
	})
}

// A section entered by an AsyncSteps that is not the package's gives its
// Mutex back when the flow is cancelled inside it.
func TestForeignSectionLeavesOnCancel(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	mu := asyncsteps.NewMutex(1)
	var tr tracer
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	mu.Sync(foreignSteps{a}, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A:inside")
		as.WaitExternal()
	})
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("B:inside") })
	resA, resB := a.Promise(), b.Promise()
	drive(t, tt)
	wantTrace(t, &tr, "A:inside")

	a.Cancel()
	drive(t, tt)

	wantTrace(t, &tr, "A:inside,B:inside")
	if err := result(t, resA).Err; !errors.Is(err, context.Canceled) {
		t.Errorf("A ended with %v, want a cancel", err)
	}
	wantSuccess(t, result(t, resB))
	syncWantIdle(t, tt)
}
