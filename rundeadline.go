package asyncsteps

import (
	"context"
	"errors"
	"slices"
)

// This file makes the deadline of Run's context a timeout of the whole
// flow, while a plain cancel of the context stays a cancel (see Root.Run).

// stopFor stops the execution that Run started with w, because ctx has
// ended: a cancel cancels it, a deadline times it out. Neither reaches
// another execution of r, which a goroutine may start once w's has ended,
// before Run has returned (see waiter.requestCancel and expiryOf).
func (r *Root) stopFor(ctx context.Context, w *waiter) {
	cause := ctx.Err()
	if !errors.Is(cause, context.DeadlineExceeded) {
		if req := w.requestCancel(&r.fl, cause); req != nil {
			r.fl.postCancel(req)
		}
		return
	}
	r.fl.expireSoon(w)
}

// endedContextError returns the error with which Run, RunHelping,
// PromiseContext and ExecuteThenContext refuse to start under ctx, nil
// while ctx has not ended: a cancel is the context's own error, as it is
// once the flow runs, and a deadline that has passed the Timeout it times
// a flow out with as the flow begins (see expiredAtStart), so that a
// deadline is a Timeout whether it passed a moment before the start or a
// moment after.
func endedContextError(ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return deadlineError(ctx)
	}
	return err
}

// deadlineInfo is the info of the Timeout with which the deadline of the
// flow's context times a step out. A step's own timeout has none: an
// error handler, a log line or an HTTP answer tells the request's budget
// from a step's limit by it.
const deadlineInfo = "the flow's context deadline passed"

// deadlineError returns the Timeout with which the deadline of ctx, the
// context the flow runs under, times a step out: deadlineInfo, and ctx's
// cause as Cause, so that errors.Is finds the cause a program gave the
// deadline (context.WithTimeoutCause), context.DeadlineExceeded if none.
// Each call makes an *Error of its own, as a step's timeout does: a
// handler may keep the one it saw.
func deadlineError(ctx context.Context) *Error {
	cause := context.Cause(ctx)
	if cause == nil {
		// A Context of the user's type whose deadline is its own, over
		// a context of the context package that has not ended: Cause
		// asks that one, which has no cause yet.
		cause = ctx.Err()
	}
	return &Error{Code: Timeout, Info: deadlineInfo, Cause: cause}
}

// deadlineError returns the Timeout of the deadline of the context that
// the flow's running execution runs under.
func (fl *flow) deadlineError() *Error { return deadlineError(fl.wait.ctx) }

// expireSoon times out the execution w of fl, in a task of its own on the
// flow's loop, unless fl runs another execution by then.
func (fl *flow) expireSoon(w *waiter) { fl.postStop(fl.expiryOf(w)) }

// expiryOf returns the task that times out the execution w of fl, on the
// loop. It does nothing once w's execution has ended, nor before it has
// begun (fl.done either way, or w.ended once another execution runs): a
// task injected from another goroutine may run before the flow's start,
// and the flow then sees the deadline as it begins (see expiredAtStart).
// It does not read fl.wait, which a later execution's start writes from
// another goroutine while such a task may still be queued.
func (fl *flow) expiryOf(w *waiter) func() {
	var expire func()
	expire = func() {
		if w.ended || fl.done {
			return // not the execution Run started any more, or not yet
		}
		if fl.inCall { // a callback of the flow drives its TestTool
			fl.deferTask(flowStop{fl: fl, apply: expire}) // kept by ResetEvents, as the stop was
			return
		}
		if l := w.late; l != nil && l.expiring {
			// The timeout a claim owed (see expireAfterClaim); none
			// if a timeout of the deadline has paid it meanwhile.
			l.expiring = false
			if !l.owed {
				return
			}
		}
		fl.expire()
	}
	return expire
}

// expireAfterClaim queues the timeout of the execution w that a
// completion the deadline found on its way (stLate) owes once it has
// run, or once the loop has killed its step instead, unless one is
// queued already: two such completions applied before it runs (branches
// of a Parallel) owe one timeout between them, as a second would fail
// the handler that recovered from the first though it waits for nothing.
//
// A claim owes nothing once a timeout of the deadline has timed a step
// out after the claim was found (see lateRun.owed): a Parallel timed out
// as a whole, which cancels the claim's branch, or a sibling branch that
// waited and failed at once.
func (fl *flow) expireAfterClaim(w *waiter) {
	if l := w.late; l != nil {
		if l.expiring || !l.owed {
			return
		}
		l.expiring = true
	}
	fl.expireSoon(w)
}

