package asyncsteps

import (
	"slices"
	"sync/atomic"
	"time"
)

// step is a queued step definition. It is never modified once queued, but
// for the branches of a Parallel, which the value Parallel returned adds
// to: Clone and CopyFrom copy those (detached), and share the rest.
type step struct {
	// impl is the step's StepFunc, the stepKind of a built-in step, or,
	// for a step with an error handler, a *guarded holding either: one
	// field, so that a step is 16 bytes and a flow's first four steps fit
	// a 64-byte array. Most steps have no handler of their own.
	impl any
}

// guarded is a step with its error handler.
type guarded struct {
	impl    any // StepFunc or stepKind
	onerror ErrorFunc
}

// plainStep and builtinStep make the two kinds of step. They type impl:
// a function literal stored as is would not be a StepFunc.
func plainStep(fn StepFunc, onerror ErrorFunc) step { return newStep(fn, onerror) }

func builtinStep(k stepKind, onerror ErrorFunc) step { return newStep(k, onerror) }

func newStep(impl any, onerror ErrorFunc) step {
	if onerror != nil {
		return step{impl: &guarded{impl: impl, onerror: onerror}}
	}
	return step{impl: impl}
}

// copySteps appends to dst the steps of src, detached from the model.
func copySteps(dst, src []step) []step {
	dst = slices.Grow(dst, len(src))
	for _, s := range src {
		dst = append(dst, s.detached())
	}
	return dst
}

// detached returns s, or a copy of it whose Parallel definition is a copy,
// so that branches added to the model's afterwards are not in it.
func (s step) detached() step {
	impl, onerror := s.parts()
	d, ok := impl.(*parallelDef)
	if !ok {
		return s
	}
	return builtinStep(d.clone(), onerror)
}

// parts returns what the step runs, a StepFunc or a stepKind, and its
// error handler.
func (s *step) parts() (impl any, onerror ErrorFunc) {
	if g, ok := s.impl.(*guarded); ok {
		return g.impl, g.onerror
	}
	return s.impl, nil
}

// plain returns the step's StepFunc if it is a plain step without an error
// handler, or nil.
func (s *step) plain() StepFunc {
	fn, _ := s.impl.(StepFunc)
	return fn
}

// stepKind gives a step a built-in behaviour (loop, parallel) in place of a
// user callback. newControl makes the per-execution state.
type stepKind interface {
	newControl() control
}

// control drives a frame of a built-in step. All methods run on the loop.
type control interface {
	// begin starts the step; it returns the frame to go on with, or nil
	// when the flow waits.
	begin(f *frame) *frame
	// drained is called when f has run all its queued sub-steps; it reports
	// whether it queued more (the next loop iteration).
	drained(f *frame) bool
	// catch is offered an error unwinding through f; it returns the frame
	// to go on with and true when it handles the error.
	catch(f *frame, err *Error) (*frame, bool)
}

// Handle states, in handle.st. The loop goroutine owns frames, but a waiting
// step may be completed from any goroutine, so the hand-over between the two
// is this word alone.
//
// The zero state is "callback running": a fresh handle needs no store, and
// a step that completes from its own callback without having waited (the
// common case) costs no atomic read-modify-write but the one that kills the
// handle when the callback returns.
const (
	stIdle   uint32 = 1 << iota // the step's callback is not running
	stWait                      // the step may be completed from outside
	stClaim                     // Success or Error has claimed the completion
	stReady                     // the claimed completion is written
	stDone                      // the handle is dead: no completion accepted
	stFailed                    // with stReady: the completion is an error, in args[0]
)

// frame mode
const (
	modeStep    uint8 = iota // a step's callback and its sub-steps
	modeHandler              // an error handler that took over a failed step
	modeBranch               // the root of one parallel branch
	modeBase                 // the root of the flow
)

