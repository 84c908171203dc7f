package asyncsteps

import (
	"sync"
	"sync/atomic"
	"time"
)

// Throttle lets at most max flows enter its critical sections per period
// (spec 1.11.2 and 2.4). A period starts with the first entry after the
// Throttle was idle; up to max flows enter during it, and the flows that
// come after wait in a first-in, first-out queue. When the period ends, a
// new one starts if flows are waiting, and up to max of them enter at once.
// A Throttle whose period ends with nobody waiting goes idle: it keeps no
// timer armed. A period ends at its end on the clock: a flow that comes
// then, before the timer that ends it has run (both due at one instant of
// a [TestTool], or a busy loop that runs the timer late), ends it itself:
// it is neither refused for a period that is over nor counted in it.
//
// A period's max entries may all come at once, so max-1 entries just
// before a period's end and max as the next begins make 2×max-1 within
// moments: an upstream that allows max within any sliding window of the
// period's length refuses some. One entry per period/max (the division
// rounded up: NewThrottle(1, 100*time.Millisecond) for 10 a second)
// spaces the entries at least that far apart and never lets more than
// max in within any such window, as they enter, on their clock; the
// upstream sees them after latencies that vary, so leave it a margin. An
// upstream that asks to wait (a 429 with a Retry-After)
// is answered with [Throttle.Hold], which keeps every flow out until
// then.
//
// A Throttle counts entries, not flows: a flow that enters twice counts
// twice, and no entry is ever given back. So a Throttle limits how often
// work starts, not how much of it runs at once: an entry is spent when the
// flow enters, whatever runs inside afterwards, an [AsyncSteps.Await]
// function that outlives its step included (use a [Mutex] or a [Limiter]'s
// Concurrent to bound that). A flow cancelled while it waits leaves the
// queue. With a queue limit, a flow that finds the queue full
// fails at once with [DefenseRejected] and the info "Throttle queue limit",
// which the error handler given to Sync sees first.
//
// Time is read from the [Tool] of the flows: the timer that ends a period
// runs on the tool of the flow that started it (also for a period begun by
// a flow that found the one before over, ahead of its timer, whose timer
// then does nothing), or, for a period begun as one ends, of the first
// flow it lets in, so flows sharing one Throttle must use tools with the same clock
// (a [TestTool] gives virtual time to all the flows on it): a flow whose
// clock is ahead finds every full period over, and ends it. If that tool is
// a [Loop] that is closed before the period ends, the period still ends
// at its time: the rest of it is timed on the tool of the first flow that
// waits on a loop that is not closing, or that comes later and must wait,
// so that closing some of the loops never lets more than max flows in per
// period.
//
// A flow of a Loop that comes while a period runs on a TestTool's virtual
// clock, or a flow of a TestTool while one runs on the clock of Loops,
// fails with InternalError, "Throttle: a flow of a Loop and one of a
// TestTool share it: their clocks differ", which the error handler given
// to Sync sees first (a Root made without WithTool runs on [DefaultTool],
// a Loop). A period begun on a TestTool that is never driven to its end
// runs on for good, so a Throttle shared by a test on virtual time and a
// later one on Loops refuses the flows of the later one: give each test a
// Throttle of its own. Likewise a period timed on a Loop closed before
// its end, with no flow waiting, runs on untimed on the clock of Loops
// until it is ended, and flows of a TestTool are refused until then: by a
// flow of a Loop that comes after that end, or at that end by the timer
// of one that came before it and had to wait, which times the rest of
// the period on its own loop. Two TestTools, a tool of another package, and Loops
// inside and outside a testing/synctest bubble are not told apart.
//
// A Throttle is safe for concurrent use: flows running on different loops
// may share one. Create it with [NewThrottle]; the zero value lets 1 flow
// per second in and queues without limit, like NewThrottle(1, time.Second).
// A Throttle must not be copied after first use.
type Throttle struct {
	limit    int           // 0 means 1
	period   time.Duration // 0 means one second
	maxQueue queueLimit

	mu      sync.Mutex // guards the fields below; never held while user code or a Tool runs
	entered int        // entries in the current period
	running bool       // a period runs: its timer is armed, or it is untimed
	// ends is when the current period ends on the clock of timedOn, the
	// tool of its timer; zero while unknown (the timer is being armed).
	ends    time.Time
	timedOn Tool
	// clock is the kind of clock the current period runs on, set as the
	// period begins, before its timer is armed, and kept until the
	// Throttle goes idle, also while the period runs untimed: timedOn is
	// nil in both windows, and a flow of the other clock must be refused
	// there too.
	clock clockKind
	// timer is the task of the current period's timer, nil before the
	// first period. A flow that outruns a period (see admit) times the
	// period it begins on its own tool, with a new timer: the timer of
	// the period it ended, whose task is no longer timer, does nothing
	// when it runs or is dropped. That timer's tool is the one of a flow
	// that may have ended long ago, which the Throttle must not use
	// again: a foreign table's Tool (cabi) is valid only while the step
	// it came from runs. The other periods, each timed as the one before
	// ends, share their task: a period costs no allocation of its own.
	timer *periodTimer
	// untimed is set while the period runs on with no timer: the Loop it
	// was timed on closed before ends, or a Hold moved ends, and no flow
	// waited to time the rest of it on its own tool; or a Hold made while
	// idle began it (see holdIdle). The queue holds none but flows of
	// closing loops then, which leave it as their loops stop; the next
	// flow that must wait arms the timer, and one that comes at or after
	// ends starts the next period.
	untimed bool
	// heldUntil is the end of the latest Hold, on the flows' clock; zero
	// before the first. It is read as a period's timer is armed: a Hold
	// made as the period began, its end unknown yet, makes it last until
	// then.
	heldUntil time.Time
	queue     waitQueue
	// heldAhead is set as the Throttle goes idle before its period's
	// end, its timer dropped, after a Hold: the hold may still be ahead
	// (see rest).
	heldAhead bool
	// owner is the key of a KeyedThrottle or a KeyedLimiter whose rate
	// limit this is, told as a period's timer runs or is dropped; nil for
	// any other Throttle.
	owner periodWatcher
}

