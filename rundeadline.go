package asyncsteps

import (
	"context"
	"errors"
)

// This file makes the deadline of Run's context a timeout of the whole
// flow, while a plain cancel of the context stays a cancel (see Root.Run).

// stopFor stops the execution that Run started with w, because ctx has
// ended: a cancel cancels it, a deadline times it out.
func (r *Root) stopFor(ctx context.Context, w *waiter) {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r.cancel(ctx.Err())
		return
	}
	r.fl.expireSoon(w)
}

// expireSoon times out the execution w of fl, in a task of its own on the
// flow's loop, unless fl runs another execution by then.
func (fl *flow) expireSoon(w *waiter) {
	var expire func()
	expire = func() {
		if fl.wait != w || fl.done {
			return // not the execution Run started any more
		}
		if fl.inCall { // a callback of the flow drives its TestTool
			fl.deferTask(funcTask(expire))
			return
		}
		fl.expire()
	}
	fl.sched.Immediate(expire)
}

// expire times out the flow at its innermost running step: Run's deadline
// has passed. From then on, each step that waits is timed out as soon as
// it does (see settle), so that a handler that recovers cannot make the
// flow wait past the deadline.
func (fl *flow) expire() {
	fl.wait.expired = true
	f := &fl.base
	for f.active != nil && !f.isParallel() {
		f = f.active
	}
	fl.timeOut(f)
}

// isParallel reports whether f runs a Parallel: its branches are not its
// active sub-step, so a timeout stops at it.
func (f *frame) isParallel() bool {
	_, ok := f.impl.(*parallelRun)
	return ok
}

// timeOut fails f with Timeout after cancelling what runs under it, like
// the expiry of a step timeout armed on f.
func (fl *flow) timeOut(f *frame) {
	if f.waiting && f.h.st.Load()&(stClaim|stDone) == stClaim {
		// A completion from outside is on its way to the loop: it wins,
		// and the flow times out where it has got to once it has come
		// (queued behind it, or soon after if it is being queued). The
		// step that waits next would, but the flow may wait no more.
		fl.expireSoon(fl.wait)
		return
	}
	fail := func() *frame {
		err := &Error{Code: Timeout}
		fl.noteError(err, err)
		return fl.fail(f, err)
	}
	var tops []*frame
	if f.active != nil {
		tops = append(tops, f.active)
	}
	if pr, ok := f.impl.(*parallelRun); ok {
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
