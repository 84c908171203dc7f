package asyncsteps

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
)

// Hooks are functions that a [Loop] or [TestTool] calls at points of
// interest of its flows and of itself, so that metrics and tracing can be
// built on them (package github.com/asyncsteps/asyncsteps/otelsteps traces
// with OpenTelemetry). Any hook may be nil. A tool without hooks pays
// nothing for them but a nil check at each of those points.
//
// Set them with [Loop.SetHooks], [LoopGroup.SetHooks] or
// [TestTool.SetHooks]; a flow is observed by the hooks its tool had when
// the flow began, from its beginning to its end. Hooks must not be changed
// once set: set new ones instead. Hooks run inline: they
// must return quickly and must not block. A panic in FlowStart,
// AwaitStart, AwaitEnd or SyncWait fails the flow or the step it starts
// or ends with an InternalError, as a panic in a step does (see each);
// FlowEnd, StepError, LoopPass and LoopLag have nothing to fail, so a
// panic in them is logged with [log/slog] and the engine goes on as if
// the hook had returned; after a runtime.Goexit (t.FailNow) in them, which
// ends the goroutine that called them, it goes on likewise (see each).
// Those called on the loop run one at a time with the flows' callbacks;
// AwaitStart and AwaitEnd may run on other goroutines, concurrently.
// In a flow, FlowStart comes first and the other hooks follow in the order
// of what they report, but an AwaitEnd may come after FlowEnd: a flow that
// ends (cancelled, timed out, its Loop closed) while an Await function
// still runs does not wait for the function's goroutine.
//
// The context of a flow is the context given to [Root.Run] (or
// [Root.RunHelping], [Root.PromiseContext], [Root.ExecuteThenContext]), or
// context.Background() for Execute, ExecuteThen and Promise, or for a flow
// run by [AwaitFlow] the values of the awaiting flow's context (what its
// FlowStart added included, without its deadline or cancel), as returned
// by FlowStart: it is what the flow's other hooks receive, and what the
// functions of its [AsyncSteps.Await] steps see the values of. Its values
// only: the flow is timed and stopped by Run's context alone, so a
// deadline or a cancel of the hook's own neither ends the flow nor shows
// in an Await function's context, whose Deadline is that of Run's context
// and of the step timeouts around it, and a context the hook detaches from
// Run's (context.WithoutCancel) does not hide Run's deadline.
type Hooks struct {
	// FlowStart is called on the loop as a flow begins, before its first
	// step. The context it returns, which must be ctx or derived from it,
	// becomes the flow's context, for its values (a span): its deadline
	// and cancel are not the flow's (see above). Nil keeps ctx. A panic
	// or runtime.Goexit in it fails the flow with an InternalError before
	// its first step, as one in a step fails the step; FlowEnd still sees
	// the flow end, as StepError sees the error, with ctx: what a hook put
	// in the context it did not return (a span to end) is not there, but
	// what the hooks of an awaiting flow put in its own may be (for a flow
	// run by AwaitFlow, or by an Await function under its context). One
	// that drives its [TestTool] into its own flow (a misuse: a cancel
	// queued for it) runs none of the flow's events, which wait until it
	// returns, and fails the flow likewise, as a step that does so fails,
	// but with the context it returned.
	FlowStart func(ctx context.Context) context.Context
	// FlowEnd is called on the loop as a flow ends, before its Result is
	// delivered: err is nil, an *Error, or, for a flow cancelled by
	// Root.Cancel or by the end of Run's context, the error the Result
	// carries (it matches context.Canceled or the context's error). A
	// flow that its closed Loop ends also ends here, with its
	// InternalError. The flow has nothing left to fail: a panic in it is
	// logged, and the Result is delivered however it ends (runtime.Goexit
	// included).
	FlowEnd func(ctx context.Context, err error)
	// StepError is called on the loop with each error raised in a flow's
	// steps, in order, before the handlers see it: an Error call, a panic,
	// a timeout, a failed Await, a misuse of the API; also the error an
	// error handler replaces the one it handles with, and a panic in a
	// cancel handler. It is called once the callback that raised the
	// error has returned, before the cancel and error handlers the error
	// passes run (or, for a flow that ends, before FlowEnd). Break and
	// Continue are not errors. A panic or runtime.Goexit in it is a fault
	// of the hook alone: the flow goes on as if it had returned, with the
	// error it was told of, and the errors left are reported all the same;
	// a panic is logged.
	StepError func(ctx context.Context, err *Error)
	// AwaitStart is called on the goroutine of an [AsyncSteps.Await]
	// function before the function, with the context the function would
	// get; the function gets the returned context instead, which must be
	// ctx or derived from it. Nil keeps ctx.
	AwaitStart func(ctx context.Context) context.Context
	// AwaitEnd is called on the same goroutine once the function has
	// returned (or panicked), with the context AwaitStart returned and
	// the error the step fails with, nil on success. The step completes
	// after AwaitEnd returns; if the step has ended meanwhile (the flow
	// moved on, or ended and FlowEnd ran), AwaitEnd still reports the
	// function's own outcome. After a function that called
	// runtime.Goexit, whose step fails anyway, a panic in it is logged.
	// With AwaitStart, it tells a function that ignores its context,
	// which holds the locks taken around it until it returns, long
	// after its step ended: see ExampleHooks_lateAwait.
	AwaitEnd func(ctx context.Context, err *Error)
	// SyncWait is called on the flow's loop when a flow that had to wait
	// in the queue of a [Mutex], [Throttle] or [Limiter] has been let in,
	// before the flow goes on, with how long it waited on its tool's clock
	// until it was let in. A panic or runtime.Goexit in it fails the
	// flow's waiting step with an InternalError (the slot it was given
	// comes back as the flow unwinds). obj is the Syncer that Sync was
	// called on: the Mutex, the Throttle or the Limiter, or, for a keyed
	// one ([KeyedMutex], [KeyedThrottle], [KeyedLimiter]), the Syncer of
	// the key that its Key returns. A flow that waits for both of a
	// Limiter's limits, a slot and then an entry in the next period, is
	// reported twice, once per wait. A flow let in at once, or
	// that leaves the queue without entering (cancelled, timed out, also
	// once let in, before it went on), is not reported. The flow goes on
	// as it would without the hook. One that drives its [TestTool] into
	// its own flow (a misuse: a timeout around the step, a sibling branch)
	// runs none of the flow's events, which wait until it returns, and
	// fails the step likewise, as a step that does so fails.
	SyncWait func(obj Syncer, waited time.Duration)
	// LoopPass is called on a Loop's goroutine at each pass over its
	// queue, with the number of callbacks ready to run: the loop's
	// queue length, less the probe LoopLag may have queued and the marks
	// of the callbacks given to AtTurnEnd. A panic in
	// it is logged like a callback's, and the pass goes on as after a
	// return, LoopLag included. After one that calls runtime.Goexit, the
	// loop goes on with a new goroutine, whose first pass runs without
	// the hook.
	LoopPass func(l *Loop, queued int)
	// LoopLag is called on a Loop's goroutine with how long a callback
	// queued at the start of a pass waited before it ran: the delay a
	// callback or step scheduled now meets. It is measured whenever work
	// is queued and the previous measure has ended; an idle loop reports
	// nothing.
	LoopLag func(l *Loop, lag time.Duration)
}