// periodWatcher is told, once mu is released, that the timer of a
// Throttle's period has run or been dropped: the Throttle may have gone
// idle, or run on with no timer (see Throttle.rest).
type periodWatcher interface{ periodEnded() }

// NewThrottle returns a Throttle that lets at most max flows enter per
// period and queues at most maxQueue more: with no maxQueue, or a negative
// one, the queue is unlimited; 0 queues none (see [Unlimited]). It panics
// if max is below 1 or period is not positive.
func NewThrottle(max int, period time.Duration, maxQueue ...int) *Throttle {
	if max < 1 {
		panic("asyncsteps: NewThrottle: max must be at least 1")
	}
	if period <= 0 {
		panic("asyncsteps: NewThrottle: period must be positive")
	}
	return &Throttle{limit: max, period: period, maxQueue: optionalQueueLimit(maxQueue)}
}

// Sync implements [Syncer]: it adds to as the steps that wait for an entry
// in the current period, then run f with onerror as its error handler. The
// success args of f's step are the result of the steps added.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (t *Throttle) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	if t == nil || f == nil {
		refuseSync(as, t == nil)
		return
	}
	if onerr, ok := syncHandler(as, onerror); ok {
		addSection(as, f, onerr, t)
	}
}

// Hold keeps every flow out of the Throttle until the instant until,
// read on the clock of the flows that share it: in a step,
// as.Tool().Now().Add(wait) (a [Loop] reads the wall clock, a [TestTool]
// its virtual one, so an instant read from time.Now holds the flows of a
// TestTool for years). The current period lets no more flows in, and
// lasts until that instant if it would end before (a Hold whose instant
// has passed still fills it); the flows that wait or come meanwhile
// queue, within the queue limit, and enter as the next period begins,
// max at once, in their order. So a provider's answer "429, Retry-After:
// 5" pauses every flow that shares the Throttle, on every loop, not only
// the one that got it. A Hold that ends no later than one already made
// does nothing; one made while the Throttle is idle, whose instant has
// passed as a flow comes, keeps nobody out.
//
// No hold can be shortened or lifted, and a flow counts its wait for one
// in any timeout around it (a [Retry] attempt's): cap a wait that an
// upstream asks for before holding, so that a wrong Retry-After (a day, a
// date from a clock that is off) does not stop every flow for as long,
// nor fail every flow that waits under a shorter timeout.
//
// Hold arms no timer of its own: the end of a hold is timed on the tool
// of a flow that waits for it, as a period's end is, or by the first
// flow that comes and must wait. It is safe for concurrent use, from a
// step of any loop or from another goroutine.
func (t *Throttle) Hold(until time.Time) {
	t.mu.Lock()
	if !until.After(t.heldUntil) {
		t.mu.Unlock()
		return
	}
	t.heldUntil = until
	if !t.running {
		t.holdIdle(until)
		t.mu.Unlock()
		return
	}
	t.entered = t.perPeriod()
	if t.ends.IsZero() || !until.After(t.ends) {
		t.mu.Unlock() // arm reads heldUntil, or the period outlasts the hold
		return
	}
	t.ends = until
	if t.untimed {
		t.mu.Unlock()
		return
	}
	t.timer = &periodTimer{t} // the one armed, due at the old end, does nothing
	t.timeRest()
}

