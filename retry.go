package asyncsteps

import (
	"fmt"
	"time"
)

// RetryOptions configures [Retry]. The zero value makes one attempt, without
// a timeout: set Attempts to retry. Retry keeps a copy. Backoff, Delay
// and Retryable run on the flow's loop; the clones of a model Root that
// holds the Retry may call them from several loops at once.
type RetryOptions struct {
	// Attempts is how many attempts are made at most, the first included;
	// less than 1 counts as 1.
	Attempts int
	// Timeout bounds each attempt, its sub-steps included; 0 or less sets
	// none. It does not make the attempt wait, as SetTimeout would: an
	// attempt that returns without calling Success or Error or adding a
	// step succeeds at once, as without a Timeout. An attempt waits for a
	// completion from outside only if it calls SetTimeout, SetCancel or
	// WaitExternal itself; its SetTimeout re-arms the attempt's timer.
	Timeout time.Duration
	// Backoff returns the wait before retry n (1 before the second
	// attempt); nil, or a wait of 0 or less, retries at once. The wait is
	// on the flow's Tool, so on a TestTool it is virtual time (a timer of
	// the tool, which TestTool.ResetEvents drops: the flow then waits until
	// it is cancelled).
	Backoff func(n int) time.Duration
	// Delay, if not nil, returns the wait before retry n in place of
	// Backoff, given the failure that asks for the retry: err is
	// State().LastException, the *Error of an Error call or a timeout,
	// or the Go error of [Fail] or of an Await function, so that a wait
	// the failure carries (the Retry-After of an HTTP answer) is honoured.
	// A wait of 0 or less retries at once. A wait that would not end
	// before the nearest deadline around the Retry (the timeout of a step
	// around it; on a [Loop], the deadline of the context the flow was
	// started with: that of [Root.Run], [Root.RunHelping],
	// [Root.PromiseContext] or [Root.ExecuteThenContext]) is not waited:
	// the next attempt could not begin, so no retry is made and the
	// failure unwinds out of the Retry at once, with its own code and
	// info, rather than a Timeout once the wait has run out the budget.
	// The attempt's own Timeout is no such deadline: it ended with the
	// attempt. Nor is the timeout of the step that awaits the Retry's flow
	// with [AwaitFlow], whose deadline does not reach that flow. The
	// timeouts are known on a Loop and a TestTool, whose timers the engine
	// reads; on a Tool of your own, the wait is waited as Backoff's is.
	// Example_retryAfter shows it.
	Delay func(n int, err error) time.Duration
	// Retryable reports whether an attempt that failed with code is made
	// again, if attempts are left. Nil retries Timeout, CommError and
	// ConnectError. It runs as part of the attempt's error handler, with
	// State().ErrorInfo and LastException set to the failure. It is not
	// asked about Break and Continue, which are not failures: they go on
	// to their loop.
	Retryable func(code string) bool
	// Label names the loop of the attempts for Break and Continue.
	Label string
}

