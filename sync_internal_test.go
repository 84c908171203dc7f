package asyncsteps

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// syncMutexClean fails the test unless m holds nothing and queues nothing.
func syncMutexClean(t *testing.T, m *Mutex) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holders.len() != 0 || m.queue.len() != 0 || m.branchWaiters != 0 {
		t.Errorf("Mutex left with %d holders, %d queued, %d branch waiters",
			m.holders.len(), m.queue.len(), m.branchWaiters)
	}
}

// TestSyncLeavesNoState checks that every way out of a section gives back
// all the bookkeeping: holders, queue entries and deadlock chains.
func TestSyncLeavesNoState(t *testing.T) {
	tt := NewTestTool()
	m := NewMutex(1, 10)
	th := NewThrottle(1, 100*time.Millisecond, 10)
	newRoot := func() *Root { return New(WithTool(tt)) }

	// A deadlocked branch, a cancelled waiter, a waiter that enters, a
	// reentrant entry and a failing section.
	r1 := newRoot()
	r1.Sync(m, func(as AsyncSteps, _ ...any) {
		as.Add(func(as AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.Tool().Deferred(10*time.Millisecond, func() { as.Success() })
		})
		as.Sync(m, func(as AsyncSteps, _ ...any) {
			as.Parallel().Sync(m, func(AsyncSteps, ...any) {})
		})
	})
	r2 := newRoot()
	r2.Sync(m, func(AsyncSteps, ...any) {})
	r3 := newRoot()
	r3.Sync(m, func(as AsyncSteps, _ ...any) { as.Error("Boom") })
	r4 := newRoot()
	r4.Sync(th, func(AsyncSteps, ...any) {})
	r5 := newRoot()
	r5.Sync(th, func(AsyncSteps, ...any) {})
	r6 := newRoot()
	r6.Sync(th, func(AsyncSteps, ...any) {})

	for _, r := range []*Root{r1, r2, r3, r4, r5, r6} {
		r.Promise()
	}
	tt.Advance(0)
	m.mu.Lock()
	th.mu.Lock()
	if m.queue.len() != 2 || th.queue.len() != 2 {
		t.Fatalf("%d queued on the Mutex, %d on the Throttle; want 2 and 2", m.queue.len(), th.queue.len())
	}
	th.mu.Unlock()
	m.mu.Unlock()
	r2.Cancel()
	r5.Cancel()
	tt.Run()

	syncMutexClean(t, m)
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.running || th.entered != 0 || th.queue.len() != 0 {
		t.Errorf("Throttle left running=%v, %d entered, %d queued", th.running, th.entered, th.queue.len())
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left", n)
	}
}

func TestWaitQueueKeepsOrder(t *testing.T) {
	var q waitQueue
	es := make([]entry, 4)
	for i := range es {
		q.push(&es[i])
	}
	q.remove(&es[1])
	q.remove(&entry{}) // not queued: no effect
	for _, want := range []*entry{&es[0], &es[2], &es[3], nil} {
		if got := q.pop(); got != want {
			t.Fatalf("pop = %p, want %p", got, want)
		}
	}
}

// A period opened by an entry whose Loop was closed before it could arm
// the period's timer still lasts its time: the next flow, on a live loop,
// waits for its end.
func TestThrottlePeriodOpenedOnAClosedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(1, time.Hour)
		closed, live := NewLoop(), NewLoop()
		defer live.Close()
		closed.Close()
		start := time.Now()
		if e := (&entry{}); !th.admit(e, nil, closed, time.Time{}) || e.state != entryHeld {
			t.Fatal("the first entry did not enter")
		}
		var entered time.Duration
		next := New(WithTool(live))
		next.Sync(th, func(as AsyncSteps, _ ...any) { entered = time.Since(start) })
		if _, err := next.Run(context.Background()); err != nil {
			t.Fatalf("the next flow: %v", err)
		}
		if entered != time.Hour {
			t.Errorf("the next flow entered at %v, want 1h0m0s", entered)
		}
	})
}

// ResetEvents drops a Throttle's period timer with the rest: the period
// ends there, rather than keep the Throttle full for good.
func TestThrottlePeriodEndsWhenItsTestToolResets(t *testing.T) {
	tt := NewTestTool()
	th := NewThrottle(1, time.Second)
	first := New(WithTool(tt))
	first.Sync(th, func(as AsyncSteps, _ ...any) {})
	if _, err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tt.ResetEvents()
	next := New(WithTool(tt))
	next.Sync(th, func(as AsyncSteps, _ ...any) { as.Success("entered") })
	start := tt.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args, err := next.Run(ctx) // the deadline only guards against a hang
	if err != nil || len(args) != 1 || args[0] != "entered" {
		t.Errorf("the next flow: %v, %v; want [entered]", args, err)
	}
	if waited := tt.Now().Sub(start); waited != 0 {
		t.Errorf("the next flow waited %v of virtual time, want 0", waited)
	}
}