// observer is a tool's hooks with what the tool keeps to feed them; it
// belongs to the tool's goroutine (see enginePools).
type observer struct {
	hooks *Hooks
	// probing is whether a lag probe is queued, since probeSince on the
	// loop's clock. A flag of its own, as any clock reading may be 0: the
	// first ones of a Loop made in a testing/synctest bubble, where time
	// stands still while the loop runs, or on a clock of coarse ticks.
	probing    bool
	probeSince int64
	// passExited: the last call of LoopPass called runtime.Goexit (see
	// Loop.callLoopPass).
	passExited bool
}

func newObserver(h *Hooks) *observer {
	if h == nil {
		return nil
	}
	return &observer{hooks: h}
}

// SetHooks makes the flows that begin on the loop from now on observed by
// h; nil removes the hooks. The change is made on the loop's goroutine,
// ahead of the flows started after SetHooks returns; flows already running
// keep the hooks they began with, while the LoopPass and LoopLag of the
// hooks replaced are called no more. SetHooks is safe for concurrent use. The
// loop of [DefaultTool] takes hooks too: DefaultTool().(*Loop).SetHooks(h)
// observes every flow of the process that runs on it.
func (l *Loop) SetHooks(h *Hooks) {
	obs := newObserver(h)
	l.Immediate(func() { l.engine.obs = obs })
}

