package asyncsteps

import "sync/atomic"

// This file makes a critical section count the work that really runs in
// it. An Await function runs on a goroutine of its own, and Go cannot stop
// it: when its step is cancelled (a timeout, a failed sibling, a cancel of
// the flow, a closed loop) the flow moves on at once, but the function may
// go on calling the resource the section protects. So a Mutex slot is
// given back only once the flow has left the section and every Await
// function started inside it has returned.
//
// The count lives in section.work: each Await function started inside a
// section that holds a slot adds one (on the loop, while the flow is still
// inside, so the count cannot be zero then); the first one also adds one
// for the flow itself, which leave takes back. Whoever brings the count to
// zero gives the slots back: the flow's leave, or the goroutine of the last
// Await function, from any goroutine (a Mutex is safe for that).
//
// An item of a ForEachLimit counts its Await functions the same way, so
// that its limit, too, counts the work really running: an item that has
// ended keeps its slot until they have returned (see itemWork).

// workUnit is what an Await function's goroutine gives back when it
// returns: one unit of the count of each place it was started in (a
// *section, an *itemWork, or a *workHold of several).
type workUnit interface {
	// release gives the unit back, from the function's goroutine: the
	// place whose count it brings to zero gives its slot back.
	release()
}

// workHold is the workUnit of a function started in more than one place.
type workHold []workUnit

func (held *workHold) release() {
	for _, u := range *held {
		u.release()
	}
}

// holdWork counts an Await function that starts in the step of frame f in
// every section around it that holds a slot and in every item of a
// ForEachLimit around it, and returns what to give back when the function
// returns: nil when it counts nowhere, the common case; the place itself
// when it counts in one, which costs no allocation. Loop goroutine only.
func holdWork(f *frame) workUnit {
	var held workUnit
	for p := f.parent; p != nil; p = p.parent {
		if s, ok := p.impl.(*section); ok && !s.left && s.holdsSlots() {
			countWork(&s.work)
			held = addWork(held, s)
		}
		if w := itemWorkOf(p); w != nil {
			countWork(&w.work)
			held = addWork(held, w)
		}
	}
	return held
}

// countWork counts one more Await function in the count n of a place the
// flow is inside: the first one counts the flow too.
func countWork(n *atomic.Int32) {
	if n.Load() == 0 {
		n.Add(2) // the function and the flow
	} else {
		n.Add(1)
	}
}

// addWork returns held with u added.
func addWork(held, u workUnit) workUnit {
	switch h := held.(type) {
	case nil:
		return u
	case *workHold:
		*h = append(*h, u)
		return h
	}
	return &workHold{held, u}
}

// release gives back the work of a returned Await function, from its own
// goroutine: a section whose flow has left and whose last function this was
// gives its slots back now.
func (s *section) release() {
	if s.work.Add(-1) == 0 {
		s.giveBack()
	}
}

// leaveLater is leave while Await functions started inside the section
// still run: the flow leaves every gate but keeps its Mutex slots for them,
// under keys of their own (see Mutex.detach), and gives them back now if
// the functions have returned meanwhile. Loop goroutine only.
func (s *section) leaveLater() {
	for i := int(s.n) - 1; i >= 0; i-- {
		if m := s.gates[i].holds(); m != nil && m.detach(&s.entries[i]) {
			continue
		}
		s.gates[i].leave(&s.entries[i], nil)
	}
	if s.work.Add(-1) == 0 {
		s.giveBack()
	}
}

// giveBack gives back the Mutex slots that leaveLater kept, from any
// goroutine: the waiters it admits are resumed from outside their loops.
// It leaves through the gate, not its Mutex, so that a KeyedMutex's key
// stays in use until then (a gate that leaveLater left already is left
// again, which does nothing).
func (s *section) giveBack() {
	for i := int(s.n) - 1; i >= 0; i-- {
		if s.gates[i].holds() != nil {
			s.gates[i].leave(&s.entries[i], nil)
		}
	}
}

// detach moves the slot that e holds from its flow to a key of its own, as
// its flow leaves the section while Await functions started inside it still
// run. The flow, which may come back, then no longer holds the Mutex: it is
// not let in again by reentrance while the functions hold the slot, and
// waits like any other flow.
//
// If the flow still holds the Mutex through a section around this one, that
// section counts the same functions, so it keeps the slot for them: e just
// leaves, with nothing to give back later. It reports false, doing
// nothing, when e holds no slot.
func (m *Mutex) detach(e *entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.state != entryHeld {
		return false
	}
	if m.holders.drop(e.key) > 0 {
		e.state = entryLeft
		return true
	}
	e.key = new(frame)
	m.holders.addNew(e.key)
	return true
}