// Retry adds a step that runs attempt, and runs it again while it fails
// with a retryable code and attempts are left (see [RetryOptions]). The
// step succeeds with the success arguments of the first attempt that
// succeeds; it fails with the error of the last attempt made, or of the
// first one whose error is not retryable. attempt gets the attempt's
// number, 0 for the first, and no incoming arguments, like an
// [AsyncSteps.Repeat] body. Retry returns as, to chain further steps.
//
// The attempts are a loop labelled o.Label: in an attempt, Break(label)
// ends the step with no arguments, and Continue(label) starts the next
// attempt at once, without the backoff, or ends the step like Break when
// none is left. An error handler of the attempt's own steps sees each
// failure first, as usual; a timeout or a cancel of an outer step cancels
// the attempt in progress and is not retried, and once the deadline of
// [Root.Run]'s context has passed (a timeout of the whole flow) no failure
// is retried (docs/DESIGN.md#retry).
//
// On a decorator (see [Unwrapper]) of a step's AsyncSteps, of a [Root] or
// of the value [AsyncSteps.Parallel] returns, the loop is added to the
// AsyncSteps it wraps: attempt receives the step's AsyncSteps of this
// package, which it may decorate again.
//
// Unlike a Repeat whose last step calls Break, a successful attempt ends
// the step without raising LoopBreak: it leaves ErrorInfo, LastException
// and AsyncStack as they were, and costs no panic.
func Retry(as AsyncSteps, o RetryOptions, attempt RepeatFunc) AsyncSteps {
	d := &retryDef{opts: o}
	d.loopDef = loopDef{label: o.Label, count: max(o.Attempts, 1), repFn: attempt, collect: d}
	if h, ok := as.(host); ok {
		return addLoopDef(h, attempt == nil, "Retry", &d.loopDef)
	}
	if h := unwrapHost(as); h != nil {
		// A decorator of a running step, a Root or a Parallel: the loop
		// is added there, after the steps the decorator has added. The
		// decorator is returned, to chain further steps.
		addLoopDef(h, attempt == nil, "Retry", &d.loopDef)
		return as
	}
	// Not this package's AsyncSteps: it cannot hold the loop.
	as.Error(InternalError, fmt.Sprintf("Retry: %T is not an AsyncSteps of this package", as))
	return as
}

// retryDef is the definition of a Retry step: a Repeat whose iteration is
// one attempt, guarded by retryFailed, in one allocation.
type retryDef struct {
	loopDef
	opts RetryOptions
}

// retryOf returns the retryDef that holds d, or nil if d is not a Retry's.
func (d *loopDef) retryOf() *retryDef {
	r, _ := d.collect.(*retryDef)
	return r
}

// retryable reports whether a failure with code is worth another attempt.
func (d *retryDef) retryable(code string) bool {
	if d.opts.Retryable != nil {
		return d.opts.Retryable(code)
	}
	return code == Timeout || code == CommError || code == ConnectError
}

// retryStep is the iteration of every Retry: the attempt, with the error
// handler that decides whether to retry. Both are plain functions, so one
// step value serves every Retry.
var retryStep = plainStep(retryAttempt, retryFailed)

// retryAttempt runs the attempt of the current iteration, within its
// timeout. The timeout is armed as the engine arms a step's, not through
// SetTimeout, which would also make the step wait: an attempt waits only if
// it asks to itself (docs/DESIGN.md#retry).
func retryAttempt(as AsyncSteps, _ ...any) {
	h := as.(*stepAPI)
	lr := iterationOf(as)
	if lateIteration(h, lr) {
		return
	}
	t := lr.def.retryOf().opts.Timeout
	if t > 0 {
		h.fl.armTimeout(h.f, t)
	}
	lr.def.repFn(as, lr.i)
	if t > 0 && h.st.Load() == 0 && len(h.f.queue) == 0 && h.f.timer() != nil {
		// Completed by its callback, which neither waited nor added
		// steps: a Success so made ends the step without releasing it
		// (stepDone), so its timer is disarmed here.
		h.fl.disarm(h.f)
	}
}

// retryFailed is the error handler of an attempt: if the failure is
// retryable and attempts are left, it queues the next attempt in the
// loop's frame, to run once this handler, and the backoff's wait it adds
// if any, have completed, and swallows the error; otherwise the error goes
// on unwinding. An error or a cancel that ends the handler first drops
// that queue, as any other.
func retryFailed(as AsyncSteps, code string) {
	h := as.(*stepAPI)
	loop := h.f.parent
	lr := loop.impl.(*loopRun)
	d := lr.def.retryOf()
	if code == LoopBreak || code == LoopCont {
		return // no failure: the loop it names takes it, as in a Repeat
	}
	if lr.i+1 >= lr.def.count || pastRunDeadline(h.fl) || !d.retryable(code) {
		return
	}
	w := d.wait(as, lr.i+1)
	if d.opts.Delay != nil && w > 0 && outlastsDeadline(h.fl, loop, w) {
		return // the next attempt could not begin: the failure is the Retry's
	}
	lr.i++ // the next attempt's number, and the retry's (Backoff's n)
	lr.count = lr.i + 1
	lr.queueIteration(loop)
	if w > 0 {
		as.Add(sleepStep(w))
		return
	}
	as.Success()
}

