package asyncsteps

// This file holds the step API, the AsyncSteps a step's callbacks receive:
// the identity of one incarnation of a frame, its state word shared with
// other goroutines, and its AsyncSteps methods.

import (
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/misuse"
)

// Step API states, in stepAPI.st. The loop goroutine owns frames, but a waiting
// step may be completed from any goroutine, so the hand-over between the two
// is this word alone.
//
// The zero state is "callback running": a fresh step API needs no store, and
// a step that completes from its own callback without having waited (the
// common case) costs no atomic read-modify-write but the one that kills the
// step API when the callback returns.
const (
	stIdle   uint32 = 1 << iota // the step's callback is not running
	stWait                      // the step may be completed from outside
	stClaim                     // Success or Error has claimed the completion
	stReady                     // the claimed completion is written
	stDone                      // the step API is dead: no completion accepted
	stFailed                    // with stClaim: the completion claimed is an error, in args[0] once stReady
	stLate                      // with stClaim: Run's deadline found the completion on its way (see flow.timeOut)
)

// stepAPI is the AsyncSteps value given to one callback: the identity of one
// incarnation of a frame. Step APIs are never reused, so a step API kept after
// its step has completed stays dead (docs/DESIGN.md#stale-steps) while the frame behind
// it is recycled for later steps. A step API is also what the engine queues on
// the loop to continue a frame, so a queued continuation whose frame has
// moved on is recognised as stale.
type stepAPI struct {
	st atomic.Uint32
	f  *frame // set as made, and to retiredFrame, on the loop, as the frame is blanked; the frame's fields belong to the loop
	fl *flow  // immutable; what other goroutines may reach
}

// inCallback reports whether a call with step API state st comes from the
// step's own running callback, i.e. may abort it by panicking. A waiting
// step may also be completed from another goroutine while its callback still
// runs; only then is the (slower) goroutine check needed.
func (h *stepAPI) inCallback(st uint32) bool {
	if st&stIdle != 0 {
		return false
	}
	return st&stWait == 0 || h.fl.sched.IsSameThread()
}

// claim takes the right to complete the step: only one Success or Error of
// a step counts. kind is stFailed for an error, 0 for a success: it is
// recorded with the claim, so that a loop that cancels the step before
// the completion is written knows which one has won, without waiting for
// the writer (see frame.kill).
func (h *stepAPI) claim(kind uint32) bool {
	for {
		st := h.st.Load()
		if st&(stClaim|stDone) != 0 {
			return false
		}
		if h.st.CompareAndSwap(st, st|stClaim|kind) {
			return true
		}
	}
}

// publish marks the written completion as ready (its kind came with the
// claim). If the callback has already returned, nobody on the loop will
// look at the step again by itself, so the completion is handed to the
// loop: posted to its own queue when the caller runs on that loop
// (onLoop), else injected through the inbox's lock.
func (h *stepAPI) publish(onLoop bool) {
	if h.st.Or(stReady)&stIdle == 0 {
		return
	}
	if onLoop {
		h.fl.sched.post(h)
		return
	}
	h.fl.inject(h)
}

// succeedOutside completes the step with args from outside its running
// callback; onLoop as for publish. Only the first completion counts.
func (h *stepAPI) succeedOutside(args []any, onLoop bool) {
	if h.claim(0) {
		h.f.args = args
		h.publish(onLoop)
		return
	}
	if !onLoop {
		h.callOnEnded(h.st.Load(), "Success", inCancelEnds)
	}
}

// succeedHere completes the step with args from outside its running
// callback, in a task of its flow's tool, and reports whether the caller
// is to go on with it now (h.run), where publish would queue it: the
// callback has returned. Only the first completion counts.
func (h *stepAPI) succeedHere(args []any) bool {
	if !h.claim(0) {
		return false
	}
	h.f.args = args
	return h.st.Or(stReady)&stIdle != 0
}