// holdIdle, with mu held, makes a hold of an idle Throttle a full period
// that runs untimed until the hold's end, until: the first flow that must
// wait times its end, and one that comes after it starts the next period
// (see untimed). The kind of clock is the first waiter's.
func (t *Throttle) holdIdle(until time.Time) {
	t.running, t.untimed, t.entered = true, true, t.perPeriod()
	t.ends, t.timedOn, t.clock = until, nil, unknownClock
	if t.timer == nil {
		t.timer = &periodTimer{t}
	}
}

// enterSection implements sectioner.
func (t *Throttle) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	beginSection(as, f, onerror, args, t)
}

// perPeriod is the number of entries per period.
func (t *Throttle) perPeriod() int { return max(t.limit, 1) }

// periodLen is the length of a period.
func (t *Throttle) periodLen() time.Duration {
	if t.period <= 0 {
		return time.Second
	}
	return t.period
}

// enter implements gate.
func (t *Throttle) enter(as AsyncSteps, e *entry) { t.enterFor(as, e, t) }

// holds implements gate: an entry holds no slot.
func (*Throttle) holds() *Mutex { return nil }

// enterFor runs as the step that asks to enter, for a Sync called on obj
// (see Mutex.enterFor). Like Mutex.enterFor, it makes the step wait only
// when the flow must queue, then tries again. Both tries go by the clock,
// read once before them: a flow that comes once the period is over, its
// timer not run yet, opens the next period rather than count in the one
// that is over, which may have room left (the timer would then forget the
// entry, and let a whole period's more in); and a period whose timer is
// gone (see untimed) ends only so, on either try.
func (t *Throttle) enterFor(as AsyncSteps, e *entry, obj Syncer) {
	tool := as.Tool()
	t.enterAt(as, e, obj, tool, clockOf(tool))
}

// enterAt is enterFor on tool, as.Tool(), whose clock read now.
func (t *Throttle) enterAt(as AsyncSteps, e *entry, obj Syncer, tool Tool, now time.Time) {
	if t.admit(e, nil, tool, now) {
		return
	}
	as.WaitExternal()
	if t.admit(e, observeWait(as, obj), tool, now) {
		as.Success()
	}
}

// admit lets e in, or, when waiter is nil (a first try), reports that it
// cannot yet; else it refuses e or queues it. It reports whether e is
// settled (in or refused); false means it must wait. A Throttle whose
// period is over at now, its timer not run yet, ends the period first (see
// outrun), full or not, so that a flow's fate at the period's end does not
// hang on the order of two events due at one instant, nor on a loop that
// runs the timer late: it is neither refused for a period that is over nor
// counted in it. The entry that opens a period arms its timer on tool, as
// does the first that queues in an untimed period, for the period's rest.
func (t *Throttle) admit(e *entry, waiter AsyncSteps, tool Tool, now time.Time) bool {
	var admitted []AsyncSteps
	t.mu.Lock()
	if t.running && otherClock(t.clock, tool) {
		t.mu.Unlock()
		e.err = &Error{Code: InternalError, Info: otherClockInfo}
		return true
	}
	if t.untimed {
		t.endUntimedIfOver(now)
	}
	outran := t.running && !t.ends.IsZero() && !now.IsZero() && !now.Before(t.ends)
	if outran {
		admitted = t.nextPeriod(nil)
		t.outrun(tool, now)
	}
	settled, start, armRest := true, false, false
	switch {
	case t.entered < t.perPeriod():
		t.entered++
		e.state = entryHeld
		start = !t.running
		if start {
			t.clock = clockKindOf(tool)
		}
		t.running = true
	case waiter == nil:
		settled = false
	case t.maxQueue.full(t.queue.len()):
		e.err = &Error{Code: DefenseRejected, Info: "Throttle queue limit"}
	default:
		e.state = entryQueued
		e.as = waiter
		e.tool = tool
		t.queue.push(e)
		settled = false
		armRest = t.untimed // this waiter times the period's rest
		if armRest {
			t.untimed, t.timedOn = false, tool
			if t.clock == unknownClock { // a hold made while idle
				t.clock = clockKindOf(tool)
			}
		}
	}
	ends, timer := t.ends, t.timer
	t.mu.Unlock()
	if start {
		t.begun()
		t.arm(tool)
	}
	if armRest || outran {
		t.armUntil(tool, ends, timer)
	}
	for _, as := range admitted {
		as.Success()
	}
	return settled
}

