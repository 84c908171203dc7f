package asyncsteps

// This file holds how a flow fails and stops: error unwinding, error and
// cancel handlers, step timeouts, the whole flow's cancel, and the
// AsyncStack recorded at an error.

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// fail unwinds the error err from f outward (docs/DESIGN.md#error-handlers,
// #cancel-handlers and #break-and-continue):
// each level runs its cancel handler, then its error handler, until one
// handles the error or a loop takes its Break or Continue, or a cancel
// requested of the flow stops it (see stopped). It returns where the flow
// goes on.
func (fl *flow) fail(f *frame, err *Error) *frame {
	fl.noteStack(f)
	return fl.unwind(f, err)
}

// unwind is fail for an error whose AsyncStack is recorded already: one
// that goes on from a handler that returned, or from a failed branch to its
// Parallel.
func (fl *flow) unwind(f *frame, err *Error) *frame { return fl.unwindFrom(f, err, false) }

// unwindFrom is unwind, where faulted says that err is the fault of a
// cancel handler that no handler has seen yet: of f's, which ran already
// (the unwinding goes on after a runtime.Goexit in that handler, or in
// the StepError hook told of it), or of one in a level below f, from
// which err climbed with no error handler on the way (a failed Parallel
// branch's included). A cancel that wins before an error handler runs
// hides it, wherever it wins, so it stays faulted until one does.
func (fl *flow) unwindFrom(f *frame, err *Error, faulted bool) *frame {
	for {
		if fl.hasUnreported() {
			// Before the handlers on the way: the errors raised until
			// now, err among them (see reportErrors).
			fl.reportErrors(resumePoint{f: f, err: err, faulted: faulted})
		}
		f.dropQueue()
		f.active = nil
		f.waiting = false
		if ctl := f.ctl(); ctl != nil {
			if next, ok := ctl.catch(f, err); ok {
				return next
			}
		}
		if perr, unseen := fl.callCancel(f, nil, unseenFault(err, faulted)); perr != nil {
			err, faulted = perr, unseen
			if fl.hasUnreported() {
				fl.reportErrors(resumePoint{f: f, err: err, faulted: faulted})
			}
		}
		if testHookUnwindStopCheck != nil {
			testHookUnwindStopCheck()
		}
		if fl.stoppedOver(err, faulted) {
			return nil
		}
		fl.release(f)
		if f.onerror() != nil {
			faulted = false // the handler sees err
			c := fl.runErrorHandler(f, err)
			from, e := fl.unwindsOn(c)
			if e == nil {
				return fl.settle(c)
			}
			if from != c && fl.stoppedAbove(from) {
				return nil
			}
			f, err = from, e
			continue
		}
		switch f.mode {
		case modeBase:
			fl.end(nil, fl.rootError(err))
			return nil
		case modeBranch:
			fl.climb(f)
			return branchFailed(f, err, faulted)
		}
		p := f.parent
		fl.climb(f)
		fl.retire(f)
		f = p
	}
}

// unseenFault returns err if it is a cancel handler's fault that no
// handler has seen (faulted), else nil: what a fault of the next cancel
// handler would hide for good (see callCancel).
func unseenFault(err *Error, faulted bool) *Error {
	if faulted {
		return err
	}
	return nil
}

// testHookUnwindStopCheck, set by a test, runs in unwind once a level's
// cancel handler has run, before the look at a cancel requested of the
// flow: where a Cancel from another goroutine may land.
var testHookUnwindStopCheck func()

// stopped cancels the flow, in place of unwinding an error further, if a
// cancel has been requested of it (docs/DESIGN.md#cancel-handlers): a
// cancel requested before an error is raised wins, so that no error
// handler runs once it has been requested, even when the callback that
// requested it raises the error. It reports whether it did; the flow has
// then ended. Only the error path pays for the atomic load.
//
// unwind asks once a level's own cancel handler has run, as for any error
// through it: that handler may have requested the cancel, and the cancel
// of the whole tree would drop it unrun where the loop turned a claimed
// Success into the error (see callCancel). The cancel then runs those of
// the other steps still live, innermost first.
func (fl *flow) stopped() bool { return fl.stoppedOver(nil, false) }