// SetHooks sets h on every loop of the group, like [Loop.SetHooks]. A nil
// or zero LoopGroup has no loops to set.
func (g *LoopGroup) SetHooks(h *Hooks) {
	if g == nil {
		return
	}
	for _, l := range g.loops {
		l.SetHooks(h)
	}
}

// SetHooks makes the flows that begin on the tool from now on observed by
// h; nil removes the hooks. Unlike the rest of TestTool, it must not be
// called while another goroutine drives the tool: call it from the test's
// own goroutine, between the calls that drive it. A TestTool calls no
// LoopPass or LoopLag hook.
func (t *TestTool) SetHooks(h *Hooks) { t.engine.obs = newObserver(h) }

// hooks returns the hooks of the tool's state l, or nil: nil for a tool
// that is not one of this package's.
func (l *enginePools) hooks() *Hooks {
	if l == nil || l.obs == nil {
		return nil
	}
	return l.obs.hooks
}

// observeStart sets up the observation of a flow that begins with hooks
// h: the flow's waiter, made for it if it has none, keeps h and the
// flow's context until the flow ends. On the loop. A panic in FlowStart
// is the InternalError it returns, which fails the flow before its first
// step; after a runtime.Goexit, the flow fails so on the next goroutine.
//
// The hook runs as a callback of the flow, as StepError does (see
// reportError): one that drives its TestTool into the flow (a misuse)
// leaves the flow's events waiting until it returns, where a cancel ran
// under it and ended the flow before it had begun; the start then fails
// with the InternalError of the misuse, as after a panic, but with the
// context the hook returned.
func (fl *flow) observeStart(h *Hooks) (err *Error) {
	if fl.wait == nil {
		fl.wait = &waiter{}
	}
	w := fl.wait
	w.hooks = h
	if w.ctx == nil {
		w.ctx = context.Background()
	}
	if h.FlowStart == nil {
		return nil
	}
	fl.inCall = true // a flow that begins runs no other callback
	returned := false
	defer func() {
		fl.inCall = false
		if fl.reent {
			// Queued before the start fails, whose end drops them.
			fl.endReentry()
		}
		if returned {
			return
		}
		if r := recover(); r != nil {
			err = fl.panicked(r)
			if goexitPending(err) { // the goroutine ends all the same
				fl.afterGoexit(&startFailure{fl: fl, err: err})
			}
			return
		}
		fl.afterGoexit(&startFailure{fl: fl, err: fl.goexitError()})
	}()
	// The hook's context gives the flow values only: w.ctx stays Run's,
	// whose deadline the flow is timed by.
	ctx := h.FlowStart(w.ctx)
	returned = true
	if ctx != nil { // nil keeps ctx
		w.hookCtx = &ctx
	}
	if fl.reent {
		return fl.reentryError()
	}
	return nil
}

// flowContext is the context of the flow w observes, which its hooks get:
// the one FlowStart returned, else Run's.
func (w *waiter) flowContext() context.Context {
	if w.hookCtx != nil {
		return *w.hookCtx
	}
	return w.ctx
}

// startFailure ends a flow whose FlowStart hook called runtime.Goexit.
type startFailure struct {
	fl         *flow
	err        *Error
	goexitTurn // none: the flow has taken no step yet
}

