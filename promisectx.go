package asyncsteps

import (
	"context"
	"errors"
)

// PromiseContext starts the flow like [Root.Promise], under ctx as
// [Root.Run] runs it, without a goroutine waiting for it: ctx's values
// reach the contexts of the flow's [AsyncSteps.Await] functions (and the
// hooks'), a cancel of ctx cancels the flow (its cancel handlers run, and
// the Result's Err matches ctx.Err()), and ctx's deadline is a timeout of
// the whole flow, which its error handlers see as [Timeout]. The Result
// comes once the flow has fully stopped, as Promise's does.
//
// Unlike Run it does not block, so it may be called anywhere Promise may,
// a callback of a [Loop] included. A nil ctx starts nothing: the Result
// is an InternalError that says so. Nor does an ended ctx: the Result's
// Err is ctx.Err(). Like Promise, it panics if the flow is already
// running.
//
// ctx is watched with [context.AfterFunc], whose goroutine hands the stop
// to the flow's tool: on a [TestTool] it arrives when that goroutine has
// run, not at once when ctx ends, so a test that cancels ctx waits for it
// (testing/synctest's Wait) before it drives the tool, or uses Run, which
// looks at ctx between the tool's events. A ctx of a type of the user's
// with a Done channel of its own costs AfterFunc a goroutine for each
// flow while it runs. The watch ends with the flow, so a ctx that
// outlives many flows (a worker's, cancelled at shutdown) keeps nothing
// of those that ended.
func (r *Root) PromiseContext(ctx context.Context) <-chan Result {
	ch := make(chan Result, 1)
	if ctx == nil {
		ch <- Result{Err: &Error{Code: InternalError, Info: "PromiseContext called with a nil context: pass context.Background() or the job's context"}}
		return ch
	}
	if err := ctx.Err(); err != nil {
		ch <- Result{Err: err} // a Go API starts no work under an ended context
		return ch
	}
	w := &waiter{promise: ch, ctx: ctx}
	watch := ctx.Done() != nil
	w.watched = watch
	r.startIn(w, ch, "PromiseContext")
	if watch {
		w.watch(r, ctx)
	}
	return ch
}

// watch makes the end of ctx stop the execution w of r. The stop is a
// task handed to the flow's tool (ctxStop), which decides on the loop
// whether w is still the execution running: no lock is held while the
// tool is called, whose Immediate may block or run the task at once. mu
// and finished only keep the watch from being made for an execution that
// has ended already (the flow may end on its loop before watch runs), so
// that ctx keeps nothing of it.
func (w *waiter) watch(r *Root, ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.stopWatch = context.AfterFunc(ctx, func() {
		r.fl.sched.inject(&ctxStop{fl: &r.fl, w: w, ctx: ctx})
	})
}

// endWatch ends the watch of the execution's context as the flow delivers
// its Result, on the loop: ctx keeps no reference to the flow, and a stop
// already on its way finds the execution over.
func (w *waiter) endWatch() {
	w.mu.Lock()
	w.finished = true
	stop := w.stopWatch
	w.stopWatch = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// ctxStop stops the execution w of fl because ctx has ended, on the
// flow's loop: a cancel of ctx cancels it (cancel handlers only), its
// deadline times it out, as for Run. It does nothing once w is not the
// execution running: ended, or followed by another. It is handed to the
// tool with inject, which logs a panic of a stopped tool's Immediate
// rather than ending the process on the goroutine of context.AfterFunc.
type ctxStop struct {
	fl  *flow
	w   *waiter
	ctx context.Context
}

func (s *ctxStop) run() {
	fl := s.fl
	if fl.wait != s.w || fl.done {
		return
	}
	if fl.inCall { // a callback of the flow drives its TestTool
		fl.deferTask(s)
		return
	}
	cause := s.ctx.Err()
	if errors.Is(cause, context.DeadlineExceeded) {
		fl.expire()
		return
	}
	// As Root.Cancel's, once its callback runs: a cancel requested
	// already (Root.Cancel) is applied by its own callback.
	if fl.stop.CompareAndSwap(nil, &cause) {
		fl.cancel(cause)
	}
}
