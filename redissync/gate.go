package redissync

import (
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// gateQueue is what a Mutex and a Throttle share: the flows of this
// process that wait for the gate's goroutine, and the signal that wakes
// it. Flows that ask while a round trip is under way are tried together in
// the next one, so the number of round trips does not grow with the number
// of waiting flows.
type gateQueue struct {
	c        *Client
	maxQueue int    // negative: unlimited
	what     string // "Mutex" or "Throttle", for the refusal's info

	mu     sync.Mutex // guards the fields below and the states of their waiters
	fresh  []*waiter  // asked since the last round trip: first try pending
	queue  waitList   // tried and not admitted: they wait, first in, first out
	closed bool       // the Client closed: no round trip will be made
	// waiting counts the fresh and queued waiters of each loop, so that
	// a round trip finds the loops to probe without walking its queue.
	waiting map[asyncsteps.Tool]int

	wake chan struct{} // buffered 1: a round is due
	// key, for the gate of a key of a KeyedMutex or a KeyedThrottle, is
	// that key: its keyed Syncer's goroutine, which serves every key,
	// makes its rounds, and it has no wake channel of its own.
	key keyState
}

// signal makes the gate's goroutine run a round soon. It never blocks.
func (q *gateQueue) signal() {
	if q.key != nil {
		q.key.due()
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// request hands w, whose step waits, to the gate's goroutine; after the
// Client closed, it refuses w at once.
func (q *gateQueue) request(w *waiter) { q.requestUnless(w, nil) }

// requestUnless is request that refuses w at once with the error refusal
// returns, if any. refusal runs with mu held: it judges the waiters and
// holders as they are when w joins them, so that two flows that ask at
// once each see the other. It may let go of mu for a while (a Mutex's
// probe of closed loops), and the Client may close meanwhile.
func (q *gateQueue) requestUnless(w *waiter, refusal func() *asyncsteps.Error) {
	q.mu.Lock()
	var err *asyncsteps.Error
	if refusal != nil && !q.closed {
		err = refusal()
	}
	if err == nil && q.closed {
		err = closedError()
	}
	if err != nil {
		q.mu.Unlock()
		w.err = err
		complete([]*waiter{w})
		return
	}
	w.state = wFresh
	q.countWaiting(w, 1)
	q.fresh = append(q.fresh, w)
	q.mu.Unlock()
	q.signal()
}

// dequeue takes a waiting w out, if it waits. It reports whether w was
// held, which the caller must give back. Called with mu held.
func (q *gateQueue) dequeue(w *waiter) (held bool) {
	switch w.state {
	case wQueued:
		q.queue.live--
		fallthrough
	case wFresh:
		q.countWaiting(w, -1)
		w.state = wLeft
		w.as = nil
	case wHeld:
		w.state = wLeft
		return true
	}
	return false
}

// countWaiting adds d to the count of waiting flows of w's loop, as w
// starts (1) or stops (-1) to wait: fresh or queued. Called with mu held.
func (q *gateQueue) countWaiting(w *waiter, d int) {
	if w.tool == nil {
		return
	}
	if q.waiting == nil {
		q.waiting = make(map[asyncsteps.Tool]int)
	}
	if q.waiting[w.tool] += d; q.waiting[w.tool] == 0 {
		delete(q.waiting, w.tool)
	}
}

// waitingLoops adds to loops the loop of every waiting flow, when some
// flow waits in the queue: only then is a round trip a retry, which a
// flow whose loop was closed meanwhile could be in. A flow on its first
// try ran its step on its loop a moment ago; probing its loop too would
// cost every uncontended entry. Its cost is that of the loops, not of
// the flows: a round trip with thousands queued stays cheap. Called with
// mu held.
func (q *gateQueue) waitingLoops(loops loopSet) loopSet {
	if q.queue.live == 0 {
		return loops
	}
	for tool := range q.waiting {
		loops = loops.add(tool)
	}
	return loops
}

// dropClosed takes out of the queue the waiters whose loop closed finds
// closed: such a flow stops without its cancel handlers, so it never
// leaves, and admitted it would spend a slot of the whole cluster on a
// flow that is gone. Their steps are not completed: their loop runs
// nothing more. Called with mu held.
func (q *gateQueue) dropClosed(closed loopSet) {
	for _, list := range [][]*waiter{q.queue.items, q.fresh} {
		for _, w := range list {
			if (w.state == wQueued || w.state == wFresh) && closed[w.tool] {
				q.dequeue(w)
			}
		}
	}
}

// dropClosedFlows probes the loops of the waiting flows and those of
// others (the holders of a Mutex), each once, without mu, which is held on
// entry and on return, and takes out the waiters whose loop it finds
// closed. It returns the loops probed, each marked closed or not, and
// whether any was. No loop is probed when no flow waits in the queue and
// others is empty, the common case.
func (q *gateQueue) dropClosedFlows(others loopSet) (loopSet, bool) {
	loops := q.waitingLoops(others)
	if loops == nil {
		return nil, false
	}
	q.mu.Unlock()
	closed := loops.probe()
	q.mu.Lock()
	if closed {
		q.dropClosed(loops)
	}
	return loops, closed
}

// take returns the waiters to try in the next round trip, the queued ones
// first, then the fresh ones, at most max of them (negative: all). Fresh
// ones beyond max stay fresh. Those that left before their first try are
// dropped: asked for, they would use up an entry of a Throttle, or a lease
// and a fencing token of a Mutex, for a flow that is gone. It walks the
// queue only as far as the waiters it takes. Called with mu held.
func (q *gateQueue) take(max int) []*waiter {
	q.queue.tidy()
	q.fresh = slices.DeleteFunc(q.fresh, func(w *waiter) bool { return w.state != wFresh })
	n := q.queue.live + len(q.fresh)
	if max >= 0 {
		n = min(n, max)
	}
	batch := make([]*waiter, 0, n)
	for _, w := range q.queue.items {
		if len(batch) == n {
			break
		}
		if w.state == wQueued {
			batch = append(batch, w)
		}
	}
	k := n - len(batch)
	batch = append(batch, q.fresh[:k]...)
	q.fresh = append(q.fresh[:0:0], q.fresh[k:]...)
	return batch
}

// takeFresh returns the fresh waiters, for their first try; those that
// left before it are dropped, as take drops them. Called with mu held.
func (q *gateQueue) takeFresh() []*waiter {
	fresh := slices.DeleteFunc(q.fresh, func(w *waiter) bool { return w.state != wFresh })
	q.fresh = nil
	return fresh
}

// admitQueued lets in the first n waiters of the queue, or all of them if
// fewer wait, and returns them: their steps must now be completed. Called
// with mu held.
func (q *gateQueue) admitQueued(n int) []*waiter {
	var done []*waiter
	i := 0
	for ; i < len(q.queue.items) && len(done) < n; i++ {
		if w := q.queue.items[i]; w.state == wQueued {
			q.queue.live--
			q.countWaiting(w, -1)
			w.state = wHeld
			done = append(done, w)
		}
	}
	clear(q.queue.items[:i]) // none of them waits
	q.queue.items = q.queue.items[i:]
	return done
}

// admitFresh lets in the first n fresh waiters, those not tried yet, or
// all of them if fewer wait, and returns them: their steps must now be
// completed. Called with mu held.
func (q *gateQueue) admitFresh(n int) []*waiter {
	if n <= 0 || len(q.fresh) == 0 {
		return nil
	}
	fresh := q.takeFresh()
	n = min(n, len(fresh))
	done, _ := q.settle(fresh[:n], n, func(int, *waiter) {})
	clear(fresh[:n])
	q.fresh = fresh[n:]
	return done
}

// settle applies the answer to batch: its first admitted waiters are in,
// the fresh ones among the others queue, or are refused if the queue is
// full. It returns the waiters whose steps must now be completed, and
// those admitted after they left (a Mutex gives their leases back).
// Called with mu held.
func (q *gateQueue) settle(batch []*waiter, admitted int, onAdmit func(i int, w *waiter)) (done, orphans []*waiter) {
	for i, w := range batch {
		switch {
		case i < admitted && w.state == wLeft:
			orphans = append(orphans, w)
		case i < admitted:
			if w.state == wQueued {
				q.queue.live--
			}
			q.countWaiting(w, -1)
			w.state = wHeld
			onAdmit(i, w)
			done = append(done, w)
		case w.state != wFresh:
			// Queued already, or left meanwhile.
		case q.maxQueue < 0 || q.queue.live < q.maxQueue:
			w.state = wQueued
			q.queue.push(w)
		default:
			q.countWaiting(w, -1)
			w.state = wLeft
			w.err = &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: q.what + " queue limit"}
			done = append(done, w)
		}
	}
	return done, orphans
}

// shut ends the queue with its Client: every waiting flow is refused, and
// so is every later one. It returns the waiters whose steps must now be
// completed. Called with mu held.
func (q *gateQueue) shut() []*waiter {
	q.closed = true
	return q.failAll(closedError(), false, nil)
}

// failAll refuses every waiting flow with err, or, when open, lets them
// all in: those of the queue, the fresh ones, and those of batch, the
// round trip that failed (take moved its fresh waiters out of q.fresh).
// It returns the waiters whose steps must now be completed. Called with
// mu held.
func (q *gateQueue) failAll(err *asyncsteps.Error, open bool, batch []*waiter) []*waiter {
	var done []*waiter
	for _, list := range [][]*waiter{q.queue.items, q.fresh, batch} {
		for _, w := range list {
			if w.state != wQueued && w.state != wFresh {
				continue
			}
			q.countWaiting(w, -1)
			if open {
				w.state = wHeld
			} else {
				w.state = wLeft
				w.err = err
			}
			done = append(done, w)
		}
	}
	q.queue.items, q.queue.live, q.fresh = nil, 0, nil
	return done
}

// loopSet holds the loops of flows to probe, each once, and whether each
// was found closed.
type loopSet map[asyncsteps.Tool]bool

// add adds tool to s, made on first use. A nil tool (a flow whose loop
// cannot be probed) is left out.
func (s loopSet) add(tool asyncsteps.Tool) loopSet {
	if tool == nil {
		return s
	}
	if s == nil {
		s = make(loopSet)
	}
	s[tool] = false
	return s
}

// probe marks the loops of s that are closed, and reports whether any
// is. Called without the gate's mutex: a loop takes its own lock.
func (s loopSet) probe() (any bool) {
	for tool := range s {
		if loopClosed(tool) {
			s[tool] = true
			any = true
		}
	}
	return any
}

// loopClosed reports whether the loop of tool is closed. A Tool with a
// Closed method, as [asyncsteps.Loop] has, is asked: a timer scheduled
// from another goroutine wakes a sleeping loop to rearm its sleep, and
// every round trip with flows queued probed each of their loops, so that
// a loop whose flows waited on a busy Syncer woke at each of its round
// trips. Another Tool is probed so: a closed loop accepts no timer, and
// the Handle it returns is not valid. A Tool that panics or returns no
// Handle counts as open: the gate's goroutine must not stop for it.
func loopClosed(tool asyncsteps.Tool) (closed bool) {
	defer func() {
		if recover() != nil {
			closed = false
		}
	}()
	if c, ok := tool.(interface{ Closed() bool }); ok {
		return c.Closed()
	}
	h := tool.Deferred(time.Hour, func() {})
	if h == nil {
		return false
	}
	closed = !h.IsValid()
	h.Cancel()
	return closed
}

// probeable returns tool if its loop can be probed: a loopSet keys on
// it, and a key whose type cannot be compared panics. Such a Tool's
// flows are never found closed.
func probeable(tool asyncsteps.Tool) asyncsteps.Tool {
	if tool == nil || !reflect.TypeOf(tool).Comparable() {
		return nil
	}
	return tool
}

// complete resumes the waiting steps of done. Called without mu: the
// step may run at once on another loop.
func complete(done []*waiter) {
	for _, w := range done {
		as := w.as
		w.as = nil
		as.Success()
	}
}

// toDuration returns n units, or the longest (most negative) Duration when
// n units are longer (shorter): a time that Redis names, near the longest
// Duration (a Mutex's TTL, a Throttle's Period), wrapped around to the
// other sign, and its goroutine, taking a wait to the end of time for one
// of none, made a round trip for nothing, or kept making them.
func toDuration(n int64, unit time.Duration) time.Duration {
	switch {
	case n > int64(math.MaxInt64/unit):
		return math.MaxInt64
	case n < int64(math.MinInt64/unit):
		return math.MinInt64
	}
	return time.Duration(n) * unit
}
