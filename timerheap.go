package asyncsteps

// This file holds the timer heap shared by Loop, TestTool and the step
// timeouts (steptimers.go): timerEntry, a deferred task that is its own
// Handle, and timerHeap, a binary heap of them by due time.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// addClamped returns now+d, saturating instead of overflowing, and treats a
// negative d as 0.
func addClamped(now int64, d time.Duration) int64 {
	if d <= 0 {
		return now
	}
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// timerEntry is a deferred callback and its own handle. While scheduled it
// sits in a timerHeap at index; Cancel removes it at once, so a cancelled
// timer costs nothing later and no longer counts as an event.
type timerEntry struct {
	t     task
	due   int64  // on the owner's clock, in nanoseconds
	seq   uint64 // scheduling order, breaks ties between equal dues
	index int    // position in h.items, -1 once out; guarded by h.mu
	h     *timerHeap
	state atomic.Uint32 // written under h.mu; read without it by IsValid
	// A Loop's step timer (step): owned by the loop's goroutine, never
	// handed to user code, recycled. In its duration's list (list, prev,
	// next), or in the loop's pool of step timers (next). Nothing reads
	// the state of a listed step timer (it has no user to ask IsValid), so
	// arming, cancelling and firing one write none: each write would be an
	// atomic exchange.
	step       bool
	unstamped  bool // a step timer armed in a list and not yet given its due (stepTimers.stamp)
	list       *timerList
	prev, next *timerEntry
}

// local reports whether e is a step timer of a Loop.
func (e *timerEntry) local() bool { return e.step }

// Cancel removes the timer from its heap; harmless once it ran. A heap
// without a mutex belongs to the loop's goroutine, the only caller then.
func (e *timerEntry) Cancel() {
	if e.list != nil { // a step timer: on the loop's goroutine
		e.list.unlink(e)
		return
	}
	if e.h == nil {
		// A timer of a foreign tool (its t never changes), or a step timer
		// that has run. Only an entry out of a heap may read t without
		// the heap's lock: firing and dropping write it.
		if f, ok := e.t.(foreignTimer); ok {
			f.Cancel()
		}
		return
	}
	if mu := e.h.mu; mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	if e.index >= 0 {
		e.h.remove(e.index)
		e.t = nil // a kept handle must not keep the callback alive
		e.state.Store(handleCancelled)
	}
}

// before reports whether e is due before o, both being due.
func (e *timerEntry) before(o *timerEntry) bool {
	return e.due < o.due || e.due == o.due && e.seq < o.seq
}

func (e *timerEntry) IsValid() bool { return e.state.Load() == handleScheduled }

func (e *timerEntry) fire() {
	t := e.t
	e.t = nil // a kept handle must not keep the callback alive
	t.run()
}

// funcTask runs a function as a task.
type funcTask func()

func (f funcTask) run() { f() }

// timerHeap is a binary min-heap of timers by (due, seq) that keeps each
// entry's index, so that Cancel removes in O(log n). The keys are kept in
// the heap's array, so that sifting compares without reaching the entries.
// Every method must be called with mu held; a heap without mu is used by
// one goroutine only.
type timerHeap struct {
	mu    *sync.Mutex
	items []timerSlot
	seq   *atomic.Uint64 // scheduling order, maybe shared with another heap
}

type timerSlot struct {
	due int64
	seq uint64
	e   *timerEntry
}

func (h *timerHeap) len() int { return len(h.items) }

func (h *timerHeap) push(e *timerEntry, due int64) {
	e.h, e.due, e.seq = h, due, h.seq.Add(1)
	e.index = len(h.items)
	h.items = append(h.items, timerSlot{due: due, seq: e.seq, e: e})
	h.up(e.index)
}

// nextDue returns the due time of the earliest timer, if any.
func (h *timerHeap) nextDue() (int64, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].due, true
}

// peekDue returns the earliest timer if it is due by limit.
func (h *timerHeap) peekDue(limit int64) *timerEntry {
	if len(h.items) == 0 || h.items[0].due > limit {
		return nil
	}
	return h.items[0].e
}

// popDue removes and returns the earliest timer if it is due by limit, its
// state already moved to ran so that a racing Cancel is a no-op.
func (h *timerHeap) popDue(limit int64) *timerEntry {
	if len(h.items) == 0 || h.items[0].due > limit {
		return nil
	}
	e := h.items[0].e
	h.remove(0)
	e.state.Store(handleRan)
	return e
}

func (h *timerHeap) remove(i int) {
	last := len(h.items) - 1
	e := h.items[i].e
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = timerSlot{}
	h.items = h.items[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	e.index = -1
}

// trim gives back the memory of a heap that a burst of timers grew and
// that has mostly emptied since, as the loop's queues do (see keptQueue):
// cancelled timers leave at once, but the array they filled stayed. It is
// called where the owner idles, not per timer.
func (h *timerHeap) trim() {
	if cap(h.items) <= keptQueue || len(h.items) > cap(h.items)/4 {
		return
	}
	h.items = append(make([]timerSlot, 0, 2*len(h.items)), h.items...)
}

// dropAll drops every timer, as on Close or ResetEvents, and returns the
// tasks of those that must run at once when dropped (see runsWhenDropped),
// in no particular order.
func (h *timerHeap) dropAll() (mustRun []runsWhenDropped) {
	for i, it := range h.items {
		if t, ok := it.e.t.(runsWhenDropped); ok {
			mustRun = append(mustRun, t)
		}
		it.e.index = -1
		it.e.t = nil
		it.e.state.Store(handleCancelled)
		h.items[i] = timerSlot{}
	}
	h.items = h.items[:0]
	return mustRun
}

// runsWhenDropped is a deferred task of this package that runs at once, as
// dropped, if its timer is dropped before it falls due (its Loop closed,
// its TestTool reset), because flows on other tools may wait for it: the
// end of a Throttle's period.
type runsWhenDropped interface {
	task
	dropped()
}

func (h *timerHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	return a.due < b.due || (a.due == b.due && a.seq < b.seq)
}

func (h *timerHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].e.index = i
	h.items[j].e.index = j
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) {
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}