// calledBySubstep handles a call (call names it) on the dead step API h
// of a step that still waits for its sub-steps, from the callback of one
// of them, or of a sub-step of theirs: only a step's own callback adds
// sub-steps, makes the step wait or completes it (spec section 1), so
// the call is an InternalError raised in the callback that made it, which
// the step's error handler sees. On a step that has completed, the call
// has no effect, as on any dead step API (docs/DESIGN.md#stale-steps).
// On the loop's goroutine only (see callOnEnded).
func (h *stepAPI) calledBySubstep(call string) {
	f := h.f
	if f.h != h || f.over {
		return
	}
	if c := runningUnder(f); c != nil {
		c.h.misuse(call + " called on the AsyncSteps of a step that waits for its sub-steps")
	}
}

// runningUnder returns the frame below f, its running sub-step or one
// of theirs, down to the branches of a Parallel, whose callback runs now,
// or nil if none does. It walks the frames with a stack of its own, not
// by recursion: only a misuse takes this path.
func runningUnder(f *frame) *frame {
	var branches []*frame
	for c := f.active; c != nil || len(branches) > 0; c = c.active {
		if c == nil {
			c, branches = branches[len(branches)-1], branches[:len(branches)-1]
		}
		if c.h.st.Load()&stIdle == 0 {
			return c
		}
		if pr := fanOutOf(c); pr != nil {
			branches = append(branches, pr.liveBranches()...)
		}
	}
	return nil
}

// refused handles a call (call names it) that adds sub-steps to the step
// or makes it wait (what says which), when adding has reported false.
// From the step's cancel handler, it is reported (callOnEnded). On
// a step that waits for its sub-steps, a call from the callback of one of
// them is raised there (calledBySubstep). On a step that waits for a
// completion from outside, once its callback has returned, the call fails
// the step as an Error from outside would: only the first completion
// counts, and a later Success has no effect. On a step that has
// completed, and for the callback's own call after its Success, it has no
// effect (docs/DESIGN.md#stale-steps).
func (h *stepAPI) refused(call, what string) {
	st := h.st.Load()
	switch {
	case st&stClaim != 0:
		h.callOnEnded(st, call, inCancelInfo(what))
	case st&stIdle != 0:
		h.complete(&Error{Code: InternalError, Info: call + lateCallInfo + what})
	}
}

// lateCallInfo joins the call to what only the step's own callback does,
// in the info of refused.
const lateCallInfo = " called on a step whose callback has returned: only the step's own callback "

// What a refused call does, in its info.
const (
	addsSteps = "adds sub-steps"
	makesWait = "makes it wait"
)

// The infos of a call that a cancel handler makes on its own AsyncSteps,
// after the call's name (see callOnEnded): one for the calls that add
// sub-steps, one for those that make the step wait, one for Success,
// Error, Break and Continue.
const (
	inCancelAdds  = " called in a cancel handler: the steps it adds never run; start a flow of its own for them"
	inCancelWaits = " called in a cancel handler: its step is cancelled or failed, and waits for nothing; start a flow of its own to wait"
	inCancelEnds  = " called in a cancel handler: its step is cancelled or failed, and takes no completion"
)

// inCancelInfo is the info of callOnEnded for a refused call, after
// its name, by what the call does.
func inCancelInfo(what string) string {
	if what == addsSteps {
		return inCancelAdds
	}
	return inCancelWaits
}

// callOnEnded handles a call (call names it) on h that has no effect, its
// step having ended or taken a completion (state st): from the step's own
// cancel handler, it is reported, with info after call (see inCancel);
// from the callback of a sub-step of a step that still waits for them,
// raised there (see calledBySubstep). From any other goroutine it does
// nothing more: only the loop may read the frame that tells these apart.
func (h *stepAPI) callOnEnded(st uint32, call, info string) {
	if !h.fl.sched.IsSameThread() {
		return // the frame belongs to the loop's goroutine: not read here
	}
	in, first := h.inCancel()
	switch {
	case first:
		logCancelMisuse(call + info)
	case !in && st&stDone != 0:
		h.calledBySubstep(call)
	}
}

// inCancel reports, on the loop, whether a call on h comes from its
// step's own cancel handler, which runs now (see flow.callCancel), and
// whether it is the first such call of that run, which is logged as the
// handler's misuse (docs/DESIGN.md#cancel-handlers): later ones are the
// same mistake, and a handler that makes it in a loop would flood the
// log. The call has no effect, as on any ended step, and does not abort
// the handler, whose cleanup after it still runs. Only calls that have no
// effect come here: a step's success path never does.
func (h *stepAPI) inCancel() (in, first bool) {
	f := h.f
	r := f.rare
	if f.h != h || r == nil || !r.cancelRuns {
		return false, false
	}
	first = !r.cancelTold
	r.cancelTold = true
	return true, first
}

