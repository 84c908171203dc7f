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
// the whole flow, which its error handlers see as [Timeout], with the info
// and the Cause (context.Cause(ctx)) that Run's gives it. The Result
// comes once the flow has fully stopped, as Promise's does.
//
// Unlike Run it does not block, so it may be called anywhere Promise may,
// a callback of a [Loop] included. A nil ctx starts nothing: the Result
// is an InternalError that says so. Nor does an ended ctx: the Result's
// Err is ctx.Err() for a cancel, and a [Timeout] (which matches
// context.DeadlineExceeded) for a deadline that has passed, as a flow it
// passes as it begins has. Like Promise, it panics if the flow is already
// running, whatever ctx is: these checks come after that one.
//
// ctx is watched with [context.AfterFunc], whose goroutine hands the stop
// to the flow's tool: on a [TestTool] it arrives when that goroutine has
// run, not at once when ctx ends, so a test that cancels ctx waits for it
// (testing/synctest's Wait) before it drives the tool, or uses Run, which
// looks at ctx between the tool's events. A ctx of a type of the user's
// with a Done channel of its own costs AfterFunc a goroutine for each
// flow while it runs. The watch ends with the flow, so a ctx that
// outlives many flows (a worker's, cancelled at shutdown) keeps nothing
// of those that ended. [Root.ExecuteThenContext] gives the Result to a
// function instead, with no channel.
func (r *Root) PromiseContext(ctx context.Context) <-chan Result {
	if r == nil { // before the context's checks, as for any start
		panic(nilRootStarted)
	}
	r.panicIfRunning("PromiseContext")
	ch := make(chan Result, 1)
	if ctx == nil {
		ch <- Result{Err: &Error{Code: InternalError, Info: "PromiseContext" + nilContextInfo}}
		return ch
	}
	if err := endedContextError(ctx); err != nil {
		ch <- Result{Err: err} // a Go API starts no work under an ended context
		return ch
	}
	w := newContextWaiter(ch, ctx)
	r.startIn(w, ch, "PromiseContext")
	if w.watched {
		w.watch(r, ctx)
	}
	return ch
}

// ExecuteThenContext starts the flow under ctx as [Root.PromiseContext]
// does, and calls done once with the Result of this execution, as
// [Root.ExecuteThen] does: the end of a flow that is both a request's (a
// trace id in ctx for its Await functions and hooks, the client gone
// cancelling it, its deadline timing it out) and settled in a callback,
// with no goroutine waiting for it (a queue consumer's thousands of jobs
// in flight). So ctx's values reach the contexts of the flow's
// [AsyncSteps.Await] functions (and the hooks'); a cancel of ctx cancels
// the flow (its cancel handlers run, and the Result's Err matches
// ctx.Err()); ctx's deadline is a timeout of the whole flow, which its
// error handlers see as [Timeout], with the info and the Cause
// (context.Cause(ctx)) that Run's gives it, and may recover from. The
// watch of ctx is PromiseContext's: it ends with the execution, so a ctx
// that outlives many flows (a consumer's, cancelled at shutdown) keeps
// nothing of those that ended; on a [TestTool] the end of ctx arrives once
// the goroutine of context.AfterFunc has run (see PromiseContext).
//
// done is called as ExecuteThen calls it: on the flow's tool once the
// flow has fully stopped, never before ExecuteThenContext has returned;
// it may execute the Root again, and a panic in it is the tool's. The
// Root runs from the call until done is called, whatever ctx is.
//
// A nil ctx, or one that has ended, runs none of the flow's steps, nor
// does any hook see the flow, as PromiseContext starts nothing: done gets
// the Result PromiseContext would give at once, an InternalError that
// says ctx is nil, ctx.Err() for a cancel, or the deadline's [Timeout].
// It gets it where it would get the flow's Result, as the flow would
// begin on its tool (on a TestTool, when the tool is driven; a
// Root.Cancel or ResetEvents meanwhile changes nothing); on a [Loop]
// closed meanwhile, as a flow of ExecuteThen whose loop closed before it
// began, with that Result all the same. The steps stay on the Root, as
// after a PromiseContext that started nothing: the next execution runs
// them.
//
// A nil done makes it [Root.Execute] under ctx: an error that ends the
// flow (the deadline's Timeout, a nil ctx's InternalError included) goes
// to the unhandled-error function, and a cancel, ctx's included, goes
// nowhere. A flow of it that waits is held by its Loop until it ends, as
// one of ExecuteThen. Like ExecuteThen, it panics if the flow is already
// running, whatever ctx is: that check comes first.
func (r *Root) ExecuteThenContext(ctx context.Context, done func(Result)) {
	if r == nil { // before the context's checks, as for any start
		panic(nilRootStarted)
	}
	r.panicIfRunning("ExecuteThenContext")
	w := newThenContextWaiter(done, ctx)
	r.startIn(w, nil, "ExecuteThenContext")
	if w.watched {
		w.watch(r, ctx)
	}
}

// nilContextInfo is the info, after the method's name, of the
// InternalError of Run, RunHelping, Run[T], PromiseContext and
// ExecuteThenContext given a nil context.
const nilContextInfo = " called with a nil context: pass context.Background() or the caller's context"

// watch makes the end of ctx stop the execution w of r, unless it has
// ended first (see ctxEnded). mu and finished keep the watch from being
// made for an execution that has ended already (the flow may end on its
// loop before watch runs), so that ctx keeps nothing of it.
func (w *waiter) watch(r *Root, ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.stopWatch = context.AfterFunc(ctx, func() { w.ctxEnded(&r.fl, ctx) })
}

// ctxEnded stops the execution w of fl because ctx has ended, on the
// goroutine of context.AfterFunc: a cancel cancels it (cancel handlers
// only), a deadline times it out, as for Run. No lock is held while the
// tool is called, whose Immediate may block or run the task at once, and
// the tool is called through inject, which logs the panic of a stopped
// tool rather than ending the process on a goroutine with no caller.
//
// A cancel is requested as Root.Cancel requests it, in fl.stop, which the
// flow looks at before each step, also as it begins: the task that
// applies it to a waiting flow may run on the loop before the flow has
// begun. The request is made under mu, while w has not delivered, so
// that it never reaches a later execution of the Root, which may begin
// only once w has. A deadline's task does nothing before the flow has
// begun, which then times itself out (expiredAtStart).
func (w *waiter) ctxEnded(fl *flow, ctx context.Context) {
	cause := ctx.Err()
	if errors.Is(cause, context.DeadlineExceeded) {
		fl.injectStop(fl.expiryOf(w))
		return
	}
	if req := w.requestCancel(fl, cause); req != nil {
		fl.injectCancel(req)
	}
}

// requestCancel requests the cancel of the execution w of fl, because
// its context has ended with cause, as Root.Cancel requests one, and
// returns the request, for the caller to post the task that applies it,
// or nil. It requests none once w has delivered its Result (finished, for
// a waiter whose context can end: see watched), since another execution
// of the Root may have started by then, nor when a cancel is requested
// already (by Root.Cancel: its task applies it). The request is made
// under mu, which deliver takes to finish w: until then the execution
// that runs is w's.
func (w *waiter) requestCancel(fl *flow, cause error) *stopRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return nil
	}
	gen, running := fl.execution()
	if !running {
		return nil
	}
	return fl.requestStop(gen, cause)
}

// endWatch ends the watch of the execution's context as the flow delivers
// its Result, on the loop: ctx keeps no reference to the flow, and a stop
// on its way finds the execution over (finished, or fl.wait moved on).
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