func (t *startFailure) run() {
	if !t.fl.done { // a cancel may have ended it meanwhile
		t.fl.failStart(t.err)
	}
}

// failStart ends the flow, which its FlowStart hook failed with err, before
// its first step; a misuse of the Root recorded for this execution goes
// with the steps it dropped. A cancel requested of the execution before
// then wins over err, as over any error raised after it (see stopped):
// the flow ends cancelled, with err in its State.
func (fl *flow) failStart(err *Error) {
	fl.base.err = nil
	if fl.stopped() {
		return
	}
	fl.end(nil, err)
}

// observeEnd reports the end of a flow observed by w.hooks, after the
// errors left for StepError. The flow has nothing left to fail: a panic in
// a hook is logged.
func (w *waiter) observeEnd(err error) {
	if f := w.hooks.FlowEnd; f != nil {
		defer recoverHook("FlowEnd")
		f(w.flowContext(), err)
	}
}

// recoverHook, deferred around the call of the hook named name, recovers a
// panic in it and logs it, as a loop does for a callback's: the hooks that
// have nothing of a flow to fail must not cut the engine's work short.
func recoverHook(name string) {
	if r := recover(); r != nil {
		logHookPanic(name, r, debug.Stack())
	}
}

// logHookPanic logs the panic r, with its stack, of the hook named name.
func logHookPanic(name string, r any, stack []byte) {
	slog.Error("asyncsteps: panic in hook", "hook", name,
		"panic", printsafe.Sprint(r), "stack", string(stack))
}

// noteUnreported keeps err, raised in a flow observed by w.hooks, for the
// StepError hook, which reportErrors calls at the next point where the
// engine can go on after a hook that calls runtime.Goexit: where err is
// raised (in a callback's Error, in a deferred call during a Goexit) the
// engine could not. Break and Continue are not errors.
func (w *waiter) noteUnreported(err *Error) {
	if w.hooks.StepError != nil && err.Code != LoopBreak && err.Code != LoopCont {
		if w.unreported == nil {
			w.unreported = new([]*Error)
		}
		*w.unreported = append(*w.unreported, err)
	}
}

// hasUnreported reports whether errors wait for the StepError hook: they
// are reported in the order raised, so the last one raised waits if any
// does.
func (fl *flow) hasUnreported() bool {
	w := fl.wait
	if w == nil || w.unreported == nil {
		return false
	}
	errs := *w.unreported
	return len(errs) > 0 && errs[len(errs)-1] != nil
}

// resumePoint is where the engine goes on if a StepError hook that
// reportErrors calls ends the goroutine with runtime.Goexit: the cancel
// job, if any, else the unwinding of err from f, if f is set (faulted as
// for flow.unwindFrom); the zero value goes on with nothing (the caller
// defers what must run).
type resumePoint struct {
	job     *cancelJob
	f       *frame
	err     *Error
	faulted bool
}

// reportErrors calls the StepError hook with each error waiting for it, in
// the order they were raised. The hooks are the user's and run in the
// middle of the engine's work: a panic in one is logged, and the engine
// goes on as if it had returned; so it does after a runtime.Goexit, which
// ends the goroutine: the errors left are reported from the deferred call
// that sees it, and the engine goes on from at on the next goroutine.
func (fl *flow) reportErrors(at resumePoint) {
	w := fl.wait
	if w.unreported == nil {
		return
	}
	errs := w.unreported
	// A hook may raise errors of its own (noteUnreported appends them),
	// so the slice is read again at each turn.
	for i := 0; i < len(*errs); i++ {
		err := (*errs)[i]
		if err == nil {
			continue // reported before a hook's Goexit, which this call follows
		}
		(*errs)[i] = nil
		fl.reportError(err, at)
	}
	*errs = (*errs)[:0]
}