// addRefused is refused for the calls that add sub-steps.
func (h *stepAPI) addRefused(call string) { h.refused(call, addsSteps) }

// abortSignal unwinds a callback after Error, Break, Continue or misuse.
type abortSignal struct{}

// errorCall is the call of Error that a raise stands for, as the misuse
// infos name it: with the code the user gave, which Error replaces by
// InternalError when the call itself is wrong (an empty code, more than
// one info). The raises of Break, Continue and of the engine itself
// pass notError.
type errorCall struct {
	code    string
	isError bool
	fail    bool  // the call is Fail's, not Error's
	cause   error // Fail's Go error, kept as the raised error's Cause
}

var notError errorCall

// name is how an info names the call: "Error(code)", or "Fail(code)".
func (c errorCall) name() string {
	if c.fail {
		return "Fail(" + c.code + ")"
	}
	return "Error(" + c.code + ")"
}

// raise fails the step with code: from outside its callback as an external
// completion; inside it, it records the error and reports that the caller
// must abort the callback with panic(abortSignal{}). The callers panic
// themselves: each frame between the panic and flow.call's recover is
// walked twice, and the walk is most of what an error costs. A call on a
// step that has not waited comes from its callback unless another
// goroutine makes it (docs/DESIGN.md#step-api-states). An Error (call)
// after Add in the same callback is a misuse.
func (h *stepAPI) raise(code, info string, call errorCall) (abort bool) {
	st := h.st.Load()
	if st == 0 && !onCallbackGoroutine() {
		return h.failFromElsewhere(code, info, call)
	}
	if st == 0 && h.f.err != nil && !h.f.handling {
		// The callback recovered the abort of its own error and raises
		// again: its step has failed already, and the first error stands
		// whole, its code with its info (docs/DESIGN.md#stale-steps). The
		// callback is aborted again, as a raise promises.
		return true
	}
	if call.isError && h.inCallback(st) && len(h.f.queue) > 0 {
		h.misuse(call.name() + " called after Add in the same callback")
		st = h.st.Load()
	}
	if st&(stClaim|stDone) != 0 || st == 0 && h.f.succeeded {
		if st&stClaim != 0 {
			h.callOnEnded(st, foreignCallName(code, info, call), inCancelEnds)
		}
		return false // the step has completed: no effect (docs/DESIGN.md#stale-steps)
	}
	if h.inCallback(st) {
		f := h.f
		var err *Error
		if call.cause == nil { // Fail's error is its own: a Break's shared one has no cause
			err = h.signalError(code, info)
		}
		if err == nil {
			err = &Error{Code: code, Info: info, Cause: call.cause}
			if err.Cause == nil {
				err.Cause = f.handledCause(code)
			}
		}
		var exception error = err
		if call.cause != nil {
			exception = call.cause // Fail's Go error, as from outside the callback and for Await
		}
		h.fl.noteError(err, exception)
		if f.err == nil || f.handling {
			f.err, f.handling = err, false
		}
		return true
	}
	h.complete(&Error{Code: code, Info: info, Cause: call.cause})
	return false
}

// signalError returns the loop's shared error for a Break or Continue
// (see signalCache), or nil for any other code or on a tool without pools.
// The code is looked at first: an Error is not worth a call for the pools.
func (h *stepAPI) signalError(code, info string) *Error {
	if code != LoopBreak && code != LoopCont {
		return nil
	}
	if pools := h.fl.sched.pools(); pools != nil {
		return pools.signals.signalError(code, info)
	}
	return nil
}

// complete fails the step from outside its callback; err.Cause, if set, is
// the LastException to record.
func (h *stepAPI) complete(err *Error) {
	if h.claim(stFailed) {
		// An external error is rare: it travels in args, boxed, so that a
		// frame needs no field for it.
		h.f.args = []any{err}
		h.publish(false)
	}
}

// misuse reports a wrong use of the API as an InternalError of the step.
func (h *stepAPI) misuse(info string) {
	if h.raise(InternalError, info, notError) {
		panic(abortSignal{})
	}
}