// outrun begins, with mu held, the period that a flow on tool opens at
// now, the one before over by the clock, its timer not run yet: the new
// period is timed on tool, which the caller arms, as the flow runs its
// step, with a timer of its own; the old one does nothing.
func (t *Throttle) outrun(tool Tool, now time.Time) {
	t.timer = &periodTimer{t}
	t.ends, t.timedOn, t.clock, t.running = now.Add(t.periodLen()), tool, clockKindOf(tool), true
}

// endUntimedIfOver ends the untimed period, with mu held, if it is over
// at now: the Throttle goes idle (its queue holds no flow that can run)
// and the flow that comes starts the next period. A clock that cannot be
// read (zero now) ends it too, as a period whose timer never runs ends at
// once.
func (t *Throttle) endUntimedIfOver(now time.Time) {
	if !now.IsZero() && now.Before(t.ends) {
		return
	}
	t.untimed, t.running, t.entered, t.heldAhead = false, false, 0, false
	t.ends, t.timedOn, t.clock = time.Time{}, nil, unknownClock
}

// nextPeriod starts the next period, with mu held: the waiters at the head
// of the queue enter, and are returned to be resumed once mu is released;
// the Throttle goes idle if none did. The tool of the first of them, when
// tool is not nil, is set in *tool.
func (t *Throttle) nextPeriod(tool *Tool) []AsyncSteps {
	var admitted []AsyncSteps
	t.entered = 0
	for t.entered < t.perPeriod() {
		w := t.queue.pop()
		if w == nil {
			break
		}
		if tool != nil && *tool == nil {
			*tool = w.tool
		}
		t.entered++
		w.state = entryHeld
		admitted = append(admitted, w.as)
		w.as, w.tool = nil, nil
	}
	t.running = t.entered > 0
	return admitted
}

// periodOver runs as the timer of pt ends the current period, on
// the loop of the tool that armed it, or at once when that timer will
// never run (dropped): the next period starts now, timed on the tool of
// the first waiter it lets in, or the Throttle goes idle. The timer of a
// period that a flow outran (see admit) does nothing: that flow times the
// period it began.
func (t *Throttle) periodOver(pt *periodTimer, dropped bool) {
	t.mu.Lock()
	if pt != t.timer {
		t.mu.Unlock()
		return
	}
	if dropped && t.outlivesItsLoop() {
		t.timeRest()
		t.ended()
		return
	}
	var next Tool
	admitted := t.nextPeriod(&next)
	t.heldAhead = dropped && !t.heldUntil.IsZero()
	t.ends, t.timedOn = time.Time{}, nil // unknown until next's timer is armed
	t.clock = clockKindOf(next)          // unknownClock when idle
	t.mu.Unlock()

	if next != nil {
		t.begun()
		t.arm(next)
	}
	t.ended()
	for _, as := range admitted {
		as.Success()
	}
}

// ended tells the key whose rate limit t is, if any, that the timer of a
// period has run or been dropped.
func (t *Throttle) ended() {
	if t.owner != nil {
		t.owner.periodEnded()
	}
}

