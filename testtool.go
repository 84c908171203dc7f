package asyncsteps

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// TestToolEpoch is the instant the clock of every new [TestTool] starts at,
// so that times seen by a test are the same on every run.
var TestToolEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// TestTool is a deterministic [Tool] for tests: it runs nothing on its own.
// Callbacks run only inside [TestTool.NextEvent], [TestTool.Run] and
// [TestTool.Advance], one at a time, on the goroutine that called them, and
// its clock is virtual: it starts at [TestToolEpoch] and moves only when a
// deferred callback runs or Advance says so.
//
// Immediate callbacks run first, in scheduling order; then those given to
// [AtTurnEnd] on the tool's goroutine, all of them as one event; deferred
// ones follow by due time, ties in scheduling order. A cancelled callback
// no longer counts as an event.
//
// A callback that panics does not stop the tool: as on a [Loop], the panic
// is recovered and logged with [log/slog]. A callback that calls
// runtime.Goexit ends the goroutine driving the tool (as it ends any
// goroutine); a flow's step then fails with InternalError, which the flow
// handles when the tool is driven again. One given to [AtTurnEnd] leaves
// the rest of its turn's callbacks to run first then, as a Loop's next
// goroutine runs them.
//
// Virtual time does not wait for other goroutines: when only deferred
// callbacks are left, the next one runs at once, even if a goroutine is
// about to complete a step (see the package documentation on Root.Run).
// To test such a flow (Await, AwaitChan, AwaitFlow) on
// virtual time, run it instead on a [Loop] made, and closed, inside the
// function given to testing/synctest.Test: the bubble's clock moves only
// once every goroutine in it, the Await functions' included, is blocked.
// A flow that ends does not wait for the Await functions it cancelled:
// synctest.Wait lets them return before the test reads what they did.
// Make the loops (a [LoopGroup] too) inside the bubble: a goroutine of the
// bubble that waits for a loop made outside it is blocked on what the
// bubble cannot see, and synctest reports a deadlock; if that loop then
// delivers to the bubble (a Close deferred by the test ends its flows),
// the runtime stops the process with a fatal error. The bubble's clock
// is exact, but the order in which goroutines run at one instant is the
// scheduler's:
// flows started together on several loops (or with Await functions
// returning at the same instant) reach a shared Mutex or Throttle in any
// order. A test that checks an exact order starts one flow at a time and
// calls synctest.Wait after each, so that the last has gone as far as it
// can before the next begins.
// Package asynchttp's documentation ("Testing on virtual time") shows an
// HTTP service tested that way.
//
// All methods but [TestTool.SetHooks] are safe for concurrent use, so a
// goroutine a test starts may schedule or cancel callbacks. Goroutines that
// drive the tool at once (NextEvent, Run, Advance, or [Root.Run] of a flow
// on it) take turns: a call waits until the one driving has returned, so
// callbacks still run one at a time. [Root.Run] gives the turn up after each
// event, and takes its Result while another goroutine holds the tool, so two
// of them on two goroutines, or one beside a goroutine in Run or Advance,
// see their flows end. A call from a callback, on the goroutine driving the
// tool, runs at once, inside the one that runs the callback (inside an
// Advance, no further than its end: see [TestTool.Advance]); a callback that
// waits for another goroutine which drives the tool waits for ever, as that
// goroutine waits for the callback's turn. The zero value is not usable:
// create a TestTool with [NewTestTool].
type TestTool struct {
	runner atomic.Int64 // goroutine id inside NextEvent, Run or Advance; 0 if none
	// turn holds a token while a goroutine drives the tool, from its
	// outermost NextEvent, Run or Advance to their return, so that
	// callbacks, the engine pools and the clock's jumps have one goroutine
	// at a time. A channel, not a mutex, so that Root.Run can wait for
	// its turn and for its flow's end at once (see runFlow); goroutines
	// waiting to send are served in order.
	turn chan struct{}
	// ceiling is the target of the Advance running, the innermost of
	// those nested; MaxInt64 outside any. No call nested in an Advance
	// runs what falls due after it, nor moves the clock past it. Used by
	// the goroutine that holds turn only.
	ceiling int64

	mu     sync.Mutex       // guards the fields below; never held while a callback runs
	now    int64            // nanoseconds since TestToolEpoch
	queue  fifo[queueEntry] // immediates and posted tasks, cancelled and dropped ones included
	live   int              // tasks in queue that will still run
	posted uint64           // tasks queued so far: the seq of the next one
	taken  uint64           // tasks taken out of queue so far; a test checks that each is taken once
	timers timerHeap        // deferred callbacks; cancelled ones are removed at once
	// turnEnds are the callbacks given to AtTurnEnd (turnend.go), which
	// run once no immediate is left, cancelled ones included; turnLive
	// counts those that will still run. ending is how many of those at
	// its front belong to the turn whose end runs, still to be taken out:
	// those scheduled meanwhile wait for the next turn's end.
	turnEnds fifo[*testTurnEnd]
	turnLive int
	ending   int
	engine   enginePools // used only by the driving goroutine
	seq      atomic.Uint64
	// continuations counts, by flow, the continuations in queue that
	// will still run (see continuationOf), so that a flow that ends drops
	// those it left in O(1) (see dropContinuations). A cancelled branch's
	// would run as an event that calls no user code, and count in Pending
	// after the flow has ended.
	continuations map[*flow]int
	// ended holds, by flow, the continuations that its ends dropped and
	// that are still in queue, to be skipped as they come out (see
	// skipDropped).
	ended map[*flow]droppedRun
}

