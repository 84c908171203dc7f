package asyncsteps

import "context"

// PromiseContext starts the flow like [Root.Promise], under ctx as
// [Root.Run] runs it, without a goroutine waiting for it: ctx's values
// reach the contexts of the flow's [AsyncSteps.Await] functions (and the
// hooks'), a cancel of ctx cancels the flow (its cancel handlers run, and
// the Result's Err matches ctx.Err()), and ctx's deadline is a timeout of
// the whole flow, which its error handlers see as [Timeout]. The Result
// comes once the flow has fully stopped, as Promise's does.
//
// Unlike Run it does not block, so it may be called anywhere Promise may,
// a callback of a [Loop] included; on a [TestTool] the test drives the
// tool. A nil ctx starts nothing: the Result is an InternalError that
// says so. Nor does an ended ctx: the Result's Err is ctx.Err(). Like
// Promise, it panics if the flow is already running.
//
// The watch of ctx ends with the flow, so a ctx that outlives many flows
// (a worker's, cancelled at shutdown) keeps nothing of those that ended.
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

// watch makes the end of ctx stop the execution w of r, unless it has
// ended first. The flow may end on its loop before watch runs: finished,
// under mu, says so, and then nothing is watched. A stop that ctx's end
// makes runs under mu too, so it never reaches a later execution of r:
// that one can start only once this one has delivered, after endWatch.
func (w *waiter) watch(r *Root, ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.stopWatch = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.finished {
			r.stopFor(ctx, w)
		}
	})
}

// endWatch ends the watch of the execution's context as the flow delivers
// its Result, on the loop: a later end of the context does nothing, and
// the context keeps no reference to the flow.
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