// rest reports, with mu held, what the key of a KeyedThrottle or a
// KeyedLimiter whose Throttle t is needs kept: nothing when t is idle
// (idle), its timer while a timed period runs (a zero until), or, with
// no timer to end it, t itself until the instant until on its clock, of
// the kind clock: an untimed period, which a flow that comes at or after
// its end ends (see untimed), or an idle Throttle after a Hold whose
// period ended before its time (a timer dropped), whose next period the
// hold may still lengthen (see arm).
func (t *Throttle) rest() (idle bool, until time.Time, clock clockKind) {
	switch {
	case t.untimed:
		return false, t.ends, t.clock
	case t.running:
		return false, time.Time{}, t.clock
	case t.heldAhead:
		return false, t.heldUntil, t.clock
	}
	return true, time.Time{}, t.clock
}

// outlivesItsLoop reports, with mu held, whether the period whose timer
// was dropped runs on: it was timed on a Loop that is closing, and its
// end is known. A partial shutdown must not let more than the rate in,
// so the rest of the period is timed on the tool of a waiter, or, with
// none that can time it, left untimed until a flow comes. Another tool
// that drops its timers (a TestTool's ResetEvents) ends the period at
// once.
func (t *Throttle) outlivesItsLoop() bool {
	l, ok := t.timedOn.(*Loop)
	return ok && l.closing.Load() && !t.ends.IsZero()
}

// timeRest, called with mu held, which it releases, times the rest of a
// period that outlives its Loop: on the tool of the first waiter that can
// time it (not a closing Loop), or, with none, on none until a flow comes
// (see untimed). The flows of closing loops need no timer: their loops
// take them out of the queue as they stop. Ending the period for them
// would let them in, spending entries of a new period for flows that
// never run, and let live flows take its other entries before the old
// period's end (loops that close at once).
func (t *Throttle) timeRest() {
	var tool Tool
	for _, w := range t.queue.q {
		if l, ok := w.tool.(*Loop); w.inWait && (!ok || !l.closing.Load()) {
			tool = w.tool
			break
		}
	}
	t.timedOn, t.untimed = tool, tool == nil
	ends, timer := t.ends, t.timer
	t.mu.Unlock()
	if tool != nil {
		t.armUntil(tool, ends, timer)
	}
}

// testHookPeriodBegun, set by a test, runs once a period has begun, with
// mu released, before its timer is armed: a flow of another goroutine may
// come then, while the period's timer and its tool are not known yet.
var testHookPeriodBegun atomic.Pointer[func(*Throttle)]

// begun runs testHookPeriodBegun, if a test set it.
func (t *Throttle) begun() {
	if h := testHookPeriodBegun.Load(); h != nil {
		(*h)(t)
	}
}

// arm times a period that starts now on tool, for a whole period or
// until a hold made as it began ends, whichever is later, and records its
// end. No flow can outrun the period before: its end is unknown until
// then.
func (t *Throttle) arm(tool Tool) {
	d := t.periodLen()
	now := clockOf(tool)
	t.mu.Lock()
	if !now.IsZero() {
		t.ends = now.Add(d)
		if t.heldUntil.After(t.ends) {
			t.ends, d = t.heldUntil, t.heldUntil.Sub(now)
		}
	}
	t.timedOn = tool
	if t.timer == nil {
		t.timer = &periodTimer{t}
	}
	timer := t.timer
	t.mu.Unlock()
	t.schedule(tool, d, timer)
}

// armUntil times the current period, whose timer is pt, on tool until
// ends on its clock.
func (t *Throttle) armUntil(tool Tool, ends time.Time, pt *periodTimer) {
	d := t.periodLen()
	if now := clockOf(tool); !now.IsZero() {
		d = ends.Sub(now)
	}
	t.schedule(tool, d, pt)
}

// schedule arms the timer of pt on tool, due in d. A timer that
// never runs (a Loop closed before or after arming, a TestTool reset)
// goes to periodOver as dropped: the rest of a period timed on a closing
// Loop is timed elsewhere (timeRest); on another tool the period ends at
// once rather than keep the Throttle full for good, since a flow that
// waits for it may run on another tool.
func (t *Throttle) schedule(tool Tool, d time.Duration, pt *periodTimer) {
	h := schedulerOf(tool).deferred(d, pt)
	if _, closed := h.(deadHandle); closed {
		t.periodOver(pt, true)
	}
}