// NewTestTool returns a TestTool with no event and its clock at
// [TestToolEpoch].
func NewTestTool() *TestTool {
	t := &TestTool{turn: make(chan struct{}, 1), ceiling: math.MaxInt64}
	t.timers.mu = &t.mu
	t.timers.seq = &t.seq
	return t
}

// Immediate schedules f to run after every immediate already scheduled. A
// nil f schedules nothing: the handle is invalid.
func (t *TestTool) Immediate(f func()) Handle {
	if f == nil {
		return deadHandle{}
	}
	e := &testImmediate{f: f, tool: t}
	t.post(e)
	return e
}

// Deferred schedules f to run once the virtual clock has moved by d; d <= 0
// makes it due at the current virtual time, still after every immediate.
// A nil f schedules nothing: the handle is invalid.
func (t *TestTool) Deferred(d time.Duration, f func()) Handle {
	if f == nil {
		return deadHandle{}
	}
	return t.deferTask(d, funcTask(f))
}

func (t *TestTool) deferTask(d time.Duration, tk task) *timerEntry {
	e := &timerEntry{t: tk}
	t.mu.Lock()
	t.timers.push(e, addClamped(t.now, d))
	t.mu.Unlock()
	return e
}

// IsSameThread reports whether it is called on the goroutine currently
// driving the tool through NextEvent, Run or Advance.
func (t *TestTool) IsSameThread() bool {
	r := t.runner.Load()
	return r != 0 && r == goid()
}

// Now returns the virtual clock.
func (t *TestTool) Now() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TestToolEpoch.Add(time.Duration(t.now))
}

// NextEvent runs the first immediate if there is one, else the callbacks
// waiting for the end of the turn ([AtTurnEnd]), else the earliest
// deferred callback, moving the clock to its due time. It reports false,
// running nothing, when no event is left; called from a callback that
// [TestTool.Advance] runs, also when none is due by that Advance's end.
func (t *TestTool) NextEvent() bool {
	defer t.leave(t.enter())
	return t.step(t.ceiling)
}

// HasEvents reports whether a callback is still scheduled.
func (t *TestTool) HasEvents() bool { return t.Pending() > 0 }

// Pending returns the number of callbacks still scheduled, immediate, at
// the end of the turn ([AtTurnEnd]) and deferred; cancelled ones are not
// counted. A test uses it to check that
// no timer was left armed. A flow that has ended leaves none of its steps'
// continuations queued, nor a stop it outran (a [Root.Cancel], the end of
// the context of Run, PromiseContext or ExecuteThenContext); only a
// Root.Cancel or a context end that races the flow's end may post its stop
// after the end, as one event that does nothing. A [Throttle] it entered
// keeps the timer of its current period armed until the period ends, with
// or without flows waiting, so Pending counts it until the clock reaches
// the period's end (Run or Advance by the period).
func (t *TestTool) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live + t.turnLive + t.timers.len()
}

