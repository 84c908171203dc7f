package asyncsteps

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

// workHold is what an Await function's goroutine gives back when it
// returns: one unit of the work of each section it was started in.
type workHold []*section

// holdWork counts an Await function that starts in the step of frame f in
// every section around it that holds a slot, and returns what to give back
// when the function returns: held with those sections appended (held's
// array is the caller's, so that the common case allocates nothing).
// Loop goroutine only.
func holdWork(f *frame, held workHold) workHold {
	for p := f.parent; p != nil; p = p.parent {
		s, ok := p.impl.(*section)
		if !ok || s.left || !s.holdsSlots() {
			continue
		}
		if s.work.Load() == 0 {
			s.work.Add(2) // the function and the flow
		} else {
			s.work.Add(1)
		}
		held = append(held, s)
	}
	return held
}

// release gives back the work of a returned Await function, from its own
// goroutine: a section whose flow has left and whose last function this was
// gives its slots back now.
func (held workHold) release() {
	for _, s := range held {
		if s.work.Add(-1) == 0 {
			s.giveBack()
		}
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
func (s *section) giveBack() {
	for i := int(s.n) - 1; i >= 0; i-- {
		if m := s.gates[i].holds(); m != nil {
			m.leave(&s.entries[i], nil)
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
