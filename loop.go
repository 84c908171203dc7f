package asyncsteps

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// Loop is a real event loop: one goroutine that runs scheduled callbacks one
// at a time. Immediate callbacks run in the order they were scheduled;
// deferred ones run when due, earliest first, ties in scheduling order, on
// the wall clock ([time.Now]). Due timers are checked at least every 256
// callbacks, so a busy loop delays them but never starves them; a timer that
// has fallen due may run before immediates scheduled in the meantime. A
// step's timeout ([AsyncSteps.SetTimeout]) counts at the earliest from the
// SetTimeout call and at the latest from the end of the pass over callbacks
// in which it was set, when the loop next reads its clock: it may fall due
// later than its duration by the rest of that pass, never earlier.
//
// A pass takes the callbacks scheduled with Immediate, then the flows
// started, behind what the loop's own queue holds, and runs the queue (up
// to 256 callbacks) with the steps its flows make ready meanwhile, then
// the timers due. So a callback given to Immediate on the loop's own
// goroutine, from a step say, runs at the next pass, behind every step
// ready by then: not right after the callbacks ready when it was called,
// as on a [TestTool]. [AtTurnEnd] runs a callback once the steps ready now
// have run, alike on both tools.
//
// A flow started on a Loop ([Root.Execute], Promise, Run) takes its first
// step after every callback scheduled before the start, and flows start in
// the order they were started; a callback scheduled after the start may
// run first. Flows are started without the lock that Immediate takes
// (except to wake a sleeping loop), so that goroutines starting many flows
// do not slow the loop down.
//
// Immediate, Deferred, Now, IsSameThread, Close, Wait and the methods of
// the returned handles are safe for concurrent use. The zero value is not
// usable: create a Loop with [NewLoop]. It acts as a closed Loop that never
// ran: Immediate and Deferred return invalid handles and drop their
// function, Close returns at once, Wait returns nil, and a flow given it ends at once with an
// InternalError, "the flow's Loop was not made by NewLoop". A Loop that is never closed keeps
// its goroutine for the life of the process, and the goroutines it keeps
// for [AsyncSteps.Await] functions (docs/DESIGN.md#await).
//
// A callback that panics does not stop the loop: the panic is recovered and
// logged with [log/slog], and the loop goes on with the next callback. One
// that calls runtime.Goexit ends the loop's goroutine, and the loop goes on
// with a new one (see the package documentation).
type Loop struct {
	// Owned by the loop goroutine: no lock.
	local   fifo[task] // tasks ready to run, in order
	drained []task     // the previous inbox, swapped out to be reused
	timer   *time.Timer
	start   time.Time // origin of the monotonic clock timers are due on
	engine  enginePools

	// timerDue is when timer signals wake, on the loop's clock: wait
	// leaves it armed across wake-ups.
	timerDue int64
	// lagProbes is how many lag probes (hooks.go) the local queue holds,
	// which LoopPass does not count as callbacks; turnMarks, likewise, the
	// marks of the callbacks given to AtTurnEnd (turnend.go).
	lagProbes int
	turnMarks int
	// ending are the callbacks given to AtTurnEnd whose marks have run,
	// which run at the end of the pass. endingCut is set while endTurn
	// runs them: still set as a goroutine starts, one of them ended the
	// previous goroutine with runtime.Goexit, and the rest run first.
	ending    fifo[*loopImmediate]
	endingCut bool
	// awaited holds the flows of the loop that a Promise or Run waits for,
	// from their beginning to their end, so that a Close that abandons them
	// still gives each its Result. Each flow knows its index in it
	// (flow.awaitIndex): a slot costs 8 bytes a flow, where a set's entry
	// cost 24, and links in the flow would cost every Root 16.
	awaited []*flow
	// timedAtClose are the flows that the step timers held when the loop
	// closed, until shutdown ends them (see endTimed).
	timedAtClose []*flow
	// stepTimers are the engine's step timeouts, armed and cancelled on
	// the loop only: they cost no lock, and so do not contend with the
	// goroutines that post to the loop.
	stepTimers stepTimers

	gid atomic.Int64 // goroutine id of the loop, 0 until it starts
	// waiting is true only while the loop's goroutine is blocked in wait,
	// where it runs no callback: IsSameThread is then false for every
	// caller, and answers without reading the caller's goroutine id,
	// which costs a traceback of the caller's whole stack.
	waiting atomic.Bool
	// posted is whether the inbox holds tasks, read without the lock by
	// busy and drainPosts; written under mu, only when the inbox goes from
	// empty to not empty or back, so that a post to an inbox that already
	// holds tasks costs no atomic write besides the lock's.
	posted  atomic.Bool
	closing atomic.Bool // set under mu; read per task to stop at once
	ended   atomic.Bool // set by shutdown before it takes the flows to start

	// starts holds the flows that startFlow queued, newest first, linked
	// through their base frames (see flow.nextStart). It takes no lock,
	// so that goroutines starting flows do not contend with the loop,
	// which takes mu for its own posts from callbacks (Immediate, step
	// completions). It has a cache line of its own: the producers write it
	// once per flow, and the loop reads closing, posted and the rest once
	// per task, which would miss after every push if they shared its line.
	_      [cacheLine]byte
	starts atomic.Pointer[flow]
	_      [cacheLine - 8]byte
	// sleeping is set, under mu, while the loop waits on wake; a producer
	// that sees it must signal. Atomic for startFlow, which looks at it
	// without mu (see sleep).
	sleeping atomic.Bool

	timerSeq atomic.Uint64 // orders the timers of both heaps that are due at once

	mu     sync.Mutex
	inbox  []task    // tasks from Immediate, in order
	timers timerHeap // deferred callbacks, guarded by mu
	// immediates is the rest of the block that Immediate takes its
	// handles from, guarded by mu: one allocation per block, not per call.
	immediates []loopImmediate

	shared bool // DefaultTool's loop: never closed

	// beforeStop are the functions toolinfo.BeforeStop gave, which
	// shutdown runs before it sets ended, taking each out as it runs it;
	// stopping is set as shutdown begins to, and refuses later ones.
	// Guarded by mu.
	beforeStop []func()
	stopping   bool

	// closed is closed by Close's first moment, under mu, with closing
	// set (see toolinfo.Closing). Made with the Loop, not on first
	// request: a channel made inside a testing/synctest bubble may not be
	// closed from outside it, so it belongs where the Loop was made.
	closed chan struct{}

	// unmadeInfo is the info of the error of a zero Loop's flows when it
	// stands in for something else the caller made wrong (see
	// schedulerOf and LoopGroup.Next): a nil pointer, a zero LoopGroup;
	// "" for a zero Loop itself.
	unmadeInfo string

	wake chan struct{} // capacity 1: a pending wake-up is never lost
	done chan struct{} // closed when the goroutine has exited

	// alive is cancelled when the loop stops, to release the goroutines
	// that wait on behalf of its steps (Await, AwaitChan): a closed loop
	// runs no cancel handler that would.
	alive    context.Context
	endAlive context.CancelFunc

	// sections is the sentinel of the ring of the critical sections that
	// the loop's flows have entered and not left, linked by prev and next;
	// loop goroutine only. A Loop that closes leaves them (leaveSections),
	// since it runs no cancel handler.
	sections section

	// awaitWorkers are the goroutines kept for the Await functions of the
	// loop's flows; shutdown ends them.
	awaitWorkers awaitWorkers
	// helpPromises are the channels RunHelping waits on, kept between its
	// calls on this loop's flows.
	helpPromises promisePool
	// awaitCalls are the Await calls in flight of the loop's flows, which
	// Close cancels, and the count of what may still run for the loop,
	// which Wait waits for.
	awaitCalls awaitCalls
}

