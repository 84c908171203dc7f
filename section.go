package asyncsteps

import "sync/atomic"

// gate is one admission stage of a critical section: a Mutex or a Throttle.
type gate interface {
	// enter runs as the step that asks to enter. It lets the flow in,
	// refuses it (setting e.err), or queues it: the step then waits until
	// the gate admits it (calling Success on e.as from any goroutine) or
	// the section is cancelled.
	enter(as AsyncSteps, e *entry)
	// leave gives back what e holds, or takes it out of the queue. It is
	// called on the flow's loop, at most once per entry that entered; on is
	// that flow when the caller knows it, nil otherwise (see resume).
	leave(e *entry, on *flow)
	// holds returns the Mutex whose slot an entry of the gate holds, or nil
	// for a gate that gives nothing back (a Throttle).
	holds() *Mutex
}

// entry is one flow's passage through one gate.
type entry struct {
	// Guarded by the gate's mutex: a waiter is admitted from whatever
	// goroutine gives a slot back.
	state  entryState
	inWait bool // in its gate's waitQueue (removed entries are not)
	// unkeyed, not guarded by the gate's mutex, is set once the section
	// has let go of the key of a KeyedMutex, a KeyedThrottle or a
	// KeyedLimiter (see keyLock.letGo, keyLimiter.letGo): on the
	// flow's loop, or by the goroutine that gives back what the section
	// kept (giveBack), which comes after the loop's last write
	// (section.work orders them). Here it takes no room of its own.
	unkeyed bool
	as      AsyncSteps // the waiting step, while queued
	key     *frame     // the holder: the flow or parallel branch (Mutex)
	chain   []*frame   // the outer flows of a waiting branch (Mutex)
	tool    Tool       // the loop of a waiting flow (Throttle)

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

// section is one pass of a flow through a critical section guarded by up
// to two gates (a Limiter's Mutex and Throttle), entered in order. It lives
// in one allocation, made when the step that enters runs:
//
//	enter step     cancel handler: leave every gate
//	├─ enterNext   once per gate; waits while queued
//	├─ body        runs f with the enter step's args, with onerror as its handler; raises a refusal first
//	└─ end         leaves every gate, then succeeds with f's result
//
// An error unwinding from f's step, a timeout or a cancel all pass the
// enter step, whose cancel handler gives the gates back (docs/DESIGN.md#cancel-handlers);
// on success, end does it and re-emits f's result, so the section is
// transparent to the args (spec 1.11.3). A refusal is raised by body, so
// that onerror sees it first; f does not run then, and the gates entered
// before the one that refused were left at once.
//
// All its fields are used on the flow's loop only; what a gate shares with
// other goroutines is in the entries, under the gate's mutex.
type section struct {
	f        StepFunc
	onerror  ErrorFunc
	args     []any // the enter step's args, for f
	gates    [2]gate
	entries  [2]entry
	n        uint8 // gates in use
	nextGate uint8 // the gate the next enterNext step asks
	phase    uint8 // which of the section's steps advance runs next
	left     bool  // leave has run
	// work counts the Await functions started inside the section that
	// have not returned yet, plus one for the flow itself once the first
	// of them starts; see holdWork. Their goroutines touch nothing else.
	// It fits in the padding after the bytes above.
	work atomic.Int32
	// prev and next link the section into its loop's ring (see
	// Loop.sections) from its entry until it has left its gates; next
	// links it in its loop's pool of sections once it has ended.
	prev, next *section
	// steps is the array of the section's steps, which the frame that
	// enters queues instead of allocating one (see enterFrame).
	steps [4]step
}

// sectioner is implemented by this package's Syncers: AsyncSteps.Sync
// enters their section from its own step, with that step's args, instead
// of adding a step that calls Sync.
type sectioner interface {
	enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any)
}

// addSection adds to as a step that enters a critical section guarded by
// gates: the Sync method of a Mutex, Throttle or Limiter called directly.
func addSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, gates ...gate) {
	// The gates are copied, as the caller's slice may be on its stack,
	// into values the step captures as they are: an array it sliced would
	// be captured by reference, an allocation of its own.
	var g0, g1 gate
	n := min(len(gates), 2) // a section has at most two gates
	if n > 0 {
		g0 = gates[0]
	}
	if n > 1 {
		g1 = gates[1]
	}
	as.Add(func(as AsyncSteps, args ...any) {
		pair := [2]gate{g0, g1}
		beginSection(as, f, onerror, args, pair[:n]...)
	})
}