// reportError calls the StepError hook with err (see reportErrors). The
// hook runs as a callback of the flow: one that drives its TestTool into
// the flow (a misuse) leaves the flow's events waiting until it returns,
// as a step does, where they ran under the engine's unwinding of err. The
// misuse is the hook's alone, as its panic is: the flow goes on as if the
// hook had returned.
func (fl *flow) reportError(err *Error, at resumePoint) {
	outer := fl.inCall // never set here, but kept as found all the same
	fl.inCall = true
	returned := false
	defer func() {
		fl.inCall = outer
		if fl.reent && !outer {
			defer fl.endReentry()
		}
		if returned {
			return
		}
		if r := recover(); r != nil {
			stack := debug.Stack()
			logHookPanic("StepError", r, stack)
			if !inGoexit(stack) {
				return // a plain panic: the caller goes on
			}
			// A deferred call of the hook panicked during its Goexit,
			// which goes on once this returns.
		}
		// Queued first, so that a Goexit of a later report, which
		// abandons this call, does not lose it.
		fl.resumeAfterGoexit(at)
		fl.reportErrors(resumePoint{})
	}()
	w := fl.wait
	w.hooks.StepError(w.flowContext(), err)
	returned = true
}

// resumeAfterGoexit queues what the engine goes on with at at, before any
// other task, on the goroutine that follows one a hook ended.
func (fl *flow) resumeAfterGoexit(at resumePoint) {
	switch {
	case at.job != nil:
		fl.afterGoexit(at.job)
	case at.f != nil:
		// A fault unseen is logged now if a cancel has been requested:
		// a Close of the loop may keep the next goroutine from it.
		faulted := at.faulted && !fl.loggedUnderCancel(at.err)
		fl.afterGoexit(&unwindResume{fl: fl, f: at.f, h: at.f.h, err: at.err, faulted: faulted})
	}
}

// unwindResume goes on unwinding err from f after a StepError hook called
// runtime.Goexit there. It holds the flow and the frame themselves: f may
// be a base frame, whose step API is shared by all flows.
type unwindResume struct {
	fl  *flow
	f   *frame
	h   *stepAPI // f's incarnation when the hook ran
	err *Error
	goexitTurn
	faulted bool // err is the fault of f's cancel handler (see flow.unwindFrom)
}

func (r *unwindResume) run() {
	f, fl := r.f, r.fl
	if !r.current() {
		return // the flow has moved on meanwhile (cancelled)
	}
	if fl.inCall {
		fl.deferTask(r)
		return
	}
	r.resume(fl)
	r.goOn(fl, fl.unwindFrom(f, r.err, r.faulted))
}

// current reports whether the flow is still where the hook's Goexit left
// it.
func (r *unwindResume) current() bool { return r.f.h == r.h && !r.f.over && !r.fl.done }

// observesAwait reports whether h has Await hooks.
func (h *Hooks) observesAwait() bool { return h.AwaitStart != nil || h.AwaitEnd != nil }

// observeAwait returns fn wrapped in the Await hooks of h, or fn when h has
// none. The wrapper maps fn's error as the step will, for AwaitEnd.
func (h *Hooks) observeAwait(fn AwaitFunc) AwaitFunc {
	if !h.observesAwait() {
		return fn
	}
	return func(ctx context.Context) (any, error) {
		if h.AwaitStart != nil {
			if started := h.AwaitStart(ctx); started != nil { // nil keeps ctx
				ctx = started
			}
		}
		returned := false
		defer func() {
			if !returned && h.AwaitEnd != nil {
				// fn called Goexit (also when a deferred call of fn
				// panicked on the way, which callAwait recovered), or
				// a method of its error did as it was mapped: the
				// goroutine ends, and the step with it. A panic of the
				// hook now would be taken for fn's, and the Goexit,
				// which goes on, would leave the step waiting: it is
				// logged instead.
				defer recoverHook("AwaitEnd")
				h.AwaitEnd(ctx, newGoexitError())
			}
		}()
		v, err := callAwait(ctx, fn)
		var mapped *Error
		if err != nil && h.AwaitEnd != nil {
			mapped = awaitError(err) // user code: it may Goexit too
		}
		returned = true
		if h.AwaitEnd != nil {
			h.AwaitEnd(ctx, mapped)
		}
		return v, err
	}
}

