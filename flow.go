package asyncsteps

import (
	"context"
	"math/bits"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// burst is how many steps a flow runs in a row before it lets the loop look
// at its timers and other goroutines' posts, even when nothing else is queued.
const burst = 256

// flow is the execution of a Root, reused when the Root runs again, with
// what the Root keeps across executions (its unhandled-error function and
// State). While it runs, everything in it is owned by the loop goroutine,
// but for the step APIs' states, stop and phase.
type flow struct {
	// The fields a step touches come first, packed into the first three
	// cache lines of the Root: with many flows queued on a loop, each step
	// finds its flow cold in the cache, and every line costs a miss.

	// stop is the cancel last requested of an execution of the flow, set
	// from any goroutine and looked at before each step, so that a cancel
	// takes effect at once; one meant for an execution that has ended is
	// stale, and dropped (see stopRequest).
	stop  atomic.Pointer[stopRequest]
	sched scheduler // the Root's tool
	// phase holds flowRunning, flowAbandoned, the flow's place among its
	// Loop's awaited flows and the generation of its execution, in one
	// word so that a Cancel reads in one load whether the flow runs and
	// which execution runs; set from any goroutine.
	phase atomic.Uint64
	base  frame // level 0, whose queue is the Root's; never recycled

	wait      *waiter // set by Run, ExecuteWith and ExecuteThen, and for hooks
	unhandled func(err *Error)
	state     *State // made on first use: most flows never use it
	// promise receives the Result of an execution started by Promise or
	// Run. It is a field of its own, not in wait, so that a flow started
	// by Promise costs no allocation besides the channel.
	promise chan Result

	// nextAPI is the next step API the flow gives a step, in a chunk of
	// the flow's own, so that a step API kept by anyone keeps no other flow
	// alive; apisLeft counts it and those after it in the chunk (0: nextAPI
	// is nil, make a chunk); apiChunks is the binary logarithm of the next
	// chunk's size, 0 before the first (see newAPIChunk).
	nextAPI   *stepAPI
	apisLeft  uint16
	apiChunks uint8
	// parkNoted is set once the flow's loop notes it weakly as parked
	// (see noteParked), for as long as the Root lives.
	parkNoted bool

	// The flags of one byte each come last, where with apisLeft they
	// fill the last word, so that the Root stays within 192 bytes.

	done bool // no execution runs on the loop: not begun, or ended; on the loop
	// inCall is set while a callback of the flow runs, reent when a task
	// of the flow came while it ran (see deferTask); on the loop.
	inCall, reent bool
	// driving is set while drive runs the flow's steps, or a task that
	// takes a turn as a step does (see limitRun.slotBack), so that a flow
	// that a callback's Goexit cut off there goes on in the same turn
	// (see afterGoexit); on the loop.
	driving bool
}

// Bits of flow.phase.
const (
	flowRunning   uint64 = 1 << iota // from Execute to the end
	flowAbandoned                    // its closed loop ended the flow before it began
	// flowToolSet is set, for good, once sched holds the flow's tool:
	// at New with a tool, or by the first start of a Root without one
	// (see Root.ready). A start reads sched only once it has seen it,
	// so that starts at once of a Root without a tool never race.
	flowToolSet
)

// The bits of flow.phase from awaitShift hold the flow's index in its
// Loop's awaited flows plus one, 0 when it is not among them: written on
// the loop, by watch and unwatch only, and read there, or by end off the
// loop for a flow that never began (0). The running bit outlives them:
// end takes the flow out before it clears running, and claimStart clears
// them all (and abandoned), keeping only flowToolSet.
//
// The bits from genShift hold the generation of the flow's execution,
// which claimStart counts up as it sets running, in the same write: a
// cancel is meant for the execution whose generation it read with the
// running bit (see stopRequest). It wraps around after 2^32 executions,
// far more than run while one Cancel is between its load and its request:
// at a microsecond an execution (BenchmarkStart), over an hour of that
// Root's executions back to back while the Cancel's goroutine is held
// there. A generation of 64 bits would need a word of its own, read apart
// from the running bit, and that word would take the Root from 192 bytes
// to 200, in the heap's 208-byte size class: 16 bytes more for every
// flow started (TestParkedFlowFitsItsBudget).
const (
	awaitShift = 3
	awaitBits  = 29
	awaitMask  = (1<<awaitBits - 1) << awaitShift
	maxAwaited = 1<<awaitBits - 2 // the largest index that fits
	genShift   = awaitShift + awaitBits
)

// awaitIndex returns the flow's index in its Loop's awaited flows, or -1.
func (fl *flow) awaitIndex() int { return int(fl.phase.Load()&awaitMask>>awaitShift) - 1 }

// setAwaitIndex records i as the flow's index, or that it has none (-1).
func (fl *flow) setAwaitIndex(i int) {
	fl.phase.And(^uint64(awaitMask))
	if i >= 0 {
		fl.phase.Or(uint64(i+1) << awaitShift)
	}
}

func (fl *flow) isRunning() bool { return fl.phase.Load()&flowRunning != 0 }

// loopStopped reports whether the flow's tool is a Loop that has stopped
// running tasks for good: it ends, or has ended, every flow it leaves,
// and a call on one of their steps acts on nothing any more. It turns
// true after the functions of toolinfo.BeforeStop have run. From any
// goroutine.
func (fl *flow) loopStopped() bool {
	l, ok := fl.sched.(*Loop)
	return ok && l.ended.Load()
}

// execution returns the generation of the flow's execution, and whether
// it runs: the one running, or else the last one.
func (fl *flow) execution() (gen uint32, running bool) {
	p := fl.phase.Load()
	return uint32(p >> genShift), p&flowRunning != 0
}

// claimStart begins an execution, the next generation: it sets running
// and clears abandoned, unless the flow is running already. It writes
// nothing else: a start that loses to another one leaves the winner's
// execution as it is, its cancel requested included.
func (fl *flow) claimStart() bool {
	for {
		old := fl.phase.Load()
		if old&flowRunning != 0 {
			return false
		}
		next := uint64(uint32(old>>genShift)+1)<<genShift | old&flowToolSet | flowRunning
		if fl.phase.CompareAndSwap(old, next) {
			return true
		}
	}
}

// withdrawStart undoes a start that the flow's foreign tool did not take
// (its Immediate panicked, or called runtime.Goexit) and whose task has
// not begun the flow (see foreignTool.startFlow): the flow is not
// running, and keeps its steps.
func (fl *flow) withdrawStart() {
	fl.wait, fl.promise = nil, nil
	fl.phase.And(^flowRunning)
}

// claimAbandon marks an execution that its closed loop ends before it
// began; only the first caller gets true.
func (fl *flow) claimAbandon() bool {
	for {
		old := fl.phase.Load()
		if old&flowAbandoned != 0 {
			return false
		}
		if fl.phase.CompareAndSwap(old, old|flowAbandoned) {
			return true
		}
	}
}

// State returns the flow's State, made on first use.
func (fl *flow) State() *State {
	if fl.state == nil {
		fl.state = new(State)
	}
	return fl.state
}

// nextStart and setNextStart link a flow that waits in its Loop's stack
// of flows to start (Loop.startFlow) to the next one. The base frame is not in
// use then (run sets it up), so its impl field is the link: a Root needs
// no field of its own for it, and stays within its size class.
func (fl *flow) nextStart() *flow {
	next, _ := fl.base.impl.(*flow)
	return next
}

func (fl *flow) setNextStart(next *flow) {
	if next == nil {
		fl.base.impl = nil
		return
	}
	fl.base.impl = next
}

// flowContext is the flow's context, whose values Await passes on: the
// one its FlowStart hook returned, else Run's.
func (fl *flow) flowContext() context.Context {
	if w := fl.wait; w != nil && w.ctx != nil {
		return w.flowContext()
	}
	return context.Background()
}

// waiter is what Run, ExecuteWith and ExecuteThen (and their kin under a
// context: PromiseContext, ExecuteThenContext) add to an execution,
// and what the hooks observing it need.
type waiter struct {
	promise   chan Result     // Run: the flow's promise, which Run waits on
	ctx       context.Context // Run's context (for AwaitFlow's flow, the awaiting flow's values: see subflowContext), for its deadline, and its values unless hookCtx is set; never cancels steps by itself
	unhandled func(*Error)    // ExecuteWith: in place of the Root's own
	late      *lateRun        // set once Run's deadline has passed: waits time out (on the loop)
	helper                    // RunHelping's goroutine, which runs the Await functions (helping.go)
	hooks     *Hooks          // the hooks observing the execution (hooks.go), if any
	// unreported are the errors raised for the StepError hook, in order;
	// those reported already are nil (see reportErrors), which spares a
	// count. Behind a pointer, made at the first such error, so that the
	// waiter stays in its size class with stopWatch. On the loop.
	unreported *[]*Error
	// stopWatch ends the watch of the context of PromiseContext or
	// ExecuteThenContext (promisectx.go), under helper.mu.
	stopWatch func() bool
	// atEnd is what packages cabi and asynchttp asked to run as the
	// execution ends, one function each (see toolinfo.AtFlowEnd). On the
	// loop.
	atEnd toolinfo.FlowEnds
	// hookCtx is the context the FlowStart hook returned, if any: the
	// flow's context from then on, which its hooks get and whose values
	// its Await functions see. Only its values: ctx stays Run's, whose
	// deadline and end time the flow and stop it
	// (docs/DESIGN.md#hooks). Behind a pointer, made only for a hook
	// that returns a context, so that the waiter stays in its size class.
	hookCtx *context.Context
}

// thenWaiter is the waiter of an execution started by ExecuteThen or
// ExecuteThenContext, with the function that gets its Result. done is
// beside the waiter rather than in it, so that the waiter of Run,
// ExecuteWith and the hooks keeps its size class: only ExecuteThen pays
// for the field. refused fits in the padding of the thenWaiter's own
// size class (112 bytes).
type thenWaiter struct {
	waiter // first: thenFunc finds the thenWaiter at the waiter's address
	done   func(Result)
	// refused is set, before the execution starts, for one of
	// ExecuteThenContext under a nil context or one that had ended: it
	// runs nothing, and ends as it would begin (see refusal).
	refused bool
}

// The waiter must stay first in a thenWaiter, or thenFunc would read the
// wrong memory: this does not compile once it is not.
var _ [0]struct{} = [unsafe.Offsetof(thenWaiter{}.waiter)]struct{}{}

func newThenWaiter(done func(Result)) *waiter {
	tw := &thenWaiter{done: done}
	tw.then = true
	return &tw.waiter
}

// newThenContextWaiter returns the waiter of an execution that
// ExecuteThenContext starts under ctx, calling done (nil: none, as for
// Execute): refused for a nil ctx or one that has ended, which the
// execution's end tells done (see refusal); watched, as for
// PromiseContext, for one that can end.
func newThenContextWaiter(done func(Result), ctx context.Context) *waiter {
	tw := &thenWaiter{done: done}
	tw.then = true
	tw.ctx = ctx
	if ctx == nil || ctx.Err() != nil {
		tw.refused = true
	} else {
		tw.watched = ctx.Done() != nil
	}
	return &tw.waiter
}

// thenOf returns the thenWaiter that holds w, the waiter of ExecuteThen
// or ExecuteThenContext (w.then).
func (w *waiter) thenOf() *thenWaiter {
	// w is the first field of a thenWaiter, allocated as one.
	return (*thenWaiter)(unsafe.Pointer(w))
}

// thenFunc returns the function of ExecuteThen that gets the execution's
// Result, or nil when w is not the waiter of ExecuteThen, or that of
// ExecuteThenContext given no function.
func (w *waiter) thenFunc() func(Result) {
	if !w.then {
		return nil
	}
	return w.thenOf().done
}

// refusal returns the error with which the execution ends before its
// first step, as it would begin, when ExecuteThenContext started it under
// a nil context or one that had ended; else nil. It is the error
// PromiseContext gives such a context: an ended context's error does not
// change (nor its cause), so it is read again here rather than kept.
func (fl *flow) refusal() error {
	w := fl.wait
	if w == nil || !w.then || !w.thenOf().refused {
		return nil
	}
	if w.ctx == nil {
		return &Error{Code: InternalError, Info: "ExecuteThenContext" + nilContextInfo}
	}
	return endedContextError(w.ctx)
}

// awaitsEnd reports whether something waits for the execution's end,
// which a closing Loop must then give it: a Promise or Run, or ExecuteThen
// (or ExecuteThenContext, with a function or not: its watch of its
// context ends only with the execution).
func (fl *flow) awaitsEnd() bool {
	return fl.promise != nil || fl.wait != nil && fl.wait.then
}

// newContextWaiter returns the waiter of an execution that Run,
// RunHelping or PromiseContext starts under ctx, delivering to promise:
// watched when ctx can end, so that deliver finishes it under mu.
func newContextWaiter(promise chan Result, ctx context.Context) *waiter {
	w := &waiter{promise: promise, ctx: ctx}
	w.watched = ctx.Done() != nil
	return w
}

// inject hands h to the loop from any goroutine.
func (fl *flow) inject(h *stepAPI) { fl.sched.inject(h) }

// requeue puts the continuation at f behind the other queued work.
func (fl *flow) requeue(f *frame) {
	var t task = f.h
	if f.mode == modeBase {
		t = (*baseResume)(fl)
	}
	fl.sched.post(t)
}

// baseResume continues a flow at its base frame: the flow seen through
// another method set, so that it costs no allocation. A continuation left
// queued by an ended execution cannot run in the next one: it was queued
// before the next execution's start task, and tools run tasks in order,
// so it finds done still set.
type baseResume flow

func (t *baseResume) run() {
	fl := (*flow)(t)
	if fl.done || fl.base.over {
		return
	}
	if fl.inCall {
		fl.deferTask(t)
		return
	}
	fl.drive(&fl.base)
}

// deadBaseAPI is the step API of every base frame: dead, never given out,
// and never queued (see requeue), so that a Root needs none of its own.
var deadBaseAPI = func() *stepAPI {
	h := new(stepAPI)
	h.st.Store(stIdle | stClaim | stDone)
	return h
}()

// newStepAPI gives f a new incarnation with step API state st.
func (fl *flow) newStepAPI(f *frame, st uint32) {
	if fl.apisLeft == 0 {
		fl.newAPIChunk()
	}
	h := fl.nextAPI
	if fl.apisLeft--; fl.apisLeft > 0 {
		fl.nextAPI = (*stepAPI)(unsafe.Add(unsafe.Pointer(h), unsafe.Sizeof(stepAPI{})))
	} else {
		fl.nextAPI = nil // never past the chunk's end: that would be another object
	}
	h.f, h.fl = f, fl
	if st != 0 { // step APIs start zeroed, which is a running callback
		h.st.Store(st)
	}
	f.h = h
	f.consumed = st&stDone != 0 // a dead step API can take no completion
}

// The chunks of step APIs of a flow: the first as large as the steps the
// Root has queued, up to firstAPIChunk; then each the power of two above
// the last (twice it, mostly), at least minAPIChunk, up to maxAPIChunk.
// A flow of a few steps takes one allocation of its size; one that adds
// its steps as it goes (a request's handler: 22 step APIs for a request
// of the demo gateway) a few; a long one one per maxAPIChunk steps, as
// many as the loop-wide blocks of twice the size (with the weak pointer
// each took) cost. A long flow keeps its current chunk alive while it
// runs: at most maxAPIChunk*24 bytes, 3 KiB.
const (
	firstAPIChunk = 16
	minAPIChunk   = 8
	maxAPIChunk   = 128
)

// apiChunkFloor is the least size of a chunk: 0, but for tests that count
// a flow's allocations apart from its step APIs' (atomic: other tests'
// flows may still run on DefaultTool's loop).
var apiChunkFloor atomic.Int32

// newAPIChunk gives the flow its next chunk of step APIs. Those of the
// last chunk stay where they are: whoever keeps one keeps its chunk.
// apiChunks is the binary logarithm of the next chunk's size, 0 before the
// first.
func (fl *flow) newAPIChunk() {
	n := 1 << fl.apiChunks
	if fl.apiChunks == 0 {
		// The first step has been taken from the queue: it needs one too.
		n = min(len(fl.base.queue)+1, firstAPIChunk)
	}
	n = max(n, int(apiChunkFloor.Load()))
	fl.apiChunks = uint8(min(max(bits.Len(uint(n)), bits.Len(minAPIChunk)-1), bits.Len(maxAPIChunk)-1))
	fl.nextAPI = &make([]stepAPI, n)[0]
	fl.apisLeft = uint16(n)
}

// noteParked has the flow's loop note it weakly when its step c waits for
// another goroutine and nothing of the loop's holds the flow: no step
// timer, no waiter, no Await call in flight (see Loop.endParked). Once per
// Root: a weak pointer costs a few hundred nanoseconds.
func (fl *flow) noteParked(c *frame) {
	if fl.parkNoted || fl.awaitIndex() >= 0 {
		return
	}
	if r := c.rare; r != nil && (r.timer != nil || r.await != nil && r.await.calls != nil) {
		return
	}
	if pools := fl.sched.pools(); pools != nil && pools.track {
		fl.parkNoted = true
		pools.noteParked(fl)
	}
}

// newFrame returns a frame for s under parent, recycled when possible.
func (fl *flow) newFrame(parent *frame, s *step) *frame {
	f := fl.blankFrame()
	impl, onerror := s.parts()
	f.parent, f.mode = parent, modeStep
	if onerror != nil {
		f.rareFields().onerror = onerror
	}
	switch impl := impl.(type) {
	case StepFunc:
		f.impl = impl
	case *awaitCall:
		f.impl = StepFunc(runAwaitStep)
		f.rareFields().await = impl // the step's, until runAwaitStep claims it
		// The queue's array, the frame's own, is kept after the step is
		// taken: it must not keep the call, and what it holds, alive.
		*s = step{}
	default:
		f.impl = impl.(stepKind).newControl()
	}
	return f
}

// blankFrame returns a recycled frame, or a new one.
func (fl *flow) blankFrame() *frame { return fl.sched.pools().blankFrame() }

// blankFrame returns a frame from p (nil: no pools), or a new one.
func (p *enginePools) blankFrame() *frame {
	if p != nil {
		if f := p.takeFrame(); f != nil {
			return f
		}
	}
	return &frame{}
}

// retire recycles a finished frame unless something may still refer to it:
// a completion claimed by another goroutine and not taken by the loop,
// which the frame is left to (see abandon). The base frame is part of the
// flow. A finished branch is recycled too: the synchronization primitives
// that key holders by branch have let it go before it could finish.
func (fl *flow) retire(f *frame) {
	switch {
	case f.mode == modeBase:
		return
	case !f.consumed:
		f.abandon()
		return
	}
	if f.mode == modeBranch {
		f.queue = nil // a branch's queue is the Parallel's shared definition
	}
	fl.recycle(f)
}

// recycle blanks the finished frame f, which nothing refers to any more,
// and pools it.
func (fl *flow) recycle(f *frame) { fl.recycleTo(fl.sched.pools(), f) }

// recycleTo is recycle with the tool's pools (nil: none) given.
func (fl *flow) recycleTo(pools *enginePools, f *frame) {
	if f.mode == modeBranch && f.rare != nil && f.rare.lent {
		// A lock's key (see ownerKey), left to the lock: the collector
		// takes it (see abandon).
		f.detach()
		f.abandon()
		return
	}
	if st := fl.state; st != nil && st.stack.at == f {
		st.stack.at = nil // a recycled frame may be met again elsewhere
	}
	f.detach()
	q := f.queue[:0]
	if cap(q) < 4 {
		// appendStep would not fill it: a slice of a loop's or a
		// Parallel's definition would only keep that alive.
		q = nil
	}
	*f = frame{queue: q, rare: f.clearedRare()}
	if pools != nil {
		pools.keepFrame(f)
	}
}

// retiredFrame is the frame of every step API whose own frame has been
// blanked for another incarnation, of its flow or of another flow of the
// loop, and the parent of every finished frame that is not recycled (see
// abandon): a stale step API kept by anyone must keep no frame that
// another flow may use now, nor through it that flow. It looks over to
// the checks that find a stale step API (f.h != h, f.over), is its own
// owner so that ownerOf ends there, and nothing writes to it: every writer
// of a frame checks first that its step API is the frame's live one.
var retiredFrame = frame{mode: modeBase, over: true, consumed: true, h: deadBaseAPI}

// detach points f's current step API, if any, at retiredFrame, as f is
// blanked for a later step: no completion may be written into f any more
// (f.consumed), and other goroutines read a step API's frame only while
// it may take one. It costs one store per frame blanked, none per step.
func (f *frame) detach() {
	if h := f.h; h != nil && h != deadBaseAPI {
		h.f = &retiredFrame
	}
}

// abandon points the parent of f, a finished frame that is not recycled,
// at retiredFrame. Such a frame is left to a goroutine that has claimed
// its step's completion and not written it yet (f.consumed is false), or
// to a lock as its key; its step API, kept by anyone, must keep no frame
// that the loop gives to another flow's step, nor through it that flow.
// Only args is written to f now; every reader through the step API finds
// f over first, and ownerOf ends at retiredFrame.
func (f *frame) abandon() { f.parent = &retiredFrame }

// dropQueue empties the queue of a frame that an error or a cancel
// unwinds. The steps it skips are cleared from the frame's own array, so
// that the frame, once pooled, keeps none of their functions alive; a
// loop's or a section's array is let go, so that it keeps its owner alive
// neither. A branch's or the base frame's may be a shared definition: it
// is only emptied.
func (f *frame) dropQueue() {
	switch {
	case f.mode == modeBase:
		dropParallels(f.queue) // a Root's: no execution will run them
		f.queue = f.queue[:0]
	case f.mode != modeStep && f.mode != modeHandler:
		f.queue = f.queue[:0]
	case f.fn() != nil:
		clear(f.queue)
		f.queue = f.queue[:0]
	default:
		f.queue = nil
	}
}

// drive runs the flow from f for as long as it goes on without waiting,
// yielding to other queued work after each step (the order of the FutoIn
// reference implementations; see Loop.SetBursts for the opt-out) and after
// a burst.
func (fl *flow) drive(f *frame) { fl.steps(f, 0) }

// steps is drive's loop, from f, n steps into the flow's turn: the flow
// yields before its next step once it has run one.
func (fl *flow) steps(f *frame, n int) {
	fl.driving = true
	for ; f != nil; n++ {
		if req := fl.stop.Load(); req != nil && fl.stopsThis(req) {
			fl.cancel(req.cause)
			break
		}
		if n > 0 && (n == burst || fl.sched.busy() && !fl.bursting(f)) {
			fl.requeue(f)
			break
		}
		f = fl.proceed(f)
	}
	fl.driving = false
}

// proceed runs the next sub-step of f, or completes f when it has none left.
// It returns where the flow goes on, or nil when it waits.
func (fl *flow) proceed(f *frame) *frame {
	if fl.done || f.over {
		return nil
	}
	if f.unstarted {
		return fl.startBranch(f)
	}
	if len(f.queue) == 0 {
		ctl := f.ctl()
		switch {
		case ctl != nil && ctl.drained(f):
			return f
		case ctl == nil && f.settled():
			return fl.stepDone(f, f.args)
		}
		return fl.finish(f, f.args)
	}
	s := &f.queue[0]
	var c *frame
	pools := fl.sched.pools()
	fn := s.plain()
	if fn != nil {
		// The common step: a StepFunc without an error handler.
		c = pools.blankFrame()
		c.parent, c.impl = f, s.impl
	} else {
		c = fl.newFrame(f, s)
	}
	switch {
	case len(f.queue) == 1 && (f.mode == modeStep || f.mode == modeHandler):
		// The frame's own array, its last step taken: the next Add (of
		// this frame, or of a step that recycles it) fills it from that
		// step's place on, instead of allocating an array. The step
		// taken is cleared, so that the array, kept by the frame in the
		// pool, keeps no step's function alive; but a loop's, which
		// queues the same iteration step again.
		if _, loop := f.impl.(*loopRun); !loop {
			f.queue[0] = step{}
		}
		f.queue = f.queue[:0]
	case f.mode == modeStep || f.mode == modeHandler:
		// The frame's own array, or a section's, whose steps run once:
		// the step taken is cleared, as above.
		f.queue[0] = step{}
		f.queue = f.queue[1:]
	default:
		f.queue = f.queue[1:] // no clearing: the slice may be a shared definition
		if len(f.queue) == 0 && f.mode == modeBase {
			f.queue = nil // a parked flow keeps no step array alive
		}
	}
	f.active = c
	args := f.args
	f.args = nil
	if fn == nil {
		if ctl := c.ctl(); ctl != nil {
			fl.newStepAPI(c, stIdle|stClaim|stDone)
			return ctl.begin(c)
		}
		fn = c.fn()
	}
	fl.newStepAPI(c, 0)
	fl.call(c, fn, args)
	if c.succeeded && c.err == nil && c.h.st.Load() == 0 {
		// settle's commonest case, stepDone, with the pools at hand.
		c.h.st.Store(stIdle | stClaim | stDone)
		f.active, f.args = nil, c.args
		fl.recycleTo(pools, c)
		return f
	}
	return fl.settle(c)
}

// startBranch runs the step of a parallel branch frame that runs its step
// itself. The frame's step API has not been given out yet: it comes to life
// for the callback, so the parallel still knows the branch by it.
func (fl *flow) startBranch(b *frame) *frame {
	b.unstarted = false
	b.consumed = false
	b.h.st.Store(0)
	fl.call(b, b.fn(), nil)
	return fl.settle(b)
}

// call runs a step callback (see invoke), and goes on with the flow from
// the next goroutine when invoke recovered an abort that a deferred call
// raised as the callback was leaving by runtime.Goexit (see
// resumeAfterAbort). A frame of its own, outside invoke's: its defer is
// open-coded, and with the frame costs a few nanoseconds per callback and
// no allocation.
//
//go:noinline
func (fl *flow) call(c *frame, fn StepFunc, args []any) {
	aborted := false
	defer func() {
		if aborted {
			fl.resumeAfterAbort(c)
		}
	}()
	fl.invoke(c, fn, args, &aborted)
	aborted = false
}

// callHandler runs an error handler like call runs a step.
//
//go:noinline
func (fl *flow) callHandler(c *frame, fn ErrorFunc, code string) {
	aborted := false
	defer func() {
		if aborted {
			fl.resumeAfterAbort(c)
		}
	}()
	fl.invokeHandler(c, fn, code, &aborted)
	aborted = false
}

// invoke runs a step callback, turning an abort, a panic or a Goexit into
// c.err, and sets *aborted when it recovered an abort. A callback that
// returns costs no recover: the deferred function looks for a panic or a
// Goexit only when the callback did not return.
// Never inlined: invokerOnStack finds it by its return address.
//
//go:noinline
func (fl *flow) invoke(c *frame, fn StepFunc, args []any, aborted *bool) {
	returned := false
	fl.inCall = true
	defer func() {
		if !returned {
			*aborted = fl.recoverInto(c, recover())
		}
	}()
	fn(c.h, args...)
	returned = true
	fl.returned(c)
}

// invokeHandler runs an error handler like invoke runs a step.
// Never inlined: invokerOnStack finds it by its return address.
//
//go:noinline
func (fl *flow) invokeHandler(c *frame, fn ErrorFunc, code string, aborted *bool) {
	returned := false
	fl.inCall = true
	defer func() {
		if !returned {
			*aborted = fl.recoverInto(c, recover())
		}
	}()
	fn(c.h, code)
	returned = true
	fl.returned(c)
}

// returned ends the call of c's callback that returned.
func (fl *flow) returned(c *frame) {
	fl.inCall = false
	if fl.reent {
		fl.afterReentry(c)
	}
}

// recoverInto ends the call of c's callback that did not return: it
// panicked with r, or, with r nil, called runtime.Goexit, whose goroutine
// ends whatever is done here, so the flow goes on from a task that settles
// c first. It reports whether r was an abort, which may have been raised
// by a deferred call of a Goexit too (see resumeAfterAbort).
func (fl *flow) recoverInto(c *frame, r any) (aborted bool) {
	fl.inCall = false
	if fl.reent {
		defer fl.afterReentry(c) // the callback's own error comes first
	}
	if r == nil {
		c.err, c.handling = fl.goexitError(), false
		fl.afterGoexit(&goexitResume{h: c.h, kind: resumeSettle})
		return false
	}
	if _, ok := r.(abortSignal); ok {
		if c.err == nil || c.handling {
			fl.abortedByOther(c)
		}
		return true
	}
	c.err, c.handling = fl.panicked(r), false
	if goexitPending(c.err) {
		fl.afterGoexit(&goexitResume{h: c.h, kind: resumeSettle})
	}
	return false
}

// resumeAfterAbort queues the settling of c from the next goroutine: an
// abort of its callback (an Error, Break or Continue, or another flow's
// abort) was recovered, and yet the call of the callback never returned,
// for the abort was raised by a deferred call as the callback was leaving
// by runtime.Goexit, which went on once the abort was recovered. The step
// ends as the abort left it, as after a deferred call that panics there
// (see goexitPending): the deferred call had the last word. An abort
// carries no stack to find the Goexit in, and taking one at every Error,
// Break or Continue would cost the commonest raise; the caller's deferred
// call sees it instead, having not regained control.
func (fl *flow) resumeAfterAbort(c *frame) {
	fl.afterGoexit(&goexitResume{h: c.h, kind: resumeSettle})
}

// abortedInfo is the info of the step that abortedByOther fails.
const abortedInfo = "the callback was aborted by its call on the AsyncSteps of another flow's step: " +
	"the error was raised in that flow's running callback"

// abortedByOther settles c, whose callback an abort unwound though c raised
// no error: the abort was another step's. The callback called the
// AsyncSteps of a step of another flow whose callback runs, under it on
// this goroutine (a TestTool driven from a callback) or on another Loop,
// and which the engine cannot tell from that callback's own call: the
// error was raised there (docs/DESIGN.md#step-api-states). c fails with
// InternalError rather than go on as if its callback had returned, unless
// it has completed already, as a raise of its own would leave it.
func (fl *flow) abortedByOther(c *frame) {
	if st := c.h.st.Load(); st&(stClaim|stDone) != 0 || st == 0 && c.succeeded {
		return
	}
	err := &Error{Code: InternalError, Info: abortedInfo, Cause: c.handledCause(InternalError)}
	fl.noteError(err, err)
	c.err, c.handling = err, false
}

// panicked turns the recovered value of a callback's panic into the
// InternalError it raises, and records it. The value is printed only
// where printing it cannot crash the process.
func (fl *flow) panicked(r any) *Error {
	err := panicError(r, debug.Stack())
	fl.noteError(err, err.Cause)
	return err
}

// panicError is panicked's InternalError for the panic r that stack
// shows, not recorded yet (see faultException).
func panicError(r any, stack []byte) *Error {
	p := &PanicError{Value: r, Stack: stack}
	return &Error{Code: InternalError, Info: printsafe.Sprint(r), Cause: p}
}

// faultException is what the State's LastException records for err, the
// InternalError of a callback's fault: the *PanicError of a panic, else
// err itself.
func faultException(err *Error) error {
	if p, ok := err.Cause.(*PanicError); ok {
		return p
	}
	return err
}

// settle looks at how c's callback ended and returns where the flow goes on.
func (fl *flow) settle(c *frame) *frame {
	if c.h.st.Load() == 0 {
		// It never waited: no other goroutine may complete it.
		c.h.st.Store(stIdle | stClaim | stDone)
		c.consumed = true
		switch {
		case c.err != nil && !c.handling:
			return fl.fail(c, c.err)
		case len(c.queue) > 0:
			return c
		case c.succeeded && (c.mode == modeStep || c.mode == modeHandler):
			return fl.stepDone(c, c.args)
		case c.succeeded:
			return fl.finish(c, c.args)
		case c.mode == modeHandler:
			return fl.handlerReturned(c)
		default:
			return fl.finish(c, nil)
		}
	}
	st := c.h.st.Or(stIdle)
	switch {
	case c.err != nil && !c.handling:
		return fl.fail(c, c.err)
	case len(c.queue) > 0 && st&(stClaim|stWait) == stClaim:
		// Failed from another goroutine though it never waited
		// (failFromElsewhere): that error, delivered by the loop, names
		// the call. The sub-steps do not run.
		c.dropQueue()
		c.waiting = true
		fl.noteParked(c) // a closing loop drops that delivery
		return nil
	case len(c.queue) > 0:
		if old := c.killState(); old&stClaim != 0 {
			// Success or Error came from another goroutine after Add,
			// also after the Or above: the kill decides, so that no
			// completion is left writing args while the sub-steps run.
			return fl.fail(c, fl.misuseError(completedAfterAdd(c, old)))
		}
		return c
	case st&stReady != 0:
		return fl.completed(c)
	case st&(stClaim|stWait) != 0:
		c.waiting = true
		if r := c.rare; r != nil && r.atWait != nil {
			// Before the loop may run a timer of the step's.
			fn := r.atWait
			r.atWait = nil
			fn()
		}
		fl.noteParked(c)
		if w := fl.wait; w != nil && w.late != nil {
			fl.sched.post((*expiryTask)(c.h)) // see Root.stopFor
		}
		return nil
	case c.mode == modeHandler:
		return fl.handlerReturned(c)
	default:
		return fl.finish(c, nil)
	}
}

// completedAfterAdd is the info of docs/DESIGN.md#completing-after-add for a completion that
// another goroutine claimed after the callback had added steps (st: the
// step API's state then). It names the call once the completion is written.
func completedAfterAdd(c *frame, st uint32) string {
	const after = " called after Add in the same callback"
	switch {
	case st&stReady == 0:
		return "Success or Error" + after
	case st&stFailed != 0:
		return "Error(" + c.args[0].(*Error).Code + ")" + after
	}
	return "Success" + after
}

// handlerReturned lets the error that handler frame c took go on: its
// handler returned without completing.
func (fl *flow) handlerReturned(c *frame) *frame {
	err := c.err
	p := c.parent
	fl.release(c)
	fl.climb(c)
	fl.retire(c)
	return fl.unwind(p, err)
}

// completed applies the Success or Error written to c. A completion
// that Run's deadline found on its way (stLate) wins: the kill queues the
// deadline's timeout, so that the flow times out where it has got to once
// the task that applies it has run, waiting or not, as it would had the
// deadline come after it (see frame.killState).
func (fl *flow) completed(c *frame) *frame {
	st := c.h.st.Load()
	c.kill()
	if st&stFailed != 0 {
		return fl.completedRarely(c)
	}
	return fl.finish(c, c.args)
}

// completedRarely is completed for an Error.
func (fl *flow) completedRarely(c *frame) *frame {
	err := c.args[0].(*Error)
	c.args = nil
	exception := exc(err)
	if c.handling && err.Cause == nil {
		// Raised from outside the callback of an error handler that
		// waited: made by the engine for it, seen by nobody yet.
		err.Cause = c.handledCause(err.Code)
	}
	fl.noteError(err, exception)
	return fl.fail(c, err)
}

func (fl *flow) misuseError(info string) *Error {
	err := &Error{Code: InternalError, Info: info}
	fl.noteError(err, err)
	return err
}

// noteError records err in the state: spec 1.7 and docs/DESIGN.md#error-info-and-last-exception.
func (fl *flow) noteError(err *Error, exc error) {
	s := fl.State()
	s.ErrorInfo = err.Info
	s.LastException = exc
	if w := fl.wait; w != nil && w.hooks != nil {
		w.noteUnreported(err)
	}
}

// finish completes f with args and returns where the flow goes on.
func (fl *flow) finish(f *frame, args []any) *frame {
	if f.fast {
		// The branch's step and the branch itself are two levels, as in
		// any other branch, and complete a turn apart: the order of the
		// flows does not depend on how a branch is run.
		f.fast = false
		fl.release(f)
		f.over = false
		return f
	}
	fl.release(f)
	p := f.parent
	switch f.mode {
	case modeBase:
		fl.end(args, nil)
		return nil
	case modeBranch:
		next := branchDone(f)
		fl.retire(f)
		return next
	}
	if ctl := f.ctl(); ctl != nil {
		if !passesArgs(ctl) {
			args = nil // loops and parallels give no args to the next step
		}
		f.queue = nil // a loop's array, in its loopRun: not for later steps
	}
	fl.retire(f)
	p.active = nil
	p.args = args
	return p
}

// stepDone is finish for a step or handler frame c that runs no built-in
// step and has nothing left to release: its callback completed it without
// having waited (a timer or a cancel handler makes a step wait; the failed
// step's were released before its handler ran), or its sub-steps are done
// and it is settled.
func (fl *flow) stepDone(c *frame, args []any) *frame {
	p := c.parent
	fl.recycle(c)
	p.active = nil
	p.args = args
	return p
}

// settled reports whether the step or handler frame f, whose sub-steps
// are done, can finish through stepDone: no other goroutine may write to
// it, and it holds no timer and no cancel handler.
func (f *frame) settled() bool {
	r := f.rare
	return f.consumed && (r == nil || r.timer == nil && r.onCancel == nil) && (f.mode == modeStep || f.mode == modeHandler)
}

// release ends f's own resources: its timer, its cancel handler, and
// what its built-in step's execution holds.
func (fl *flow) release(f *frame) {
	f.over = true
	f.kill()
	if ctl := f.ctl(); ctl != nil {
		ctl.letGo()
	}
	if r := f.rare; r != nil {
		if r.timer != nil {
			fl.disarm(f)
		}
		if r.await != nil && r.onerror != nil && r.user == 0 {
			// The frame of the error handler that may take f's place
			// runs the engine's step function: it names the call's
			// function in AsyncStack only through user.
			r.user = f.awaitPC()
		}
		r.onCancel, r.await, r.atWait = nil, nil, nil
	}
}

// letGoSteps lets go of what the built-in steps still running in fl
// hold (see control.letGo), as its closed loop ends it: nothing releases
// their frames then, and a model keeps the control of a step's first
// execution. Loop goroutine only, or a flow that never began.
func (fl *flow) letGoSteps() {
	if fl.base.active == nil {
		return // the common case: between two steps, or never begun
	}
	for _, f := range cancelOrder(nil, &fl.base) {
		if ctl := f.ctl(); ctl != nil {
			ctl.letGo()
		}
	}
}

// end delivers the flow's outcome; nothing of the flow runs afterwards.
func (fl *flow) end(args []any, err error) {
	fl.done = true
	dropParallels(fl.base.queue) // steps left by an error, a cancel or a misuse never run
	fl.base.queue = nil
	// The last level-0 step's success arguments: the Root lives on, and
	// must not keep them, nor what their slice is part of (the call of an
	// Await function, which is its context, with the values of Run's).
	fl.base.args = nil
	if w := fl.wait; w != nil {
		// Only an execution with a waiter pays for this test: one of
		// Execute has none unless package cabi or asynchttp set atEnd.
		if w.atEnd.Any() {
			w.atEnd.Run()
		}
		if w.hooks != nil && (w.hooks.FlowEnd != nil || fl.hasUnreported()) {
			// The hooks are the user's: the outcome is delivered however
			// they end, also when one calls runtime.Goexit, and FlowEnd
			// sees the flow end after StepError has seen its errors.
			defer fl.deliver(args, err)
			defer w.observeEnd(err)
			fl.reportErrors(resumePoint{})
			return
		}
	}
	fl.deliver(args, err)
}

// atFlowEnd is toolinfo.AtFlowEnd: it makes end's function run, on the
// loop, as the execution that the step of as belongs to ends, once however
// often it is given. It reports false, keeping nothing, when as is not
// such a step, or one the engine cannot reach (a decorator without
// Unwrap), or its step is over, or end has no function. A waiter is made
// for an execution that has none: one of Execute, whose end then reads
// the waiter's fields, as one of Run or ExecuteWith does.
func atFlowEnd(as any, end *toolinfo.FlowEnd) bool {
	a, ok := as.(AsyncSteps)
	if !ok || end == nil || end.Fn == nil {
		return false
	}
	h := unwrapAny(a)
	if h == nil || h.st.Load()&(stClaim|stDone) != 0 || h.fl.done {
		return false // over: its execution may have ended, another may run
	}
	fl := h.fl
	if fl.wait == nil {
		fl.wait = &waiter{}
	}
	fl.wait.atEnd.Keep(end)
	return true
}

// atWait is toolinfo.AtWait: it keeps fn in the frame of as, a step whose
// callback runs now on the loop, for settle to run as the step begins to
// wait. It reports false, keeping nothing, for any other value: off the
// loop the frame is not the caller's to write.
func atWait(as any, fn func()) bool {
	h := stepAPIOf(as)
	if h == nil || h.st.Load()&(stIdle|stDone) != 0 || !h.fl.sched.IsSameThread() || h.f.h != h {
		return false
	}
	h.f.rareFields().atWait = fn
	return true
}

// stepRunning is toolinfo.StepRunning: the frame of h still runs this
// incarnation, in a run of its flow that has not ended. A frame is
// recycled, and its flow run again, only on the flow's loop, where this
// is called.
func stepRunning(as any) (running, known bool) {
	h := stepAPIOf(as)
	if h == nil {
		return false, false
	}
	f := h.f
	return f.h == h && !f.over && !h.fl.done, true
}

// callbackRuns is toolinfo.CallbackRuns: the step API of as is neither
// idle nor dead, which it is from the moment its callback returns.
func callbackRuns(as any) (runs, known bool) {
	h := stepAPIOf(as)
	if h == nil {
		return false, false
	}
	return h.st.Load()&(stIdle|stDone) == 0, true
}

// validOffLoop is toolinfo.ValidOffLoop: IsValid without the read of
// f.succeeded, which the running callback writes.
func validOffLoop(as any) (valid, known bool) {
	h := stepAPIOf(as)
	if h == nil {
		return false, false
	}
	return h.st.Load()&(stClaim|stDone) == 0, true
}

// claimSuccess is toolinfo.ClaimSuccess: a claim of a success from
// another goroutine (see succeedOutside), whose args claimedSuccess
// writes later, on the loop; a step that waits only (see claimWaiting).
func claimSuccess(as any) toolinfo.Claimed {
	h := claimWaiting(as, 0)
	if h == nil {
		return nil
	}
	return claimedSuccess{h}
}

// claimedSuccess is the success claimed by claimSuccess on h.
type claimedSuccess struct{ h *stepAPI }

// Void implements toolinfo.Claimed: the loop killed the step since the
// claim, or its flow ended. Its frame, which a claim not written keeps
// from being recycled, still holds h.
func (c claimedSuccess) Void() bool {
	return c.h.st.Load()&stDone != 0 || c.h.fl.done
}

// Deliver implements toolinfo.Claimed, as Success from outside the
// step's callback writes a claimed success (succeedOutside), whichever
// tool calls it.
func (c claimedSuccess) Deliver(args []any) {
	if c.Void() {
		return
	}
	c.h.f.args = args
	c.h.publish(false)
}

// stepLive is toolinfo.StepLive: the frame of h still runs this
// incarnation, whether or not its flow has ended (a closed loop ends a
// flow without touching its frames), and the step has no success: none
// claimed from outside (waiting, a claim without the death of the step
// API: the death alone marks a step with sub-steps), and none made by its
// running callback. An error claimed from outside and not applied leaves
// the step live: the step has not ended, and its cancel handler is due,
// as a cancel would run it (see frame.kill).
func stepLive(as any) (live, known bool) {
	h := stepAPIOf(as)
	if h == nil {
		return false, false
	}
	f := h.f
	if f.h != h || f.over {
		return false, true
	}
	st := h.st.Load()
	return st&(stClaim|stDone|stFailed) != stClaim && !(st == 0 && f.succeeded), true
}

// stepAPIOf returns the step API that as, given to a toolinfo hook, is or
// unwraps to, or nil.
func stepAPIOf(as any) *stepAPI {
	a, ok := as.(AsyncSteps)
	if !ok {
		return nil
	}
	return unwrapAny(a)
}

// unwrapAny returns the step API that as is, or that the decorator as
// wraps, directly or through other decorators, also once the step's
// callback has returned (unlike unwrapStep): atFlowEnd reads nothing of
// its frame, only its state and its flow, on the flow's loop. It returns
// nil when as does not unwrap to a step API.
func unwrapAny(as AsyncSteps) *stepAPI {
	for range maxUnwrap {
		if h, ok := as.(*stepAPI); ok {
			return h
		}
		u, ok := as.(Unwrapper)
		if !ok {
			return nil
		}
		as = u.Unwrap()
	}
	return nil
}

// deliver hands the ended flow's outcome to its Promise or Run, or to
// the function of ExecuteThen, or its error to the unhandled-error
// function, and lets the Root run again.
func (fl *flow) deliver(args []any, err error) {
	// Once running is false the Root may be executed again from another
	// goroutine, which writes wait: read it first.
	promise := fl.promise
	unhandled := fl.unhandled
	var then func(Result)
	if w := fl.wait; w != nil {
		if w.unhandled != nil {
			unhandled = w.unhandled
		}
		then = w.thenFunc()
		w.ended = true
	}
	if fl.awaitsEnd() { // ExecuteThenContext's with no function too
		fl.sched.unwatch(fl) // see run
	}
	if w := fl.wait; w != nil && w.watched {
		w.endWatch()
	}
	if t, ok := fl.sched.(*TestTool); ok {
		// Before running is cleared: no continuation of the next
		// execution can be queued yet.
		t.dropContinuations(fl)
	}
	fl.wait, fl.promise = nil, nil
	fl.phase.And(^flowRunning)
	switch {
	case promise != nil:
		promise <- Result{Args: args, Err: err}
	case then != nil:
		// Last, as unhandled below: the Root may run again from it, and
		// a panic or a Goexit in it leaves nothing of the engine undone.
		then(Result{Args: args, Err: err})
	default:
		if e, ok := err.(*Error); ok {
			unhandled(e)
		}
	}
}

// run begins the flow: it runs the flow's first steps, or fails it at once
// for a wrong use of the Root before Execute.
func (fl *flow) run() {
	// Only a closed loop's shutdown, or a start that came after it, ends a
	// flow before it begins (endUnstarted): on the flows it took from the
	// queue and the stack, which this loop will never run. So this only
	// reads the bit, and costs no atomic write.
	if fl.phase.Load()&flowAbandoned != 0 {
		return // ended already: its loop was closed
	}
	if err := fl.refusal(); err != nil {
		// Before the hooks and the steps, which it leaves to the next
		// execution, as PromiseContext leaves them (see
		// thenWaiter.refused).
		fl.deliver(nil, err)
		return
	}
	if fl.awaitsEnd() {
		fl.sched.watch(fl)
	}
	fl.done = false
	// A Goexit that no resumption follows (in what the last execution's
	// end called in its drive: the StepError or FlowEnd hook, the
	// function of ExecuteThen, the unhandled-error function) leaves
	// driving set.
	fl.driving = false
	fl.dropStale()
	fl.base = frame{mode: modeBase, queue: fl.base.queue, err: fl.base.err, h: deadBaseAPI, consumed: true}
	if h := fl.sched.pools().hooks(); h != nil {
		if err := fl.observeStart(h); err != nil {
			fl.failStart(err)
			return
		}
	}
	if err := fl.base.err; err != nil {
		fl.base.err = nil
		fl.noteError(err, err)
		fl.end(nil, err)
		return
	}
	if fl.expiredAtStart() {
		return
	}
	fl.drive(&fl.base)
}

func (fl *flow) newInstance() *Root { return newRoot(fl.sched, fl.unhandled) }

// onOneLoop reports whether the flows a and b run on the same Loop. Only a
// Loop is matched: for a TestTool, posting and injecting are one queue, and
// a foreign Tool need not be comparable (its scheduler is compared only
// with one of another type, which never panics).
func onOneLoop(a, b *flow) bool {
	return a.sched.lockFreePost() && a.sched == b.sched
}