// Run calls NextEvent until no event is left, so the clock jumps to each
// deferred callback in turn. A flow that re-arms a timer forever makes Run
// loop forever: use Advance to bound virtual time. Called from a callback
// that [TestTool.Advance] runs, it stops at that Advance's end, leaving
// later events scheduled.
func (t *TestTool) Run() {
	defer t.leave(t.enter())
	for t.step(t.ceiling) {
	}
}

// Advance moves the clock by d. On the way it runs every immediate and every
// deferred callback due by then, including those they schedule, each with the
// clock at its due time; the clock then ends at exactly d after where it was.
// The clock never goes back: a negative d counts as 0 (what is due now runs). It
// stops at the largest time it can hold, where later timers then fall due.
//
// An Advance called from a callback that another Advance runs goes no
// further than that outer call's end: it runs what falls due by the
// earlier of the two ends, and leaves the clock there. Carried further,
// the clock would pass the outer call's end with callbacks run that were
// due after it, and that call would return with the clock not at d after
// where it was, as it promises. NextEvent and Run called from such a
// callback stop at the outer call's end as well.
func (t *TestTool) Advance(d time.Duration) {
	defer t.leave(t.enter())
	t.mu.Lock()
	target := min(addClamped(t.now, d), t.ceiling)
	t.mu.Unlock()
	outer := t.ceiling
	t.ceiling = target
	defer func() { t.ceiling = outer }() // before leave gives the turn up
	for t.step(target) {
	}
	t.mu.Lock()
	t.now = max(t.now, target)
	t.mu.Unlock()
}

// ResetEvents drops the test's own scheduled callbacks and the tool's
// timers; their handles become invalid. The clock is left as it is. A
// [Throttle] whose period was timed here ends that period at once: the
// flows waiting for it enter, and may start a new period. What package
// cabi queued to release C memory releases it before ResetEvents returns,
// on its caller's goroutine.
//
// The work of a running flow queued on the tool is no callback of the
// test's, and stays: the flow's start; the continuation of a flow that let
// other events go first (after each step, when events wait), or of a
// Parallel's branches; a completion made already of a step that waits (the
// admission of a flow that waited for a [Mutex], [Limiter] or [Throttle],
// which counts the flow in from that moment; Success or Error called on
// the step from outside its callback; the result of an Await function that
// has returned); the slot of a [ForEachLimit] item that has ended, given
// back as the last Await function started in it returns; a stop requested
// of the flow (a [Root.Cancel], the end of the context given to
// [Root.Run], [Root.PromiseContext] or [Root.ExecuteThenContext]: a
// cancel, or its deadline, which times the flow out; past that deadline,
// the timeout at once of a step that waits). Nothing would queue it again:
// dropped, it left the flow halted for ever, its Promise unanswered, with
// the Mutex slots it held or had been given. The tool runs it, as it would
// have, when it runs next. It belongs to the execution that queued it: it
// does nothing once that execution has ended (a continuation or a stop is
// dropped then), even if the Root runs again. A step's timeout and the
// wait of a [Retry]'s Backoff are timers of the tool, and are dropped: the
// step waits on until it is completed or cancelled, and the context of an
// [AsyncSteps.Await] function started under it afterwards has no deadline
// of that timeout (a context's deadline never changes: one that runs
// already keeps it, and its Err reports context.DeadlineExceeded if it is
// cancelled past it).
func (t *TestTool) ResetEvents() {
	var mustRun []runsWhenDropped
	var kept []task
	t.mu.Lock()
	for e, ok := t.take(); ok; e, ok = t.take() {
		if t.skipDropped(e) {
			continue
		}
		switch tk := e.tk.(type) {
		case *testImmediate:
			tk.drop()
		case runsWhenDropped:
			mustRun = append(mustRun, tk)
		default:
			if flowWorkOf(tk) != nil {
				kept = append(kept, tk)
			}
		}
	}
	t.live = 0
	t.dropTurnEnds()
	clear(t.continuations)
	clear(t.ended) // every dropped continuation was taken out above
	for _, tk := range kept {
		t.push(tk) // in the order they were queued
	}
	mustRun = append(mustRun, t.timers.dropAll()...)
	t.mu.Unlock()
	for _, tk := range mustRun {
		tk.dropped()
	}
}

