package asyncsteps

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// burst is how many steps a flow runs in a row before it lets the loop look
// at its timers and other goroutines' posts, even when nothing else is queued.
const burst = 256

// flow is the execution of a Root, reused when the Root runs again, with
// what the Root keeps across executions (its unhandled-error function and
// State). While it runs, everything in it is owned by the loop goroutine,
// but for the handles' states, stop and phase.
type flow struct {
	// The fields a step touches come first, packed into the first three
	// cache lines of the Root: with many flows queued on a loop, each step
	// finds its flow cold in the cache, and every line costs a miss.

	// baseHandle is the dead handle of the base frame, which queues the
	// base frame's continuations, in every execution. A continuation left
	// queued by an ended execution cannot run in the next one: it was
	// queued before the next execution's start task, and tools run tasks
	// in order, so it finds done still set.
	baseHandle handle
	// stop is the cause of a requested cancel, set from any goroutine and
	// looked at before each step, so that a cancel takes effect at once.
	stop  atomic.Pointer[error]
	sched scheduler // the Root's tool
	// phase holds flowRunning and flowAbandoned, in one word so that the
	// Root stays within 208 bytes; set from any goroutine.
	phase atomic.Uint32
	done  bool  // no execution runs on the loop: not begun, or ended; on the loop
	base  frame // level 0, whose queue is the Root's; never recycled

	wait      *waiter // set by Promise and Run
	unhandled func(err *Error)
	state     *State // made on first use: most flows never use it
}

// Bits of flow.phase.
const (
	flowRunning   uint32 = 1 << iota // from Execute to the end
	flowAbandoned                    // its closed loop ended the flow before it began
)

func (fl *flow) isRunning() bool { return fl.phase.Load()&flowRunning != 0 }