// expiredAtStart times the execution out as it begins, before its first
// step, if the deadline of the context it runs under has passed already:
// the task that would have done it may have run before the flow began,
// and found nothing to do. It reports whether it did; the flow has then
// ended, and a task of the deadline still queued finds it over, so that
// the execution is timed out once.
func (fl *flow) expiredAtStart() bool {
	w := fl.wait
	if w == nil || w.ctx == nil || !errors.Is(w.ctx.Err(), context.DeadlineExceeded) {
		return false
	}
	fl.expire()
	return true
}

// expire times out the flow at its innermost running step: Run's deadline
// has passed. From then on, each step that waits is timed out as soon as
// it does (see settle), so that a handler that recovers cannot make the
// flow wait past the deadline.
func (fl *flow) expire() {
	if fl.wait.late == nil {
		fl.wait.late = &lateRun{}
	}
	f := &fl.base
	for f.active != nil && !f.isParallel() {
		f = f.active
	}
	fl.timeOut(f)
}

// isParallel reports whether f runs a Parallel or a ForEachLimit: its
// branches are not its active sub-step, so a timeout stops at it.
func (f *frame) isParallel() bool { return fanOutOf(f) != nil }

// timeOut fails f with the deadline's Timeout (see deadlineError) after
// cancelling what runs under it, like the expiry of a step timeout armed
// on f.
func (fl *flow) timeOut(f *frame) {
	if f.waiting && !f.timeOutWins() {
		// A completion from outside is on its way to the loop: it wins,
		// and the flow times out where it has got to once it has run
		// (see frame.killState). The step that waits next would, but the
		// flow may wait no more. Queuing the timeout again instead would
		// spin the loop for as long as the writer takes to hand the
		// completion over.
		f.h.st.Or(stLate)
		fl.wait.late.owed = true
		return
	}
	l, ctx := fl.wait.late, fl.wait.ctx
	l.timedOut(f)
	l.owed = false // this timeout pays what the claims found so far owed
	fail := func() *frame {
		err := deadlineError(ctx)
		fl.noteError(err, err)
		return fl.fail(f, err)
	}
	var tops []*frame
	if f.active != nil {
		tops = append(tops, f.active)
	}
	if pr := fanOutOf(f); pr != nil {
		tops = append(tops, pr.liveBranches()...)
	}
	fl.drive(fl.cancelFrames(fail, tops...))
}

// expiryTask times out a step that waits after Run's deadline: a step API
// seen through another method set, so that it costs no closure.
type expiryTask stepAPI

func (t *expiryTask) run() {
	h := (*stepAPI)(t)
	f, fl := h.f, h.fl
	if f.h != h || f.over || !f.waiting || fl.done {
		return
	}
	if fl.inCall { // a callback of the flow drives its TestTool
		fl.deferTask(t)
		return
	}
	fl.timeOut(f)
}

// lateRun is what an execution keeps once the deadline of Run's context
// has passed.
type lateRun struct {
	// hit are the loops (and ForEachLimit steps) through whose running
	// iteration (item) a timeout of the deadline went, until they begin
	// the next one (see lateIteration): *loopRun and *limitRun.
	hit []control
	// expiring is set while a timeout that expireAfterClaim queued has
	// not run.
	expiring bool
	// owed is set when the deadline leaves its timeout to a completion
	// on its way (stLate), and cleared when a timeout of the deadline
	// times a step out: that timeout pays what the claims found before
	// it owed, so that a handler that recovers from it, with steps that
	// do not wait, is not timed out again for them.
	owed bool
}

// timedOut notes that the deadline times out f: it goes through the
// running iteration of every loop around f, and the running item of every
// ForEachLimit.
func (l *lateRun) timedOut(f *frame) {
	for p := f.parent; p != nil; p = p.parent {
		var c control
		switch impl := p.impl.(type) {
		case *loopRun:
			c = impl
		case *limitRun:
			c = impl
		default:
			continue
		}
		if !slices.Contains(l.hit, c) {
			l.hit = append(l.hit, c)
		}
	}
}

// lateIteration fails the iteration of lr (a *loopRun, or the item of a
// *limitRun) that h runs with the deadline's Timeout if a timeout of Run's
// deadline went through an earlier iteration of lr, and reports whether
// it did. Past the deadline every step that waits fails at once: a loop
// whose iterations wait, each with an error handler that recovers, would
// otherwise spin on the loop's goroutine for ever, as no Retry retries
// past the deadline; so would a ForEachLimit over an endless sequence.
// The failure is the deadline's too: it ends the loops around lr likewise.
func lateIteration(h *stepAPI, lr control) bool {
	w := h.fl.wait
	if w == nil || w.late == nil {
		return false
	}
	i := slices.Index(w.late.hit, lr)
	if i < 0 {
		return false
	}
	w.late.hit = slices.Delete(w.late.hit, i, i+1)
	w.late.timedOut(h.f.parent)
	err := h.fl.deadlineError()
	h.fl.noteError(err, err)
	h.f.err, h.f.handling = err, false
	return true
}