// observeWait returns the waiting step as, which is about to queue in the
// gate obj, as the gate is to complete it: wrapped so that its admission
// reports the wait to the SyncWait hook of its flow, or as itself when
// there is none. A decorator of a step of this package (see Unwrapper) is
// wrapped in any case, so that the gate, which lets the flow in from
// whatever goroutine gives a slot back or ends a period (another flow's
// callback, an Await function's goroutine), runs none of the decorator's
// methods there: its Success runs on the flow's own loop, where a panic
// fails its own step. On the flow's loop, in the step's callback.
func observeWait(as AsyncSteps, obj Syncer) AsyncSteps {
	h, ok := as.(*stepAPI)
	if !ok {
		h = unwrapStep(as)
	}
	if h == nil || ok && !waitObserved(h.fl) {
		return as
	}
	w := &waitingStep{AsyncSteps: as, h: h, obj: obj}
	if waitObserved(h.fl) {
		w.report = h.fl.wait.hooks.SyncWait
		w.since = h.Tool().Now() // the flow's clock, not a decorator's Tool
	}
	return w
}

// waitObserved reports whether fl, if a flow, has a SyncWait hook.
func waitObserved(fl *flow) bool {
	return fl != nil && fl.wait != nil && fl.wait.hooks != nil && fl.wait.hooks.SyncWait != nil
}

// waitingStep is a step waiting in a gate's queue, whose admission (the
// gate calls Success) reports how long it waited, if a hook is to know,
// and completes the step on its flow's loop.
type waitingStep struct {
	AsyncSteps          // the step, or a decorator of it
	h          *stepAPI // the step
	obj        Syncer
	report     func(obj Syncer, waited time.Duration) // nil: no SyncWait hook
	since      time.Time
	waited     time.Duration
	args       []any
	goOn       bool // resume completed the step: run goes on with it
}

// Success lets the step go on once the hook has seen the wait. The gate
// calls it from whatever goroutine gives a slot back or ends a period, in
// the middle of its own work, perhaps about to let other waiters in: the
// hook, and a decorator's Success, run in a task of their own on the
// flow's loop instead, so that one that panics or calls runtime.Goexit
// cannot cut that work short. No method of a decorator runs here.
func (w *waitingStep) Success(args ...any) { w.letIn(args, false) }

// letIn is Success from a gate that knows whether it runs on the flow's
// Loop (onLoop, see resume): the task then goes to the loop's own queue,
// as the step's completion would without the wrapper, rather than through
// the inbox, which the loop drains only after the timers of its pass.
func (w *waitingStep) letIn(args []any, onLoop bool) {
	if w.report != nil {
		w.waited = w.h.Tool().Now().Sub(w.since)
	}
	w.args = args
	if onLoop {
		w.h.fl.sched.post(w)
		return
	}
	w.h.fl.sched.inject(w)
}

// run reports the wait, then completes the step, on the flow's loop. The
// step is completed even when the hook or a decorator's Success panics or
// calls runtime.Goexit: the gate has let the flow in, so a step left
// waiting would hold its slot forever. The step fails instead, as an
// Await function that does the same fails its.
func (w *waitingStep) run() {
	completeOrFail(w.h, w.resume)
	if w.goOn {
		// In this task, not one posted behind the work queued since the
		// gate let the flow in: the flow goes on where it would have
		// without the hook, after the same tasks of its loop's queue.
		w.goOn = false
		w.h.run()
	}
}

// resume reports the wait, then lets the step's flow in. A step that has
// ended since the gate let it in (its flow cancelled or ended, its
// timeout run out) never enters, and is not reported: its flow's FlowEnd
// may have run. Its Success does nothing, and its slot comes back as its
// frame unwinds.
func (w *waitingStep) resume() {
	if w.report != nil && w.h.st.Load()&(stClaim|stDone) == 0 && !w.reportWait() {
		return // the hook drove its TestTool into the flow: the step has failed
	}
	if w.AsyncSteps == AsyncSteps(w.h) {
		// The step itself, on its loop: its completion goes on in this
		// task (see run), not through the inbox once more, where a
		// timeout falling due meanwhile (a busy loop's) would overtake
		// it. A flow that a hook observes must go on as it would without
		// the hook.
		w.goOn = w.h.succeedHere(w.args)
		return
	}
	w.AsyncSteps.Success(w.args...)
}