// wait returns the wait before retry n, which as's failure asks for:
// Delay's, given that failure, or else Backoff's; 0 if neither is set.
func (d *retryDef) wait(as AsyncSteps, n int) time.Duration {
	switch {
	case d.opts.Delay != nil:
		return d.opts.Delay(n, as.State().LastException)
	case d.opts.Backoff != nil:
		return d.opts.Backoff(n)
	}
	return 0
}

// outlastsDeadline reports whether a wait of w, from now, would not end
// before the nearest deadline around the Retry whose frame is loop: a
// step timeout of loop or a frame around it, or, on a Loop, whose clock
// is the one of Run's context, that context's deadline. A TestTool's
// virtual clock is not the context's: there only step timeouts count.
func outlastsDeadline(fl *flow, loop *frame, w time.Duration) bool {
	if left, _, ok := fl.stepTimeLeft(loop); ok && w >= left {
		return true
	}
	if _, onLoop := fl.sched.(*Loop); !onLoop || fl.wait == nil || fl.wait.ctx == nil {
		return false
	}
	deadline, ok := fl.wait.ctx.Deadline()
	return ok && !time.Now().Add(w).Before(deadline)
}

// pastRunDeadline reports whether the deadline of Run's context has
// passed for fl: a timeout of the whole flow, outer to every Retry, after
// which each step that waits fails at once, so another attempt could only
// fail the same way (docs/DESIGN.md#retry).
func pastRunDeadline(fl *flow) bool { return fl.wait != nil && fl.wait.late != nil }

// Sleep adds a step that waits d on the flow's Tool (virtual time on a
// [TestTool]), then succeeds with the arguments it was given, so that a
// wait put between two steps hands the first one's result on to the
// second, as if it were not there. As the first step of a level (added
// in a step's callback) it is given none, as any first sub-step, and so
// passes none on. Sleep returns the value as.Add returns, to chain
// further steps.
//
// A d of 0 or less arms no timer: the step succeeds at once, as
// time.Sleep returns at once. A cancel of the step (Root.Cancel, a
// timeout around it, a failed Parallel sibling, the end of Run's
// context) stops its timer, so that nothing of it stays scheduled; no
// error is raised in the step itself, so it takes no error handler. As
// with a step's timeout, [TestTool.ResetEvents] drops the timer: the step
// then waits until it is cancelled. A [Tool] of your own whose Deferred
// returns a nil Handle (a timer that cannot be cancelled) keeps the
// timer after a cancel, which then finds its step gone.
func Sleep(as AsyncSteps, d time.Duration) AsyncSteps {
	return as.Add(sleepStep(d))
}

// sleepStep returns the step that waits w on the flow's Tool and then
// succeeds with its incoming args: Sleep's, and the backoff of a Retry,
// which is added in an error handler and so gets no args. A cancel of
// the flow stops the timer. A Tool may return a nil Handle, a timer that
// cannot be cancelled (see Tool): it then finds its step gone. The wait
// is the closure's, not a field of the loopRun, which every Loop, Repeat
// and ForEach allocates: a backoff, which arms a timer anyway, costs the
// allocation instead. The step is the engine's: AsyncStack leaves it out.
func sleepStep(w time.Duration) StepFunc {
	if w <= 0 {
		return sleepNone
	}
	return func(as AsyncSteps, args ...any) {
		runsFor(as, nil)
		timer := as.Tool().Deferred(w, func() { as.Success(args...) })
		as.SetCancel(func(AsyncSteps) {
			if timer != nil {
				timer.Cancel()
			}
		})
	}
}

// sleepNone is the step of a Sleep of 0 or less: it passes its args on.
func sleepNone(as AsyncSteps, args ...any) {
	runsFor(as, nil)
	as.Success(args...)
}

// passesArgs reports whether the built-in step ctl drives gives its result
// to the next step: a Retry does, the other loops and Parallel do not.
func passesArgs(ctl control) bool {
	lr, ok := ctl.(*loopRun)
	return ok && lr.def.retryOf() != nil
}