// A Loop that closes gives back the Mutex slots its flows hold and takes
// its flows out of the Mutex's queue: a closed loop runs no cancel handler,
// but the Mutex may be shared with flows of other loops, which enter.
func TestClosedLoopGivesBackItsMutexSlots(t *testing.T) {
	m := NewMutex(1)
	doomed, live := NewLoop(), NewLoop()
	defer live.Close()
	entered := make(chan struct{})
	holder := New(WithTool(doomed))
	holder.Sync(m, func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		close(entered)
	})
	results := []<-chan Result{holder.Promise()}
	<-entered
	waiter := New(WithTool(doomed))
	waiter.Sync(m, func(as AsyncSteps, _ ...any) { t.Error("a flow of the closed loop entered") })
	results = append(results, waiter.Promise())
	waitUntil(t, "the waiter queued", func() bool { return queued(&m.mu, &m.queue) == 1 })
	next := New(WithTool(live))
	next.Sync(m, func(as AsyncSteps, _ ...any) { as.Success("entered") })
	nextResult := next.Promise()
	waitUntil(t, "the next flow queued", func() bool { return queued(&m.mu, &m.queue) == 2 })

	doomed.Close()

	for i, ch := range results {
		if res := awaitResult(t, ch); res.Err == nil || res.Err.(*Error).Info != "the flow's loop is closed" {
			t.Errorf("flow %d of the closed loop: %+v, want the closed loop's error", i, res)
		}
	}
	if res := awaitResult(t, nextResult); res.Err != nil || len(res.Args) != 1 || res.Args[0] != "entered" {
		t.Errorf("the flow of the live loop: %+v, want [entered]", res)
	}
	syncMutexClean(t, m)
}

// queued returns the length of q, guarded by mu.
func queued(mu *sync.Mutex, q *waitQueue) int {
	mu.Lock()
	defer mu.Unlock()
	return q.len()
}

// waitUntil polls cond until it holds, or fails the test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitResult waits for the Result of a Promise, or fails the test.
func awaitResult(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no Result within 10s")
		return Result{}
	}
}

// A flow told its loop has closed finds the Mutex slots its loop's flows
// held given back already: Close leaves the sections before it reports the
// flows. Here the report is the unhandled-error function of a flow whose
// start the closing loop takes, which runs during the close itself.
func TestClosedLoopGivesSlotsBackBeforeReporting(t *testing.T) {
	m := NewMutex(1)
	doomed := NewLoop()
	entered := make(chan struct{})
	holder := New(WithTool(doomed))
	holder.Sync(m, func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		close(entered)
	})
	holder.Execute()
	<-entered
	held := make(chan int, 1)
	late := New(WithTool(doomed), WithUnhandledError(func(*Error) {
		m.mu.Lock()
		held <- m.holders.len()
		m.mu.Unlock()
	}))
	late.Add(func(AsyncSteps, ...any) { t.Error("a step ran on a closed loop") })
	doomed.Immediate(func() {
		late.Execute()
		doomed.Close()
	})
	select {
	case n := <-held:
		if n != 0 {
			t.Errorf("the Mutex had %d holders when the closed loop reported a flow, want 0", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late flow was not reported")
	}
	doomed.Close()
	syncMutexClean(t, m)
}

// The ring of sections keeps no flow reachable that nothing else does: a
// flow abandoned inside a Throttle's section (nothing to give back) on a
// Loop, or inside a Mutex's section on the loop of DefaultTool (which never
// closes), is collected with its Root.
func TestAbandonedSectionsAreCollected(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	for _, tc := range []struct {
		name string
		tool Tool
		gate func() Syncer
	}{
		{"Throttle on a Loop", loop, func() Syncer { return NewThrottle(1, time.Hour) }},
		{"KeyedThrottle on a Loop", loop, func() Syncer { return NewKeyedThrottle[string](1, time.Hour).Key("a") }},
		{"Mutex on DefaultTool", DefaultTool(), func() Syncer { return NewMutex(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{})
			var root weak.Pointer[Root]
			func() {
				r := New(WithTool(tc.tool))
				r.Sync(tc.gate(), func(as AsyncSteps, _ ...any) {
					as.WaitExternal() // for ever: nobody keeps this AsyncSteps
					close(entered)
				})
				r.Execute()
				root = weak.Make(r)
			}()
			<-entered
			for range 1000 { // past the loop's block of handles, which holds the waiting one
				r := New(WithTool(tc.tool))
				r.SuccessStep()
				awaitResult(t, r.Promise())
			}
			waitUntil(t, "the abandoned Root collected", func() bool {
				runtime.GC()
				return root.Value() == nil
			})
		})
	}
}

// The queue of a Mutex or a Throttle whose waiters all left it (timed
// out, here) gives back the array they grew, as a queue drained by
// entries does: it kept it, a pointer a waiter, for the life of the
// Mutex or Throttle.
func TestSyncQueueShrinksAfterItsWaitersLeave(t *testing.T) {
	m, th := NewMutex(1), NewThrottle(1, time.Hour)
	t.Run("Mutex", func(t *testing.T) { wantQueueShrinks(t, m, &m.queue) })
	t.Run("Throttle", func(t *testing.T) { wantQueueShrinks(t, th, &th.queue) })
}

// wantQueueShrinks has many flows wait on obj, whose queue is q, and time
// out, then checks that q keeps no array.
func wantQueueShrinks(t *testing.T, obj Syncer, q *waitQueue) {
	tt := NewTestTool()
	holder := New(WithTool(tt))
	holder.Sync(obj, func(as AsyncSteps, _ ...any) { as.WaitExternal() })
	holder.Execute()
	for range 4 * keptQueue {
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Sync(obj, func(AsyncSteps, ...any) {})
		}, func(as AsyncSteps, code string) { as.Success() })
		r.Execute()
	}
	tt.Advance(time.Second)
	if n, c := q.len(), cap(q.q); n != 0 || c != 0 {
		t.Errorf("%d waiters in an array of %d, want none in none", n, c)
	}
	holder.Cancel()
	tt.Run()
}