// handle is the AsyncSteps value given to one callback: the identity of one
// incarnation of a frame. Handles are never reused, so a handle kept after
// its step has completed stays dead (API decision 12) while the frame behind
// it is recycled for later steps. A handle is also what the engine queues on
// the loop to continue a frame, so a queued continuation whose frame has
// moved on is recognised as stale.
type handle struct {
	st atomic.Uint32
	f  *frame // immutable; the frame's fields belong to the loop
	fl *flow  // immutable; what other goroutines may reach
}

// frame is one running step: its callback, then its sub-steps. Frames are
// owned by the flow's loop goroutine and recycled through the loop's pool,
// by any flow of the loop; only the current handle's completion (args) is
// written by other goroutines, and only after a successful claim. A frame
// whose claim is still being written is never recycled (consumed is false).
// At 128 bytes it is two cache lines: a parked flow is its Root (208 bytes,
// with its base frame), the frame of the waiting step and its handle.
type frame struct {
	// The fields every step touches come first: in the base frame, within
	// one cache line of the Root.
	active *frame // the sub-step running now
	mode   uint8

	over      bool // finished or unwound
	waiting   bool // suspended until an external completion
	consumed  bool // no other goroutine may still write to the frame
	succeeded bool // Success was called by the callback itself, args in args
	unstarted bool // a parallel branch frame whose own step has not run yet
	fast      bool // a parallel branch frame whose own step has not completed
	handling  bool // err is the error this handler frame handles, not one it raised

	queue  []step
	args   []any   // input of the next sub-step, then the frame's result
	h      *handle // the current incarnation; h.fl is the frame's flow
	parent *frame
	// impl is what the frame runs: its step's StepFunc (kept in a handler
	// frame for AsyncStack), the control of a built-in step, or, once the
	// step has entered a critical section, the *section its sub-steps
	// share; see fn and ctl.
	impl any

	onerror  ErrorFunc
	onCancel CancelFunc
	timer    *timerEntry

	// err is the error the callback raised (Error, Break, Continue or a
	// panic) or, while handling is set, the error this handler frame
	// handles. A completion from outside the callback is written to args
	// (stClaim, then stReady, and stFailed for an error: see complete).
	err *Error
}

// fn returns the frame's step function, or nil.
func (f *frame) fn() StepFunc {
	fn, _ := f.impl.(StepFunc)
	return fn
}

// ctl returns the control of a built-in step's frame, or nil. A type switch
// on the two kinds is cheaper than asserting to the interface.
func (f *frame) ctl() control {
	switch c := f.impl.(type) {
	case *loopRun:
		return c
	case *parallelRun:
		return c
	}
	return nil
}

// inCallback reports whether a call with handle state st comes from the
// step's own running callback, i.e. may abort it by panicking. A waiting
// step may also be completed from another goroutine while its callback still
// runs; only then is the (slower) goroutine check needed.
func (h *handle) inCallback(st uint32) bool {
	if st&stIdle != 0 {
		return false
	}
	return st&stWait == 0 || h.fl.sched.IsSameThread()
}

// claim takes the right to complete the step: only one Success or Error of
// a step counts.
func (h *handle) claim() bool {
	for {
		st := h.st.Load()
		if st&(stClaim|stDone) != 0 {
			return false
		}
		if h.st.CompareAndSwap(st, st|stClaim) {
			return true
		}
	}
}

