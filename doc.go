// Package asyncsteps is the FutoIn Async API (FTN12 v1.14, "AsyncSteps") for
// Go: request processing written as a sequence of non-blocking steps, with
// try/catch-like error handlers, timeouts, cancellation, parallel branches,
// loops, shared state and synchronization, run on an event loop.
//
// # Steps and levels
//
// A flow is a [Root] with steps added by [AsyncSteps.Add]. Each step is a
// [StepFunc] called with an [AsyncSteps] bound to that step and the success
// arguments of the previous step. A step completes in one of these ways:
//
//   - [AsyncSteps.Success] with arguments for the next step;
//   - [AsyncSteps.Error] with a code, which aborts the callback;
//   - by adding sub-steps with Add (or [AsyncSteps.Parallel], a loop, Sync or
//     Await): they form the next level and run after the callback returns;
//     the step completes when they have, with the last one's arguments;
//   - by waiting for an external event: [AsyncSteps.WaitExternal],
//     [AsyncSteps.SetTimeout] or [AsyncSteps.SetCancel], then Success or
//     Error later, from any goroutine;
//   - by returning without any of that: an implicit Success with no
//     arguments.
//
// The next step of a level runs only when every step of the levels below it
// has completed, so a flow reads top to bottom like synchronous code.
//
// # Errors unwind like exceptions
//
// A step's [ErrorFunc] catches errors raised by the step and its sub-steps.
// An error unwinds from the innermost step outward; at each level the
// step's cancel handler runs first, then its error handler, which may
// resume with Success, replace the error with Error, add steps that run in
// place of the failed step, or return to let the error go on. An error that
// no handler takes ends the flow: [Root.Promise] and [Root.Run] report it,
// [Root.Execute] passes it to the function set by [WithUnhandledError].
// Errors are [*Error] values with a FutoIn code (such as [Timeout] or
// [InternalError]) and work with errors.Is and errors.As. A panic in a
// callback, or a wrong use of the API, becomes an InternalError: the process
// never crashes because of a flow.
//
// # The loop
//
// Every flow runs on a [Tool], the event loop (the spec's AsyncTool). [Loop]
// is a real loop on a goroutine of its own; [DefaultTool] is a process-wide
// one. [TestTool] runs nothing until a test drives it, on virtual time, so
// that timeouts and throttling are tested exactly and instantly. Execute
// only schedules the flow: no callback runs before it returns.
//
// Consecutive steps of a flow run in a row, with no goroutine, channel or
// queue operation between them, as long as nothing else waits on the loop;
// otherwise the flow yields after each step, so that flows and parallel
// branches interleave fairly.
//
// # Concurrency
//
// All callbacks of a flow (steps, error handlers, cancel handlers) run on
// its loop's goroutine, one at a time, so a flow's [State] needs no locking.
// Flows on different loops run in parallel.
//
// From other goroutines, only these are safe: Success and Error on the
// AsyncSteps of a step that waits for an external event (the completion is
// handed to the loop; only the first one counts and later ones are ignored),
// [Root.Cancel], [Root.Execute], [Root.Promise] and [Root.Run] on a root that
// is not running, [Tool] methods, and the synchronization primitives
// ([Mutex], [Throttle], [Limiter]), which may be shared by flows on different
// loops. [AsyncSteps.Await] runs its function on a goroutine of its own and
// cancels its context when the step is cancelled.
package asyncsteps