// reportWait calls the SyncWait hook as a callback of the step's flow, as
// StepError is called (see reportError): one that drives its TestTool
// into the flow (a misuse) leaves the flow's events waiting until it
// returns, where the flow went on under it (a timeout of the step let in,
// a sibling branch), and the step let in fails with the InternalError of
// the misuse, as after a panic of the hook. It reports whether the step
// may go in. A panic or runtime.Goexit of the hook goes on to
// completeOrFail, which fails the step, but for a hook that also drove
// the tool: the step fails here, so that the flow's events go after its
// failure, as they do after a step's.
func (w *waitingStep) reportWait() (goIn bool) {
	fl := w.h.fl
	if fl.inCall {
		// Run inside a callback of the flow that drives the tool: the
		// misuse is that callback's.
		w.report(w.obj, w.waited)
		return true
	}
	fl.inCall = true
	returned := false
	defer func() {
		fl.inCall = false
		if !fl.reent {
			return
		}
		if !returned {
			w.h.complete(callbackFault(recover()))
		}
		fl.endReentry()
	}()
	w.report(w.obj, w.waited)
	returned = true
	if fl.reent {
		w.h.complete(newReentryError())
		return false
	}
	return true
}

// observePass reports a pass of the loop to its hooks h, and queues a lag
// probe behind the work queued now, if there is work and no probe is
// pending. On the loop, outside of any callback.
func (l *Loop) observePass(obs *observer) {
	h := obs.hooks
	if h.LoopPass != nil {
		l.reportPass(obs, h.LoopPass)
	}
	if h.LoopLag != nil && !obs.probing && l.local.len() > 0 {
		obs.probing, obs.probeSince = true, l.clock()
		l.local.push(lagProbe{l: l, obs: obs})
		l.lagProbes++
	}
}

// reportPass calls the LoopPass hook. A panic in it is recovered and
// logged here, as the loop does for its callbacks, or it would end the
// process; here rather than in observePass, so that the pass still
// measures its lag: a LoopPass that panics at every pass would otherwise
// silence LoopLag for good.
func (l *Loop) reportPass(obs *observer, hook func(*Loop, int)) {
	defer l.recoverPanic()
	l.callLoopPass(obs, hook)
}

// callLoopPass calls the LoopPass hook, unless its previous call ended the
// loop's goroutine with runtime.Goexit: the pass of the new goroutine then
// goes without it, or a hook that exits at every pass would keep the loop
// from ever running its queue, a new goroutine a pass. A panic raised
// during such a Goexit, which reportPass's recover takes, counts as the
// Goexit it is (no goroutine of a Loop runs inside an outer Goexit).
func (l *Loop) callLoopPass(obs *observer, hook func(*Loop, int)) {
	if obs.passExited {
		obs.passExited = false
		return
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		r := recover()
		obs.passExited = r == nil || inGoexit(debug.Stack())
		if r != nil {
			panic(r) // logged by reportPass, as before
		}
	}()
	hook(l, l.local.len()-l.lagProbes-l.turnMarks)
	returned = true
}

// lagProbe is the task whose wait in the queue measures a loop's lag.
type lagProbe struct {
	l   *Loop
	obs *observer
}

// run reports the lag, unless SetHooks has replaced the hooks that
// queued the probe since: those are called no more.
func (p lagProbe) run() {
	p.l.lagProbes--
	if p.l.engine.obs != p.obs {
		return
	}
	lag := time.Duration(p.l.clock() - p.obs.probeSince)
	p.obs.probing = false
	p.obs.hooks.LoopLag(p.l, lag)
}