// beginSection runs as the step that enters a critical section guarded by
// gates: it sets the cancel handler that gives the gates back and adds the
// section's steps.
func beginSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any, gates ...gate) {
	h, ok := as.(*stepAPI)
	var s *section
	if ok {
		s = h.fl.sched.pools().takeSection()
	} else {
		s = new(section)
	}
	s.f, s.onerror, s.args = f, onerror, args
	s.n = uint8(copy(s.gates[:], gates))
	s.phase = 1
	if ok {
		s.enterFrame(h)
		return
	}
	// A foreign AsyncSteps: bound methods.
	h = unwrapStep(as)
	s.setCancelOn(as)
	step := StepFunc(s.advance)
	for range s.n {
		as.Add(step)
	}
	as.Add(step, onerror)
	as.Add(step)
	if h != nil {
		// A decorator of a step of this package, whose Add has added
		// the section's steps under the step's frame: the frame holds
		// the section, as in enterFrame, so that the Await functions
		// started inside count (holdWork), and a Loop that closes gives
		// back what the section holds. Linked only now that the cancel
		// handler that unlinks it is set.
		h.f.impl = s
		h.fl.sched.linkSection(s)
	}
}

// setCancelOn sets the section's cancel handler through as, an AsyncSteps
// that is not the package's own. If that panics (a decorator's SetCancel,
// a foreign table that has none aborts its step), no handler will give
// back what the step that enters took already, a KeyedMutex's key: the
// section leaves its gates at once. Once the handler is set, it does.
func (s *section) setCancelOn(as AsyncSteps) {
	set := false
	defer func() {
		if !set {
			s.leave(nil)
		}
	}()
	as.SetCancel(s.cancel)
	set = true
}

// enterFrame adds the section's steps to the frame of the step h runs, with
// no closure: the frame holds the section in place of its step function,
// and its sub-steps and cancel handler find it there. Pushed directly, the
// steps cost no variadic slice of handlers.
func (s *section) enterFrame(h *stepAPI) {
	h.f.impl = s
	h.setCancel(cancelSection)
	// A Loop that closes gives back what its flows hold: it links the
	// section into its ring (other tools do nothing).
	h.fl.sched.linkSection(s)
	if len(h.f.queue) == 0 {
		h.f.queue = s.steps[:0] // end lets go of it (see reusable)
	}
	for range s.n {
		h.push(plainStep(advanceSection, nil))
	}
	h.push(plainStep(advanceSection, s.onerror))
	h.push(plainStep(advanceSection, nil))
}

// advanceSection is every step of a section entered by enterFrame.
func advanceSection(as AsyncSteps, args ...any) {
	as.(*stepAPI).f.parent.impl.(*section).advance(as, args...)
}

// cancelSection is the cancel handler of a section entered by enterFrame.
func cancelSection(as AsyncSteps) {
	h := as.(*stepAPI)
	h.f.impl.(*section).leave(h.fl)
}

// advance is every step of the section in turn (enterNext per gate, body,
// end): they run in that order, each once, so one function value serves
// them all.
func (s *section) advance(as AsyncSteps, args ...any) {
	phase := s.phase
	s.phase++
	switch {
	case phase <= s.n:
		s.enterNext(as)
	case phase == s.n+1:
		s.body(as)
	default:
		s.end(as, args...)
	}
}

func (s *section) enterNext(as AsyncSteps) {
	i := s.nextGate
	s.nextGate++
	if s.refusal() != nil {
		return
	}
	s.gates[i].enter(as, &s.entries[i])
	if s.entries[i].err != nil && i > 0 {
		// A refused flow is not inside: the slot of the gate before (a
		// Limiter's Mutex) goes back now, not once the refusal has
		// unwound past onerror, which may recover by waiting.
		s.leave(flowOf(as))
	}
}

func (s *section) body(as AsyncSteps) {
	if !s.holdsSlots() {
		s.unlink() // a Throttle's entry has nothing to give back
	}
	if err := s.refusal(); err != nil {
		as.Error(err.Code, err.Info)
	}
	s.f(as, s.args...)
}

func (s *section) end(as AsyncSteps, args ...any) {
	// Asked before leave: once leave has counted the flow out, the last
	// Await function may bring the work to zero from its own goroutine and
	// give the slots back through s (giveBack) while this goroutine reads
	// zero too and would blank s for the pool under it.
	reuse := s.reusable()
	s.leave(flowOf(as))
	if h, ok := as.(*stepAPI); ok && reuse {
		// The frame that entered lets go of the section first: nothing
		// of the section runs in it any more, and its queue, empty now,
		// must not keep the section's array for later appends.
		enter := h.f.parent
		enter.impl, enter.queue = nil, nil
		if r := enter.rare; r != nil {
			r.onCancel = nil
		}
		h.fl.sched.pools().keepSection(s)
	} else if ok {
		// Its steps are done: the frame, once pooled, must not keep s
		// alive through its array.
		if enter := h.f.parent; s.holdsQueue(enter.queue) {
			enter.queue = nil
		}
	}
	as.Success(args...)
}

// holdsQueue reports whether q is a slice of s.steps, which enterFrame
// lent the frame that entered: a slice of an array reaches its last
// element, whatever its start.
func (s *section) holdsQueue(q []step) bool {
	return cap(q) > 0 && &q[:cap(q)][cap(q)-1] == &s.steps[len(s.steps)-1]
}

