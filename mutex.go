package asyncsteps

import "sync"

// Mutex lets at most max flows at a time run inside its critical sections
// (spec 1.11.1 and 2.3). A flow enters with [AsyncSteps.Sync]; while the
// Mutex is full, the flows that try to enter wait in a first-in, first-out
// queue, and each slot given back goes to the flow at its head.
//
// A Mutex counts flows, not entries: a flow that already holds it enters
// again at once, so nested Sync calls on one Mutex do not deadlock. Each
// branch of a Parallel counts as a flow of its own and inherits no lock
// from the flow it was started from (spec 1.11.4).
//
// A slot is given back however the critical section ends: success, error,
// timeout or cancel. A flow cancelled while it waits leaves the queue and
// never holds a slot. With a queue limit, a flow that finds the queue full
// fails at once with [DefenseRejected] and the info "Mutex queue limit",
// which the error handler given to Sync sees first.
//
// A flow that would wait forever because every slot is held by flows it runs
// inside of (typically a Parallel branch of a flow in a critical section of
// a Mutex(1) syncing on the same Mutex) fails instead with [InternalError]
// and an info that starts with "Mutex deadlock".
//
// A Mutex is safe for concurrent use: flows running on different loops may
// share one. Create it with [NewMutex]; the zero value is a Mutex(1) with no
// queue, like NewMutex(1, 0): a flow that finds it held is rejected. A Mutex
// must not be copied after first use.
type Mutex struct {
	limit    int // 0 means 1
	maxQueue int // negative: unlimited

	mu      sync.Mutex // guards the fields below; never held while user code or a Tool runs
	holders map[any]int
	queue   waitQueue
	// branchWaiters counts the queued entries that wait from inside a
	// parallel branch: only those can take part in a deadlock.
	branchWaiters int
}

// NewMutex returns a Mutex that lets at most max flows at a time into its
// critical sections, and queues at most maxQueue more: with no maxQueue, or
// a negative one, the queue is unlimited. It panics if max is below 1.
func NewMutex(max int, maxQueue ...int) *Mutex {
	if max < 1 {
		panic("asyncsteps: NewMutex: max must be at least 1")
	}
	return &Mutex{limit: max, maxQueue: queueLimit(maxQueue)}
}

// queueLimit is the optional maxQueue argument: negative means unlimited.
func queueLimit(maxQueue []int) int {
	if len(maxQueue) == 0 || maxQueue[0] < 0 {
		return -1
	}
	return maxQueue[0]
}

// Sync implements [Syncer]: it adds to as the steps that wait for a slot,
// run f with onerror as its error handler, then give the slot back. The
// success args of f's step are the result of the steps added.
func (m *Mutex) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	addSection(as, f, firstHandler(onerror), m)
}

func (m *Mutex) max() int { return max(m.limit, 1) }

// enter runs as the step that asks for a slot.
func (m *Mutex) enter(as AsyncSteps, e *entry) {
	as.WaitExternal()
	o := owner(as)
	var chain []*frame
	if o != nil {
		e.key = o
		for p := outerOwner(o); p != nil; p = outerOwner(p) {
			chain = append(chain, p)
		}
	} else {
		e.key = e // not one of our steps: no reentrance
	}

	m.mu.Lock()
	if n := m.holders[e.key]; n > 0 || len(m.holders) < m.max() {
		if m.holders == nil {
			m.holders = make(map[any]int)
		}
		m.holders[e.key] = n + 1
		e.state = entryHeld
	} else if m.maxQueue >= 0 && m.queue.len() >= m.maxQueue {
		e.err = &Error{Code: DefenseRejected, Info: "Mutex queue limit"}
	} else if m.deadlocked(chain) {
		e.err = &Error{Code: InternalError, Info: "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"}
	} else {
		e.state = entryQueued
		e.as = as
		e.chain = chain
		if len(chain) > 0 {
			m.branchWaiters++
		}
		m.queue.push(e)
	}
	queued := e.state == entryQueued
	m.mu.Unlock()

	if !queued {
		as.Success()
	}
}

// deadlocked reports whether a new waiter whose outer flows are chain would
// complete a deadlock: every holder is an outer flow of a waiting branch,
// so none can give its slot back before a waiter has entered. Called with
// mu held and the Mutex full.
func (m *Mutex) deadlocked(chain []*frame) bool {
	if len(chain) == 0 && m.branchWaiters == 0 {
		return false
	}
	stuck := make(map[any]bool, len(m.holders))
	mark := func(chain []*frame) {
		for _, p := range chain {
			if m.holders[p] > 0 {
				stuck[p] = true
			}
		}
	}
	mark(chain)
	for _, w := range m.queue.items() {
		mark(w.chain)
	}
	return len(stuck) == len(m.holders)
}