// claimStart begins an execution: it sets running and clears abandoned, unless
// the flow is running already.
func (fl *flow) claimStart() bool {
	for {
		old := fl.phase.Load()
		if old&flowRunning != 0 {
			return false
		}
		if fl.phase.CompareAndSwap(old, flowRunning) {
			return true
		}
	}
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

// runContext is Run's context, whose values Await passes on.
func (fl *flow) runContext() context.Context {
	if fl.wait != nil && fl.wait.ctx != nil {
		return fl.wait.ctx
	}
	return context.Background()
}

// waiter is what Promise, Run and ExecuteWith add to an execution.
type waiter struct {
	promise   chan Result     // Promise and Run: the Result goes here
	ctx       context.Context // Run's context, for its values; never cancels steps by itself
	watched   *Loop           // the Loop that keeps the flow in awaited, if any
	unhandled func(*Error)    // ExecuteWith: in place of the Root's own
}

// run lets a handle be queued on a loop as is: it continues the flow at the
// handle's frame, or delivers the step's external completion. A handle whose
// frame has moved on to another incarnation is stale and does nothing.
func (h *handle) run() {
	f, fl := h.f, h.fl
	if f.h != h || f.over || fl.done {
		return
	}
	if f.waiting {
		f.waiting = false
		fl.drive(fl.completed(f))
		return
	}
	fl.drive(f)
}

// inject hands h to the loop from any goroutine.
func (fl *flow) inject(h *handle) { fl.sched.inject(h) }

// requeue puts the continuation at f behind the other queued work.
func (fl *flow) requeue(f *frame) { fl.sched.post(f.h) }

// newHandle gives f a new incarnation with handle state st.
func (fl *flow) newHandle(f *frame, st uint32) {
	var h *handle
	if st := fl.sched.engineState(); st != nil {
		h = st.nextHandle()
	} else {
		h = new(handle)
	}
	h.f, h.fl = f, fl
	if st != 0 { // handles start zeroed, which is a running callback
		h.st.Store(st)
	}
	f.h = h
	f.consumed = st&stDone != 0 // a dead handle can take no completion
}

// newFrame returns a frame for s under parent, recycled when possible.
func (fl *flow) newFrame(parent *frame, s *step) *frame {
	f := fl.blankFrame()
	impl, onerror := s.parts()
	f.parent, f.onerror, f.mode = parent, onerror, modeStep
	if fn, ok := impl.(StepFunc); ok {
		f.impl = fn
	} else {
		f.impl = impl.(stepKind).newControl()
	}
	return f
}

// blankFrame returns a recycled frame, or a new one.
func (fl *flow) blankFrame() *frame {
	if st := fl.sched.engineState(); st != nil {
		if f := st.takeFrame(); f != nil {
			return f
		}
	}
	return &frame{}
}

// retire recycles a finished frame unless something may still refer to it:
// a completion claimed by another goroutine and not taken by the loop. The
// base frame is part of the flow. A finished branch is recycled too: the
// synchronization primitives that key holders by branch have let it go
// before it could finish.
func (fl *flow) retire(f *frame) {
	if f.mode == modeBase || !f.consumed {
		return
	}
	q := f.queue[:0]
	if f.mode == modeBranch {
		q = nil // a branch's queue is the Parallel's shared definition
	}
	*f = frame{queue: q}
	if st := fl.sched.engineState(); st != nil {
		st.keepFrame(f)
	}
}

// drive runs the flow from f for as long as it goes on without waiting,
// yielding to other queued work after each step (the order of the FutoIn
// reference implementations; see Loop.SetBursts for the opt-out) and after
// a burst.
func (fl *flow) drive(f *frame) {
	for n := 0; f != nil; n++ {
		if cause := fl.stop.Load(); cause != nil {
			fl.cancel(*cause)
			return
		}
		if n > 0 && (n == burst || fl.sched.busy() && !fl.bursting(f)) {
			fl.requeue(f)
			return
		}
		f = fl.proceed(f)
	}
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
		if ctl := f.ctl(); ctl != nil && ctl.drained(f) {
			return f
		}
		return fl.finish(f, f.args)
	}
	c := fl.newFrame(f, &f.queue[0])
	switch {
	case len(f.queue) == 1 && (f.mode == modeStep || f.mode == modeHandler):
		// The frame's own array, its last step taken: the next Add (of
		// this frame, or of a step that recycles it) fills it from that
		// step's place on, instead of allocating an array.
		f.queue = f.queue[:0]
	default:
		f.queue = f.queue[1:] // no clearing: the slice may be a shared definition
		if len(f.queue) == 0 && f.mode == modeBase {
			f.queue = nil // a parked flow keeps no step array alive
		}
	}
	f.active = c
	args := f.args
	f.args = nil
	if ctl := c.ctl(); ctl != nil {
		fl.newHandle(c, stIdle|stClaim|stDone)
		return ctl.begin(c)
	}
	fl.newHandle(c, 0)
	fl.call(c, c.fn(), args)
	return fl.settle(c)
}

// startBranch runs the step of a parallel branch frame that runs its step
// itself. The frame's handle has not been given out yet: it comes to life
// for the callback, so the parallel still knows the branch by it.
func (fl *flow) startBranch(b *frame) *frame {
	b.unstarted = false
	b.consumed = false
	b.h.st.Store(0)
	fl.call(b, b.fn(), nil)
	return fl.settle(b)
}

// call runs a step callback, turning an abort or a panic into c.err.
func (fl *flow) call(c *frame, fn StepFunc, args []any) {
	defer fl.recoverInto(c)
	fn(c.h, args...)
}

// callHandler runs an error handler like call runs a step.
func (fl *flow) callHandler(c *frame, fn ErrorFunc, code string) {
	defer fl.recoverInto(c)
	fn(c.h, code)
}

func (fl *flow) recoverInto(c *frame) {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(abortSignal); ok {
		return
	}
	c.err, c.handling = fl.panicked(r), false
}