// reusable reports whether s, which its flow leaves on success, can go
// back to its loop's pool: nothing but the flow may refer to it. A Mutex's
// entry that was admitted is out of its queue (a waiter that left the
// queue may still be in it: see waitQueue.remove); a Throttle may still
// refer to its entry, and an Await goroutine to the section (holdWork).
func (s *section) reusable() bool {
	if s.work.Load() != 0 {
		return false
	}
	for _, g := range s.gates[:s.n] {
		if g.holds() == nil {
			return false
		}
	}
	return true
}

func (s *section) cancel(AsyncSteps) { s.leave(nil) }

// leave gives back every gate, the last entered first. on is the flow whose
// loop runs the call, if known. While Await functions started inside still
// run, a Mutex slot stays held for them (see leaveLater).
func (s *section) leave(on *flow) {
	if s.left {
		return
	}
	s.left = true
	s.unlink()
	// Only the flow's loop adds work, and the flow is leaving: a count of
	// one (the flow) or none cannot grow any more.
	if s.work.Load() > 1 {
		s.leaveLater()
		return
	}
	for i := int(s.n) - 1; i >= 0; i-- {
		s.gates[i].leave(&s.entries[i], on)
	}
}

// unlink takes s out of its loop's ring, if it is in it.
func (s *section) unlink() {
	if s.next != nil {
		s.prev.next, s.next.prev = s.next, s.prev
		s.prev, s.next = nil, nil
	}
}

// holdsSlots reports whether s, once in, holds something it must give
// back: a Mutex's slot.
func (s *section) holdsSlots() bool {
	for _, g := range s.gates[:s.n] {
		if g.holds() != nil {
			return true
		}
	}
	return false
}

// flowOf returns the flow of a step of this package, or of the step a
// decorator wraps (see unwrapStep), or nil.
func flowOf(as AsyncSteps) *flow {
	if h := stepOf(as); h != nil {
		return h.fl
	}
	return nil
}

// resume completes the waiting step as, which a gate has just admitted,
// from a callback of flow on (nil if unknown). A step whose flow runs on
// the same Loop is resumed through the loop's own queue: the caller is on
// that loop's goroutine, so the inbox's lock, which contends with every
// goroutine posting to the loop, is not needed.
func resume(as AsyncSteps, on *flow) {
	if on != nil {
		switch w := as.(type) {
		case *stepAPI:
			if onOneLoop(w.fl, on) {
				w.succeedOutside(nil, true)
				return
			}
		case *waitingStep: // a SyncWait hook's, or a decorator's
			if onOneLoop(w.h.fl, on) {
				w.letIn(nil, true)
				return
			}
		}
	}
	as.Success()
}

// refusal returns the first refusal of a gate, or nil.
func (s *section) refusal() *Error {
	for i := range s.n {
		if err := s.entries[i].err; err != nil {
			return err
		}
	}
	return nil
}

// waitQueue is a first-in, first-out queue of entries. A cancelled waiter
// is removed from the middle lazily: it stays in q, unmarked, until pop
// reaches it or the removed entries are half of q, so that cancelling N
// waiters (a failed Parallel of N branches on one Mutex) costs O(N), not
// O(N^2). Every method is called with the gate's mutex held.
type waitQueue struct {
	q    []*entry
	gone int // removed entries still in q
}

func (wq *waitQueue) len() int { return len(wq.q) - wq.gone }

func (wq *waitQueue) push(e *entry) {
	e.inWait = true
	wq.q = append(wq.q, e)
}

// pop removes and returns the head, or nil when the queue is empty.
func (wq *waitQueue) pop() *entry {
	for len(wq.q) > 0 {
		e := wq.q[0]
		wq.q[0] = nil
		wq.q = wq.q[1:]
		if len(wq.q) == 0 {
			wq.q = nil // let the backing array go once drained
		}
		if !e.inWait {
			wq.gone-- // removed
			continue
		}
		e.inWait = false
		return e
	}
	return nil
}

// remove takes e out of the queue, keeping the order of the others; an
// entry not in the queue is left alone.
func (wq *waitQueue) remove(e *entry) {
	if !e.inWait {
		return
	}
	e.inWait = false
	wq.gone++
	if wq.gone > len(wq.q)/2 {
		live := wq.q[:0]
		for _, w := range wq.q {
			if w.inWait {
				live = append(live, w)
			}
		}
		clear(wq.q[len(live):])
		// Give back the array of a queue that none is left in, as pop
		// does once drained, or a burst's that most have left.
		if len(live) == 0 || cap(live) > keptQueue && len(live) <= cap(live)/4 {
			live = append([]*entry(nil), live...)
		}
		wq.q, wq.gone = live, 0
	}
}
