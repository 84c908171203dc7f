package asyncsteps

import (
	"context"
	"time"
)

// StepFunc is a step's body (the spec's execute_callback). args are the
// success arguments of the previous step at the same level.
type StepFunc func(as AsyncSteps, args ...any)

// ErrorFunc handles an error raised by its step or the step's sub-steps (the
// spec's error_callback). The error info is in as.State().ErrorInfo.
//
// It completes like a catch block: [AsyncSteps.Success] resumes after the
// failed step, [AsyncSteps.Error] replaces the error, [AsyncSteps.Add] runs
// the added steps in place of the failed step, and a plain return lets the
// error go on to the outer handlers. A handler that calls
// [AsyncSteps.SetTimeout], [AsyncSteps.SetCancel] or
// [AsyncSteps.WaitExternal] waits as a step does, until it is completed
// from outside or times out (docs/DESIGN.md#error-handlers).
type ErrorFunc func(as AsyncSteps, code string)

// CancelFunc releases what a waiting step holds when the step is cancelled
// (the spec's cancel_callback). It runs on the loop and must not block.
// Its AsyncSteps is the cancelled step's, dead as a completed step's (its
// IsValid reports false): a step it adds never runs, and its Success,
// Error, Break, Continue and waits have no effect. Such a call is a
// misuse of the handler, logged with log/slog ("asyncsteps: misuse in
// cancel handler", with an info that names the call) for the first one
// of each run; it does not abort the handler, whose cleanup after it
// still runs, nor change how the flow ends. State, IsValid, Tool and
// NewInstance serve as ever. Work that takes steps (a compensation that
// calls a service, with retries) goes in a flow of its own, which the
// handler may start; Example_saga starts it once the flow has ended
// instead, since a cancel handler also runs for an error unwinding
// through its step.
type CancelFunc func(as AsyncSteps)

// LoopFunc is the body of [AsyncSteps.Loop].
type LoopFunc func(as AsyncSteps)

// RepeatFunc is the body of [AsyncSteps.Repeat]; i counts from 0.
type RepeatFunc func(as AsyncSteps, i int)

// ForEachFunc is the body of [AsyncSteps.ForEach].
type ForEachFunc func(as AsyncSteps, key, value any)

// AwaitFunc is a blocking Go function run by [AsyncSteps.Await] on its own
// goroutine.
//
// ctx carries the values of [Root.Run]'s context and the nearest deadline:
// that of the step timeouts armed around the step (the time left on them
// when the function starts; on a Tool of the caller's own, whose timers
// cannot be read, none) and that of Run's context. Its Done channel is
// closed when the step is cancelled (its timeout or an enclosing one, a
// failed parallel sibling, [Root.Cancel], the end of Run's context, a
// closed [Loop]), by the flow's loop only, never by a timer of the
// context's own: the loop decides when a timeout happens, so the function
// and the flow see one order of events. ctx.Err() is then
// context.DeadlineExceeded when a deadline caused the cancel, else
// context.Canceled. On a [TestTool] the time left on a step timeout is
// virtual time, which the function gets as as much wall-clock time from
// its start; the Done channel follows the virtual clock.
//
// The returned error becomes the step's error as [ErrorFrom] maps it.
//
// The flow runs while the function does, so the function must not use the
// flow's [State], nor an [AsyncSteps] of the flow other than to complete a
// step that waits: that is a data race. Give it what it needs in its
// closure, and let it return what it produced, for the next step to store.
type AwaitFunc func(ctx context.Context) (any, error)

