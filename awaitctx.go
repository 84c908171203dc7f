package asyncsteps

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the state of one call of an Await function, which is
// also the context given to the function (docs/DESIGN.md#await).
//
// The context carries the values of Run's context and the nearest deadline
// around the step: the step timeouts of the steps it runs in (SetTimeout)
// and the deadline of Run's context. Its Done channel is closed by the
// engine only, when the step is cancelled, the loop is closed or the
// function has returned, never by a timer of its own: the flow's loop
// decides when a timeout happens, so the function and its error handlers
// see one order of events, not a race between two clocks. Err then says
// context.DeadlineExceeded when a deadline had passed, else
// context.Canceled.

// awaitCall is one call of an Await function: its step, its function, what
// it holds, and its cancellation. Everything a call needs is in this one
// object, made with the step when a running step adds it (see claim), else
// when the step starts; it is the function's context too.
//
// The contexts that the function derives from it with the context package
// (net/http derives one per request) do not need a goroutine each: it
// implements AfterFunc, which the context package uses to be told of the
// cancel. It is safe for concurrent use, as a context must be.
type awaitCall struct {
	// Context is Run's context, for Value (see awaitCall.Value);
	// Deadline, Done and Err are the call's own.
	context.Context

	h  *stepAPI
	fn AwaitFunc
	// lender is the goroutine waiting in RunHelping that runs fn, or nil
	// when a goroutine of the tool's does.
	lender *waiter
	// held is what the call counts in until its function returns (see
	// holdWork): the critical sections and the ForEachLimit items around
	// its step; nil when none.
	held workUnit

	deadline    time.Time // the nearest deadline, wall clock; zero: none
	runDeadline time.Time // Run's context's; zero: none
	stepDue     int64     // the nearest step timeout on the tool's timer clock, or noStepDue

	err  atomic.Pointer[error] // errCanceled or errDeadline once cancelled
	mu   sync.Mutex            // guards done, after, more and nAfter
	done chan struct{}         // made by the first Done, or closedChan
	// after is the first function given to AfterFunc, nil once stopped or
	// run; more are the later ones not yet stopped, in order, each with
	// its number (nAfter counts them), which its stop looks for: stopped
	// ones are dropped, so a function that derives context after context
	// keeps only those alive.
	after  func()
	more   *[]afterEntry // rare: a pointer, to keep the call small
	nAfter int32
	used   atomic.Bool // Done or AfterFunc was called: cancel must lock
	// claimed is set once a run of the step uses the call (see claim).
	claimed atomic.Bool

	result [1]any // the success argument's slice: it costs no allocation

	// calls is the Loop's calls in flight that the call was added to (set
	// before the function starts); prev and next are its place in them,
	// under their lock.
	calls      *awaitCalls
	prev, next *awaitCall
}

// afterEntry is a function given to awaitCall.AfterFunc after the first,
// numbered for its stop.
type afterEntry struct {
	n int32
	f func()
}

// noStepDue is awaitCall.stepDue when no step timeout is armed around the
// call.
const noStepDue = math.MaxInt64

// What an awaitCall's Err returns, as variables so that a call stores a
// pointer to one, without allocating.
var (
	errCanceled error = context.Canceled
	errDeadline error = context.DeadlineExceeded
)