// stoppedOver is stopped at a level of an unwinding whose error err is,
// if faulted, the fault of a cancel handler that no handler has seen (see
// unwindFrom): the cancel that wins hides it from every handler, so it is
// logged, as one under the cancel itself. The look at the request decides
// both, so a Cancel from another goroutine that lands after the handler
// has ended still finds the fault told.
func (fl *flow) stoppedOver(err *Error, faulted bool) bool {
	req := fl.stopRequest()
	if req == nil {
		return false
	}
	if faulted {
		logCancelFault(err)
	}
	fl.cancel(req.cause)
	return true
}

// stoppedAbove is stopped for an error that a handler let go on to the
// level above, from: a cancel requested by then (by the handler, say)
// wins before the error reaches that level, so that the level's cancel
// handler runs with the others', in the cancel's order, not first as the
// error's next level. The handler's frame is gone: from runs nothing.
func (fl *flow) stoppedAbove(from *frame) bool {
	if fl.stopRequest() == nil {
		return false
	}
	from.active = nil
	return fl.stopped()
}

// stopRequest returns the cancel requested of the execution that runs,
// or nil: none, or a stale one, of an execution that has ended.
func (fl *flow) stopRequest() *stopRequest {
	if req := fl.stop.Load(); req != nil && fl.stopsThis(req) {
		return req
	}
	return nil
}

// runErrorHandler runs f's error handler in a new incarnation of f that takes its
// place, so that steps the handler adds run in place of the failed step, and
// the failed step's runErrorHandler stays dead.
func (fl *flow) runErrorHandler(f *frame, err *Error) *frame {
	h := f.onerror()
	user := f.userFn() // read before a fresh frame, which has no rare part, takes f's place
	if !f.consumed {
		// Another goroutine may still write to f: take a fresh frame.
		g := &frame{parent: f.parent, impl: f.fn()}
		f.parent.active = g
		f.abandon()
		f = g
	}
	parent, fn := f.parent, f.fn()
	q := f.queue[:0]
	if fn == nil {
		q = nil // a loop's or a section's array: not for the handler's steps
	}
	f.detach() // the failed step's: the frame may be recycled while it is kept
	*f = frame{parent: parent, impl: fn, mode: modeHandler, err: err, handling: true, queue: q, rare: f.clearedRare()}
	if user != 0 {
		// The handler's frame stands for the failed step in AsyncStack:
		// it names the user's function that step ran, as impl does for
		// a plain step.
		f.rareFields().user = user
	}
	fl.newStepAPI(f, 0)
	fl.callHandler(f, h, err.Code)
	return f
}

// unwindsOn looks at how the error handler of c returned, for the two
// outcomes that make the error go on: the handler raised an error of its
// own, or returned plainly. It reports the frame and the error to unwind
// from, so that unwind goes on in its loop: settling them by recursion
// would take stack in proportion to the levels the error crosses. A
// handler that waited is left to settle.
func (fl *flow) unwindsOn(c *frame) (from *frame, err *Error) {
	if c.h.st.Load() != 0 {
		return nil, nil
	}
	switch {
	case c.err != nil && !c.handling:
		c.h.st.Store(stIdle | stClaim | stDone)
		c.consumed = true
		fl.noteStack(c)
		return c, c.err
	case len(c.queue) == 0 && !c.succeeded:
		c.h.st.Store(stIdle | stClaim | stDone)
		c.consumed = true
		err, p := c.err, c.parent
		fl.release(c)
		fl.climb(c)
		fl.retire(c)
		return p, err
	}
	return nil, nil
}