// otherClockInfo is the refusal of a flow whose tool reads another kind of
// clock than the one the current period runs on.
const otherClockInfo = "Throttle: a flow of a Loop and one of a TestTool share it: their clocks differ"

// otherClock reports whether tool is known to read another kind of clock
// than k: a TestTool's virtual clock, or the process's, which every Loop
// reads. A Loop's flow then finds every period of a TestTool over, as its
// clock is years ahead, and ends it at once: more than max enter per
// period. Two TestTools are not told apart: a period is timed on the tool
// of the flow that opens it, and the next on another's, by design. A Tool
// of another package, or none, may read either: it is never refused, nor
// used to refuse.
func otherClock(k clockKind, tool Tool) bool {
	kt := clockKindOf(tool)
	return k != unknownClock && kt != unknownClock && k != kt
}

// A clockKind tells the clocks a Throttle's period and a flow read.
type clockKind uint8

const (
	unknownClock clockKind = iota
	virtualClock           // a TestTool's
	processClock           // a Loop's
)

// clockKindOf returns the kind of clock tool reads.
func clockKindOf(tool Tool) clockKind {
	switch tool.(type) {
	case *TestTool:
		return virtualClock
	case *Loop:
		return processClock
	}
	return unknownClock
}

// clockOf reads tool's clock. A tool of another package whose Now panics
// gives the zero time, which leaves a period's end unknown: the period
// then ends with its timer only.
func clockOf(tool Tool) (now time.Time) {
	defer func() {
		if recover() != nil {
			now = time.Time{}
		}
	}()
	return tool.Now()
}

// periodTimer is the task of the timers that end a Throttle's periods:
// one for the periods timed one after the other, a new one for a period
// that a flow outran (see Throttle.timer). A pointer, so that a timer
// armed takes no allocation for its task.
type periodTimer struct{ t *Throttle }

func (p *periodTimer) run()     { p.t.periodOver(p, false) }
func (p *periodTimer) dropped() { p.t.periodOver(p, true) }

// leave takes a waiting entry out of the queue. An entry that has entered
// stays counted in its period: there is nothing to give back.
func (t *Throttle) leave(e *entry, _ *flow) {
	t.mu.Lock()
	if e.state == entryQueued {
		t.queue.remove(e)
		e.as, e.tool = nil, nil
	}
	e.state = entryLeft
	t.mu.Unlock()
}

// KeyedThrottle is a [Throttle] per key: each key (a tenant, an API key,
// an upstream host) lets at most max flows in per period, as
// NewThrottle(max, period, maxQueue...) does, while the flows of other
// keys go on at once. Per key it behaves as such a Throttle does, in every
// respect: its periods and their timers, its queue and the queue limit's
// [DefenseRejected] "Throttle queue limit", a cancel or a timeout while
// waiting, a closed [Loop], the clocks of the flows (a flow of a Loop and
// one of a [TestTool] refused within one period of a key), [KeyedThrottle.Hold]
// on that key only, and the SyncWait hook (see [Hooks]), which is told of
// the Syncer that Key returns for the key.
//
// A key has a Throttle of its own only while it must: while a flow
// enters or waits, while a period of the key runs (its entries count
// until the period ends: a key dropped and made again within one period
// would let max more in), and while a hold on the key is ahead. As a
// key's period ends with nobody waiting, the key is dropped, with no
// timer left behind, so that the keys seen once cost nothing afterwards;
// [KeyedThrottle.Len] counts the keys in use. A key whose period runs on
// with no timer (a hold made while the key was idle, or a period whose
// Loop was closed before its end) is kept until a flow of the
// KeyedThrottle, on any key, comes at or after that end on its clock. So
// the flows of all its keys must read one clock, as a Throttle's must: a
// hold made while its key is idle, which no flow has timed yet, is
// dropped by a flow of a Loop on any other key once the hold's end is in
// that Loop's past, and a test on a TestTool's virtual time that shares
// a KeyedThrottle with Loops loses its holds; give it one of its own.
//
// Keys are compared as map keys are. A key that cannot be one (an
// interface key whose value is a slice, a map or a func) or that is not
// equal to itself (a NaN, or a value holding one), which could never be
// found again nor dropped, is a misuse: the step that would enter fails
// with [InternalError], whose info starts with "KeyedThrottle: ", and
// neither f nor the onerror given to Sync runs; Hold on such a key does
// nothing.
//
// A KeyedThrottle is safe for concurrent use: flows on different loops
// may share one. Create it with [NewKeyedThrottle]; the zero value is the
// same as NewKeyedThrottle(1, time.Second): one flow per second per key,
// with an unlimited queue. A KeyedThrottle must not be copied after first
// use.
type KeyedThrottle[K comparable] struct {
	limit    int           // per key; 0 means 1
	period   time.Duration // per key; 0 means one second
	maxQueue queueLimit

	keys keyLimiters[K] // the keys in use, each a Limiter of a rate alone
}