// panicked turns the recovered value of a callback's panic into the
// InternalError it raises, and records it.
func (fl *flow) panicked(r any) *Error {
	p := &PanicError{Value: r, Stack: debug.Stack()}
	err := &Error{Code: InternalError, Info: fmt.Sprint(r), Cause: p}
	fl.noteError(err, p)
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
	case len(c.queue) > 0:
		c.kill()
		if st&stClaim != 0 {
			// Success or Error came from another goroutine after Add.
			return fl.fail(c, fl.misuseError(completedAfterAdd(c, st)))
		}
		return c
	case st&stReady != 0:
		return fl.completed(c)
	case st&(stClaim|stWait) != 0:
		c.waiting = true
		return nil
	case c.mode == modeHandler:
		return fl.handlerReturned(c)
	default:
		return fl.finish(c, nil)
	}
}

// completedAfterAdd is the info of API decision 4 for a completion that
// another goroutine claimed after the callback had added steps (st: the
// handle's state then). It names the call once the completion is written.
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

// kill makes f's handle dead, noting whether another goroutine may still
// be writing a completion into f: one that claimed it but has not made it
// ready. Until then f must not be recycled. A handle whose completion is
// claimed and written is dead already (nothing accepts a second one), and
// costs no atomic write: the steps completed from outside all end so.
func (f *frame) kill() {
	st := f.h.st.Load()
	if st&stDone != 0 {
		return
	}
	if st&(stClaim|stReady) == stClaim|stReady {
		f.consumed = true
		return
	}
	old := f.h.st.Or(stIdle | stClaim | stDone)
	f.consumed = old&stClaim == 0 || old&stReady != 0
}

// handlerReturned lets the error that handler frame c took go on: its
// handler returned without completing.
func (fl *flow) handlerReturned(c *frame) *frame {
	err := c.err
	p := c.parent
	fl.release(c)
	fl.retire(c)
	return fl.unwind(p, err)
}

// completed applies the Success or Error written to c.
func (fl *flow) completed(c *frame) *frame {
	failed := c.h.st.Load()&stFailed != 0
	c.kill()
	if failed {
		err := c.args[0].(*Error)
		c.args = nil
		fl.noteError(err, exc(err))
		return fl.fail(c, err)
	}
	return fl.finish(c, c.args)
}

func (fl *flow) misuseError(info string) *Error {
	err := &Error{Code: InternalError, Info: info}
	fl.noteError(err, err)
	return err
}

// noteError records err in the state: spec 1.7 and API decision 5.
func (fl *flow) noteError(err *Error, exc error) {
	s := fl.State()
	s.ErrorInfo = err.Info
	s.LastException = exc
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
		next := p.impl.(*parallelRun).branchDone(p)
		fl.retire(f)
		return next
	}
	if f.ctl() != nil {
		args = nil // loops and parallels give no args to the next step
	}
	fl.retire(f)
	p.active = nil
	p.args = args
	return p
}

// release ends f's own resources: its timer and cancel handler.
func (fl *flow) release(f *frame) {
	f.over = true
	f.kill()
	if f.timer != nil {
		fl.disarm(f)
	}
	f.onCancel = nil
}

// fail unwinds the error err from f outward (API decisions 6, 7 and 9):
// each level runs its cancel handler, then its error handler, until one
// handles the error or a loop takes its Break or Continue. It returns where
// the flow goes on.
func (fl *flow) fail(f *frame, err *Error) *frame {
	fl.noteStack(f)
	return fl.unwind(f, err)
}

// unwind is fail for an error whose AsyncStack is recorded already: one
// that goes on from a handler that returned, or from a failed branch to its
// Parallel.
func (fl *flow) unwind(f *frame, err *Error) *frame {
	for {
		f.queue = f.queue[:0]
		f.active = nil
		f.waiting = false
		if ctl := f.ctl(); ctl != nil {
			if next, ok := ctl.catch(f, err); ok {
				return next
			}
		}
		if perr := fl.callCancel(f); perr != nil {
			err = perr
		}
		fl.release(f)
		if f.onerror != nil {
			return fl.handle(f, err)
		}
		switch f.mode {
		case modeBase:
			fl.end(nil, fl.rootError(err))
			return nil
		case modeBranch:
			return f.parent.impl.(*parallelRun).branchFailed(f.parent, err)
		}
		p := f.parent
		fl.retire(f)
		f = p
	}
}