// publish marks the written completion as ready. If the callback has already
// returned, nobody on the loop will look at the step again by itself, so the
// completion is handed to the loop: posted to its own queue when the caller
// runs on that loop (onLoop), else injected through the inbox's lock.
func (h *handle) publish(bits uint32, onLoop bool) {
	if h.st.Or(stReady|bits)&stIdle == 0 {
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
func (h *handle) succeedOutside(args []any, onLoop bool) {
	if h.claim() {
		h.f.args = args
		h.publish(0, onLoop)
		return
	}
	if !onLoop && h.st.Load()&stDone != 0 {
		h.completedBySubstep("Success")
	}
}

// completedBySubstep handles Success or Error (call) on the dead handle h
// of a step that still waits for its sub-steps, from the callback of one
// of them: spec section 1 makes that an InternalError, which the step's
// error handler sees, raised in the callback that made the call. From any
// other goroutine, or on a step that has completed, the call has no
// effect, as on any dead handle.
func (h *handle) completedBySubstep(call string) {
	if !h.fl.sched.IsSameThread() {
		return // the frame belongs to the loop's goroutine: not read here
	}
	f := h.f
	if f.h != h || f.over || f.active == nil {
		return
	}
	c := f.active
	for c.active != nil {
		c = c.active
	}
	if c.h.st.Load()&stIdle == 0 && c.mode != modeBranch {
		c.h.misuse(call + " called on the AsyncSteps of a step that waits for its sub-steps")
	}
}

// onOneLoop reports whether the flows a and b run on the same Loop. Only a
// Loop is matched: for a TestTool, posting and injecting are one queue, and
// a foreign Tool need not be comparable.
func onOneLoop(a, b *flow) bool {
	l, ok := a.sched.(*Loop)
	return ok && b.sched == scheduler(l)
}

// abortSignal unwinds a callback after Error, Break, Continue or misuse.
type abortSignal struct{}

// raise fails the step with code: from outside its callback as an external
// completion; inside it, it records the error and reports that the caller
// must abort the callback with panic(abortSignal{}). The callers panic
// themselves: each frame between the panic and flow.call's recover is
// walked twice, and the walk is most of what an error costs.
func (h *handle) raise(code, info string, cause error) (abort bool) {
	st := h.st.Load()
	if st&(stClaim|stDone) != 0 || st == 0 && h.f.succeeded {
		if st&stDone != 0 && code != LoopBreak && code != LoopCont {
			h.completedBySubstep("Error(" + code + ")")
		}
		return false // the step has completed: no effect (API decision 12)
	}
	err := &Error{Code: code, Info: info, Cause: cause}
	if h.inCallback(st) {
		f := h.f
		h.fl.noteError(err, exc(err))
		if f.err == nil || f.handling {
			f.err, f.handling = err, false
		}
		return true
	}
	h.complete(err)
	return false
}

// complete fails the step from outside its callback; err.Cause, if set, is
// the LastException to record.
func (h *handle) complete(err *Error) {
	if h.claim() {
		// An external error is rare: it travels in args, boxed, so that a
		// frame needs no field for it.
		h.f.args = []any{err}
		h.publish(stFailed, false)
	}
}

// misuse reports a wrong use of the API as an InternalError of the step.
func (h *handle) misuse(info string) {
	if h.raise(InternalError, info, nil) {
		panic(abortSignal{})
	}
}

// exc is the LastException of err: err itself unless it has a cause.
func exc(err *Error) error {
	if err.Cause != nil {
		return err.Cause
	}
	return err
}

// adding reports whether the step accepts new sub-steps, or a way to wait:
// only from its running callback, before it completed. A stale handle
// accepts nothing. The frame is read only when the state says that the
// caller is the callback, on the loop.
func (h *handle) adding() bool {
	st := h.st.Load()
	return st&(stIdle|stClaim|stDone) == 0 && !(st == 0 && h.f.succeeded)
}

func (h *handle) push(s step) AsyncSteps {
	h.f.queue = appendStep(h.f.queue, s)
	return h
}

// appendStep appends s to the queue q. An empty queue gets room for four
// steps at once, since most flows and steps have a few: it grows once, not
// thrice. A recycled frame may bring the tail of an array its earlier steps
// were popped from, too short to be worth filling.
func appendStep(q []step, s step) []step {
	if len(q) == 0 && cap(q) < 4 {
		q = make([]step, 0, 4)
	}
	return append(q, s)
}

// Add implements [AsyncSteps].
func (h *handle) Add(fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addStep(h, fn, onerror)
}

// Parallel implements [AsyncSteps].
func (h *handle) Parallel(onerror ...ErrorFunc) AsyncSteps { return addParallel(h, onerror) }

// State implements [AsyncSteps].
func (h *handle) State() *State { return h.fl.State() }

// CopyFrom implements [AsyncSteps].
func (h *handle) CopyFrom(model *Root) AsyncSteps {
	if model == nil {
		h.misuse("CopyFrom: nil model")
		return h
	}
	if h.adding() {
		h.f.queue = copySteps(h.f.queue, model.fl.base.queue)
		if model.fl.state != nil {
			h.fl.State().fillMissing(model.fl.state)
		}
	}
	return h
}

// Sync implements [AsyncSteps].
func (h *handle) Sync(obj Syncer, fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addSync(h, obj, fn, onerror)
}

// SuccessStep implements [AsyncSteps].
func (h *handle) SuccessStep(args ...any) AsyncSteps { return addSuccess(h, args) }

// Await implements [AsyncSteps].
func (h *handle) Await(fn AwaitFunc, onerror ...ErrorFunc) AsyncSteps {
	return addAwait(h, fn, onerror)
}

// NewInstance implements [AsyncSteps].
func (h *handle) NewInstance() *Root { return h.fl.newInstance() }

// IsValid implements [AsyncSteps].
func (h *handle) IsValid() bool {
	st := h.st.Load()
	return st&(stClaim|stDone) == 0 && !(st == 0 && h.f.succeeded)
}

// Tool implements [AsyncSteps].
func (h *handle) Tool() Tool { return h.fl.sched.tool() }

// Success implements [AsyncSteps].
func (h *handle) Success(args ...any) {
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
func (h *handle) Error(code string, info ...string) {
	if st := h.st.Load(); h.inCallback(st) && len(h.f.queue) > 0 {
		h.misuse("Error(" + code + ") called after Add in the same callback")
	}
	if h.raise(code, firstLabel(info), nil) {
		panic(abortSignal{})
	}
}

// SetTimeout implements [AsyncSteps].
func (h *handle) SetTimeout(d time.Duration) {
	if !h.adding() {
		return
	}
	h.fl.armTimeout(h.f, d)
	h.st.Or(stWait)
}

// SetCancel implements [AsyncSteps].
func (h *handle) SetCancel(fn CancelFunc) {
	if !h.adding() {
		return
	}
	h.f.onCancel = fn
	h.st.Or(stWait)
}

// WaitExternal implements [AsyncSteps].
func (h *handle) WaitExternal() {
	if !h.adding() {
		return
	}
	h.st.Or(stWait)
}

// Loop implements [AsyncSteps].
func (h *handle) Loop(fn LoopFunc, label ...string) AsyncSteps { return addLoop(h, fn, label) }

// Repeat implements [AsyncSteps].
func (h *handle) Repeat(count int, fn RepeatFunc, label ...string) AsyncSteps {
	return addRepeat(h, count, fn, label)
}

// ForEach implements [AsyncSteps].
func (h *handle) ForEach(collection any, fn ForEachFunc, label ...string) AsyncSteps {
	return addForEach(h, collection, fn, label)
}

// Break implements [AsyncSteps].
func (h *handle) Break(label ...string) {
	if h.raise(LoopBreak, firstLabel(label), nil) {
		panic(abortSignal{})
	}
}

// Continue implements [AsyncSteps].
func (h *handle) Continue(label ...string) {
	if h.raise(LoopCont, firstLabel(label), nil) {
		panic(abortSignal{})
	}
}

// owner returns the frame that stands for the flow, or the parallel branch,
// that as runs in: what synchronization primitives count as one holder
// (spec 1.11.4). It is nil for a value that is not a running step. Branch
// and base frames are never recycled, so the key stays unique.
func owner(as AsyncSteps) *frame {
	h, ok := as.(*handle)
	if !ok {
		return nil
	}
	return ownerOf(h.f)
}

// outerOwner returns the owner that the parallel branch o was started from,
// or nil when o is the whole flow.
func outerOwner(o *frame) *frame {
	if o.mode != modeBranch {
		return nil
	}
	return ownerOf(o.parent)
}

func ownerOf(f *frame) *frame {
	for f.mode != modeBranch && f.mode != modeBase {
		f = f.parent
	}
	return f
}