// cacheLine is the size of a cache line on the machines Go runs on most
// (amd64, arm64 mostly 64 bytes); a wrong guess costs speed, not
// correctness.
const cacheLine = 64

// loopBatch bounds how many queued tasks run between two looks at the inbox
// and the timers, so that a flow that keeps posting work starves neither.
const loopBatch = 256

// NewLoop starts a new event loop on its own goroutine.
func NewLoop() *Loop {
	l := newIdleLoop()
	go l.run()
	return l
}

// newIdleLoop returns a Loop whose goroutine is not started: NewLoop
// starts it, and tests may run its passes by hand instead.
func newIdleLoop() *Loop {
	l := &Loop{
		start:  time.Now(),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	l.alive, l.endAlive = context.WithCancel(context.Background())
	l.awaitWorkers.idleFor = awaitWorkerIdle
	l.awaitCalls.closing = &l.closing
	l.awaitCalls.live = 1 // the loop's goroutine, until it has exited after the stop
	l.awaitCalls.drained = make(chan struct{})
	l.awaitWorkers.live = &l.awaitCalls
	l.engine.track = true // see endParked
	l.timers.mu = &l.mu
	l.timers.seq = &l.timerSeq
	l.stepTimers.init(&l.timerSeq)
	return l
}

var defaultLoop = sync.OnceValue(func() *Loop {
	l := newIdleLoop()
	l.shared = true
	l.engine.track = false // it never closes: see endParked
	go l.run()
	return l
})

func init() {
	toolinfo.NeverCloses = func(tool any) bool {
		l, ok := tool.(*Loop)
		return ok && l.shared
	}
	toolinfo.Closing = func(tool any) <-chan struct{} {
		if l, ok := tool.(*Loop); ok {
			return l.closedChan()
		}
		return nil
	}
	toolinfo.BranchID = branchID
	toolinfo.AtFlowEnd = atFlowEnd
	toolinfo.AtWait = atWait
	toolinfo.StepRunning = stepRunning
	toolinfo.StepLive = stepLive
	toolinfo.CallbackRuns = callbackRuns
	toolinfo.ValidOffLoop = validOffLoop
	toolinfo.ClaimSuccess = claimSuccess
	toolinfo.KeyedKey = keyedKey
	toolinfo.ClaimError = claimError
	toolinfo.ErrorCallInfo = errorCallInfo
	toolinfo.OwnerKey = ownerKey
	toolinfo.OuterKeys = outerKeys
	toolinfo.HoldFor = holdFor
	toolinfo.BeforeStop = beforeStop
	toolinfo.ExecuteMisused = executeMisused
	toolinfo.RecordMisuse = recordMisuse
}

// beforeStop is toolinfo.BeforeStop: it keeps fn for l's shutdown, unless
// l is not a Loop that may stop (DefaultTool's, a zero Loop) or its
// shutdown has taken the functions already.
func beforeStop(tool any, fn func()) bool {
	l, ok := tool.(*Loop)
	if !ok || l.shared || l.unmade() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return false
	}
	l.beforeStop = append(l.beforeStop, fn)
	return true
}