// AsyncSteps is the interface every callback receives (spec 2.2). The value
// given to a callback is bound to that one step: once the step has completed,
// or can never complete (its [Loop] was closed and has stopped, see
// [Loop.Close]), calls on it have no effect and IsValid reports false.
//
// [*Root] implements it too, so a helper written as func(as AsyncSteps) works
// on a root before execution and inside a step alike.
//
// Except for Success, Error and IsValid on a waiting step, the methods may
// be called only from the callback the value was given to.
type AsyncSteps interface {
	// Add queues a sub-step, run after the current callback returns.
	Add(f StepFunc, onerror ...ErrorFunc) AsyncSteps
	// Parallel queues a step whose branches run concurrently; each Add (or
	// Loop, Repeat, ForEach, Sync, Await) on the returned value adds a branch.
	// The branches get no arguments, and once they have all succeeded the
	// step after the Parallel gets none either ([Gather] hands the
	// branches' results on). The first branch that fails (a Break or
	// Continue in one included) cancels the others, and its error is the
	// Parallel's: onerror sees it first, and may recover with
	// Success(args...), whose args the next step gets.
	Parallel(onerror ...ErrorFunc) AsyncSteps
	// State returns the state shared by every step of the flow.
	State() *State
	// CopyFrom queues the steps of model and copies its state variables
	// that are not set yet.
	CopyFrom(model *Root) AsyncSteps
	// Sync queues a step run in the critical section guarded by obj.
	Sync(obj Syncer, f StepFunc, onerror ...ErrorFunc) AsyncSteps
	// SuccessStep queues a step that succeeds with args.
	SuccessStep(args ...any) AsyncSteps
	// Await queues a step that runs f on its own goroutine and succeeds
	// with its value; an error fails the step with the code [ErrorFrom]
	// gives it, and State().LastException holds the original error. The
	// critical sections ([Mutex], [Limiter]) and the items of a
	// [ForEachLimit] around the step count f until it returns, even once
	// the step has been cancelled. On a
	// [Loop] made by [NewLoop], f's goroutine is one the Loop keeps for
	// later Await functions once f has returned, so what f changes about
	// its own goroutine (pprof labels, a locked OS thread) stays for the
	// next (the loop of [DefaultTool] starts a new goroutine for each);
	// under [Root.RunHelping], f may run on RunHelping's caller.
	Await(f AwaitFunc, onerror ...ErrorFunc) AsyncSteps
	// NewInstance returns a new, empty root on the same tool.
	NewInstance() *Root
	// IsValid reports whether calls on this value still act on a step.
	IsValid() bool
	// Tool returns the event loop of the flow.
	Tool() Tool

	// Success completes the step with args for the next step. Unlike
	// Error it does not abort the callback, but the step has completed:
	// a later Success, Add, Parallel, loop, Sync, Await, Error, Break or
	// Continue in the same callback has no effect (an Error neither fails
	// the step nor aborts the callback), so return right after Success.
	Success(args ...any)
	// Error completes the step with an error and aborts the callback. info
	// is optional: one string at most. An empty code or more than one info
	// is a misuse: the step fails with InternalError, whose info says so
	// and keeps the code and the infos given. Raised by an error handler, the error
	// keeps the Go cause of the one it handles (see [Error]).
	Error(code string, info ...string)
	// SetTimeout makes the step wait for an external completion and fail
	// with Timeout after d, covering its sub-steps. A d of 0 or less
	// expires as soon as the callback returns without completing the step.
	SetTimeout(d time.Duration)
	// SetCancel sets the function that runs, once, if the step is cancelled
	// before it completes: by a timeout, a failed parallel sibling,
	// Root.Cancel, or an error unwinding through the step (then before the
	// step's error handler). A step without sub-steps then waits for an
	// external completion; with sub-steps, f stays set while they run and
	// is dropped when the step completes. A Success from outside the
	// callback completes the step once it is accepted: a cancel that the
	// loop applies after it, before the step's flow has moved on, does
	// not run f (an Error accepted so still does, as the error would).
	// A step has one such function: a second SetCancel replaces the first,
	// so a helper that sets its own on the step it is given (a fake call,
	// a wrapper) drops the caller's; put each on a step of its own, the
	// caller's around the helper's.
	SetCancel(f CancelFunc)
	// WaitExternal makes the step wait for an external completion.
	WaitExternal()

	// Loop queues a loop that runs f until Break.
	Loop(f LoopFunc, label ...string) AsyncSteps
	// Repeat queues a loop that runs f count times.
	Repeat(count int, f RepeatFunc, label ...string) AsyncSteps
	// ForEach queues a loop over a slice, array, map, iter.Seq2 or *State.
	// An iter.Seq2 is pulled one pair per iteration (iter.Pull2), and
	// stopped, its deferred cleanup run, when the loop ends for any
	// reason: Break, an error, a timeout, a cancel, the close of its Loop.
	// A sequence that yields again after its yield returned false panics
	// there, as in a range over it; that panic is dropped.
	ForEach(collection any, f ForEachFunc, label ...string) AsyncSteps
	// Break leaves the innermost loop, or the loop with label. It carries
	// no value: the step after a loop gets no args, whatever its last
	// iteration succeeded with, so keep a loop's result in a variable or
	// the State.
	Break(label ...string)
	// Continue starts the next iteration of the innermost loop, or of the
	// loop with label.
	Continue(label ...string)
}

// Syncer is a synchronization primitive (the spec's ISync): Sync adds to as
// the steps that run f inside its critical section, with onerror as f's
// error handler.
//
// as may be a decorator of the AsyncSteps a step received (see
// [Unwrapper]): this package's Syncers tell the flow it runs in through
// Unwrap. One that does not unwrap still gets its critical section, but
// each of its Sync calls counts as a flow of its own, so a [Mutex] that
// its flow already holds does not let it in again: a nested Sync then
// waits for the section around it until a timeout or a cancel ends the
// wait, and a deadlock through [AsyncSteps.Parallel] is not detected.
type Syncer interface {
	Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc)
}

// Unwrapper is implemented by a decorator of an AsyncSteps: a value of
// another type that wraps the AsyncSteps a step received, to log or trace
// the step's calls, say, and passes it on. Unwrap returns the AsyncSteps it
// wraps, which may be a decorator too, as errors.Unwrap does for an error.
//
// This package looks through Unwrap where it must know the flow behind an
// AsyncSteps: a [Mutex] (or a [Limiter]'s concurrency limit) lets a flow
// that holds it in again and detects deadlocks through
// [AsyncSteps.Parallel] only for a flow it can tell (see [Syncer]), counts
// the [AsyncSteps.Await] functions started inside a critical section, and
// gives a section's slot back when the flow's [Loop] is closed; [Retry]
// adds its loop to the AsyncSteps unwrapped, [First] and [Quorum] their
// race, whose branches get that AsyncSteps; [AwaitChan], [AwaitResult]
// and [AwaitFlow] stop their goroutine when the Loop is closed, and the
// last two fail the step unwrapped with the awaited flow's error, which
// the decorator's Error would drop (it takes no cause); a SyncWait hook
// (see [Hooks]) sees the waits. The decorator's own methods are still the
// ones called to add the section's steps and to complete them (a Mutex,
// Throttle or Limiter that lets the flow in calls its Success on the
// flow's loop, whatever goroutine gave the slot back, and so do AwaitChan,
// AwaitResult and AwaitFlow with the value they receive), and Sync's f
// receives what the decorator gives its steps.
//
// Unwrap must return the AsyncSteps the decorator was made with for its
// step, never one kept from another step: the package uses the step it
// finds only while that step's callback runs, and ignores one that has
// completed. A panic in Unwrap fails the step, as in any callback.
type Unwrapper interface {
	Unwrap() AsyncSteps
}

func firstHandler(h []ErrorFunc) ErrorFunc {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func firstLabel(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}