// NewKeyedThrottle returns a KeyedThrottle that lets at most max flows per
// period enter the critical sections of each key, and queues at most
// maxQueue more per key, as [NewThrottle] does. It panics if max is below
// 1 or period is not positive.
func NewKeyedThrottle[K comparable](max int, period time.Duration, maxQueue ...int) *KeyedThrottle[K] {
	if max < 1 {
		panic("asyncsteps: NewKeyedThrottle: max must be at least 1")
	}
	if period <= 0 {
		panic("asyncsteps: NewKeyedThrottle: period must be positive")
	}
	return &KeyedThrottle[K]{limit: max, period: period, maxQueue: optionalQueueLimit(maxQueue)}
}

// Sync adds to as the steps that wait for an entry of key in its current
// period, then run f with onerror as its error handler, as
// [Throttle.Sync] does.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (t *KeyedThrottle[K]) Sync(as AsyncSteps, key K, f StepFunc, onerror ...ErrorFunc) {
	if t == nil || f == nil {
		refuseSync(as, t == nil)
		return
	}
	if onerr, ok := syncHandler(as, onerror); ok {
		as.Add(func(as AsyncSteps, args ...any) { t.enterSection(as, key, f, onerr, args) })
	}
}

// Key returns the [Syncer] of key, for [AsyncSteps.Sync] and whatever
// takes a Syncer: its Sync is t.Sync with key. It looks key up at each
// Sync, so that keeping it keeps no Throttle of the key alive. Two
// Syncers of one KeyedThrottle and equal keys are equal (==).
func (t *KeyedThrottle[K]) Key(key K) Syncer { return keyThrottleSyncer[K]{t, key} }

// Hold keeps every flow of key out until the instant until, as
// [Throttle.Hold] does for a Throttle: the flows of other keys go on. A
// key that is not in use is made for the hold, and kept until its end
// (see KeyedThrottle). It is safe for concurrent use, from a step of any
// loop or from another goroutine.
func (t *KeyedThrottle[K]) Hold(key K, until time.Time) {
	t.keys.hold(key, t.kind(), until)
}

// Len returns the number of keys in use: those a flow enters or waits
// for, whose period runs, or on which a hold is ahead.
func (t *KeyedThrottle[K]) Len() int { return t.keys.table.len() }

// enterSection runs as the step that enters the critical section of key.
func (t *KeyedThrottle[K]) enterSection(as AsyncSteps, key K, f StepFunc, onerror ErrorFunc, args []any) {
	t.keys.enterSection(as, key, t.kind(), f, onerror, args)
}

// kind is what the keys of t are, for keyLimiters: a Limiter whose rate
// limit alone is set.
func (t *KeyedThrottle[K]) kind() keyKind[K] {
	return keyKind[K]{
		name:   "KeyedThrottle",
		limits: limiterConfig{rated: true, rate: t.limit, period: t.period, burst: t.maxQueue},
		owner:  t,
	}
}

// keyThrottleSyncer is the Syncer of one key of a KeyedThrottle.
type keyThrottleSyncer[K comparable] struct {
	t   *KeyedThrottle[K]
	key K
}

// Sync implements [Syncer].
func (s keyThrottleSyncer[K]) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	s.t.Sync(as, s.key, f, onerror...)
}

// enterSection implements sectioner.
func (s keyThrottleSyncer[K]) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	s.t.enterSection(as, s.key, f, onerror, args)
}

// nilSyncer reports whether the KeyedThrottle is nil (see nilSyncer).
func (s keyThrottleSyncer[K]) nilSyncer() bool { return s.t == nil }

// keyedKind implements keyedSyncer: a KeyedThrottle is a Throttle per key.
func (keyThrottleSyncer[K]) keyedKind() string { return "throttle" }