// closedChan is the Done channel of a call cancelled before anyone asked
// for one.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Deadline implements [context.Context]: the nearest deadline around the
// step, which the engine enforces.
func (c *awaitCall) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done implements [context.Context]. The channel is made on first use:
// many functions never ask for it.
func (c *awaitCall) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.used.Store(true) // before err is read: see cancel
		if c.err.Load() != nil {
			c.done = closedChan
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

// Value implements [context.Context]: the values of Run's context, without
// its cancellation, which the context package keeps in a context under its
// own key (the cancel of a context derived from the call's is the step's
// alone, see AfterFunc): that key finds nothing here, as it finds nothing
// through [context.WithoutCancel]. Other keys are looked up in Run's
// context itself. Should the key not be known (see cancelCtxKey), keys of
// its type go through WithoutCancel, at an allocation per lookup.
func (c *awaitCall) Value(key any) any {
	if _, ok := key.(*int); ok {
		if key == cancelCtxKey {
			return nil
		}
		if cancelCtxKey == nil {
			return context.WithoutCancel(c.Context).Value(key)
		}
	}
	return c.Context.Value(key)
}

// cancelCtxKey is the key, of type *int, under which the context package
// looks up the cancel of a context: what [context.Cause] asks a cancelled
// context's Value for, learnt once from a context that records it. net/http
// derives a context from the call's per request, and each derivation asks
// for it; nil if Cause ever asks for no such key.
var cancelCtxKey = func() any {
	p := keyProbe{Context: context.Background()}
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe is a cancelled context that records the first key of type *int
// its Value is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Err() error { return context.Canceled }

func (p *keyProbe) Value(key any) any {
	if _, ok := key.(*int); ok && p.key == nil {
		p.key = key
	}
	return nil
}

// Err implements [context.Context].
func (c *awaitCall) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// String names the context, as those of the context package do.
func (c *awaitCall) String() string { return "asyncsteps.Await context" }

// AfterFunc arranges for f to run once the call is cancelled; stop
// prevents it and reports whether it did. The context package calls it for
// each context derived from the call's, in place of starting a goroutine
// to watch Done, with a function that cancels that context: f runs on the
// goroutine that cancels the call, so it must not block. Use
// [context.AfterFunc], which runs its function on a goroutine of its own.
func (c *awaitCall) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	c.used.Store(true) // before err is read: see cancel
	if c.err.Load() != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	n := c.nAfter
	c.nAfter++
	switch {
	case n == 0:
		c.after = f
	case c.more == nil:
		c.more = &[]afterEntry{{n, f}}
	default:
		*c.more = append(*c.more, afterEntry{n, f})
	}
	c.mu.Unlock()
	if n == 0 {
		return c.stopFirst // a closure of the call alone: 16 bytes, not 24
	}
	return func() bool { return c.stopAfter(n) }
}

// stopFirst forgets the first function given to AfterFunc, as stopAfter.
func (c *awaitCall) stopFirst() bool { return c.stopAfter(0) }

// stopAfter forgets the n-th function given to AfterFunc, unless it has
// run or been stopped: then it reports false.
func (c *awaitCall) stopAfter(n int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err.Load() != nil {
		return false
	}
	if n == 0 {
		stopped := c.after != nil
		c.after = nil
		return stopped
	}
	more := *c.more
	for i := range more {
		if more[i].n == n {
			*c.more = slices.Delete(more, i, i+1)
			return true
		}
	}
	return false
}

// cancel cancels the call's context, once: Err reports context.Canceled,
// or context.DeadlineExceeded if a deadline had passed; Done is closed,
// and the functions given to AfterFunc run (on this goroutine: those of
// the context package only cancel the derived contexts). From any
// goroutine.
//
// A call whose function never asked for Done nor derived a context, the
// common case at its end, is cancelled without the lock: Done and
// AfterFunc set used before they read err, and cancel sets err before it
// reads used, so (the atomics being sequentially consistent) either cancel
// sees used and locks, or they see err and need no cancel.
func (c *awaitCall) cancel() {
	if c.err.Load() != nil || !c.err.CompareAndSwap(nil, c.cause()) {
		return
	}
	if !c.used.Load() {
		return
	}
	c.mu.Lock()
	d := c.done
	if d == nil {
		c.done = closedChan
	}
	after, more := c.after, c.more
	c.after, c.more = nil, nil
	c.mu.Unlock()
	// A Done that came between the compare-and-swap above and the lock saw
	// err set and handed out closedChan, closed already.
	if d != nil && d != closedChan {
		close(d)
	}
	if after != nil {
		runAfter(after)
	}
	if more != nil {
		for _, e := range *more {
			runAfter(e.f)
		}
	}
}

// runAfter runs f, given to AfterFunc. The context package's functions
// never panic; one given by other code must not take down the goroutine
// that cancels (the loop's, or one that must still complete the step), and
// has no step left to fail: its panic is dropped.
func runAfter(f func()) {
	defer func() { _ = recover() }()
	f()
}

// cause is what Err reports once the call is cancelled now.
func (c *awaitCall) cause() *error {
	if c.stepDue != noStepDue && c.h.fl.timerClock() >= c.stepDue ||
		!c.runDeadline.IsZero() && !time.Now().Before(c.runDeadline) {
		return &errDeadline
	}
	return &errCanceled
}

// cancelAwaitStep is the cancel handler of an Await step: it cancels the
// call that the step's frame holds. A function of its own rather than a
// closure, so that a call costs no allocation for it.
func cancelAwaitStep(as AsyncSteps) {
	if r := as.(*stepAPI).f.rare; r != nil && r.await != nil {
		r.await.cancel()
	}
}

// setDeadlines sets the deadlines of c, started by the step of frame f.
// Loop goroutine only.
func (fl *flow) setDeadlines(c *awaitCall, f *frame) {
	if w := fl.wait; w != nil && w.ctx != nil {
		c.runDeadline, _ = w.ctx.Deadline()
	}
	c.deadline = c.runDeadline
	left, now, stepDue := fl.stepTimeLeft(f)
	if !stepDue {
		c.stepDue = noStepDue
		return
	}
	c.stepDue = now.clock + int64(left)
	if wall := now.wall.Add(left); c.deadline.IsZero() || wall.Before(c.deadline) {
		c.deadline = wall
	}
}

// farFuture bounds the step timeouts that give a deadline: a longer one
// (typically math.MaxInt64, "never") gives none, rather than a time that
// overflows.
const farFuture = 100 * 365 * 24 * time.Hour

// instant is one reading of the time: the wall clock, and the same instant
// on the clock of the tool's step timers (see timerClockAt).
type instant struct {
	wall  time.Time
	clock int64
}

// stepTimeLeft returns the time left before the nearest step timeout armed
// on f or a step around it falls due, on the tool's clock, and false when
// none is armed or the tool's timers cannot be read (a Tool of the user's).
// It reads the time once, when it meets the first timeout, and returns
// that reading: the time is not free to read.
func (fl *flow) stepTimeLeft(f *frame) (left time.Duration, now instant, ok bool) {
	read := false
	for ; f != nil; f = f.parent {
		e := f.timer()
		if e == nil {
			continue
		}
		if !read {
			now.wall = time.Now()
			now.clock, read = fl.timerClockAt(now.wall), true
		}
		d, known := fl.timerLeft(e, now.clock)
		if known && d < farFuture && (!ok || d < left) {
			left, ok = max(d, 0), true
		}
	}
	return left, now, ok
}

// timerClock is the time on the clock of the tool's step timers, the scale
// of their dues; only a Loop's and a TestTool's are known.
func (fl *flow) timerClock() int64 { return fl.timerClockAt(time.Now()) }

// timerClockAt is timerClock at the instant t, on the wall clock; a
// TestTool's clock is its own, whatever t.
func (fl *flow) timerClockAt(t time.Time) int64 {
	switch s := fl.sched.(type) {
	case *Loop:
		return int64(t.Sub(s.start)) // as Loop.clock, from one reading
	case *TestTool:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.now
	}
	return 0
}

// timerLeft returns the time left on the step timer e, now being the time
// on the tool's timer clock.
func (fl *flow) timerLeft(e *timerEntry, now int64) (time.Duration, bool) {
	switch fl.sched.(type) {
	case *Loop:
		if e.unstamped {
			// Armed in this pass of the loop: due d after the pass ends,
			// so at least d from now.
			return e.list.d, true
		}
		return time.Duration(e.due - now), true
	case *TestTool:
		if e.state.Load() == handleCancelled {
			// Dropped by ResetEvents while still the step's: the step
			// waits on, with no timeout.
			return 0, false
		}
		return time.Duration(e.due - now), true
	}
	return 0, false
}

// awaitCalls is a Loop's Await calls in flight, so that closing the loop
// cancels them: a closed loop runs no cancel handler, and a function must
// not be left waiting for a flow that is gone. It holds their flows for
// Close to end too (see Loop.endParked). A list through the calls
// themselves, under a lock of its own, since calls end on their own
// goroutines. It also counts what may still run for the loop, for
// Loop.Wait (see live): a count under the lock that every call takes
// already costs a call nothing more. Its zero value is an open, empty
// list that counts nothing running; it is safe for concurrent use.
type awaitCalls struct {
	mu     sync.Mutex
	head   *awaitCall
	closed bool
	// closing is the Loop's flag, set once Close has begun; nil: never.
	closing *atomic.Bool

	// live counts what may still run for the loop: its goroutine (one,
	// from newIdleLoop until that goroutine has exited after the loop
	// stopped), each call from add until its remove (also once close has
	// taken it out of the list), and each goroutine started for the
	// loop's steps from enter until its exit: a goroutine the loop keeps
	// for Await functions, one that waits for a step (AwaitChan,
	// AwaitResult, AwaitFlow, ForEachChan), an iter.Seq2's that a ForEach
	// pulls, one that ends the flows started once the loop has stopped.
	// It goes up on the loop's goroutine, which holds its own one
	// meanwhile, or elsewhere through enter, which adds nothing to zero,
	// so once it is zero it stays zero: drained, made with the loop, is
	// closed then, once.
	live    int
	drained chan struct{}
}

// add puts c in the list, or cancels it if the loop is closed; either
// way c counts as live until its remove.
func (s *awaitCalls) add(c *awaitCall) {
	s.mu.Lock()
	s.live++
	if s.closed {
		s.mu.Unlock()
		c.cancel()
		return
	}
	c.next = s.head
	if s.head != nil {
		s.head.prev = c
	}
	s.head = c
	s.mu.Unlock()
}

// remove takes c, whose function has returned and whose step has been
// given its outcome, out of the list, unless the loop is closing: a
// closing loop takes no task from another goroutine, so it may have
// dropped that outcome, and the flow, which nothing else may hold (a flow
// in an Await is not noted as parked, see flow.noteParked), must stay
// here for Close to end. The loop sets closing before it drops a task,
// so a call whose outcome was dropped sees it set. Close empties the
// list anyway. Either way c no longer counts as live.
func (s *awaitCalls) remove(c *awaitCall) {
	s.mu.Lock()
	if c.prev != nil || s.head == c { // not taken by close
		if s.closing == nil || !s.closing.Load() {
			s.unlink(c)
		}
	}
	s.exitLocked()
	s.mu.Unlock()
}

// unlink takes c out of the list; under mu.
func (s *awaitCalls) unlink(c *awaitCall) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		s.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}