// flowWorkOf returns the running flow whose own work tk is, or nil: the
// flow's start, a continuation of it (see continuationOf), or the
// delivery of a completion made of one of its steps (a gate's admission
// with a SyncWait hook or a decorator, a decorated Await's result, an
// Error called from another goroutine on a step that does not wait).
// ResetEvents keeps those.
func flowWorkOf(tk task) *flow {
	fl := continuationOf(tk)
	switch c := tk.(type) {
	case *flow:
		fl = c
	case *waitingStep:
		fl = c.h.fl
	case *loopDelivery:
		fl = c.h.fl
	case *foreignFailure:
		fl = c.h.fl
	}
	if fl == nil || !fl.isRunning() {
		return nil // none, or an ended flow's, which would do nothing
	}
	return fl
}

// droppable is a callback of another package of this module (see
// toolinfo.PostOrDrop) whose fallback runs if ResetEvents drops it: the
// release of C memory, in package cabi, that would otherwise be lost.
type droppable struct{ f, fallback func() }

func (d droppable) run()     { d.f() }
func (d droppable) dropped() { d.fallback() }

// flowStop is the task that applies a stop requested of fl, queued on a
// TestTool: a cancel (Root.Cancel, or the cancel of the context of Run,
// PromiseContext or ExecuteThenContext) or the deadline of that context.
// ResetEvents keeps it, and the end of fl's execution drops it, as a
// continuation of fl.
type flowStop struct {
	fl    *flow
	apply func()
}

func (s flowStop) run() { s.apply() }

func init() {
	toolinfo.PostOrDrop = func(tool any, run, dropped func()) bool {
		t, ok := tool.(*TestTool)
		if ok {
			t.post(droppable{run, dropped})
		}
		return ok
	}
}

// queueEntry is an entry of a TestTool's queue: a task, and its place in the
// order tasks were queued, which tells a continuation that the end of its
// flow dropped from one of a later execution (see skipDropped).
type queueEntry struct {
	tk  task
	seq uint64
}

// post queues tk behind every immediate, in the same FIFO as Immediate.
func (t *TestTool) post(tk task) {
	t.mu.Lock()
	t.push(tk)
	t.mu.Unlock()
}

// push queues tk and counts it (see count). Called with t.mu held.
func (t *TestTool) push(tk task) {
	t.queue.push(t.entry(tk))
	t.count(tk)
}

// entry returns the queue entry of tk, next in order. Called with t.mu
// held.
func (t *TestTool) entry(tk task) queueEntry {
	e := queueEntry{tk: tk, seq: t.posted}
	t.posted++
	return e
}

// take takes the first entry out of the queue. Called with t.mu held.
func (t *TestTool) take() (queueEntry, bool) {
	e, ok := t.queue.pop()
	if ok {
		t.taken++
	}
	return e, ok
}

// count counts tk, just queued: in live, and in continuations if it is
// one (see uncount, which takes it out again). Called with t.mu held.
func (t *TestTool) count(tk task) {
	t.live++
	if fl := continuationOf(tk); fl != nil {
		if t.continuations == nil {
			t.continuations = make(map[*flow]int)
		}
		t.continuations[fl]++
	}
}

// continuationOf returns the flow that tk continues, or nil if tk is no
// continuation: a step API queued to go on from its frame, the flow's
// base frame resumed, a stop of the flow to apply (a cancel, a deadline,
// a step that waits past it), a ForEachLimit's slot given back by the
// last Await function of an ended item, or a ForEachChan's value. Each
// does nothing once its flow's execution has ended (see baseResume,
// cancelOf, expiryOf, expiryTask, limitRun.slotBack and itemArrival),
// even if the Root runs again.
func continuationOf(tk task) *flow {
	switch c := tk.(type) {
	case *stepAPI:
		return c.fl
	case *baseResume:
		return (*flow)(c)
	case flowStop:
		return c.fl
	case *expiryTask:
		return c.fl
	case *itemWork:
		return c.fl
	case *itemArrival:
		return c.fl
	}
	return nil
}

