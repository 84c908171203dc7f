package asyncsteps

import (
	"math"
	"sync/atomic"
	"time"
)

// maxTimerLists bounds how many durations get a list of their own; timeouts
// of other durations share a heap.
const maxTimerLists = 8

// stepTimers are a Loop's step timeouts, armed and disarmed on the loop's
// goroutine only, so without a lock. Timeouts of one duration fall due in
// the order they were armed, the loop's clock never going back, so each
// duration keeps a FIFO list: arming appends, disarming unlinks, both O(1)
// whatever the number of timeouts outstanding, and the next one due is the
// earliest of the lists' heads and the heap's.
//
// A timeout armed in a list gets its due later, from stamp: the loop reads
// its clock once for all the timeouts its callbacks armed since it last
// looked at its timers, rather than once per timeout (a read of the clock
// costs about as much as the rest of arming). The time read then is later
// than each arming, so a timeout may fall due later than d after it was
// armed, by the rest of that pass of the loop, never earlier.
type stepTimers struct {
	lists []*timerList
	heap  timerHeap // mu nil: the loop's goroutine only
	armed int       // timeouts armed in lists since the last stamp, at most
}

// timerList is the timeouts of one duration, in the order they fall due.
type timerList struct {
	d          time.Duration
	head, tail *timerEntry
}

func (s *stepTimers) init(seq *atomic.Uint64) { s.heap.seq = seq }

// push arms e to fall due d after the next stamp or, for a duration that
// gets no list, d after now().
func (s *stepTimers) push(e *timerEntry, d time.Duration, now func() int64) {
	l := s.list(d)
	if l == nil {
		s.heap.push(e, addClamped(now(), d))
		return
	}
	// The sequence number is taken now: timeouts due at the same time fall
	// due in the order they were armed, whatever their lists.
	// Never due until stamped, whatever a pooled entry's old due was.
	e.due, e.seq, e.list, e.unstamped = math.MaxInt64, s.heap.seq.Add(1), l, true
	s.armed++
	e.prev = l.tail
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

// stamp gives the timeouts armed since the last stamp their due, d after
// now.
func (s *stepTimers) stamp(now int64) {
	if s.armed == 0 {
		return
	}
	s.armed = 0
	for _, l := range s.lists {
		first := l.tail
		for first != nil && first.prev != nil && first.prev.unstamped {
			first = first.prev
		}
		if first == nil || !first.unstamped {
			continue
		}
		due := addClamped(now, l.d)
		for e := first; e != nil; e = e.next {
			e.due, e.unstamped = due, false
		}
	}
}

// list returns the list for d, making or reusing one if there is room, or
// nil when d must go to the heap.
func (s *stepTimers) list(d time.Duration) *timerList {
	var empty *timerList
	for _, l := range s.lists {
		if l.d == d {
			return l
		}
		if l.head == nil && empty == nil {
			empty = l
		}
	}
	switch {
	case empty != nil:
		empty.d = d
		return empty
	case len(s.lists) < maxTimerLists:
		l := &timerList{d: d}
		s.lists = append(s.lists, l)
		return l
	}
	return nil
}

// unlink takes e out of its list. Out of it, e is not unstamped: it may
// be armed again in the heap, where nothing stamps it, and the flag would
// make it read as a listed timeout with no list (see timerLeft).
func (l *timerList) unlink(e *timerEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next, e.list, e.unstamped = nil, nil, nil, false
}

// first returns the timeout that falls due first, or nil; timeouts not
// stamped yet are left out.
func (s *stepTimers) first() *timerEntry {
	var first *timerEntry
	if len(s.heap.items) > 0 {
		first = s.heap.items[0].e
	}
	for _, l := range s.lists {
		if e := l.head; e != nil && !e.unstamped && (first == nil || e.before(first)) {
			first = e
		}
	}
	return first
}

// take removes e, the first timeout, to fire it.
func (s *stepTimers) take(e *timerEntry) {
	if e.list != nil {
		e.list.unlink(e)
		return
	}
	s.heap.popDue(e.due)
}

// dropAll cancels every timeout, as on Close, and returns the flows whose
// steps they timed, for the closing loop to end.
func (s *stepTimers) dropAll() (timed []*flow) {
	for _, l := range s.lists {
		for e := l.head; e != nil; e = l.head {
			l.unlink(e)
			timed = appendTimed(timed, e.t)
			e.t = nil
		}
	}
	for _, it := range s.heap.items {
		timed = appendTimed(timed, it.e.t)
	}
	s.heap.dropAll()
	return timed
}

// appendTimed appends to timed the flow of t, a step's timeout.
func appendTimed(timed []*flow, t task) []*flow {
	if t, ok := t.(*timeoutTask); ok {
		timed = append(timed, t.fl)
	}
	return timed
}
