package asyncsteps

import (
	"context"
	"reflect"
	"runtime/debug"
	"sync/atomic"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// This file holds typed helpers for Go code that meets a flow: waiting for a
// channel or for another flow, and reading success arguments. They are built
// on the public API, so they behave like hand-written steps; they live here
// rather than as methods because Go methods cannot have type parameters.

// AwaitChan adds a step that waits for one value from ch and succeeds with it
// as its single argument, like [AsyncSteps.Await] for a channel. As with a
// receive expression, a closed channel gives the zero value and a nil channel
// never delivers. onerror is the step's error handler.
//
// A value already waiting is taken at once, without a goroutine. Otherwise a
// goroutine waits on ch and on the step's cancellation (a timeout, a failed
// parallel sibling, [Root.Cancel], the end of [Root.Run]'s context), so it
// ends whichever comes first. A value received while the step is being
// cancelled is dropped: it is not put back into ch.
//
// No goroutine can be spared in general: Go has no way to be told that a
// channel is ready, and the loop must never block on one.
func AwaitChan[T any](as AsyncSteps, ch <-chan T, onerror ...ErrorFunc) AsyncSteps {
	if refusedExtraHandlers(as, "AwaitChan", onerror) {
		return as
	}
	return as.Add(recvStep(func(*stepAPI) (<-chan T, *flowWatch) { return ch, nil }, succeed[T], nil), onerror...)
}

// AwaitResult adds a step that waits for a [Result] from ch (typically the
// channel of another flow's [Root.Promise]) and completes like that flow did:
// it succeeds with Result.Args, or fails with the code [ErrorFrom] gives
// Result.Err, as [AsyncSteps.Await] does (State().LastException holds
// Result.Err, and the step's error has it as Cause).
//
// Given a decorator of a step's AsyncSteps (see [Unwrapper]), the step
// fails the same way: the failure goes to the engine's step that the
// decorator unwraps to, not through the decorator's Error, which takes no
// cause (nor is it called when an Await step fails). A decorator that does
// not unwrap can only be failed through its Error: the flow then sees an
// *Error of Result.Err's code and info, without Result.Err. Success goes
// through the decorator's Success either way. The methods of a decorator
// that does not unwrap run on the goroutine that waited for ch: a panic in
// its Success fails the step with InternalError, through its Error, as a
// panic in an Await function does.
//
// Cancelling the step stops the wait but not the flow behind ch: use
// [AwaitFlow] to own that flow. As with [AwaitChan], a nil ch never
// delivers: the step ends only by its timeout or a cancel.
func AwaitResult(as AsyncSteps, ch <-chan Result, onerror ...ErrorFunc) AsyncSteps {
	if refusedExtraHandlers(as, "AwaitResult", onerror) {
		return as
	}
	return as.Add(recvStep(func(*stepAPI) (<-chan Result, *flowWatch) { return ch, nil }, complete, nil), onerror...)
}

// AwaitFlow adds a step that runs the flow other as a sub-flow: the step
// starts other (as [Root.Promise] does) when it runs, and completes like
// other ends, as [AwaitResult] describes. other may run on another [Tool].
//
// Cancelling the step (its timeout, a failed parallel sibling, the
// cancellation of the flow it is in) cancels other, and so does closing
// the step's [Loop], which runs no cancel handler. other stops
// asynchronously: its cancel handlers may run on its own loop after the step
// has been cancelled. A nil other, or one that is already running, fails the
// step with InternalError. If other's loop is closed before other ends, the
// step fails with InternalError, "the awaited flow's loop is closed" (its
// Cause the error other ended with), which tells it from the closing of
// the step's own loop. An error other passes on from a flow of another
// closed loop (one it awaited with AwaitResult) fails the step as it is.
//
// other runs under the values of the context of the flow that the step is
// in: those of the context given to [Root.Run] (or [Root.PromiseContext],
// [Root.ExecuteThenContext]), and what that flow's FlowStart hook added
// (see [Hooks]). So other's hooks and its [AsyncSteps.Await] functions see
// them: a tracing hook makes other's span a child of the awaiting flow's
// (package otelsteps gives the step a span of its own, other's parent),
// and the request's values (a tenant, a logger) reach other's functions.
// Values only: that context's deadline and cancel do not reach other,
// which the step alone cancels, as above. A step given through a decorator
// that does not unwrap (see [Unwrapper]) has no flow the engine can see:
// other then runs under context.Background()'s, as with Promise.
func AwaitFlow(as AsyncSteps, other *Root, onerror ...ErrorFunc) AsyncSteps {
	if refusedExtraHandlers(as, "AwaitFlow", onerror) {
		return as
	}
	if other == nil {
		return as.Add(func(as AsyncSteps, _ ...any) {
			runsFor(as, nil)
			as.Error(InternalError, "AwaitFlow: nil Root")
		}, onerror...)
	}
	return as.Add(awaitFlowStep(other), onerror...)
}

// awaitFlowStep returns the step of AwaitFlow on other. A step whose
// flow's context holds an observer of AwaitFlow steps (see
// toolinfo.AwaitFlowKey) reports to it as it starts other, under the
// context the observer returns, and as it ends (see flowWatch). The
// watch goes with the run of the step, from its start to its end, so
// that a step with none costs no allocation for it.
func awaitFlowStep(other *Root) StepFunc {
	start := func(h *stepAPI) (<-chan Result, *flowWatch) {
		if w := watchAwaitFlow(h); w != nil {
			return w.startFlow(h, other), w
		}
		return other.promiseUnder(subflowContext(h, nil)), nil
	}
	return recvStep(start, completeAwaited(other), other)
}

// subflowContext returns the context that the flow of an AwaitFlow step
// h begins with: the values of outer, else of h's flow's context (see
// flowContext), without its deadline or cancel, and a token of this
// start under toolinfo.SubflowKey. A hook that wraps otelsteps' may fail
// the flow's start, whose StepError and FlowEnd then get this context,
// with the awaiting flow's record of otelsteps in it: the token tells
// otelsteps that that record is not the failed flow's. Without either (a
// decorator that does not unwrap), context.Background()'s values. On the
// loop, in the step's callback.
func subflowContext(h *stepAPI, outer context.Context) context.Context {
	switch {
	case outer != nil:
	case h != nil:
		outer = h.fl.flowContext()
	default:
		outer = context.Background()
	}
	return &subflowCtx{Context: context.WithoutCancel(outer)}
}

// flowWatch is the report of one run of an AwaitFlow step to the
// observer its flow's context holds (see toolinfo.AwaitFlowObserver).
type flowWatch struct {
	obs toolinfo.AwaitFlowObserver
	// step is the step's context: the values of its flow's context, the
	// deadline around the step, cancelled with the step. An Await
	// function's context is made so, and tells a timeout from a cancel
	// alike (see awaitCall.cause); it runs no function here.
	step *awaitCall
	ctx  context.Context // what AwaitFlowStart returned, or step
	// ended is set by the first end: the step ends on its loop (a
	// cancel, a Result taken at once) or on the goroutine that waits for
	// the Result, and both may see it end at once.
	ended atomic.Bool
	// told is closed by the first end, for the goroutine that handed the
	// Result to the loop to stop watching the loop's close (see
	// endOrDrop).
	told chan struct{}
}

// watchAwaitFlow returns the watch of the AwaitFlow step h, nil if its
// flow's context holds no observer, or h is nil (a decorator that does
// not unwrap). On the loop, in the step's callback.
func watchAwaitFlow(h *stepAPI) *flowWatch {
	if h == nil {
		return nil
	}
	obs, _ := h.fl.flowContext().Value(toolinfo.AwaitFlowKey{}).(toolinfo.AwaitFlowObserver)
	if obs == nil {
		return nil
	}
	return &flowWatch{obs: obs, told: make(chan struct{})}
}

// startFlow reports the start of the step h to the observer, then starts
// other under the values of the context the observer returned. A start
// of other that fails (other is running; a Tool of the user's panicked
// or called runtime.Goexit as it was given the flow) fails the step as
// before, and is its end: the observer is told of the error the step
// fails with, before the panic goes on.
func (w *flowWatch) startFlow(h *stepAPI, other *Root) <-chan Result {
	c := &awaitCall{h: h}
	c.Context = h.fl.flowContext()
	h.fl.setDeadlines(c, h.f)
	w.step, w.ctx = c, c
	if ctx := w.obs.AwaitFlowStart(c); ctx != nil { // nil keeps ctx
		w.ctx = ctx
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		// The step's error, made as the engine makes a callback's, which
		// it goes on to do.
		if r := recover(); r != nil {
			w.end(panicError(r, debug.Stack()))
			panic(r)
		}
		w.end(newGoexitError())
	}()
	ch := other.promiseUnder(subflowContext(h, w.ctx))
	returned = true
	return ch
}

// end reports the end of the step to the observer, with err, the error
// the step fails with (nil: none), unless an end was reported already.
func (w *flowWatch) end(err *Error) {
	if w == nil || !w.ended.CompareAndSwap(false, true) {
		return
	}
	w.tell(err)
}

// cancelled reports the end of a step that a cancel or a timeout ended,
// or the closing of its loop, unless an end was reported already: the
// step's context is cancelled first, and says which. Only then: the
// cancel handler of a step whose failure another goroutine has claimed
// runs, as applying the failure would, while that goroutine tells the
// failure; cancelled under the observer, the context made that end read
// as a cancel too.
func (w *flowWatch) cancelled() {
	if w == nil || !w.ended.CompareAndSwap(false, true) {
		return
	}
	w.step.cancel()
	w.tell(nil)
}

// tell tells the observer the end of the step, with err as for end, once
// the caller has taken the right to. The step has ended, or ends as it
// would have: a panic of the observer is logged.
func (w *flowWatch) tell(err *Error) {
	close(w.told)
	defer recoverHook("AwaitFlowEnd")
	if err == nil {
		w.obs.AwaitFlowEnd(w.ctx, nil) // not a nil *Error in an error
		return
	}
	w.obs.AwaitFlowEnd(w.ctx, err)
}

// endOrDrop waits, on the goroutine that handed the step's Result to its
// loop in a task (see loopDelivery), until the step's end has been told,
// or the loop has closed (closed: its lifetime's Done, nil for a tool
// that never closes): a closing loop drops that task unrun, as any, and
// the step ends with its flow, which tells no one else. The end is told
// then as for a step that the closing of its loop ends.
func (w *flowWatch) endOrDrop(closed <-chan struct{}) {
	if w == nil || closed == nil {
		return
	}
	select {
	case <-w.told:
	case <-closed:
		w.cancelled() // nothing if the task told the end first
	}
}

// subflowCtx is the context of subflowContext, which is its own token.
type subflowCtx struct{ context.Context }

func (c *subflowCtx) Value(key any) any {
	if key == (toolinfo.SubflowKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// String names the context, as those of the context package do.
func (c *subflowCtx) String() string { return "asyncsteps.AwaitFlow context" }

// completeAwaited returns complete for the step of AwaitFlow on other: a
// flow ended by the closing of its loop names that loop as the awaited
// flow's. The same code and info may come from elsewhere (a flow of a
// closed loop that other awaited with AwaitResult): that error, a copy
// with a Cause, or one other raised while its loop runs on, is other's
// own, passed on as it is. The end of the step, with the error it fails
// with, goes to w, if not nil, as the step takes it: on the goroutine
// that received res, once the completion is claimed, before it is
// written (see completeOutside); on the loop, once the step has taken
// the completion, from what it took (see deliverInTask and
// deliverInCallback).
func completeAwaited(other *Root) func(as AsyncSteps, h *stepAPI, res Result, w *flowWatch) {
	return func(as AsyncSteps, h *stepAPI, res Result, w *flowWatch) {
		if e, ok := res.Err.(*Error); ok && e.Code == InternalError && e.Info == loopClosedInfo &&
			e.Cause == nil && other.onClosedLoop() {
			res.Err = &Error{Code: InternalError, Info: "the awaited flow's loop is closed", Cause: e}
		}
		switch st := h.stateOf(w); {
		case w == nil:
			complete(as, h, res, nil)
		case as == AsyncSteps(h) && st&stWait != 0:
			// The step itself, which waits: from the goroutine that
			// received res (its callback made it wait before that
			// goroutine began). A runtime.Goexit of the mapping of
			// res.Err fails the step there (see deliverOutside).
			e := awaitError(res.Err)
			if testHookAwaitFlowClaim != nil {
				testHookAwaitFlowClaim()
			}
			w.completeOutside(h, res.Args, e)
		case st&stIdle != 0:
			w.deliverInTask(as, h, res)
		default:
			w.deliverInCallback(as, h, res)
		}
	}
}

// stateOf returns the state word of h, the step of w, if w is not nil;
// else 0, h being nil (a decorator that does not unwrap) or unread.
func (h *stepAPI) stateOf(w *flowWatch) uint32 {
	if w == nil {
		return 0
	}
	return h.st.Load()
}

// deliverInTask completes the step h through as, a decorator of it, in a
// task on its loop (see loopDelivery), and tells w of the end that the
// step takes then: the decorator's Success may complete the step and
// panic after, or panic, or call runtime.Goexit, before it does, which
// fails the step with an InternalError as completeOrFail would (it then
// finds the step completed), or call the step's Error instead. Told
// before the decorator's Success, the success was the end of a step that
// failed.
func (w *flowWatch) deliverInTask(as AsyncSteps, h *stepAPI, res Result) {
	returned := false
	defer func() {
		if !returned {
			h.complete(callbackFault(recover()))
		}
		w.endAsTaken(h)
	}()
	completeWith(as, h, res, awaitError(res.Err))
	returned = true
}

// endAsTaken tells w of the end of its step h as the completion h has
// taken says, on its loop, after a completion there: nil for a success,
// the error of a failure. A step that has taken none (a decorator's
// Success that did not call the step's) waits on, and its cancel or its
// timeout tells its end; one that a cancel ended has told it.
func (w *flowWatch) endAsTaken(h *stepAPI) {
	st := h.st.Load()
	switch {
	case st&(stClaim|stReady|stDone) != stClaim|stReady:
	case st&stFailed == 0:
		w.end(nil)
	default:
		e, _ := h.f.args[0].(*Error) // see complete
		w.end(e)
	}
}

// deliverInCallback completes the step h through as, itself or a
// decorator of it, in its callback, res having been ready as it ran, and
// tells w of the end that the step takes: as it completes it, or, should
// that panic or call runtime.Goexit (a decorator's Success, the mapping of
// res.Err), the error made as the engine makes a callback's, which it
// goes on to do (see startFlow), or, should it fail the step (a
// decorator's Success that calls Error, which aborts the callback), that
// error.
func (w *flowWatch) deliverInCallback(as AsyncSteps, h *stepAPI, res Result) {
	var e *Error
	returned := false
	defer func() {
		if returned {
			w.end(e)
			return
		}
		switch r := recover(); r.(type) {
		case nil:
			w.end(newGoexitError())
		case abortSignal:
			w.end(h.f.err)
			panic(r)
		default:
			w.end(panicError(r, debug.Stack()))
			panic(r)
		}
	}()
	e = awaitError(res.Err)
	completeWith(as, h, res, e)
	returned = true
}

// testHookAwaitFlowClaim, set by a test, runs on the goroutine that
// received the Result of an AwaitFlow step that it completes itself, as
// it is about to claim the step's completion: where a cancel of the step
// may come first.
var testHookAwaitFlowClaim func()

// completeOutside completes h, the step of w (nil: none to tell), from
// outside its callback, as Success(args...) from another goroutine does,
// or fails it with e if not nil, as complete does, and tells w of the
// end once the completion is claimed, as the step then sees it: a cancel
// that ends the step first runs its cancel handler, which tells the
// cancel, and the completion has no effect; one that comes after a
// claimed success finds the step completed, and runs no cancel handler
// (docs/DESIGN.md#cancel-handlers); one that comes after a claimed
// failure runs it, as applying the failure would, and it finds the
// failure told (see flowWatch.cancelled). Told before the claim, the
// success was the end of a step that was cancelled. The completion is written
// after the end is told, also when the observer calls runtime.Goexit:
// the claim keeps the step for it until then.
func (w *flowWatch) completeOutside(h *stepAPI, args []any, e *Error) {
	kind := uint32(0)
	if e != nil {
		kind, args = stFailed, []any{e} // an external error travels in args: see complete
	}
	if !h.claim(kind) {
		return // ended: its cancel handler tells the end, or has told it
	}
	defer func() {
		h.f.args = args
		h.publish(false)
	}()
	w.end(e)
}

// onClosedLoop reports whether r runs on a Loop that Close has stopped, or
// is stopping.
func (r *Root) onClosedLoop() bool {
	l, ok := r.fl.sched.(*Loop)
	return ok && l.closing.Load()
}

// recvStep returns a step that waits for one value from the channel open
// returns, given the engine's step (nil if unknown), and hands it to
// deliver, with the engine's step behind the
// step's AsyncSteps (see stepOf). owned, if not nil, is the flow the step
// owns: it is cancelled when the step is. The watch open returns with
// the channel (see flowWatch), if not nil, is told of a step that a
// cancel ends, or the closing of its loop; deliver, given it, tells it
// of the other ends.
//
// The fast path runs deliver inside the callback. Otherwise the waiting
// goroutine calls deliver as an external completion; if the step was
// cancelled meanwhile, the completion is refused by the step itself
// (docs/DESIGN.md#stale-steps), so the goroutine never blocks on the flow and
// never needs to
// know whether the step is still alive. Through a decorator of a step of
// this package (see Unwrapper), deliver calls the decorator's methods,
// user code: it runs in a task on the flow's loop (see loopDelivery), not
// on the waiting goroutine, which nothing recovers.
func recvStep[T any](open func(h *stepAPI) (<-chan T, *flowWatch), deliver func(as AsyncSteps, h *stepAPI, v T, w *flowWatch), owned *Root) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		h := stepOf(as) // while the callback runs: see unwrapStep
		// The step runs none of the user's functions: AsyncStack leaves
		// it out, and ends with the step that called the helper.
		runsFor(as, nil)
		ch, w := open(h)
		select {
		case v := <-ch: // never ready on a nil channel
			deliver(as, h, v, w)
			return
		default:
		}
		cancelled := make(chan struct{})
		as.SetCancel(func(AsyncSteps) {
			close(cancelled) // cancel handlers run at most once
			// Before owned's cancel, which calls owned's Tool, user code
			// that may panic or call runtime.Goexit.
			w.cancelled()  // nothing for a nil watch
			owned.Cancel() // nothing for a nil Root
		})
		if ch == nil {
			return // only a cancellation ends the step: nothing to wait on
		}
		loop := loopOf(as, h)
		counted := loop.live().enter()
		// The goroutine works out from what it captures anyway the rest
		// of what it needs: its function stays in a smaller size class.
		go func() {
			if counted {
				defer loop.live().exit()
			}
			closed := loop.lifetimeDone()
			_, own := as.(*stepAPI)
			select {
			case v := <-ch:
				if h != nil && !own { // a decorator of the step h
					h.fl.sched.inject(&loopDelivery{h: h, deliver: func() { deliver(as, h, v, w) }})
					if testHookDeliveryInjected != nil {
						testHookDeliveryInjected()
					}
					w.endOrDrop(closed)
					return
				}
				deliverOutside(as, h, v, w, deliver)
			case <-cancelled:
			case <-closed:
				w.cancelled() // the loop runs the cancel handler no more
				cancelUnlessCancelled(owned, cancelled)
			}
		}()
	}
}

// testHookDeliveryInjected, set by a test, runs once the goroutine that
// waited for the Result of a decorated step has handed it to the loop,
// before it watches for the step's end: where a Close of the loop may
// drop the delivery.
var testHookDeliveryInjected func()

// cancelUnlessCancelled cancels owned, if not nil, for a step whose loop
// has closed, unless the step's cancel handler has run, which cancels it
// itself. A closed loop runs no cancel handler, yet what the step owns
// (the flow of AwaitFlow, on another loop) must not go on for a flow
// that is gone. The loop is closed once it runs no callback any more:
// a handler that has not closed cancelled by then never will. It runs on
// the goroutine that waited for the step, where a panic of the Immediate
// of owned's tool must be logged, not end the process (see
// Root.cancelOutside).
func cancelUnlessCancelled(owned *Root, cancelled <-chan struct{}) {
	if owned == nil {
		return
	}
	select {
	case <-cancelled:
	default:
		owned.cancelOutside()
	}
}

// stepOf returns the engine's step API that as is, or that the decorator
// as wraps (see unwrapStep), or nil. Call it while the step's callback
// runs; the step API it returns may be completed from anywhere after.
func stepOf(as AsyncSteps) *stepAPI {
	if h, ok := as.(*stepAPI); ok {
		return h
	}
	return unwrapStep(as)
}

// loopOf returns the Loop that runs the step of h, or nil: the goroutine
// that waits for the step ends at its close (its lifetime, see
// scheduler.lifetime), and counts for its Wait meanwhile. Without h, the
// step of as, which does not unwrap to one of this package (a decorator
// without Unwrap), runs on the Loop its Tool names, if any: a goroutine
// waiting for the step must not outlive that Loop either
// (docs/DESIGN.md#closing-a-loop).
func loopOf(as AsyncSteps, h *stepAPI) *Loop {
	var tool any
	if h != nil {
		tool = h.fl.sched
	} else {
		tool = as.Tool()
	}
	if l, ok := tool.(*Loop); ok && l != nil && !l.unmade() {
		return l
	}
	return nil // a zero Loop never runs a step
}

// deliverOutside hands v to deliver on the goroutine that received it for
// the step of as (h, if known). Mapping a Result's error to a code runs
// the error's methods, user code: one that calls runtime.Goexit ends the
// goroutine, and the step fails then as after a Goexit in an Await
// function, instead of waiting for a completion that never comes (w, if
// not nil, told of it as the step takes it: see completeOutside). Without
// h, deliver calls the Success or Error of as, a decorator that does not
// unwrap (or a step of another package): user code that may panic, on a
// goroutine nothing else recovers, where a panic would end the process.
// The step fails then as after a panic in an Await function.
func deliverOutside[T any](as AsyncSteps, h *stepAPI, v T, w *flowWatch, deliver func(as AsyncSteps, h *stepAPI, v T, w *flowWatch)) {
	returned := false
	defer func() {
		if returned {
			return
		}
		err := callbackFault(recover())
		if h != nil {
			w.completeOutside(h, nil, err) // h.complete(err), and w told
			return
		}
		failOutside(as, err)
	}()
	deliver(as, h, v, w)
	returned = true
}

// failOutside fails the step of as, which the engine cannot reach, through
// its Error with err's code and info, from outside its callback. That
// Error may be a decorator's, user code too: should it panic, nothing is
// left that could fail the step, and the panic is dropped rather than
// end the process.
func failOutside(as AsyncSteps, err *Error) {
	defer func() { _ = recover() }()
	as.Error(err.Code, err.Info) // of this package: no panic outside a callback
}

// loopDelivery completes the step h through a decorator of it, on the
// flow's loop: deliver calls the decorator's Success, or fails h. A panic
// or runtime.Goexit there fails the step with InternalError, as one of an
// Await function does, rather than leave it waiting; the loop goes on (on
// a new goroutine after a Goexit).
type loopDelivery struct {
	h       *stepAPI
	deliver func()
}

func (d *loopDelivery) run() { completeOrFail(d.h, d.deliver) }

// succeed is the deliver of AwaitChan, whose step has no watch.
func succeed[T any](as AsyncSteps, _ *stepAPI, v T, _ *flowWatch) { as.Success(v) }

// complete completes as like the flow that gave res ended. A failure
// fails h, the engine's step behind as, if known, with the original error
// as its Cause and LastException, as Await does; Error would drop it. It
// is the deliver of AwaitResult, whose step has no watch.
func complete(as AsyncSteps, h *stepAPI, res Result, _ *flowWatch) {
	var e *Error
	if res.Err != nil {
		e = awaitError(res.Err)
	}
	completeWith(as, h, res, e)
}

// completeWith is complete with e, res.Err's error as the step maps it
// (nil if none), made already.
func completeWith(as AsyncSteps, h *stepAPI, res Result, e *Error) {
	if e == nil {
		as.Success(res.Args...)
		return
	}
	if h != nil {
		h.complete(e)
		return
	}
	as.Error(e.Code, e.Info)
}

// Arg returns args[i] as a T. ok is false when i is out of range or args[i]
// is not a T; an untyped nil counts as the nil T when T is an interface,
// pointer, unsafe.Pointer, map, slice, channel or function type. It reads
// the success arguments a step receives without a chain of type
// assertions:
//
//	name, ok := asyncsteps.Arg[string](args, 0)
func Arg[T any](args []any, i int) (v T, ok bool) {
	if i < 0 || i >= len(args) {
		return v, false
	}
	if v, ok = args[i].(T); ok || args[i] != nil {
		return v, ok
	}
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice,
		reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return v, true
	}
	return v, false
}