// uncount takes tk, taken from the queue, out of continuations. Called
// with mu held.
func (t *TestTool) uncount(tk task) {
	fl := continuationOf(tk)
	if fl == nil {
		return
	}
	if n := t.continuations[fl] - 1; n > 0 {
		t.continuations[fl] = n
	} else {
		delete(t.continuations, fl)
	}
}

// droppedRun is what the ends of a flow dropped of the continuations it
// had queued: those queued before the seq before, of which left are still
// in the queue.
type droppedRun struct {
	before uint64
	left   int
}

// dropContinuations drops the continuations of fl, whose execution is
// ending: they would run as events that do nothing. They stay in the
// queue, uncounted, until they come out of it (see skipDropped), so that
// the cost is the same whether one flow ends or thousands do at once.
// Called on the goroutine driving the tool, as the flow delivers its
// outcome, before the Root may run again.
func (t *TestTool) dropContinuations(fl *flow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.continuations[fl]
	if n == 0 {
		return // the common case: the flow left nothing queued
	}
	delete(t.continuations, fl)
	t.live -= n // a continuation is never a cancellable handle
	if t.ended == nil {
		t.ended = make(map[*flow]droppedRun)
	}
	// Every continuation of fl queued so far is dropped: those of an
	// earlier end still queued, and these.
	t.ended[fl] = droppedRun{before: t.posted, left: t.ended[fl].left + n}
}

// skipDropped reports whether e, taken out of the queue, is a
// continuation that the end of its flow dropped, and forgets it then: the
// next execution's are queued after the end, or in front of the queue
// after it (afterGoexit), but always with a later seq. Called with t.mu
// held.
func (t *TestTool) skipDropped(e queueEntry) bool {
	if len(t.ended) == 0 {
		return false // the common case: no flow ended with continuations queued
	}
	fl := continuationOf(e.tk)
	d, ok := t.ended[fl]
	if !ok || e.seq >= d.before {
		return false
	}
	if d.left--; d.left > 0 {
		t.ended[fl] = d
	} else {
		delete(t.ended, fl)
	}
	return true
}

// busy reports whether another immediate is waiting.
func (t *TestTool) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live > 0
}

// enter makes the calling goroutine the one driving the tool, waiting for
// its turn if another drives it, and reports whether the call is the
// outermost one, for leave. A nested call (NextEvent from inside a
// callback) is on the goroutine that holds the turn already: it runs at
// once, and IsSameThread stays true until the outer call returns.
// goid costs about a microsecond: Run and Advance pay it once, not per event.
func (t *TestTool) enter() (outer bool) {
	g := goid()
	if t.runner.Load() == g {
		return false // only this goroutine stores its own id
	}
	t.turn <- struct{}{}
	t.runner.Store(g)
	return true
}

// leave ends a call begun by enter; the outermost one gives the turn up.
// It runs deferred, so a callback's Goexit gives the turn up too.
func (t *TestTool) leave(outer bool) {
	if outer {
		t.runner.Store(0)
		<-t.turn
	}
}

// step runs one event: the rest of a turn's end cut short, else the
// first live immediate, else the callbacks waiting for the end of the
// turn, else the earliest timer due by limit.
// The event is taken under mu and run without it, because callbacks
// schedule more events.
func (t *TestTool) step(limit int64) bool {
	t.mu.Lock()
	if t.ending > 0 && t.endTurn(false) {
		// The rest of a turn's end that a callback's Goexit cut short,
		// as a Loop runs it: first.
		t.mu.Unlock()
		return true
	}
	if tk := t.popImmediate(); tk != nil {
		t.mu.Unlock()
		runLogged(tk.run)
		return true
	}
	if t.turnLive > 0 {
		t.endTurn(true)
		t.mu.Unlock()
		return true
	}
	e := t.timers.popDue(limit)
	if e == nil {
		// Run or Advance is ending: the tool idles, and gives back what
		// a burst grew.
		t.dropTurnEnds() // cancelled ones only
		t.queue.trim()
		t.timers.trim()
		t.mu.Unlock()
		return false
	}
	t.now = max(t.now, e.due)
	t.mu.Unlock()
	runLogged(e.fire)
	return true
}