// runBeforeStop runs the functions toolinfo.BeforeStop gave, once each,
// as the loop stops: it runs no callback any more, and the AsyncSteps of
// its steps still answer IsValid by their state (see flow.loopStopped).
// Each is taken out of the loop as it runs, not all at once: one that
// calls runtime.Goexit ends this goroutine, and the next one, in
// shutdown again, runs the rest.
func (l *Loop) runBeforeStop() {
	for {
		l.mu.Lock()
		l.stopping = true
		if len(l.beforeStop) == 0 {
			l.beforeStop = nil
			l.mu.Unlock()
			return
		}
		fn := l.beforeStop[0]
		l.beforeStop = l.beforeStop[1:]
		l.mu.Unlock()
		fn()
	}
}

// DefaultTool returns the process-wide [Loop], started on first use. It is
// safe for concurrent use. It is shared by every caller in the process, so
// its Close does nothing.
func DefaultTool() Tool { return defaultLoop() }

// Immediate schedules f to run on the loop after every callback already
// scheduled with Immediate. After Close, it returns an invalid handle and f
// never runs; so does a nil f, which has nothing to run.
func (l *Loop) Immediate(f func()) Handle {
	if f == nil {
		return deadHandle{}
	}
	l.mu.Lock()
	if l.closing.Load() || l.unmade() {
		l.mu.Unlock()
		return deadHandle{}
	}
	e := l.newImmediate()
	e.f = f
	l.postLocked(e)
	l.unlockAndWake(true)
	return e
}

// newImmediate takes a handle from the block; mu must be held. A block
// is garbage once none of its handles is kept: a handle drops its callback
// once it has run or been skipped, so a kept handle keeps no closure of
// its block alive.
func (l *Loop) newImmediate() *loopImmediate {
	if len(l.immediates) == 0 {
		l.immediates = make([]loopImmediate, immediateBlock)
	}
	e := &l.immediates[0]
	l.immediates = l.immediates[1:]
	return e
}

// immediateBlock is how many handles of Immediate one allocation makes.
const immediateBlock = 32

// Deferred schedules f to run on the loop once d has passed; d <= 0 makes
// it due at once. After Close, it returns an invalid handle and f never
// runs; so does a nil f.
func (l *Loop) Deferred(d time.Duration, f func()) Handle {
	if f == nil {
		return deadHandle{}
	}
	return l.deferred(d, funcTask(f))
}

// deferTask arms a step's timeout. It is called on the loop only.
func (l *Loop) deferTask(d time.Duration, t task) *timerEntry {
	if l.closing.Load() {
		return nil
	}
	e := l.engine.takeTimer()
	e.t, e.step = t, true
	l.stepTimers.push(e, d, l.clock)
	return e
}

func (l *Loop) deferred(d time.Duration, t task) Handle {
	e := &timerEntry{t: t}
	l.mu.Lock()
	if l.closing.Load() || l.unmade() {
		l.mu.Unlock()
		return deadHandle{}
	}
	l.timers.push(e, addClamped(l.clock(), d))
	// Only a new earliest timer shortens the loop's sleep.
	l.unlockAndWake(e.index == 0)
	return e
}