// callCancel runs f's cancel handler, if it has one, once, with f's step API
// dead. A panic or a Goexit in it, or a misuse (the handler drove its
// TestTool into its own flow, or was cut short by the abort of its call on
// another flow's running step), becomes the InternalError it returns, not
// raised. After a Goexit, job goes on from f on the next goroutine or,
// with no job (an error unwinding), the unwinding does. Under a job (a
// cancel, not an error) the InternalError replaces no error, so that no
// handler sees it: it is logged, or the fault would go unseen. With no
// job it replaces the error unwinding: logged at once if a cancel has
// been requested already, which wins over it before any handler runs,
// else unseen, for the look at the request that lets a cancel win to
// log it (see stoppedOver), or for a Close of the loop that drops its
// unwinding after a Goexit (see Loop.endDropped). Logged here, it is told
// even when the next goroutine after a Goexit never runs its flow. The
// error it replaces may be hidden, the fault of a cancel handler further
// in that no handler has seen (unwindFrom's faulted): replaced, no
// handler ever sees it, whatever wins next, so it is logged first.
//
// A step that a cancel (job) reaches after a Success from outside has
// claimed it has completed: its handler is dropped unrun, as the
// completion is (docs/DESIGN.md#cancel-handlers). An error unwinding
// through the step runs it all the same: a claimed Success meets one
// only where the loop has made that Success an error (after Add); a
// timeout lets the claim win instead of failing the step.
func (fl *flow) callCancel(f *frame, job *cancelJob, hidden *Error) (err *Error, unseen bool) {
	r := f.rare
	if r == nil || r.onCancel == nil {
		return nil, false
	}
	h := r.onCancel
	r.onCancel = nil
	if succeeded := f.kill(); succeeded && job != nil {
		return nil, false
	}
	returned := false
	fl.inCall = true
	r.cancelRuns, r.cancelTold = true, false
	defer func() {
		fl.inCall = false
		r.cancelRuns = false
		var exiting bool
		err, exiting = fl.cancelFault(recover(), returned)
		if fl.reent {
			// The handler's own fault comes first, as for a step.
			c := &frame{err: err} // no step to fail: the tasks go on
			fl.afterReentry(c)
			err = c.err
		}
		if err != nil {
			if hidden != nil {
				logCancelFault(hidden)
			}
			if job != nil {
				logCancelFault(err)
			} else {
				unseen = !fl.loggedUnderCancel(err)
			}
		}
		if exiting {
			fl.resumeCancel(f, job, err, unseen)
		}
	}()
	h(f.h)
	returned = true
	return nil, false
}

// loggedUnderCancel logs err, a cancel handler's fault that no handler
// has seen, if a cancel has been requested of the flow, and reports
// whether it did: that cancel wins over err before any handler runs (see
// stoppedOver), unless a Close of the loop ends the flow first, which no
// handler sees either.
func (fl *flow) loggedUnderCancel(err *Error) bool {
	if fl.stopRequest() == nil {
		return false
	}
	logCancelFault(err)
	return true
}

// resumeCancel queues, after a Goexit that ends f's cancel handler, what
// goes on from the next goroutine: job, or the unwinding of err from f,
// unseen as callCancel reports it.
func (fl *flow) resumeCancel(f *frame, job *cancelJob, err *Error, unseen bool) {
	switch {
	case job != nil:
		fl.afterGoexit(job)
	case unseen:
		fl.afterGoexit(&goexitResume{h: f.h, err: err, kind: resumeCancelFault})
		if testHookCancelFaultQueued != nil {
			testHookCancelFaultQueued()
		}
	default:
		fl.afterGoexit(&goexitResume{h: f.h, err: err, kind: resumeUnwind})
	}
}

// testHookCancelFaultQueued, set by a test, runs once the unwinding of a
// cancel handler's fault that no handler has seen is queued after the
// handler's Goexit, before the next goroutine can take it: where a Cancel
// and a Close from another goroutine may land.
var testHookCancelFaultQueued func()

// cancelFault returns the InternalError, recorded, of a cancel handler
// that did not return (returned false): it panicked with r, or, with r
// nil, called runtime.Goexit; and whether the goroutine is exiting, for
// the caller to queue what goes on from the next one. An abort (r an
// abortSignal) is never the handler's own, whose step API is dead: it is
// the misuse of a call on another flow's running step, as for a step
// (see abortedByOther). A panic or an abort in a deferred call of the
// handler's Goexit is recovered here, and the Goexit goes on: the flow
// goes on from the next goroutine all the same. An abort has no stack of
// its own, so one is taken: only a misuse pays for it.
func (fl *flow) cancelFault(r any, returned bool) (err *Error, exiting bool) {
	switch {
	case returned:
		return nil, false
	case r == nil:
		return fl.goexitError(), true
	}
	if _, ok := r.(abortSignal); ok {
		err = fl.misuseError(abortedInfo)
		return err, inGoexit(debug.Stack())
	}
	err = fl.panicked(r)
	return err, goexitPending(err)
}