// handle runs f's error handler in a new incarnation of f that takes its
// place, so that steps the handler adds run in place of the failed step, and
// the failed step's handle stays dead.
func (fl *flow) handle(f *frame, err *Error) *frame {
	h := f.onerror
	if !f.consumed {
		// Another goroutine may still write to f: take a fresh frame.
		g := &frame{parent: f.parent, impl: f.fn()}
		f.parent.active = g
		f = g
	}
	parent, fn := f.parent, f.fn()
	q := f.queue[:0]
	*f = frame{parent: parent, impl: fn, mode: modeHandler, err: err, handling: true, queue: q}
	fl.newHandle(f, 0)
	fl.callHandler(f, h, err.Code)
	return fl.settle(f)
}

// callCancel runs f's cancel handler, if it has one, once, with f's handle
// dead. A panic in it becomes the InternalError it returns, not raised.
func (fl *flow) callCancel(f *frame) (err *Error) {
	h := f.onCancel
	if h == nil {
		return nil
	}
	f.onCancel = nil
	f.kill()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abortSignal); !ok {
				err = fl.panicked(r)
			}
		}
	}()
	h(f.h)
	return nil
}

// cancelTree cancels f and everything running under it, innermost first,
// running cancel handlers only (API decisions 7 and 8).
func (fl *flow) cancelTree(f *frame) {
	if pr, ok := f.impl.(*parallelRun); ok {
		pr.cancelBranches()
	}
	if f.active != nil {
		fl.cancelTree(f.active)
	}
	f.queue = f.queue[:0]
	f.active = nil
	f.waiting = false
	fl.callCancel(f) // a panic in it is recorded; nothing is left to fail
	fl.release(f)
	fl.retire(f)
}

// armTimeout (re)arms f's timeout (API decision 8).
func (fl *flow) armTimeout(f *frame, d time.Duration) {
	if f.timer != nil {
		fl.disarm(f)
	}
	f.timer = fl.sched.deferTask(d, (*timeoutTask)(f.h))
}

// disarm cancels f's timer. A Loop's step timer, which nothing else refers
// to, goes back to the loop's pool: a timeout costs no allocation.
func (fl *flow) disarm(f *frame) {
	e := f.timer
	f.timer = nil
	e.Cancel()
	fl.recycleTimer(e)
}

func (fl *flow) recycleTimer(e *timerEntry) {
	if st := fl.sched.engineState(); st != nil && e != nil && e.local() {
		st.keepTimer(e)
	}
}

// timeoutTask is the timeout of a step as a task: a handle seen through
// another method set, so that arming a timeout costs no closure.
type timeoutTask handle

func (t *timeoutTask) run() {
	h := (*handle)(t)
	h.fl.timeout(h)
}

// timeout fails the step of h with Timeout after cancelling what runs under
// it.
func (fl *flow) timeout(h *handle) {
	f := h.f
	if f.h != h || f.over || fl.done {
		return
	}
	fl.recycleTimer(f.timer) // it has run: fire drops it
	f.timer = nil
	if f.waiting && h.st.Load()&(stClaim|stDone) == stClaim {
		// A completion from outside came first and is on its way to the
		// loop, which was too busy to take it before the timer: success
		// or error disarms the timeout (API decision 8).
		return
	}
	if f.active != nil {
		fl.cancelTree(f.active)
	}
	err := &Error{Code: Timeout}
	fl.noteError(err, err)
	fl.drive(fl.fail(f, err))
}

// cancel stops the whole flow: Root.Cancel, or the end of Run's context.
func (fl *flow) cancel(cause error) {
	if fl.done {
		return
	}
	fl.cancelTree(&fl.base)
	fl.end(nil, cause)
}