// unlockAndWake releases mu and, if the loop sleeps and need is true, wakes
// it. The flag is cleared under mu, so a busy loop costs producers no
// channel operation and a sleeping one gets at most one signal.
func (l *Loop) unlockAndWake(need bool) {
	signal := need && l.sleeping.Load()
	if signal {
		l.sleeping.Store(false)
	}
	l.mu.Unlock()
	if signal {
		l.signal()
	}
}

func (l *Loop) signal() {
	select {
	case l.wake <- struct{}{}:
	default: // a signal is already pending
	}
}

// IsSameThread reports whether it is called on the loop's goroutine.
func (l *Loop) IsSameThread() bool {
	if l.waiting.Load() {
		return false // the loop's goroutine is blocked in wait, not here
	}
	if !mayBeLoopGoroutine() {
		return false // the usual caller: a server's goroutine about to Run
	}
	return goid() == l.gid.Load()
}

// Now returns the current time: the loop runs on the wall clock.
func (l *Loop) Now() time.Time { return time.Now() }

// Close stops the loop. Callbacks still scheduled are dropped (their
// handles become invalid) and later ones never run. The flows on the loop
// stop where they are, without their cancel handlers; a flow that
// [Root.Promise] or [Root.Run] waits for ends with an InternalError, "the
// flow's loop is closed", and so does a flow that had not begun. The
// goroutines that wait on behalf of its steps are released: the context of
// an [AsyncSteps.Await] function is cancelled, and [AwaitChan],
// [AwaitResult] and [AwaitFlow] stop waiting, and AwaitFlow cancels the
// flow it awaits, as a cancel of its step would. So are the [Mutex],
// [Throttle] and [Limiter] its flows share with other loops: the slots its
// flows hold are given back (a section's once the Await functions running
// in it have returned) and its flows leave their queues; a Throttle
// period timed on the loop still lasts its time (see [Throttle]). Once
// the loop has stopped, the AsyncSteps of a step it left waiting reports
// [AsyncSteps.IsValid] false: the step can never complete.
//
// An Await function is not stopped: its context is cancelled, and it runs
// until it returns, which Close does not wait for. A service that must
// know them finished (a dependency it closes next) calls [Loop.Wait]
// after Close: it returns once every Await function of the loop's flows
// has returned, and every goroutine the loop started has ended, or when
// its context ends first (Example_consumer).
//
// Close waits until the loop's goroutine has exited, except when called
// from a callback on that goroutine: then the loop stops as soon as the
// callback returns, and a step that called it is the last one its flow
// runs. Called from a callback of another Loop, it does not wait either,
// since that loop may be the one this loop's callbacks are closing. Close
// is idempotent. On the loop of [DefaultTool] it does nothing.
func (l *Loop) Close() {
	if l.stop() {
		l.awaitStop()
	}
}

// stop tells the loop to close, and reports whether it has a goroutine
// that Close may wait for (see awaitStop).
func (l *Loop) stop() bool {
	if l.shared || l.unmade() {
		// The process-wide loop of DefaultTool outlives every caller; a
		// zero Loop has no goroutine to wait for.
		return false
	}
	l.mu.Lock()
	if !l.closing.Load() {
		l.closing.Store(true)
		close(l.closed)
		// A flow running on the loop sees a task waiting (busy) and yields
		// at its next step; the loop, which runs no task once closing,
		// stops there.
		l.postLocked(closeMark{})
		l.sleeping.Store(false)
		l.signal()
	}
	l.mu.Unlock()
	return true
}

// awaitStop waits until the stopped loop's goroutine has exited, unless
// that could deadlock.
func (l *Loop) awaitStop() {
	if l.IsSameThread() || onSomeLoop() {
		return // waiting could deadlock: that loop may be closing this one's
	}
	<-l.done
}

// Closed reports whether [Loop.Close] has been called: from then on the
// loop accepts no callback (Immediate and Deferred return invalid
// handles) and runs no more steps, though a callback running may still
// return and Done may not be closed yet. It is true for a zero Loop and
// never for the loop of [DefaultTool]. Unlike a Deferred call, which
// wakes a sleeping loop to rearm its timer, it costs the loop nothing:
// another goroutine may poll it.
func (l *Loop) Closed() bool { return l.unmade() || l.closing.Load() }

// closedChan is toolinfo.Closing for l: a channel closed once Close has
// been called, as Closed reports it, without waking the loop. It is closed
// already for a zero Loop, and nil (never closed) for the loop of
// DefaultTool.
func (l *Loop) closedChan() <-chan struct{} {
	switch {
	case l.unmade():
		return closedChan
	case l.shared:
		return nil
	}
	return l.closed
}

