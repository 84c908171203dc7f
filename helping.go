package asyncsteps

import (
	"context"
	"sync"
	"sync/atomic"
)

// This file lets the goroutine that waits in RunHelping run the Await
// functions of the flow it waits for (docs/DESIGN.md#await): a server that
// calls Run on each request's goroutine would otherwise keep that goroutine
// idle while another one runs the request's blocking call.

// RunHelping runs the flow like [Root.Run], and while it waits, the calling
// goroutine runs the flow's [AsyncSteps.Await] functions itself, one at a
// time, in place of a goroutine of the loop's. An Await function that
// starts while the caller runs another one (a second branch of a Parallel)
// goes to a goroutine of the loop's, as with Run. Only the flow's own
// functions come to the caller, never those of another flow. On a tool
// that is not a [Loop] ([TestTool], a Tool of the caller's), RunHelping is
// Run.
//
// It costs the flow no goroutine while the caller waits anyway: a server
// that runs one flow per request on the request's goroutine (as
// asynchttp.Handler does) holds one goroutine, and one stack, less per
// request in flight. Handing a function to the caller costs the loop one
// channel send, no allocation. Under a context that can end, the first
// function the caller runs sets up a watch of the context, kept until
// RunHelping returns (a context.AfterFunc: a few small allocations per
// call of RunHelping).
//
// What differs from Run follows from the function running on the caller's
// goroutine:
//
//   - Run's results, the cancel on ctx's end and the timeout on its
//     deadline are as with Run, also while the caller runs a function.
//   - RunHelping returns only once the function it runs has returned,
//     even when the flow has ended before (a timeout, a cancel, the end of
//     ctx, a closed Loop: each cancels the function's context as with
//     Run). A function that ignores its context delays RunHelping, where
//     Run would have returned at the end of the flow; one that waits for
//     something the caller holds never gets it.
//   - A panic in the function fails its step with InternalError, as with
//     Run.
//   - A function that calls runtime.Goexit ends the caller's goroutine, as
//     if the caller had called it: RunHelping never returns, and the
//     caller's deferred calls run. The flow does not stop: the step fails
//     with InternalError and the flow goes on from there as after any
//     error (its error handlers run) to its end, which ctx still hastens;
//     the loop goes on.
//   - What the function leaves set on its goroutine (pprof labels, a
//     locked OS thread) stays set on the caller's.
//
// RunHelping is a method of its own, not an option of the Root, because
// those differences are the caller's to accept, for its own goroutine, at
// the place where it waits. Like Run, it must not be called on the
// goroutine of any [Loop] nor from a callback of the flow's own tool (it
// then returns an InternalError at once), and it panics if the flow is
// already running, whatever ctx is.
func (r *Root) RunHelping(ctx context.Context) ([]any, error) {
	r.ready()
	loop, ok := r.fl.sched.(*Loop)
	if !ok {
		return r.run(ctx, "RunHelping")
	}
	if err := r.runnable(ctx, "RunHelping"); err != nil {
		return nil, err
	}
	w := newContextWaiter(loop.helpPromises.take(), ctx)
	w.idle.Store(true)
	r.startIn(w, w.promise, "RunHelping")
	return w.help(ctx, r)
}

// promisePool holds the empty promise channels of the calls of RunHelping
// on one Loop's flows that have returned: a channel of Results costs two
// allocations, which a server that calls RunHelping per request would
// otherwise pay each time. A channel comes back only once its Result is
// taken, and nothing is sent on it after that Result (see deliver and
// lend), so it is empty.
//
// The pool is the Loop's, not the process's: a channel made inside a
// testing/synctest bubble belongs to that bubble, and a receive on it from
// another bubble, or from outside any, is a fatal error of the runtime,
// which no recover stops. A Loop made in a bubble is used from that bubble
// only, so its callers' channels never leave it.
type promisePool struct {
	mu   sync.Mutex
	free []chan Result
}

// maxPooledPromises bounds the channels a Loop keeps: those of the
// RunHelping calls in flight at its busiest, up to this many.
const maxPooledPromises = 256

// take returns a kept channel, or a new one.
func (p *promisePool) take() chan Result {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		ch := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return ch
	}
	p.mu.Unlock()
	// Room for the flow's Result and the one Await function handed over
	// at a time: the loop never blocks on sending either.
	return make(chan Result, 2)
}

// keep keeps ch, empty, unless the pool is full.
func (p *promisePool) keep(ch chan Result) {
	p.mu.Lock()
	if len(p.free) < maxPooledPromises {
		p.free = append(p.free, ch)
	}
	p.mu.Unlock()
}