// awaitStep runs fn on a goroutine of its own (spec 1.13, goAwait): the
// step waits, its cancel handler cancels fn's context, and fn's outcome
// completes it. One awaitCall holds what the call needs, and is fn's
// context.
// A closed loop runs no cancel handler: the loop knows its calls in flight
// and cancels them as it closes (awaitCalls), so that fn's goroutine is not
// left waiting for a flow that is gone.
// The critical sections and the ForEachLimit items around the step count
// fn until it returns (see holdWork); that hold is given back before the
// step completes, so that a flow that leaves a section (or an item that
// ends) after fn's result finds nothing left to wait for.
// awaitStep is the step of a model (a Root before it runs, a Parallel's
// branch), which may run more than once; a running step's Await step is
// its call itself (see runAwaitStep).
func awaitStep(fn AwaitFunc) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		h := as.(*stepAPI)
		h.f.nameHelpersAwait()
		startAwait(h, h.fl.newAwaitCall(h.f, fn))
	}
}

// runAwaitStep is the step function of an Await step whose step is its
// call (see addAwait), which the step's frame holds (see newFrame).
func runAwaitStep(as AsyncSteps, _ ...any) {
	h := as.(*stepAPI)
	h.f.nameHelpersAwait()
	startAwait(h, h.f.rare.await.claim(h.f, h.fl))
}