// Done returns a channel that is closed once the loop has stopped: after
// [Loop.Close], when the loop's goroutine has run its last callback and
// exited (Close returns then). No callback of the loop runs after that;
// those it had accepted and not run never will. For a zero Loop, which
// never runs anything, the channel is closed already; for the loop of
// [DefaultTool], which is never closed, it never is.
func (l *Loop) Done() <-chan struct{} {
	if l.unmade() {
		return closedChan
	}
	return l.done
}

// Wait waits until the loop has stopped and nothing it started still
// runs, and returns nil then, or ctx's error if ctx ends first. Nothing
// means: no [AsyncSteps.Await] function of its flows, also one that the
// goroutine in [Root.RunHelping] runs (the function is the flow's, though
// the goroutine is the caller's), and no goroutine the loop started: its
// own, those it keeps for Await functions, those that wait on behalf of
// its steps ([AwaitChan], [AwaitResult], [AwaitFlow], [ForEachChan]),
// that of an iter.Seq2 its flows pull (its cleanup, which the close runs)
// and that which ends a flow started once the loop has stopped (its
// ExecuteThen function, its unhandled-error function), unless nothing
// else of the loop counted any more: a flow started once Wait could
// return may end after it has returned.
// Each such goroutine has then run its last code, and only its exit is
// left: a goroutine count taken once those exits are through (in a
// testing/synctest bubble, after synctest.Wait) is the count before the
// loop. Like [sync.WaitGroup.Wait], or errgroup's, it lets a service's
// shutdown know that no code of its flows outlives it, before it closes
// what that code uses:
//
//	loop.Close()
//	if err := loop.Wait(ctx); err != nil {
//		// an Await function ignores its cancelled context
//	}
//
// A function counts from the start of its step, on the loop, not from
// the start of its goroutine: a count the functions kept themselves (a
// sync.WaitGroup's Add as one begins) would miss one whose goroutine has
// not begun when its flow ends. A function that ignores its context
// delays Wait until it returns; a context that ends first ends Wait, and
// the function still counts for the next one. Wait does not close the
// loop: before [Loop.Close] it waits for Close too, since a running loop
// may start a function at any time. Goroutines may wait at once. Once
// nothing of the loop runs, Wait returns nil, also under a context that
// has ended; not as soon as the loop is done ([Loop.Done]): an Await
// function may run on after that, and a Wait whose context has ended
// then returns the context's error.
//
// Wait must not be called on the goroutine of a Loop: a callback of its
// own loop would keep the loop from stopping, and one of another Loop
// would block that loop, whose flows the functions waited for may need;
// it returns an InternalError at once, as for a nil ctx. An Await
// function of the loop's flows that calls it waits for itself, until ctx
// ends, as does the ExecuteThen function of a flow started once the loop
// has stopped, which runs off the loop's goroutine, while its goroutine
// counts (see above). On a zero Loop, which never ran anything, it
// returns nil; on the loop of [DefaultTool], which is never closed, an
// InternalError.
func (l *Loop) Wait(ctx context.Context) error {
	if err := waitMisuse("Loop.Wait", ctx); err != nil {
		return err
	}
	switch {
	case l.unmade():
		return nil
	case l.shared:
		return &Error{Code: InternalError, Info: "Loop.Wait on the loop of DefaultTool, which is never closed"}
	}
	select {
	case <-l.awaitCalls.drained:
		return nil // rather than an ended ctx's error
	default:
	}
	select {
	case <-l.awaitCalls.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitMisuse returns the error of method, Loop.Wait or LoopGroup.Wait,
// called where it must not be, or with a nil ctx; else nil.
func waitMisuse(method string, ctx context.Context) error {
	return blockMisuse(method, waitOnLoopInfo, ctx)
}

// blockMisuse returns the error of method, which blocks, called on the
// goroutine of a Loop (onLoop, after the method's name, says why not), or
// with a nil ctx; else nil.
func blockMisuse(method, onLoop string, ctx context.Context) error {
	if onSomeLoop() { // also an iter.Seq2 a flow pulls: see asLoopCallback
		return &Error{Code: InternalError, Info: method + onLoop}
	}
	if ctx == nil {
		return &Error{Code: InternalError, Info: method + nilContextInfo}
	}
	return nil
}

// waitOnLoopInfo is the info of Loop.Wait and LoopGroup.Wait called on the
// goroutine of a Loop, after the method's name.
const waitOnLoopInfo = " called on the goroutine of a Loop: it would block that loop," +
	" which the Await functions it waits for may need"

// unmade reports whether l is a zero Loop, not made by NewLoop: it has no
// goroutine, and nothing it is given runs.
func (l *Loop) unmade() bool { return l.done == nil }

// unmadeStarted marks a zero Loop given to a Root as stopped, before the
// Root can start: its flows then end as on a closed loop
// (docs/DESIGN.md#closing-a-loop), with an info of their own.
func (l *Loop) unmadeStarted() {
	l.closing.Store(true)
	l.ended.Store(true)
}

// closeMark is the task Close posts; it never runs.
type closeMark struct{}

func (closeMark) run() {}

// post queues t behind every queued task. Loop goroutine only.
func (l *Loop) post(t task) { l.local.push(t) }

// busy reports whether another task waits, here, in the inbox or among
// the flows to start.
func (l *Loop) busy() bool {
	return l.local.len() > 0 || l.posted.Load() || l.starts.Load() != nil
}

// inject queues t behind every callback already scheduled, from any
// goroutine, without the allocation of a Handle. A closed loop drops it.
func (l *Loop) inject(t task) {
	l.mu.Lock()
	if l.closing.Load() {
		l.mu.Unlock()
		return
	}
	l.postLocked(t)
	l.unlockAndWake(true)
}

// postLocked appends t to the inbox; mu must be held.
func (l *Loop) postLocked(t task) {
	if len(l.inbox) == 0 {
		l.posted.Store(true)
	}
	l.inbox = append(l.inbox, t)
}

// loopClosedInfo is the info of errLoopClosed.
const loopClosedInfo = "the flow's loop is closed"

// errLoopClosed is how a flow that its closed loop will never run ends.
func errLoopClosed() *Error {
	return &Error{Code: InternalError, Info: loopClosedInfo}
}

// endUnstarted ends fl, which its closed loop took from its queue or its
// stack of starts and will never run, unless it was ended already:
// claimAbandon decides.
func (l *Loop) endUnstarted(fl *flow) {
	if fl.claimAbandon() {
		l.endClosed(fl)
	}
}

// endClosed ends fl, which its closed loop will never run.
func (l *Loop) endClosed(fl *flow) {
	defer l.recoverPanic() // the unhandled-error function is the user's
	if err := fl.refusal(); err != nil {
		// Its context's checks come first, as PromiseContext's: it
		// ends with their error, its steps left, as it would begin.
		fl.deliver(nil, err)
		return
	}
	if l.unmade() {
		info := "the flow's Loop was not made by NewLoop"
		if l.unmadeInfo != "" {
			info = l.unmadeInfo
		}
		fl.end(nil, &Error{Code: InternalError, Info: info})
		return
	}
	fl.letGoSteps()
	fl.end(nil, errLoopClosed())
}

// watch and unwatch keep the awaited flows. The loop of DefaultTool keeps
// none: it never closes; nor could a loop keep more than maxAwaited, which
// would take hundreds of gigabytes. Loop goroutine only.
func (l *Loop) watch(fl *flow) {
	if l.shared || len(l.awaited) > maxAwaited {
		return
	}
	fl.setAwaitIndex(len(l.awaited))
	l.awaited = append(l.awaited, fl)
}

// unwatch takes fl out of the awaited flows, if it is among them, moving
// the last one into its place. A flow that never began is not: it may be
// ended off the loop, and then touches nothing of the loop's.
func (l *Loop) unwatch(fl *flow) {
	i := fl.awaitIndex()
	if i < 0 {
		return
	}
	last := len(l.awaited) - 1
	if i != last {
		moved := l.awaited[last]
		l.awaited[i] = moved
		moved.setAwaitIndex(i)
	}
	l.awaited[last] = nil
	l.awaited = l.awaited[:last]
	fl.setAwaitIndex(-1)
	if last == 0 && cap(l.awaited) > keptQueue {
		l.awaited = nil // a burst's: do not keep it while idle
	}
}

// pools is the engine state of the flows on the loop. Loop goroutine only.
func (l *Loop) pools() *enginePools { return &l.engine }

func (l *Loop) tool() Tool { return l }

func (l *Loop) selfRunInfo() string { return runOnLoopInfo }

func (l *Loop) waitRun(ctx context.Context, r *Root, w *waiter) ([]any, error) {
	return waitResult(ctx, r, w)
}

func (l *Loop) lifetime() context.Context { return l.alive }

// lifetimeDone is the Done channel of l's lifetime: closed as l stops,
// nil (never ready) for a nil l.
func (l *Loop) lifetimeDone() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.alive.Done()
}

// live returns the count of what runs for l, which Wait waits for (see
// awaitCalls.live); nil, which counts nothing, for a nil l or the loop of
// DefaultTool, which never stops.
func (l *Loop) live() *awaitCalls {
	if l == nil || l.shared {
		return nil
	}
	return &l.awaitCalls
}

// liveOf is the live count of s if it is a Loop, else nil.
func liveOf(s scheduler) *awaitCalls {
	l, _ := s.(*Loop)
	return l.live()
}

// clock is the loop's monotonic time in nanoseconds, the scale of timer dues.
func (l *Loop) clock() int64 { return int64(time.Since(l.start)) }

// lockFreePost is true: post appends to the loop's own queue, inject to
// the inbox under mu.
func (l *Loop) lockFreePost() bool { return true }

func (l *Loop) run() {
	markLoopGoroutine()
	l.gid.Store(l.enterGoroutine())
	ended := false
	defer l.leaveGoroutine(&ended)
	if l.endingCut {
		l.endTurn() // the rest of the previous goroutine's work
	}
	for !l.closing.Load() {
		l.drainInbox()
		if obs := l.engine.obs; obs != nil {
			l.observePass(obs)
		}
		l.runBatch()
		if l.ending.len() > 0 {
			l.endTurn()
		}
		l.fireTimers()
		if l.local.len() == 0 {
			l.sleep()
		}
	}
	l.shutdown()
	ended = true
}

// drainInbox moves the inbox, then the flows to start, behind the local
// queue. The stack of flows is emptied before the inbox is taken, so that
// a task posted before a flow was started is in the inbox taken, and runs
// before that flow, as Loop's doc promises.
func (l *Loop) drainInbox() {
	starts := l.takeStarts()
	l.drainPosts()
	for fl := starts; fl != nil; {
		next := unlinkStart(fl)
		l.local.push(fl)
		fl = next
	}
}

// drainPosts moves the inbox behind the local queue. The two slices are
// swapped rather than copied so that a steady flow allocates nothing.
func (l *Loop) drainPosts() {
	if !l.posted.Load() {
		return // anything racing in is seen under mu before sleeping
	}
	l.mu.Lock()
	l.inbox, l.drained = l.drained[:0], l.inbox
	l.posted.Store(false)
	l.mu.Unlock()
	for _, t := range l.drained {
		l.local.push(t)
	}
	clear(l.drained) // let the GC have the tasks
	if cap(l.drained) > keptQueue {
		l.drained = nil // a burst's buffer: do not keep it for the next one
	}
}

// runBatch runs up to loopBatch queued tasks, including those they queue.
// A panic ends the batch early; the deferred recover is paid once per batch,
// not once per task.
func (l *Loop) runBatch() {
	defer l.recoverPanic()
	for range loopBatch {
		if l.closing.Load() {
			return
		}
		t, ok := l.local.pop()
		if !ok {
			return
		}
		t.run()
	}
}

// fireTimers runs the timers due now. Those armed while it runs wait for
// the next pass, so a timer that re-arms itself with d <= 0 cannot stall
// the loop: not by its due, which is now when the clock has not moved
// since the pass began (inside a testing/synctest bubble it does not
// while the loop runs), but by its order, later than every timer armed
// before the pass.
func (l *Loop) fireTimers() {
	defer l.recoverPanic()
	now := l.clock()
	armedBefore := l.timerSeq.Load()
	l.stepTimers.stamp(now)
	// Step timeouts that the timers' callbacks arm count from the end of
	// this pass, also if a callback panics.
	defer l.stampTimers()
	for !l.closing.Load() {
		l.mu.Lock()
		e, stepTimer := l.timers.peekDue(now), false
		if s := l.stepTimers.first(); s != nil && s.due <= now && (e == nil || s.before(e)) {
			e, stepTimer = s, true
		}
		if e != nil && e.seq > armedBefore {
			e = nil // and so is every timer left that is due by now
		}
		if e != nil && stepTimer {
			l.stepTimers.take(e)
		} else if e != nil {
			l.timers.popDue(now)
		}
		l.mu.Unlock()
		if e == nil {
			return
		}
		e.fire()
	}
}

// stampTimers stamps the step timeouts armed since the last stamp, if any.
func (l *Loop) stampTimers() {
	if l.stepTimers.armed > 0 {
		l.stepTimers.stamp(l.clock())
	}
}

func (l *Loop) recoverPanic() {
	if r := recover(); r != nil {
		slog.Error("asyncsteps: panic in loop callback",
			"panic", printsafe.Sprint(r), "stack", string(debug.Stack()))
	}
}

// sleep waits for a producer's signal or the next due timer. It re-checks
// the inbox under mu, and producers look at sleeping under mu, so no task
// can slip in unnoticed between the check and the wait. startFlow pushes
// without mu, so the stack of starts is looked at again after sleeping is
// set: of two sequentially consistent stores, each then read by the other
// side, at least one is seen.
func (l *Loop) sleep() {
	// The loop's own queues are empty: give back what a burst grew them
	// to. Done before sleeping is set, so that whoever sees the loop
	// asleep finds them trimmed.
	l.drained = trimmed(l.drained)
	l.local.trim()
	l.mu.Lock()
	if len(l.inbox) > 0 || l.starts.Load() != nil || l.closing.Load() {
		l.mu.Unlock()
		return
	}
	due, timed := l.timers.nextDue()
	if s := l.stepTimers.first(); s != nil && (!timed || s.due < due) {
		due, timed = s.due, true
	}
	wait := due - l.clock()
	if timed && wait <= 0 {
		l.mu.Unlock()
		return
	}
	l.sleeping.Store(true)
	if l.starts.Load() != nil { // a flow started meanwhile (see startFlow)
		l.sleeping.Store(false)
		l.mu.Unlock()
		return
	}
	l.inbox = trimmed(l.inbox)
	l.timers.trim()
	l.stepTimers.heap.trim()
	l.mu.Unlock()
	l.wait(timed, due, wait)
	// A producer that woke the loop has cleared sleeping. After a timer,
	// it is cleared without mu: a producer that still sees it set only
	// signals once more, and one that sees it clear posted under mu
	// before the next sleep looks at the inbox under mu.
	if l.sleeping.Load() {
		l.sleeping.Store(false)
	}
}

// wait blocks until a producer's signal or, if timed, until due, wait
// from now. The timer signals wake as a producer does, so that a timed
// sleep costs a receive, not a select over two channels; and it stays
// armed when a producer's signal comes first: the loop, idle most of the
// time in a server, is woken by nearly every post while a step timeout is
// armed, and rearming the timer each time costs more than the rare early
// wake-up of a timer armed for a due time that has gone, after which the
// loop just sleeps again. A signal of the timer that comes while the
// loop runs likewise makes its next sleep return at once.
func (l *Loop) wait(timed bool, due, wait int64) {
	l.waiting.Store(true)
	defer l.waiting.Store(false)
	if timed && (due < l.timerDue || l.timerDue <= due-wait) {
		// Armed too late, or fired already (or about to): rearm it.
		if l.timer == nil {
			l.timer = time.AfterFunc(time.Duration(wait), l.signal)
		} else {
			l.timer.Reset(time.Duration(wait))
		}
		l.timerDue = due
	}
	<-l.wake
}

// shutdown drops everything still scheduled so that every handle becomes
// invalid, stops the timer and lets Close return.
func (l *Loop) shutdown() {
	if l.timer != nil {
		l.timer.Stop()
	}
	l.runBeforeStop()
	l.ended.Store(true)
	l.mu.Lock()
	// The inbox joins the local queue rather than a local variable: the
	// flows ended below run user code (unhandled-error functions, hooks),
	// and one that calls runtime.Goexit ends this goroutine; the next one
	// goes on from the loop's fields.
	for _, t := range l.inbox {
		l.local.push(t)
	}
	l.inbox = nil
	l.posted.Store(false)
	mustRun := l.timers.dropAll()
	l.mu.Unlock()
	// Kept in the loop, not in a local variable, for the same reason as
	// the inbox: the goroutine that goes on after a Goexit ends them.
	l.timedAtClose = append(l.timedAtClose, l.stepTimers.dropAll()...)
	// Mutexes and Throttles may be shared with flows of other loops: give
	// back what this loop's flows hold, then time the rest of the periods
	// it timed on another flow's tool, so that the slots and the entries
	// go to flows that can still run; and before the flows are reported
	// ended, so that whoever learns it finds them given back.
	l.leaveSections()
	for _, t := range mustRun {
		t.dropped()
	}
	for t, ok := l.local.pop(); ok; t, ok = l.local.pop() {
		if fl, ok := t.(*flow); ok {
			l.endUnstarted(fl)
		}
		l.endDropped(t)
		dropTask(t)
	}
	l.dropTurnEnds()
	l.endStarts(false)
	l.endParked()
	l.endTimed()
	l.endAwaited()
	l.endAlive()
	l.awaitCalls.close()
	l.awaitWorkers.close()
	close(l.done)
}

// endAwaited gives the waiter of each flow left waiting on the closed loop
// its Result: the flow will never go on, and a Promise that never receives
// would hold its reader forever.
func (l *Loop) endAwaited() {
	for len(l.awaited) > 0 {
		fl := l.awaited[len(l.awaited)-1]
		l.unwatch(fl)
		if !fl.done {
			l.endClosed(fl)
		}
	}
}

func dropTask(t task) {
	switch e := t.(type) {
	case *loopImmediate:
		e.drop()
	case *loopTurnEnd: // a mark of AtTurnEnd
		e.drop()
	}
}