// enter counts a goroutine about to start for the loop, and reports
// whether it did: not once nothing runs for the loop any more (a step of
// another package whose Tool is the loop may start one from anywhere),
// nor for a nil s, a Loop that counts nothing (see Loop.live). A
// goroutine counted calls exit as it ends.
func (s *awaitCalls) enter() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == 0 {
		return false
	}
	s.live++
	return true
}

// exit counts out what enter (or newIdleLoop, for the loop's goroutine)
// counted; nothing for a nil s.
func (s *awaitCalls) exit() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.exitLocked()
	s.mu.Unlock()
}

// exitLocked is exit under mu.
func (s *awaitCalls) exitLocked() {
	if s.live--; s.live == 0 && s.drained != nil { // nil: a zero Loop's
		close(s.drained)
	}
}

// flows returns the flows of the calls in flight.
func (s *awaitCalls) flows() []*flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fls []*flow
	for c := s.head; c != nil; c = c.next {
		fls = append(fls, c.h.fl)
	}
	return fls
}

// close cancels the calls in flight, and any added later.
func (s *awaitCalls) close() {
	s.mu.Lock()
	s.closed = true
	var calls []*awaitCall
	for c := s.head; c != nil; {
		next := c.next
		c.prev, c.next = nil, nil
		calls = append(calls, c)
		c = next
	}
	s.head = nil
	s.mu.Unlock()
	for _, c := range calls {
		c.cancel()
	}
}