// handledCause is the Cause of an error of code that f raises itself, by
// Error or a misuse, from its callback or from another goroutine: when f
// is an error handler's frame that still handles the error it was called
// for, the Go error or panic under that error's *Error copies
// (docs/DESIGN.md#error-handlers); nil for any other frame, and for a
// Break or Continue, which are no errors of the handler's own. The
// handled *Error itself is not chained: errors.Is with a template tests
// the code that the handler replaced it with, not the one it replaced.
func (f *frame) handledCause(code string) error {
	if !f.handling || f.err == nil || code == LoopBreak || code == LoopCont {
		return nil
	}
	return goCause(f.err)
}

// maxCauseDepth bounds the *Error causes goCause walks down: a chain that
// a user made into a loop must not hang the loop.
const maxCauseDepth = 16

// goCause returns the first error under the *Error copies that wrap each
// other from e down its Cause: the Go error or panic that started e (the
// engine keeps it under its copies, AwaitResult's for one), or nil if
// there is none within maxCauseDepth. It calls no method of a user's
// error.
func goCause(e *Error) error {
	for range maxCauseDepth {
		next, ok := e.Cause.(*Error)
		switch {
		case !ok:
			return e.Cause
		case next == nil:
			return nil
		}
		e = next
	}
	return nil
}

// exc is the LastException of err: err itself unless it has a cause.
func exc(err *Error) error {
	if err.Cause != nil {
		return err.Cause
	}
	return err
}

// adding reports whether the step accepts new sub-steps, or a way to wait:
// only from its running callback, before it completed. A stale step API
// accepts nothing. The frame is read only when the state says that the
// caller is the callback, on the loop.
func (h *stepAPI) adding() bool {
	st := h.st.Load()
	return st&(stIdle|stClaim|stDone) == 0 && !(st == 0 && h.f.succeeded)
}

func (h *stepAPI) push(s step) AsyncSteps {
	h.f.queue = appendStep(h.f.queue, s)
	return h
}

// Add implements [AsyncSteps].
func (h *stepAPI) Add(fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	if fn != nil && len(onerror) <= 1 && h.adding() {
		// addStep's case of a valid call, without its calls through host.
		h.f.queue = appendStep(h.f.queue, plainStep(fn, firstHandler(onerror)))
		return h
	}
	return addStep(h, fn, onerror)
}

// Parallel implements [AsyncSteps].
func (h *stepAPI) Parallel(onerror ...ErrorFunc) AsyncSteps { return addParallel(h, onerror) }

// State implements [AsyncSteps].
func (h *stepAPI) State() *State { return h.fl.State() }

// CopyFrom implements [AsyncSteps]. As [Root.CopyFrom] and [Root.Clone]
// do, it fails the step with the wrong use recorded on model, or when
// model's flow runs on another goroutine, and copies nothing then.
func (h *stepAPI) CopyFrom(model *Root) AsyncSteps {
	if !h.adding() {
		h.addRefused("CopyFrom") // misplaced: what else is wrong comes after
		return h
	}
	if info := copyRefusal(model); info != "" {
		h.misuse(info)
		return h
	}
	h.f.queue = copySteps(h.f.queue, model.fl.base.queue)
	if model.fl.state != nil {
		h.fl.State().fillMissing(model.fl.state)
	}
	return h
}

// Sync implements [AsyncSteps].
func (h *stepAPI) Sync(obj Syncer, fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addSync(h, obj, fn, onerror)
}

// SuccessStep implements [AsyncSteps].
func (h *stepAPI) SuccessStep(args ...any) AsyncSteps { return addSuccess(h, args) }

// Await implements [AsyncSteps].
func (h *stepAPI) Await(fn AwaitFunc, onerror ...ErrorFunc) AsyncSteps {
	return addAwait(h, fn, onerror)
}

// NewInstance implements [AsyncSteps].
func (h *stepAPI) NewInstance() *Root { return h.fl.newInstance() }