// rootError turns a Break or Continue that found no loop into InternalError
// (API decision 9).
func (fl *flow) rootError(err *Error) *Error {
	if err.Code != LoopBreak && err.Code != LoopCont {
		return err
	}
	call := "Break"
	if err.Code == LoopCont {
		call = "Continue"
	}
	info := call + " outside of a loop"
	if err.Info != "" {
		info = fmt.Sprintf("%s(%q) outside of a loop labelled %q", call, err.Info, err.Info)
	}
	e := &Error{Code: InternalError, Info: info, Cause: err}
	fl.noteError(e, e)
	return e
}

// end delivers the flow's outcome; nothing of the flow runs afterwards.
func (fl *flow) end(args []any, err error) {
	fl.done = true
	fl.base.queue = nil // steps left by an error, a cancel or a misuse never run
	// Once running is false the Root may be executed again from another
	// goroutine, which writes wait: read it first.
	var promise chan Result
	unhandled := fl.unhandled
	if w := fl.wait; w != nil {
		promise = w.promise
		if w.unhandled != nil {
			unhandled = w.unhandled
		}
		if w.watched != nil {
			w.watched.unwatch(fl)
		}
	}
	fl.wait = nil
	fl.phase.And(^flowRunning)
	if promise != nil {
		promise <- Result{Args: args, Err: err}
		return
	}
	if e, ok := err.(*Error); ok {
		unhandled(e)
	}
}

// noteStack records the step functions from the root to f (spec 1.7). A
// stack equal to the one recorded last is kept as it is, so that errors
// raised again and again at one place allocate no stack.
func (fl *flow) noteStack(f *frame) {
	n := 0
	for p := f; p != nil; p = p.parent {
		if p.stackPC() != 0 {
			n++
		}
	}
	st := fl.State()
	if st.sameStack(f, n) {
		return
	}
	stack := make([]string, n)
	pcs := make([]uintptr, n)
	for ; f != nil; f = f.parent {
		if pc := f.stackPC(); pc != 0 {
			n--
			pcs[n] = pc
			stack[n] = funcName(pc)
		}
	}
	st.AsyncStack, st.stack = stack, recordedStack{pcs: pcs, names: stack}
}

// sameStack reports whether AsyncStack is still the stack the engine
// recorded last, and that stack's functions are the n step functions from
// the root to f. Entry addresses are compared, not names: looking a name up
// costs more than the rest of the comparison.
func (s *State) sameStack(f *frame, n int) bool {
	pcs := s.stack.pcs
	if len(pcs) != n || len(s.AsyncStack) != n || n > 0 && &s.AsyncStack[0] != &s.stack.names[0] {
		return false
	}
	for ; f != nil; f = f.parent {
		if pc := f.stackPC(); pc != 0 {
			n--
			if pcs[n] != pc {
				return false
			}
		}
	}
	return true
}

// funcPC returns the entry address of fn.
func funcPC(fn any) uintptr { return reflect.ValueOf(fn).Pointer() }

// stackPC is the entry address of the user's function that f runs, for
// AsyncStack, or 0 if it runs none: for an iteration of a loop, the loop's
// body; for a step of a critical section, the function given to Sync (the
// engine's own steps around it are not the user's); else f's step function.
func (f *frame) stackPC() uintptr {
	if p := f.parent; p != nil {
		switch c := p.impl.(type) {
		case *loopRun:
			return funcPC(c.def.body())
		case *section:
			return funcPC(c.f)
		}
	}
	if fn := f.fn(); fn != nil {
		return funcPC(fn)
	}
	return 0
}

// funcNames caches the names of step functions by entry address: looking a
// name up in the runtime's tables on every error costs more than the rest
// of the error path.
var funcNames sync.Map // uintptr -> string

func funcName(pc uintptr) string {
	if name, ok := funcNames.Load(pc); ok {
		return name.(string)
	}
	name := "?"
	if rf := runtime.FuncForPC(pc); rf != nil {
		name = rf.Name()
	}
	funcNames.Store(pc, name)
	return name
}