// logCancelFault logs err, the InternalError of a cancel handler that
// panicked, called runtime.Goexit or made a misuse under a cancel, with
// the panic's stack.
func logCancelFault(err *Error) {
	switch p, ok := err.Cause.(*PanicError); {
	case ok:
		slog.Error("asyncsteps: panic in cancel handler", "panic", err.Info, "stack", string(p.Stack))
	case err.Info == goexitInfo:
		slog.Error("asyncsteps: runtime.Goexit in cancel handler", "info", err.Info)
	default:
		logCancelMisuse(err.Info)
	}
}

// logCancelMisuse logs the misuse of a cancel handler that info tells.
func logCancelMisuse(info string) {
	slog.Error("asyncsteps: misuse in cancel handler", "info", info)
}

// cancelTree cancels f and everything running under it, innermost first,
// running cancel handlers only (docs/DESIGN.md#cancel-handlers and #timeouts), then goes on with
// then (nil: nothing). It returns then's frame.
func (fl *flow) cancelTree(f *frame, then func() *frame) *frame {
	return fl.cancelFrames(then, f)
}

// armTimeout (re)arms f's timeout (docs/DESIGN.md#timeouts).
func (fl *flow) armTimeout(f *frame, d time.Duration) {
	if f.timer() != nil {
		fl.disarm(f)
	}
	f.rareFields().timer = fl.sched.deferTask(d, (*timeoutTask)(f.h))
}

// disarm cancels f's timer. A Loop's step timer, which nothing else refers
// to, goes back to the loop's pool: a timeout costs no allocation.
func (fl *flow) disarm(f *frame) {
	e := f.rare.timer
	f.rare.timer = nil
	e.Cancel()
	fl.recycleTimer(e)
}

func (fl *flow) recycleTimer(e *timerEntry) {
	if st := fl.sched.pools(); st != nil && e != nil && e.local() {
		st.keepTimer(e)
	}
}

// timeoutTask is the timeout of a step as a task: a step API seen through
// another method set, so that arming a timeout costs no closure.
type timeoutTask stepAPI

func (t *timeoutTask) run() {
	h := (*stepAPI)(t)
	h.fl.timeout(h)
}

// timeout fails the step of h with Timeout after cancelling what runs under
// it.
func (fl *flow) timeout(h *stepAPI) {
	f := h.f
	if f.h != h || f.over || fl.done {
		return
	}
	if fl.inCall {
		fl.deferTask((*timeoutTask)(h))
		return
	}
	if r := f.rare; r != nil {
		fl.recycleTimer(r.timer) // it has run: fire drops it
		r.timer = nil
	}
	if f.waiting && !f.timeOutWins() {
		// A completion from outside came first and is on its way to the
		// loop, which was too busy to take it before the timer: success
		// or error disarms the timeout (docs/DESIGN.md#timeouts). The
		// timer held the flow for a closing loop: now nothing does, and
		// a loop closed before the completion reaches it drops it.
		fl.noteParked(f)
		return
	}
	fail := func() *frame {
		err := &Error{Code: Timeout}
		fl.noteError(err, err)
		return fl.fail(f, err)
	}
	if f.active != nil {
		fl.drive(fl.cancelTree(f.active, fail))
		return
	}
	fl.drive(fail())
}

// cancel stops the whole flow: Root.Cancel, or the end of Run's context.
func (fl *flow) cancel(cause error) {
	if fl.done {
		return
	}
	fl.cancelTree(&fl.base, func() *frame {
		fl.end(nil, cause)
		return nil
	})
}

// rootError turns a Break or Continue that found no loop into InternalError
// (docs/DESIGN.md#break-and-continue).
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
	// A copy: err may be the one the loop keeps for its flows' Breaks
	// (signalCache), and the Cause leaves the loop with Run's error.
	cause := *err
	e := &Error{Code: InternalError, Info: info, Cause: &cause}
	fl.noteError(e, e)
	return e
}

