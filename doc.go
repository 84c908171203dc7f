// Package asyncsteps is the FutoIn Async API (FTN12 v1.14, "AsyncSteps") for
// Go: request processing written as a sequence of non-blocking steps, with
// try/catch-like error handlers, timeouts, cancellation, parallel branches,
// loops, shared state and synchronization, run on an event loop.
//
// docs/FROM-ERRGROUP.md maps errgroup, context and semaphore idioms to steps.
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
// # Running a flow
//
// [New] makes an empty [Root]; its flow runs on [DefaultTool] unless
// [WithTool] names another loop (the default loop is started at the flow's
// first execution, not by New). [Root.Run] starts the flow and waits until
// it has stopped: it returns the success arguments of the last step, or the
// error that ended the flow. [Root.Promise] starts it and returns a channel
// for its [Result]; [Root.ExecuteThen] starts it and calls a function
// with that Result; [Root.Execute] only starts it. [Root.PromiseContext]
// and [Root.ExecuteThenContext] are Promise and ExecuteThen under a
// context, as Run runs a flow.
//
// A server makes one [LoopGroup] (one [Loop] per core) when it starts, and
// for each request a flow on the group's next loop:
//
//	g := asyncsteps.NewLoopGroup(0) // runtime.GOMAXPROCS(0) loops
//	defer g.Close()
//	// in the http.Handler:
//	r := g.New()
//	r.Add(handle) // handle is a StepFunc
//	args, err := r.Run(req.Context()) // a client gone cancels the flow
//
// [Root.RunHelping] waits the same way and runs the flow's Await functions
// on the waiting goroutine; package asynchttp of this module does all this
// for net/http. ExampleLoopGroup is a server in miniature, Example_worker a
// queue worker: a flow per job, a lock per tenant, a lease and a drain;
// Example_consumer a broker's consumer, 16 messages in flight, whose
// shutdown waits for the calls it cancelled; Example_saga an order whose
// compensations a cancel does not skip; Example_loader a DataLoader, the
// lookups that the flows of a loop make in one turn of it sent as one
// batch call; Example_poller a health-check poller, a tick per target on
// the loop, a tick skipped while the target's last check still runs.
// [ForEachChan] runs the values of a channel as they arrive, K at a time,
// as the items of one step.
//
// Which to call:
//
//   - [Root.Run] where a goroutine waits for the result anyway (a handler,
//     main, a test): its context's end cancels the flow, its deadline
//     times the flow out.
//   - [Root.RunHelping] in its place when the flow makes Await calls and
//     the caller accepts that they run on its goroutine (see its doc).
//   - [Root.Promise] to wait in a select, or for several flows at once;
//     [Root.PromiseContext] for the same under a context, as Run's: a
//     worker's flow per job, with the job's values and deadline, and no
//     goroutine waiting for it.
//   - [Root.ExecuteThen] for a function that must see every end of the
//     flow (a success, an error, a cancel, its Loop closed), once, on
//     the loop, with no goroutine waiting: a worker settling its job.
//     [Root.ExecuteThenContext] for the same under a context, as Run's:
//     a consumer's order whose context's values (a trace id), cancel
//     and deadline must reach the flow.
//   - [Root.Execute] for a flow nobody waits for: an error that ends it
//     goes to [WithUnhandledError]'s function, or, with
//     [Root.ExecuteWith], to a function of that execution's own.
//
// A step never waits for a flow this way (Run and RunHelping called on the
// goroutine of any Loop, the flow's own or another, return an
// InternalError at once): a step that must block calls
// [AsyncSteps.Await], and one that waits for another flow [AwaitFlow].
//
// # Errors unwind like exceptions
//
// A step's [ErrorFunc] catches errors raised by the step and its sub-steps.
// An error unwinds from the innermost step outward; at each level the
// step's cancel handler runs first, then its error handler, which may
// resume with Success, replace the error with Error, add steps that run in
// place of the failed step, or return to let the error go on. An error that
// no handler takes ends the flow: [Root.Promise], [Root.ExecuteThen] and
// [Root.Run] report it, [Root.Execute] passes it to the function set by
// [WithUnhandledError].
// Errors are [*Error] values with a FutoIn code (such as [Timeout] or
// [InternalError]) and work with errors.Is and errors.As; [Fail] raises a
// Go error from a step's own code, keeping it as the Cause. A panic in a
// callback, or a wrong use of the API inside a flow, becomes an
// InternalError: the process never crashes because of a flow. Outside a
// flow, programming errors panic, as documented where they can happen:
// starting a Root that is already running, or a Mutex, Throttle or Limiter
// (or their keyed forms) given limits it cannot work with.
//
// # Timeouts and cancellation
//
// [AsyncSteps.SetTimeout] bounds a step and its sub-steps: past it, the
// step fails with [Timeout], an error like any other that its error handler
// may recover from. A flow is cancelled by [Root.Cancel] or the end of
// [Root.Run]'s context (a deadline of that context is a timeout of the whole
// flow instead). Cancelling stops the steps still running, innermost
// first, and runs the function each set with [AsyncSteps.SetCancel], once,
// to release what it holds; no error handler runs, and the flow ends with
// an error matching context.Canceled. A cancel requested before an error
// is raised wins over it, also when the callback that called Cancel
// raises the error: no error handler runs after the request. A timeout,
// an error unwinding, and the first failed branch of
// [AsyncSteps.Parallel] cancel the steps they abandon the same way.
// ExampleAsyncSteps_SetTimeout and ExampleRoot_Cancel show both. [Retry]
// makes a call again while it fails with a retryable code, each attempt
// within its own timeout, with a backoff between attempts; Example_retry
// shows it. [RetryOptions].Delay takes the wait from the failure instead
// (an HTTP answer's Retry-After, which asynchttp.RetryAfter reads), and
// gives up at once on a wait that the deadline around it would cut
// short; Example_retryAfter shows it. [Throttle.Hold] and [Limiter.Hold]
// make every flow that shares the limit wait as long.
// [Sleep] adds a step that waits on the flow's clock (virtual on a
// [TestTool]) and passes its arguments on; a cancel or a timeout around
// it stops its timer.
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
// queue operation between them, as long as nothing else waits on the loop,
// and for at most 256 steps; otherwise the flow yields after each step, so
// that flows and parallel branches interleave fairly, as in the reference
// implementations ([Loop.SetBursts] trades that order for speed). On a
// [Tool] of another package, a flow yields after every step.
//
// [AtTurnEnd] runs a callback once the tool's current turn is over: the
// steps ready on it have run, and those they made ready. A DataLoader
// gathers the keys that the flows of a loop ask for in one turn and asks
// for them in one call at its end (Example_loader).
//
// # Concurrency
//
// A flow runs on its [Tool]: every callback of it (steps, error handlers,
// cancel handlers) runs on the loop's goroutine ([Loop]), or on the goroutine
// driving a [TestTool], one at a time. A flow's [State] is owned by that
// goroutine and needs no locking; do not touch it from other goroutines, pass
// values through Success arguments instead. Flows on one loop interleave at
// step boundaries and wherever a step waits; flows on different loops run in
// parallel. A server spreads its flows over one loop per core with a
// [LoopGroup].
//
// Safe from any goroutine:
//
//   - [AsyncSteps.Success], [AsyncSteps.Error] and [AsyncSteps.IsValid] on
//     the AsyncSteps of a step that waits for an external event: it called
//     [AsyncSteps.WaitExternal], [AsyncSteps.SetTimeout] or
//     [AsyncSteps.SetCancel] before handing its AsyncSteps to another
//     goroutine. The completion is handed to the loop and never blocks the
//     caller; the first Success or Error counts, and every later call, or any
//     call once the step has completed or was cancelled, has no effect
//     (IsValid then reports false). Error does not panic there. The
//     arguments passed to Success are visible to the next step.
//   - [Root.Cancel], which is asynchronous: the flow stops before its next
//     step, or where an error raised after the cancel unwinds (no error
//     handler runs then), and the loop runs the cancel handlers of the
//     steps still running. It acts on the execution running when it is
//     called, never on a later one.
//   - [Root.Execute], [Root.ExecuteThen], [Root.Promise] and [Root.Run] on
//     a root that is not running; the methods of [Tool], [Loop] and
//     [TestTool] (but [TestTool.SetHooks], made between the calls that
//     drive the tool);
//     [Mutex], [KeyedMutex], [Throttle], [KeyedThrottle], [Limiter] and
//     [KeyedLimiter], which may be shared by flows on different loops.
//
// Everything else on an AsyncSteps may be called only from the callback it
// was given to. Error, Break or Continue called from another goroutine while
// the callback of a step that does not wait still runs returns there, and
// fails the step with an InternalError that names the call.
//
// [Root.Promise] delivers exactly one [Result], [Root.ExecuteThen] calls
// its function once, and [Root.Run] returns, only once the flow has fully
// stopped: no callback of it runs afterwards, and everything its callbacks
// wrote is visible to the receiver. When Run's
// context is cancelled, the flow is cancelled and Run returns an error
// matching ctx.Err(); when its deadline passes, the flow times out as with
// SetTimeout, so its error handlers may recover. That Timeout has the info
// "the flow's context deadline passed" and context.Cause(ctx) as its
// Cause, where a step's own timeout has neither: a handler tells the
// request's budget from a step's limit with errors.Is and the cause given
// to [context.WithTimeoutCause]. A Cancel that races with
// the flow's last step may win or lose; it never stops an execution of
// the Root started after the one it found running.
//
// [AsyncSteps.Await] bridges to blocking Go code: its function runs on a
// goroutine of its own with a context that carries the values and the
// nearest deadline of Run's context and the step timeouts around it, and
// is cancelled the moment the step is cancelled (its timeout or an
// enclosing one, a failed parallel sibling, Root.Cancel, the end of Run's
// context). A result that comes after that is dropped, and the goroutine
// never blocks on the flow. The flow does not wait for the function to
// return (it should return promptly once its context is done), but a
// [Mutex] slot taken around it stays taken until it has. Its error is
// mapped to a FutoIn code by [ErrorFrom]. [AwaitChan],
// [AwaitResult] and [AwaitFlow] wait for a channel or another flow in the
// same way; the flow AwaitFlow runs sees the values of the awaiting
// flow's context, not its deadline. [Root.RunHelping] waits like Run, and runs the flow's Await
// functions on its caller's goroutine meanwhile, one at a time, so that a
// server that runs a flow per request on the request's goroutine holds no
// other goroutine for it; it returns only once the function it runs has
// returned, and a function that calls runtime.Goexit ends the caller's
// goroutine.
//
// A service starts its background flows (a worker's jobs, a poller's
// polls) through a [FlowSet]: at shutdown, [FlowSet.Shutdown] refuses new
// ones, lets those running end within a grace period, cancels the rest
// and returns once none runs, before the loops are closed.
//
// Close a [Loop] after its flows have ended. A flow whose loop is closed
// stops where it is, without its cancel handlers. A [Root.Promise],
// [Root.ExecuteThen] or [Root.Run] that waits for it receives an
// InternalError, "the flow's loop is closed", so that no reader is left
// waiting; so does a flow that had not begun, or else its unhandled-error
// function. The goroutines of its
// waiting Await, AwaitChan, AwaitResult and AwaitFlow steps are released
// (an Await function's context is cancelled; the flow an AwaitFlow step
// awaits is cancelled). Close does not wait for the Await functions,
// which run until they return; [Loop.Wait] (or [LoopGroup.Wait]), after
// Close, waits for them and for every goroutine of the loop, under a
// context that bounds the wait: a service calls it before closing what
// the functions use. On a [TestTool], completions
// that come from other goroutines (Await, AwaitChan, a goroutine calling
// Success) arrive while the tool may look idle: drive such flows with
// [Root.Run], which waits for them, rather than with [TestTool.Run]. Run
// waits only while no timer is scheduled, though: virtual time does not
// wait for real goroutines, so with a timeout armed it moves to the
// timeout at once. The timeout then wins unless the goroutine's completion
// has reached the tool first, which one that returns at once sometimes
// does: the outcome is the scheduler's, not the test's. Test such a race
// on a [Loop] (in a testing/synctest bubble for virtual time), or hold the
// goroutine until the test has driven the tool to the point it wants.
//
// # What a callback may do to the loop
//
// A loop serves many flows, so nothing a callback does (a step, an error or
// cancel handler, a loop body, a Sync section, an Await function) crashes
// the process or stops the loop: a panic, a fault at an unexpected address
// on a [Loop], runtime.Goexit (what t.FailNow calls) or a wrong use of the
// API fails the callback's step with an InternalError whose info says what
// happened, which the flow's handlers see; a panic where no step can take
// it (in an unhandled-error function, a [Tool] callback, the cancel handler
// of a step that is cancelled, or that an error unwinds through once a
// cancel, which wins, has been requested) is logged, and so is such a
// cancel handler's Goexit or misuse. What
// the engine cannot do is take a goroutine back: a callback that blocks
// blocks its loop, and every other flow of it, until it returns; blocking
// work goes in an [AsyncSteps.Await] function. A flow nested a million
// levels deep is cancelled and unwound like a shallow one.
// docs/DESIGN.md#what-a-callback-may-do-to-its-loop gives each case: a
// Goexit on a Loop and on a TestTool, Close called from a callback, a
// TestTool driven from one, calls on the AsyncSteps of a parent step.
package asyncsteps