// claim returns the call for a run of the Await step that step is, made
// with it: step itself on its first run, the common case, which costs no
// allocation; a new call should the step ever run again (a step is never
// run twice but by a model's clones, which awaitStep serves), or when
// hooks observe the function. Loop goroutine only; the flag is atomic so
// that even a step shared by flows on two loops never gives one call
// twice.
func (step *awaitCall) claim(f *frame, fl *flow) *awaitCall {
	if w := fl.wait; w == nil || w.hooks == nil || !w.hooks.observesAwait() {
		if step.claimed.CompareAndSwap(false, true) {
			return step
		}
	}
	return fl.newAwaitCall(f, step.fn)
}

// newAwaitCall returns a new call of fn by the Await step of frame f,
// wrapped in the flow's Await hooks if it has any. f then names fn for
// AsyncStack, which would otherwise name the hooks' wrapper.
func (fl *flow) newAwaitCall(f *frame, fn AwaitFunc) *awaitCall {
	if w := fl.wait; w != nil && w.hooks != nil && w.hooks.observesAwait() {
		if f.userFn() == 0 {
			f.rareFields().user = funcPC(fn)
		}
		fn = w.hooks.observeAwait(fn)
	}
	return &awaitCall{fn: fn}
}

// startAwait starts the call c, whose function is set, by the step of h.
// Loop goroutine only.
func startAwait(h *stepAPI, c *awaitCall) {
	fl := h.fl
	c.Context, c.h = fl.flowContext(), h
	fl.setDeadlines(c, h.f)
	h.setCancel(cancelAwaitStep)
	h.f.rareFields().await = c
	c.held = holdWork(h.f)
	if l, ok := fl.sched.(*Loop); ok && !l.shared {
		c.calls = &l.awaitCalls
		c.calls.add(c)
	}
	c.lender = fl.lender() // nil: fn goes to a goroutine of the tool's
	goAwait(fl, c)
}