// noteStack records the step functions from the root to f (spec 1.7). A
// stack equal to the one recorded last is kept as it is, so that errors
// raised again and again at one place allocate no stack.
func (fl *flow) noteStack(f *frame) {
	if st := fl.state; st != nil && st.stack.at == f && f != nil {
		k := st.stack.depth
		// Without room beyond k: an append to AsyncStack must not write
		// into the stack, which other flows of the loop may share.
		st.stack.n = k
		st.AsyncStack = st.stack.rec.names[:k:k]
		return
	}
	var buf [16]uintptr
	pcs := appendStackPCs(buf[:0], f)
	st := fl.State()
	n := int32(len(pcs))
	if st.sameStack(pcs) {
		st.stack.at, st.stack.depth = f, n
		return
	}
	var r *stackRecord
	if pools := fl.sched.pools(); pools != nil {
		r = pools.stacks.find(pcs)
	} else {
		r = newStackRecord(pcs)
	}
	st.AsyncStack, st.stack = r.names, recordedStack{rec: r, at: f, depth: n, n: n}
}

// stackRecord is an AsyncStack and the entry addresses of the functions
// it names, both outermost first. Flows of one loop share them: neither
// is ever changed (State's doc asks the same of users).
type stackRecord struct {
	pcs   []uintptr
	names []string
}

// newStackRecord records the step functions pcs, innermost first.
func newStackRecord(pcs []uintptr) *stackRecord {
	n := len(pcs)
	r := &stackRecord{pcs: make([]uintptr, n), names: make([]string, n)}
	for i, pc := range pcs {
		r.pcs[n-1-i] = pc
		r.names[n-1-i] = funcName(pc)
	}
	return r
}

// stackCache holds the AsyncStacks recorded last on one loop, so that the
// flows of the loop that fail at the same place, each with a State of its
// own, share one stack instead of allocating it each: a new flow per
// request whose loop ends with Break records its stack without an
// allocation.
type stackCache struct {
	recs [4]*stackRecord
	next int // the entry to replace next
}

// find returns the record of the step functions inner, innermost first:
// a kept one, or a new one kept in place of the oldest.
func (c *stackCache) find(inner []uintptr) *stackRecord {
	n := len(inner)
next:
	for _, r := range c.recs {
		if r == nil || len(r.pcs) != n {
			continue
		}
		for i, pc := range inner {
			if r.pcs[n-1-i] != pc {
				continue next
			}
		}
		return r
	}
	r := newStackRecord(inner)
	c.recs[c.next] = r
	c.next = (c.next + 1) % len(c.recs)
	return r
}

// signalCache holds the errors of the Breaks and Continues raised last on
// one loop, shared by its flows like their AsyncStacks: a flow that leaves
// its loop with Break allocates no error. The engine never changes an
// Error once made, so whoever holds one (LastException, an error
// handler's frame) sees no difference; one that a user changed no longer
// matches and is replaced.
type signalCache struct {
	errs [4]*Error
	next int // the entry to replace next
}

// signalError returns an error of code (LoopBreak or LoopCont) with the
// label info: a kept one, or a new one kept in place of the oldest.
func (c *signalCache) signalError(code, info string) *Error {
	for _, e := range c.errs {
		if e != nil && e.Code == code && e.Info == info && e.Cause == nil {
			return e
		}
	}
	e := &Error{Code: code, Info: info}
	c.errs[c.next] = e
	c.next = (c.next + 1) % len(c.errs)
	return e
}

// appendStackPCs appends to dst the entry addresses of the step functions
// from f up to the root, innermost first: one walk, whose result is both
// compared with the recorded stack and, when it differs, recorded.
func appendStackPCs(dst []uintptr, f *frame) []uintptr {
	for ; f != nil; f = f.parent {
		if pc := f.stackPC(); pc != 0 {
			dst = append(dst, pc)
		}
	}
	return dst
}

// climb moves the recorded stack's frame from f up to its parent, as an
// error unwinds past f.
func (fl *flow) climb(f *frame) {
	if st := fl.state; st != nil && st.stack.at == f {
		st.stack.at = f.parent
		if f.stackPC() != 0 {
			st.stack.depth--
		}
	}
}

// funcPC returns the entry address of fn.
func funcPC(fn any) uintptr { return reflect.ValueOf(fn).Pointer() }

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
