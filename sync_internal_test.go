package asyncsteps

import (
	"testing"
	"time"
)

// syncMutexClean fails the test unless m holds nothing and queues nothing.
func syncMutexClean(t *testing.T, m *Mutex) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.holders) != 0 || m.queue.len() != 0 || m.branchWaiters != 0 {
		t.Errorf("Mutex left with %d holders, %d queued, %d branch waiters",
			len(m.holders), m.queue.len(), m.branchWaiters)
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

// A period opened by a flow whose Loop is then closed must not keep the
// Throttle full for good: a flow on another loop still enters.
func TestThrottlePeriodOnClosedLoopEnds(t *testing.T) {
	th := NewThrottle(1, time.Hour)
	closed := NewLoop()
	closed.Close()
	e := &entry{}
	if !th.admit(e, nil, closed) || e.state != entryHeld {
		t.Fatal("the first entry did not enter")
	}
	e2 := &entry{}
	if !th.admit(e2, nil, NewTestTool()) || e2.state != entryHeld {
		t.Fatalf("a second entry is refused after the period's loop closed: state %v", e2.state)
	}
}