// popImmediate returns the first task that will still run, claiming it if it
// is a handle, or nil. Called with mu held.
func (t *TestTool) popImmediate() task {
	for t.live > 0 {
		e, _ := t.take()
		if t.skipDropped(e) {
			continue // its flow has ended: uncounted then
		}
		if h, ok := e.tk.(*testImmediate); ok && !h.state.CompareAndSwap(handleScheduled, handleRan) {
			continue // cancelled: already uncounted
		}
		t.live--
		t.uncount(e.tk)
		return e.tk
	}
	// Only cancelled and dropped entries are left: free them now rather
	// than keep them, and the flows they refer to, until the next
	// immediate runs.
	for t.queue.len() > 0 {
		t.take()
	}
	clear(t.ended)
	return nil
}

// inject queues t like post; it is safe from any goroutine.
//
// A task that has become stale (see staleTask) is dropped, checked under
// mu: the goroutine that queued it found it live, but its flow may have
// ended since on the goroutine driving the tool, whose end drops the
// flow's continuations under mu (see dropContinuations); one queued later
// would stay counted in Pending for a flow that is gone.
func (t *TestTool) inject(x task) {
	t.mu.Lock()
	if s, ok := x.(staleTask); !ok || !s.stale() {
		t.push(x)
	}
	t.mu.Unlock()
}

// startFlow queues a flow's first task like inject.
func (t *TestTool) startFlow(fl *flow) { t.post(fl) }

// pools is the engine state of the flows on the tool, used by the driving
// goroutine only.
func (t *TestTool) pools() *enginePools { return &t.engine }

// lifetime is nil: a TestTool never stops for good (ResetEvents drops
// callbacks, but later ones run).
func (t *TestTool) lifetime() context.Context { return nil }

func (t *TestTool) tool() Tool { return t }

// watch does nothing: a TestTool never abandons a flow.
func (t *TestTool) watch(*flow) {}

func (t *TestTool) unwatch(*flow) {}

// linkSection does nothing: a TestTool never closes.
func (t *TestTool) linkSection(*section) {}

// lockFreePost is false: post and inject share one queue and lock.
func (t *TestTool) lockFreePost() bool { return false }

func (t *TestTool) deferred(d time.Duration, tk task) Handle { return t.deferTask(d, tk) }

func (t *TestTool) selfRunInfo() string {
	return " called from a callback of the flow's TestTool: it would drive the tool inside itself"
}

// waitRun drives the tool itself (see runFlow).
func (t *TestTool) waitRun(ctx context.Context, r *Root, w *waiter) ([]any, error) {
	return t.runFlow(ctx, r, w)
}

// runFlow drives t until the flow of r reports to w, stopping it when ctx
// ends (see Root.stopFor). While no event is queued it waits for one from
// other goroutines.
//
// It takes its turn for each event, and while another goroutine drives
// the tool it waits for the turn, its flow's Result and ctx's end at
// once: that goroutine may run the flow to its end, or hold the tool
// until this Run has returned.
func (t *TestTool) runFlow(ctx context.Context, r *Root, w *waiter) ([]any, error) {
	done, stopped := ctx.Done(), false
	for {
		select {
		case res := <-w.promise:
			return res.Args, res.Err
		default:
		}
		if !stopped && ctx.Err() != nil {
			// Stopped once; the flow ends by itself from here. Err is
			// asked at each turn: a Context may end without closing Done.
			stopped, done = true, nil
			r.stopFor(ctx, w)
		}
		select {
		case res := <-w.promise:
			return res.Args, res.Err
		case <-done:
			continue // stopped at the top of the loop
		case t.turn <- struct{}{}:
		}
		if !t.eventInTurn() {
			time.Sleep(time.Millisecond) // only while another goroutine owes an event
		}
	}
}

// eventInTurn runs one event, as NextEvent does, for runFlow, which has
// taken the turn: it gives it up as it returns, also at a callback's
// Goexit.
func (t *TestTool) eventInTurn() bool {
	t.runner.Store(goid())
	defer t.leave(true)
	return t.step(math.MaxInt64)
}