// leave gives back the slot e holds, or takes e out of the queue. The slot
// goes to the waiters at the head of the queue, which are resumed after mu
// is released.
func (m *Mutex) leave(e *entry) {
	m.mu.Lock()
	switch e.state {
	case entryQueued:
		m.dequeue(e)
		m.queue.remove(e)
		e.state = entryLeft
		m.mu.Unlock()
		return
	case entryHeld:
		e.state = entryLeft
		if n := m.holders[e.key] - 1; n > 0 {
			m.holders[e.key] = n
			m.mu.Unlock()
			return
		}
		delete(m.holders, e.key)
	default:
		m.mu.Unlock()
		return
	}
	var admitted []AsyncSteps
	for len(m.holders) < m.max() {
		w := m.queue.pop()
		if w == nil {
			break
		}
		m.dequeue(w)
		m.holders[w.key]++
		w.state = entryHeld
		admitted = append(admitted, w.as)
		w.as = nil
	}
	m.mu.Unlock()
	for _, as := range admitted {
		as.Success()
	}
}

// dequeue drops what a queued entry keeps for the deadlock check. Called
// with mu held.
func (m *Mutex) dequeue(e *entry) {
	if len(e.chain) > 0 {
		m.branchWaiters--
		e.chain = nil
	}
}

// The critical section machinery below is shared by Mutex, Throttle and
// Limiter.

// gate is one admission stage of a critical section: a Mutex or a Throttle.
type gate interface {
	// enter runs as the step that asks to enter. It lets the flow in,
	// refuses it (setting e.err), or queues it: the step then waits until
	// the gate admits it (calling Success on e.as from any goroutine) or
	// the section is cancelled.
	enter(as AsyncSteps, e *entry)
	// leave gives back what e holds, or takes it out of the queue. It is
	// called on the flow's loop, at most once per entry that entered.
	leave(e *entry)
}

// entry is one flow's passage through one gate.
type entry struct {
	// Guarded by the gate's mutex: a waiter is admitted from whatever
	// goroutine gives a slot back.
	state entryState
	as    AsyncSteps // the waiting step, while queued
	key   any        // the holder: the flow or parallel branch (Mutex)
	chain []*frame   // the outer flows of a waiting branch (Mutex)
	tool  Tool       // the loop of a waiting flow (Throttle)

	// Written and read on the flow's own loop only.
	err *Error // why the gate refused the flow: raised by the section step
}

type entryState uint8

const (
	entryNone   entryState = iota // not entered (or refused)
	entryQueued                   // waiting in the gate's queue
	entryHeld                     // admitted
	entryLeft                     // given back or dequeued
)

// addSection adds to as the steps of a critical section guarded by gates,
// entered in order:
//
//	section (cancel handler: leave every gate)
//	├─ enter gates[0]     waits while queued
//	├─ …
//	├─ run f              onerror is its handler; raises a refusal first
//	└─ leave every gate   then succeeds with f's result
//
// An error unwinding from f's step, a timeout or a cancel all pass the
// section step, whose cancel handler gives the gates back (API decision 7);
// on success the last step does it and re-emits f's result, so the section
// is transparent to the args (spec 1.11.3). A refusal is raised by f's step,
// so that onerror sees it first; f does not run then.
func addSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, gates ...gate) {
	as.Add(func(as AsyncSteps, _ ...any) {
		entries := make([]entry, len(gates))
		leaveAll := func() {
			for i := len(gates) - 1; i >= 0; i-- {
				gates[i].leave(&entries[i])
			}
		}
		as.SetCancel(func(AsyncSteps) { leaveAll() })
		for i, g := range gates {
			as.Add(func(as AsyncSteps, _ ...any) {
				if refusal(entries[:i]) == nil {
					g.enter(as, &entries[i])
				}
			})
		}
		as.Add(func(as AsyncSteps, _ ...any) {
			if err := refusal(entries); err != nil {
				as.Error(err.Code, err.Info)
			}
			f(as)
		}, onerror)
		as.Add(func(as AsyncSteps, args ...any) {
			leaveAll()
			as.Success(args...)
		})
	})
}

// refusal returns the first refusal among entries, or nil.
func refusal(entries []entry) *Error {
	for i := range entries {
		if entries[i].err != nil {
			return entries[i].err
		}
	}
	return nil
}

// waitQueue is a first-in, first-out queue of entries. A cancelled waiter
// is removed from the middle, which is rare and bounded by the queue's
// length.
type waitQueue struct {
	q []*entry
}

func (wq *waitQueue) len() int { return len(wq.q) }

func (wq *waitQueue) items() []*entry { return wq.q }

func (wq *waitQueue) push(e *entry) { wq.q = append(wq.q, e) }

// pop removes and returns the head, or nil when the queue is empty.
func (wq *waitQueue) pop() *entry {
	if len(wq.q) == 0 {
		return nil
	}
	e := wq.q[0]
	wq.q[0] = nil
	wq.q = wq.q[1:]
	if len(wq.q) == 0 {
		wq.q = nil // let the backing array go once drained
	}
	return e
}

// remove takes e out of the queue, keeping the order of the others.
func (wq *waitQueue) remove(e *entry) {
	for i, w := range wq.q {
		if w == e {
			copy(wq.q[i:], wq.q[i+1:])
			wq.q[len(wq.q)-1] = nil
			wq.q = wq.q[:len(wq.q)-1]
			return
		}
	}
}