// run calls the function and completes the step with its outcome, on the
// call's own goroutine.
func (c *awaitCall) run() {
	returned := false
	defer func() {
		if !returned {
			// fn called runtime.Goexit: the goroutine ends, also when a
			// deferred call of fn panicked on the way and callAwait
			// recovered that panic. Completing the step from here, not
			// from callAwait, sees both.
			c.goexited()
		}
	}()
	v, err := callAwait(c, c.fn)
	var mapped *Error
	if err != nil {
		// The error's methods are user code too: one that calls
		// runtime.Goexit ends the goroutine here, as fn would have.
		mapped = awaitError(err)
	}
	returned = true
	c.end()
	c.lender.free() // before the flow goes on: its next fn may come here
	if err == nil {
		// The success argument's slice is the call's: no allocation.
		c.result[0] = v
		c.h.succeedOutside(c.result[:], false)
	} else {
		c.h.complete(mapped)
	}
	c.leave()
}

// goexited completes the step of a function that called runtime.Goexit,
// which ends the goroutine. Unlike run, it does not free c.lender: that
// goroutine, the caller of RunHelping, is the one that ends, and must take
// no function of the flow any more (see waiter.leave); the flow's next
// ones go to the loop's goroutines.
func (c *awaitCall) goexited() {
	c.end()
	c.h.complete(newGoexitError())
	c.leave()
}