// helper is the state, in a waiter, of the goroutine waiting in
// RunHelping. Its zero value is a waiter that runs no Await function.
type helper struct {
	// idle is set while the goroutine can take an Await function: it
	// waits for the flow, or the function it ran has returned. Only the
	// loop clears it, when it hands one over; only the goroutine sets it,
	// in the function's job (see free). So at most one function waits in
	// the channel for the goroutine.
	idle atomic.Bool
	// mu keeps a cancel for the end of ctx, which a callback of ctx's
	// may request, from reaching a later execution (see requestCancel).
	mu       sync.Mutex
	finished bool // the Result is delivered: a stop comes too late; under mu
	// watched is set, before the execution starts, for one of Run,
	// RunHelping, PromiseContext or ExecuteThenContext under a context
	// that can end: deliver then sets finished, under mu (see endWatch).
	watched bool
	// ended is set, on the loop, as the execution delivers its Result:
	// a task queued for it (a timeout at its context's deadline) tells
	// by it that the execution is over without reading the flow's wait,
	// which the next execution's start writes from another goroutine.
	ended bool
	// then is set for the waiter of ExecuteThen (or ExecuteThenContext),
	// which a thenWaiter holds (see waiter.thenFunc). Here, in the
	// struct's last byte of padding, so that the waiter keeps its size
	// class.
	then bool
}

// awaitJob is an Await call, which runs its function and completes its
// step, handed to the goroutine in RunHelping as the Err of a Result on the
// flow's promise channel. A pointer becomes an error without an
// allocation; and one channel delivers the functions and the flow's end in
// the order the loop sent them, so a function handed over before the end
// runs before RunHelping returns.
type awaitJob awaitCall

func (*awaitJob) Error() string { return "asyncsteps: an Await function for RunHelping" }

// lender returns the waiter of the goroutine in RunHelping if it is idle,
// and takes it for an Await function of the flow; else nil. On the loop.
// The flag is read before the compare-and-swap: under Run it is never set,
// and a plain load costs no locked instruction.
func (fl *flow) lender() *waiter {
	if w := fl.wait; w != nil && w.idle.Load() && w.idle.CompareAndSwap(true, false) {
		return w
	}
	return nil
}

// lend hands the call c to the goroutine in RunHelping, which lender took
// for it.
func (w *waiter) lend(c *awaitCall) {
	w.promise <- Result{Err: (*awaitJob)(c)} // RunHelping left room for it
}

// free makes the goroutine in RunHelping idle again once the Await function
// it ran has returned, before the function's step completes: the flow's
// next function, which the completion may start at once, can then come to
// it too. The rest of the job, short, runs before the goroutine looks for
// that function. A nil w, a function on another goroutine, does nothing.
func (w *waiter) free() {
	if w != nil {
		w.idle.Store(true)
	}
}

// help waits for the Result of r's execution w, running the Await
// functions the loop hands it meanwhile, and stops the execution when ctx
// ends first.
func (w *waiter) help(ctx context.Context, r *Root) ([]any, error) {
	done := ctx.Done()
	var unwatch func() bool // ends the watch of ctx set up for a function
	returned := false
	defer func() {
		if !returned { // a function called runtime.Goexit
			w.leave(unwatch)
		}
	}()
	for {
		select {
		case res := <-w.promise:
			job, ok := res.Err.(*awaitJob)
			if !ok {
				w.finish(unwatch)
				returned = true
				r.fl.sched.(*Loop).helpPromises.keep(w.promise)
				return res.Args, res.Err
			}
			if done != nil {
				// While the function runs, nothing here sees ctx end: a
				// callback of ctx's stops the flow instead, from now on.
				unwatch = context.AfterFunc(ctx, func() { r.stopFor(ctx, w) })
				done = nil
			}
			(*awaitCall)(job).run() // it frees the goroutine (see free), unless it ends it
		case <-done:
			done = nil // stop once: a second timeout would fail an outer step
			r.stopFor(ctx, w)
		}
	}
}

// finish ends the watch of ctx once the Result is taken. Its callback
// may still run: stopFor does nothing then, the execution having
// delivered (see requestCancel and expiryOf).
func (w *waiter) finish(unwatch func() bool) {
	if unwatch != nil {
		unwatch()
	}
}

// leave lets the flow go on without the goroutine of RunHelping, which an
// Await function ended with runtime.Goexit: the watch of ctx, if any,
// stays until the flow ends. idle stays clear, so no function is handed
// over any more, and the Result is the next value on the channel. The
// goroutine it starts for that is not counted for Loop.Wait: a closing
// loop gives every flow's Result before its own goroutine counts out, and
// the goroutine then only ends the watch and exits.
func (w *waiter) leave(unwatch func() bool) {
	if unwatch == nil {
		return // nothing watches ctx: nothing to end
	}
	go func() {
		<-w.promise
		w.finish(unwatch)
	}()
}