// IsValid implements [AsyncSteps]. A step of a flow whose Loop has
// stopped is not valid, whatever its state word says: the loop runs
// nothing more, so the step can never complete, and the loop ends the
// flow where it stood without killing its step APIs
// (docs/DESIGN.md#closing-a-loop).
func (h *stepAPI) IsValid() bool {
	st := h.st.Load()
	return st&(stClaim|stDone) == 0 && !(st == 0 && h.f.succeeded) && !h.fl.loopStopped()
}

// Tool implements [AsyncSteps].
func (h *stepAPI) Tool() Tool { return h.fl.sched.tool() }

// Success implements [AsyncSteps].
func (h *stepAPI) Success(args ...any) {
	if h.st.Load() == 0 {
		// Running and never waited: surely the callback's own call, on the
		// loop, so the frame can be written without a claim.
		f := h.f
		switch {
		case f.succeeded:
		case len(f.queue) > 0:
			h.misuse("Success called after Add in the same callback")
		default:
			f.args, f.succeeded = args, true
		}
		return
	}
	h.succeedOutside(args, false)
}

// Error implements [AsyncSteps].
func (h *stepAPI) Error(code string, info ...string) {
	call, i := errorCall{code: code, isError: true}, firstLabel(info)
	if code == "" || len(info) > 1 {
		code, i = InternalError, errorCallInfo(code, info)
	}
	if h.raise(code, i, call) {
		panic(abortSignal{})
	}
}

// SetTimeout implements [AsyncSteps].
func (h *stepAPI) SetTimeout(d time.Duration) {
	if !h.adding() {
		h.refused("SetTimeout", makesWait)
		return
	}
	h.fl.armTimeout(h.f, d)
	h.st.Or(stWait)
}

// SetCancel implements [AsyncSteps].
func (h *stepAPI) SetCancel(fn CancelFunc) {
	if !h.setCancel(fn) {
		h.refused("SetCancel", makesWait)
	}
}

// setCancel is SetCancel's valid case; it reports false, having done
// nothing, when the step takes no wait now. Small enough to be inlined
// into the engine's own steps, which call it from their callback.
func (h *stepAPI) setCancel(fn CancelFunc) bool {
	if !h.adding() {
		return false
	}
	h.f.rareFields().onCancel = fn
	h.st.Or(stWait)
	return true
}

// WaitExternal implements [AsyncSteps].
func (h *stepAPI) WaitExternal() {
	if !h.wait() {
		h.refused("WaitExternal", makesWait)
	}
}

// wait is WaitExternal's valid case, as setCancel is SetCancel's.
func (h *stepAPI) wait() bool {
	if !h.adding() {
		return false
	}
	h.st.Or(stWait)
	return true
}

// Loop implements [AsyncSteps].
func (h *stepAPI) Loop(fn LoopFunc, label ...string) AsyncSteps { return addLoop(h, fn, label) }

// Repeat implements [AsyncSteps].
func (h *stepAPI) Repeat(count int, fn RepeatFunc, label ...string) AsyncSteps {
	return addRepeat(h, count, fn, label)
}

// ForEach implements [AsyncSteps].
func (h *stepAPI) ForEach(collection any, fn ForEachFunc, label ...string) AsyncSteps {
	return addForEach(h, collection, fn, label)
}

// Break implements [AsyncSteps].
func (h *stepAPI) Break(label ...string) {
	if info := misuse.ExtraArgs("Break", "label", len(label)); info != "" {
		h.misuse(info)
		return
	}
	if h.raise(LoopBreak, firstLabel(label), notError) {
		panic(abortSignal{})
	}
}

// Continue implements [AsyncSteps].
func (h *stepAPI) Continue(label ...string) {
	if info := misuse.ExtraArgs("Continue", "label", len(label)); info != "" {
		h.misuse(info)
		return
	}
	if h.raise(LoopCont, firstLabel(label), notError) {
		panic(abortSignal{})
	}
}

// run lets a step API be queued on a loop as is: it continues the flow at the
// step API's frame, or delivers the step's external completion. A step API whose
// frame has moved on to another incarnation is stale and does nothing.
func (h *stepAPI) run() {
	f, fl := h.f, h.fl
	if f.h != h || f.over || fl.done {
		return
	}
	if fl.inCall {
		fl.deferTask(h)
		return
	}
	if f.waiting {
		f.waiting = false
		fl.drive(fl.completed(f))
		return
	}
	fl.drive(f)
}