// end ends the call whose function has returned: it gives back its hold on
// the sections around it and cancels its context (what the function
// started with it stops too).
func (c *awaitCall) end() {
	if c.held != nil {
		c.held.release()
	}
	c.cancel()
}

// leave takes the call, whose step has been given the function's outcome,
// out of the loop's calls in flight. Only then: a loop that is closing
// drops that outcome, and the calls in flight are what holds the flow for
// Close to end it (see awaitCalls.remove).
func (c *awaitCall) leave() {
	if c.calls != nil {
		c.calls.remove(c)
	}
}

// goAwait runs the call c, its function and the completion of its step, on
// a goroutine of its own: c.lender's, the one waiting in [Root.RunHelping] for
// the flow, when it took the function (see flow.lender); else one that a
// Loop keeps for them (see awaitWorkers), or a new one on the process-wide
// Loop, which is never closed and so could not give its goroutines back,
// and on any other Tool.
func goAwait(fl *flow, c *awaitCall) {
	if c.lender != nil {
		c.lender.lend(c)
		return
	}
	if l, ok := fl.sched.(*Loop); ok && !l.shared {
		l.awaitWorkers.run(c)
		return
	}
	go c.run()
}

// isNilValue reports whether x holds a nil pointer, map, slice, channel
// or function: an interface value (an error, a Syncer) that is not nil,
// but has no value.
func isNilValue(x any) bool {
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// callAwait runs fn, turning a panic into an error: a panic on a goroutine
// nobody recovers would end the process. A Goexit in fn ends the
// goroutine whatever is done here, and callAwait does not return (nor
// when a deferred call of fn panicked during the Goexit: the panic is
// recovered here, and the Goexit goes on): its callers see that it did
// not return.
func callAwait(ctx context.Context, fn AwaitFunc) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
