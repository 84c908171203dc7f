// Package cabi is the C binary interface of asyncsteps: the FutoIn
// AsyncSteps structures of FTN12 section 2.7 (FutoInAsyncSteps and its table
// of 25 functions, FutoInArgs, FutoInSync), implemented on the Go engine.
//
// [Binary] gives a Go [asyncsteps.AsyncSteps] to C as a FutoInAsyncSteps*,
// and [Wrap] adopts a FutoInAsyncSteps* from C: one of ours becomes the Go
// value it stands for again, a foreign one (another implementation of the
// table) becomes an AsyncSteps that calls through that table. [New] makes a
// root owned by C. The header is futoin_asyncsteps.h in this directory; the
// shared library for C programs is built from ./lib:
//
//	go build -buildmode=c-shared -o libfutoin_asyncsteps.so ./cabi/lib
//
// # Values and ownership
//
// The receiver owns what it is given. A step's success arguments cross the
// interface as FutoInBinaryValue. On the Go side each keeps its type:
// FTN_TYPE_INT32 is an int32, STRING a string, STRING16 a [String16],
// STRING32 a [String32], an array a slice ([]int32, []string, ...), a
// custom object a [*Custom]. A Go value with no C type reaches C as a
// custom object that comes back as the same Go value when C passes it on in
// success. An empty slot (a NULL type) is a Go nil, and a Go nil an empty
// slot. A Go int or uint has no C type of its own: it crosses as INT64 or
// UINT64 and comes back from C as an int64 or uint64. At most 4 values
// cross: more from Go fail, with InternalError,
// the C step that would receive them (or the Go step whose Success gives
// them to a foreign table), as a value too long does. A FutoInArgs has no
// count: empty slots at its end are no values, so Go nils at the end of a
// success's values do not reach the next step (its len(args) is shorter),
// while a nil between two values stays an empty slot.
//
//   - success takes the values over: strings and arrays are copied before it
//     returns and their type's cleanup is called at once; the caller's slots
//     are reset; a custom object is passed on as is. args may be NULL. A
//     string or array whose p is NULL is empty, whatever its length says,
//     and so is a NULL item of an array of strings: "", or an empty (not
//     nil) [String16] or [String32], as an empty item is. A string or
//     array longer than a Go int holds (an int of 32 bits), or an array
//     of strings with such an item, fails the step with InternalError; a
//     Go value longer than the uint32_t length holds, or whose C copy
//     needs more bytes than a Go int holds (a value of 2 GiB or more,
//     with an int of 32 bits), fails, before it runs, the C step that
//     would receive it (or the Go step whose Success gives it to a
//     foreign table).
//   - The FutoInArgs a C step receives is valid during its callback. The
//     step may take any value over, casting away the const of its args
//     (the slots are writable): use it and futoin_reset_binval the slot,
//     which runs its cleanup then (as the C++ reference implementation
//     does with every value), or copy it out and set the slot's type to
//     NULL, which leaves the cleanup to the copy (futoin_reset_binval it
//     once done, from any thread). Copying it out and then calling
//     futoin_reset_binval on the slot frees what the copy points to. The
//     library cleans up, when the step completes, only what is still in
//     the slots, so each cleanup runs exactly once. A custom object no C step
//     receives is cleaned up some time after the Go side has dropped it.
//   - handle_error copies code and info; labels, state variable names and
//     every other string given to a function are copied too. The other
//     way, the code given to an error handler or an unhandled_error is
//     the library's copy, valid during that callback only. In a callback
//     whose step already failed or completed (a second handle_error, one
//     after success, breakLoop or continueLoop) it has no effect: the first
//     error keeps its code and info.
//   - stateVariable with allocate: an ordinary variable of the flow, made
//     once, a value of the flow's Go State. Its cleanup runs once: for a
//     root owned by C, when the root is freed; in the flow of a Go Root
//     given by [Binary], which stays Go's and may give its State to C steps
//     again after the free, once the State no longer holds the variable
//     (the Root collected, or the variable replaced or unset by Go), as a
//     Go runtime cleanup: only after a garbage collection, on a goroutine
//     of the runtime, on no loop and any thread. An allocate that returns
//     NULL makes a variable holding NULL: it is not called again, and the
//     cleanup runs with NULL. A variable belongs to the flow that
//     allocated it: the C steps of a copy of its Root (Clone, CopyFrom),
//     whose State holds the variable too, find it missing and allocate
//     their own (C gives no way to copy one, and the model's free or
//     collection ends the model's). With a NULL allocate, "error_info"
//     returns the last error's info and "last_exception" its code, as
//     const char* valid until the next error or the end of the flow.
//   - stack memory lives until its step completes; when the step fails,
//     until its own error handler has returned.
//   - A loop body that calls success and then breakLoop in one callback
//     (the C++ reference implementation's await does) ends the loop, and the
//     step after it receives those args; loops give no args otherwise.
//
// Towards a foreign table ([Wrap]) the library keeps the same rules from
// the other side: it never passes a NULL callback or NULL args, never calls
// success after adding sub-steps nor add, setTimeout, setCancel or
// waitExternal on a step that has completed (an Add, a loop, a Sync, an
// Await, a Parallel or a wait after Success, or in a cancel handler, has
// no effect, whatever its arguments), keeps
// every string it passes (loop labels for the life of the process, one
// copy per label) alive as long as the table may read it, takes over the
// values the table gives a Go step, uses stateVariable only with
// allocate, and records a Go step's Error(code, info) in the flow's Go
// State for the Go error handlers. The Go functions it gives the table
// (steps, error handlers, loop bodies, cancel handlers) are kept until
// the table runs them or the library sees that it never will; one that
// the table drops unrun without a word (a step after a sibling that
// failed, the steps of a cancelled flow) goes when the table cleans up
// the flow's state variables (the C++ reference implementation, as it
// destroys the root), with the flow's Go State, which the library keeps
// in one (a table without stateVariable keeps no state variable, and the
// functions it drops stay). What a Go step keeps past its callback (the
// cancel handler of a step that failed, kept for a table that runs it,
// as the C++ one does; the functions of sub-steps dropped unrun) goes
// sooner, once the table is done with the step: as the step's own error
// handler starts, or as the Go loop (Loop, Repeat, ForEach) the step is
// in, or under, goes on to its next iteration or ends. So a long-lived
// flow's Go loop keeps nothing of its past iterations. A loop of the
// table's own (a C step's) tells Go nothing of its iterations: what the
// Go steps added in its body through Wrap keep goes as their own error
// handler starts, or with the flow. A Go step whose cancel handler the
// table runs (a Go one, or the one WaitExternal sets on a table without
// waitExternal) is over from then on, and so is one the table is done
// with so: a Success or Error on it from another goroutine (an Await's,
// whose context the handler cancels) has no effect and IsValid is
// false, as after a cancel on the engine's flows, rather than reach a
// step the table has ended. A Go step that
// has added sub-steps completes with them: while its callback runs, a
// Success or Error on it, from any goroutine, fails it with the
// InternalError of a completion after Add (another goroutine's as the
// callback returns, on the loop; one that the callback's end overtakes
// comes after it); once the callback has returned, either has no effect
// and IsValid is false, as on the engine's own flows for a call from
// another goroutine. Made from the callback of one of the step's
// sub-steps, such a call fails that sub-step on the engine's flows; here
// it has no effect either, as the library cannot tell the table's
// sub-steps of the step from its loop's other callbacks. The Tool of a
// foreign AsyncSteps is the table's event loop, through its sched_*
// functions and is_same_thread. A table without sched_immediate or
// is_same_thread has a loop that cannot run a flow (nothing would run, or
// the loop would not know its own thread): NewInstance there fails the
// calling step with InternalError naming the function ("NewInstance: the
// foreign table has no sched_immediate: a Root on its Tool cannot run"),
// and the Tool's Immediate and Deferred panic, naming it, so that a Go
// Root made on that Tool panics as it starts (Execute, Promise, Run), as
// the engine documents for a Tool whose Immediate panics, and does not
// run. Without sched_deferred only Deferred panics: a step's SetTimeout
// on such a flow fails the step with InternalError naming it. Without
// sched_cancel a cancelled callback still runs nothing when the table
// runs it, and without sched_is_valid a handle is valid until its
// callback has run or been cancelled, as the library keeps track of it.
// The Tool of a Go callback's AsyncSteps, and the Tool of a Root that
// NewInstance makes there, call the table with the step's pointer, and
// are valid while the step runs: until it completes, or, if it added
// sub-steps, until they end. The table frees the pointer as the step
// ends (the C++ reference implementation's sched_* and is_same_thread
// read it), so once the library sees the step over (a Success or Error
// made, an implicit success, its sub-steps ended, its Go cancel handler
// returned, an error handler that returned with the error going on, the
// flow's state cleaned up), the Tool calls the table no more: Immediate
// and Deferred panic ("cabi: the Tool of a foreign step used after the
// step ended: the table may have freed it"), so that such a Root panics
// as it starts and does not run, a step timeout on it fails its step,
// and a completion handed to it from another goroutine is logged and
// lost, as the engine documents for a Tool that has stopped;
// IsSameThread is false, and a handle it gave is cancelled without the
// table. The step's Go cancel handler still has the Tool: the table
// frees the step once it returns, so a timer the step armed is cancelled
// in the table there. A flow that runs on such a Tool as the step ends
// stops there (its next callback cannot be scheduled; the panic is
// logged): run a
// Go flow that must outlive the step on a Loop of its own. The library
// cannot see the end of a step that the table ends by itself while it
// waits with the table's waitExternal and no Go cancel handler (a
// timeout, a cancel), nor, until the table cleans up the flow, that of
// a step that added sub-steps whose error unwinds past it to no Go
// error handler: a Tool kept from such a step must not be used after
// it. The Tool of
// a pointer Wrap was given (a root, a step C gave Go) is valid while
// that pointer is.
//
// The table's other functions may be NULL as well: the library never
// calls a NULL one, and a Go call that needs it never does nothing in its
// place. A table without handle_error could not fail the step of any Go
// call on it: [Wrap] refuses it with a panic naming the function, as a
// pointer whose api is NULL, there being no step yet to fail. A Go call that needs a function the table lacks fails
// its step with InternalError naming the call and the function, as any
// misuse ("SetTimeout: the foreign table has no setTimeout"), rather
// than leave the step to hang or complete it as its callback returns:
// Success and the implicit success of a Go step that returns without
// completing, adding steps or waiting need success ("implicit success:
// the foreign table has no success"), Break breakLoop, Continue
// continueLoop, SetTimeout setTimeout, SetCancel and Await setCancel,
// Parallel parallel, Loop loop, Repeat and ForEach repeat, the calls that
// add steps add, and State stateVariable: the flow's Go State is kept in
// a state variable, and one of each callback's own would lose what the
// steps give each other and the info of an error for the Go error
// handlers (a stateVariable that gives no variable fails the same way;
// off the step's callback State returns an empty State, the step failed).
// IsValid needs isValid, but on a step the library completed itself,
// which is over (the table may have ended any other unseen: a timeout, a
// cancel). waitExternal has a sound fallback, the way the spec had a step
// wait before waitExternal: in a Go callback of the library's, a cancel
// handler that does nothing, unless the step has a Go one already (a Go
// SetCancel after it replaces it); on a pointer C gave Go, where C may
// have set a cancel handler of its own, WaitExternal fails the step. The
// library never calls stack, execute, cancel, addSync, newInstance or
// free on a foreign table (a Go Root on its Tool, NewInstance's, is Go's),
// and rootId only from the lock function of a [Sync] (a table without it
// has rootId 0: see below). A table that gives its steps another table
// than the one Wrap saw, without handle_error, leaves a Go step's error
// nowhere to go: it is logged, with its code and info, and the step does
// not complete.
//
// # Flows and syncs
//
// rootId tells the flows of C steps apart: every step of a flow has its
// flow's, and each parallel branch has its own, a branch made by Go too: a
// Go step given to C by [Binary], and the C steps added on it, have the
// rootId of the flow or branch the Go step runs in (given through a
// decorator without Unwrap, or off the loop, where its branch cannot be
// told: one of its own, never the flow's, which another branch's steps
// could share). [Sync] gives a Go [asyncsteps.Syncer] to C. Our addSync
// enters it directly, with its Go semantics (a Mutex is reentrant per flow
// and parallel branch). Its lock and unlock functions, for other
// implementations of the table and for C that calls them, enter it through
// a hidden flow per caller's flow, told by its table and rootId: a flow
// that holds it enters again at once. Called with one of our steps, in its
// callback, the hidden flow holds as that step's flow or branch, the
// holder our addSync enters as: the two forms nest in either order. Such
// a lock is held until its unlock or the end, by any path, of the
// execution of the step's flow: a flow that fails before its unlock
// leaves no holder behind. A
// rootId of 0, from a table with no rootId function, tells no flow from
// another, and safety goes before liveness: each lock with it enters as a
// flow of its own, never as a reentrant one, so two such flows exclude each
// other, and a nested lock of one such flow waits for its outer lock (or is
// rejected by a full queue), as a Go decorator without Unwrap does in a
// Mutex. Its unlock gives back the first entry with rootId 0 of its table
// that is inside the section. Its lock sets a cancel handler on the
// caller's step, and completes the step from the hidden flow's loop,
// another thread than the caller's, possibly, and then possibly before
// lock has returned to the caller: the two exclude each other,
// so that once the cancel handler has returned neither success nor
// handle_error reaches the step (a completion under way runs to its end
// first, and the cancel handler then does nothing). lock needs success
// and setCancel of the caller's table: without one it fails the step with
// InternalError naming it, and does not enter: the step could never be
// completed once inside, or a cancel of the waiting step would go unseen,
// and without waitExternal as well the step would not wait, which the
// table takes as the lock held. Without waitExternal alone, the cancel
// handler makes the step wait. A table without handle_error has that
// error, and a rejection by the sync, logged with its code and info; the
// step is left waiting rather than returned to the table as held.
//
// # Concurrency
//
// Every C callback runs on the flow's loop. An [asyncsteps.Loop] (the
// default one included) is locked to its OS thread the first time this
// package sees it, so that "the loop's thread" is one OS thread and
// is_same_thread compares OS threads. A Go callback that calls
// runtime.Goexit ends the loop's goroutine; the loop's next one is locked
// to its own thread, which becomes the loop's thread. A Go callback that
// a foreign table calls ([Wrap]) is the exception: it runs above the
// table's C frames, which a Goexit cannot unwind and nothing can stop it
// from unwinding, so it must not call runtime.Goexit (t.FailNow, t.Fatal):
// on a thread that C made the Go runtime aborts the process ("Goexit
// called in a thread that was not created by the Go runtime"), on one of
// Go's the table's frames are skipped and its flow never ends. The
// library logs such a Goexit first, with the stack that names its
// caller. success,
// handle_error, cancel, execute, free and the sched_* functions may be
// called from any thread: they post to the loop and return without
// blocking. Of two completions of a waiting step from outside its
// callback that race (success and handle_error from two threads, say),
// the one called first applies, even when the other reaches the loop
// first, as for Go's Success and Error from two goroutines; so do Go's
// calls through [Wrap] that fail a waiting step from another goroutine
// (Break, Continue, a late Add), which have no effect after a success
// called first. A success from another thread on a step that waits for
// it completes the step as it is called, as Go's Success from another
// goroutine does: the step's timeout, falling due before the loop has
// applied it, does not fail the step, and a cancel of the flow then runs
// no cancel handler of the step's. So does a handle_error, or Go's Error
// through [Wrap]: the step fails with its code and info, not Timeout,
// and its cancel handler runs once either way. On the pointer of a Go
// step that [Binary] gave in the step's callback, one made while that
// callback still runs, before the step waits, completes the step so as
// the callback returns and the step begins to wait. isValid may be called
// from any thread too: it reads what the loop has settled, so its answer
// may be stale by the time it returns (from another thread, a step whose
// callback still runs is 1, also once that callback has completed it). A
// free that comes while an execute on another thread starts the flow is
// released once that execute has started it, and cancels it, as a free
// after the execute does; no lock is held over the start, which
// a Tool of the caller's may run inside Immediate. The other functions
// are for the callback that was given the pointer, on the loop (or, for a
// root, while it is idle). handle_error, breakLoop and continueLoop
// return to the C caller, which must return from its callback at once;
// isValid there still returns 1 until the callback returns, when the step
// is settled. free, execute and cancel are a root's (and so is
// futoin_asyncsteps_free_wait, [FreeWait]): called on a step's
// pointer in the step's own callback (for a Go step given by [Binary], its
// Go callback), they fail the step with InternalError naming the misuse;
// on a pointer that is not a root's anywhere else (another thread, a
// sub-step's callback, a parallel's) they do nothing. On a stale pointer
// every call is ignored: those that answer give 0 or NULL (is_same_thread
// 0 also on the loop's thread), sched_immediate and sched_deferred an
// invalid handle whose callback never runs; sched_cancel and
// sched_is_valid read their handle only, and act on it whatever the
// pointer. A scheduled callback is the loop's: it runs also once the step
// that scheduled it has completed or its root has been freed, unless
// cancelled. A NULL function given to add, loop, repeat or addSync, a
// NULL sync given to addSync, and a NULL or empty code given to
// handle_error fail the calling step with InternalError naming the
// argument; sched_* with a NULL callback give an invalid handle. stack and
// stateVariable return NULL for a stale pointer and from another thread
// while the flow runs; stack also when its memory cannot be allocated,
// stateVariable also for a NULL name, a missing variable with a NULL
// allocate, and "last_exception" before any error. A C++ exception must
// not escape a callback: it cannot unwind through the library, and the
// process terminates; catch it in the callback and call handle_error.
//
// So free returns before the loop has cancelled the root's flow and run
// the cleanups of its state variables and stack memory (the free of a
// root never executed and holding neither releases it at once, on the
// caller's thread: the loop has nothing to do for it). A program that
// destroys what those cleanups use, or exits, right after freeing a root
// (a C++ destructor on the main thread) calls futoin_asyncsteps_free_wait
// ([FreeWait]) instead, which returns once they have run, as the C++
// reference implementation's destructor does. It does not wait where
// waiting could deadlock: on a loop's thread (the loop may be the one to
// run them, or wait for this one), or on a tool that is not an
// [asyncsteps.Loop] (the caller may be the one driving it). A step, C or
// Go, that blocks its loop until the waiting thread does something
// (releases a lock it holds, say) deadlocks, as on the reference
// implementation.
//
// Called in a callback of the root's own flow (a step that ends its
// request frees its root), free cancels the flow at once, as cancel does
// there: no later step of it runs. From another thread the cancel
// reaches the flow on the loop, and steps may start until then: what
// they use stays until futoin_asyncsteps_free_wait has returned.
//
// A pointer given to a callback stays valid until its step completes, also
// while it waits for an external event; calls on a stale one are ignored.
// The step keeps its pointer and stack memory for its sub-steps, which
// may use both. Only a step's own callback adds sub-steps to it, makes it
// wait or completes it while it runs, and the table follows the engine's
// rule (see [asyncsteps]): add, parallel, loop, repeat, addSync,
// setTimeout, setCancel, waitExternal, success, handle_error, breakLoop
// and continueLoop through the pointer of a step that waits for its
// sub-steps, from the C callback of one of them (or of a step under them,
// a parallel branch included), fail that sub-step with InternalError,
// whose info names the engine's call ("Add called on the AsyncSteps of a
// step that waits for its sub-steps"), once its callback has returned, as
// a misuse in a step's own callback does: C cannot be unwound, and the
// callback should return at once. From anywhere else they have no effect
// on such a step. From another thread, add, parallel, loop, repeat and
// addSync have none either on the pointer of a parallel made in a step,
// nor on a running root or a parallel made on it (the loop takes their
// steps as the flow goes on). There the first such call is recorded in
// the root, as a misuse of an engine Root is: its next execute fails at
// once with InternalError through its unhandled_error, before any step
// runs ("add called from another thread on a running root: the step was
// not added"), and a free that comes first logs it with log/slog. On the
// pointer of a parallel made in a step, success and handle_error fail
// that step with InternalError as long as its callback runs (the
// engine's rule for a call from another goroutine on a step that does
// not wait). setTimeout, setCancel, waitExternal, success, handle_error,
// breakLoop and continueLoop act on a step, which a root, or a parallel
// made on one, is not: made there, from any thread, while the root is
// idle or runs, the first such call is recorded in the root the same way
// ("setTimeout called on a root: it has no step to time"; "setCancel ...:
// it has no step to cancel"; "waitExternal ...: it has no step to make
// wait"; "success ...: it has no step to complete"; "handle_error ...: it
// has no step to fail"; "breakLoop ...: it has no loop to break";
// "continueLoop ...: it has no loop to continue"; "... called on a
// parallel made on a root: ..."), and the
// call does nothing else (a cancel handler given is never called, so
// that what its data holds stays the caller's to free; the values given
// to success are cleaned up). Through the pointer of a Go root given by
// [Binary], or of a parallel made on it, these calls and the adds above
// are recorded in the engine's Root itself, on the flow's loop, as a
// misuse of the Root: Go executes such a root too, and its next
// execution, Go's or C's, fails with the record; a free of the pointer
// leaves it to that execution. On the pointer of a parallel made in a
// step, in the step's callback, they fail the step with InternalError
// ("SetTimeout called on the value returned by Parallel").
//
// On a step that waits for a completion from outside, the calls that add
// sub-steps or make it wait, made once its callback has returned (from
// another thread, a callback of the tool, or another step's callback on
// the loop, a sibling parallel branch's say: the call is posted), fail the
// step as a handle_error from outside would ("Add called on a step whose
// callback has returned: only the step's own callback adds sub-steps"),
// and a success that follows has no effect; breakLoop and continueLoop
// there complete it as Go's Break and Continue from outside do.
//
// Go may drive a C step through [Wrap] of its pointer as C does through
// the table: Success, Error, Break and Continue there are success,
// handle_error, breakLoop and continueLoop through the pointer, with the
// same release of the pointer and its stack memory, and [asyncsteps.Fail]
// fails it as Error does, the Go error kept as the Cause; in the step's C
// callback, Add, Parallel, Loop, Repeat, ForEach, Sync, Await, CopyFrom
// and SuccessStep add sub-steps as add does, and SetCancel, WaitExternal
// and SetTimeout make the step wait as setCancel, waitExternal and
// setTimeout do, so that its pointer, its stack memory and its cancel
// handler stay until the step is over, whichever side added the sub-steps
// or made it wait. The step has one cancel handler, C's or Go's, the one
// set last; a Go one gets the step's Wrap, and is not called for a step
// a closed loop leaves, as for a Go step.
//
// A step's cancel handler runs once: if the step is cancelled before it
// completes, and when it fails. handle_error through its pointer (a C
// step's, or a Go step's given by Binary) runs it before the step's error
// handler, in its callback, later or from another thread, and so do
// breakLoop and continueLoop (in its callback, or on a step that waits,
// later), and a call that fails a waiting step, as Go's Error, Break and
// Continue on the step do: the engine runs the failing step's own cancel
// handler, and so does the C++ reference implementation's handle_error.
// A success runs none, and nothing runs it after the step has completed.
// In the handler the step is over: isValid is 0, and success,
// handle_error and the calls that add have no effect, while rootId, and
// on the loop stateVariable and stack, still answer. The first call of
// the handler that has no effect (a wait, breakLoop and continueLoop
// too) is logged with log/slog, "asyncsteps: misuse in cancel handler",
// as a Go cancel handler's call on its own step is: its info names the
// Go call it stands for ("Loop called in a cancel handler: ..." for
// loop), in the body of a loop or a repeat too. The custom objects that
// a success there passes, which no step receives, are cleaned up at once.
// A Go cancel handler set through [Wrap] is logged so for its calls on
// its AsyncSteps and for the table's calls through the step's pointer.
//
// The pointer [Binary] gives for a Go step stays valid as long; Go may
// end the step itself (Success or Error from another goroutine, a
// timeout, a cancel of the flow, its Loop closed): the pointer is
// released once the step is over, at the latest as the flow's execution ends, with no C step or
// Binary after it (but for a step given through a decorator the engine
// cannot reach: see Binary; and for a step its closed loop left waiting
// in a flow whose root pointer C holds, which its free releases with the
// flow's other steps left, see below). A flow per request that gives C a
// step that waits keeps nothing of it after the request.
// A root's isValid is 1 while it is idle, 0 while its flow runs (as on the
// C++ reference implementation).
//
// A closed loop runs nothing more, so two things happen on another thread:
// the unhandled_error of a flow that its closed loop ends before it began
// (executed after the loop was closed, or while it was closing), which is
// called rather than lost; and what the loop does not run of a free, or of
// a success, a handle_error or a call that fails a waiting step (see
// below) from another thread, because it was closing
// or was closed before their turn: once the loop has stopped
// ([asyncsteps.Loop.Done]), never beside one of its callbacks, one at a
// time and in the order they were called (the loop of
// [asyncsteps.DefaultTool] never closes: cabi keeps nothing of this for
// it). For free, the steps of the root's flow that the loop left waiting
// are released, innermost first: the cancel handler given to setCancel of
// each is called (as a free on a running loop calls it through the flow's
// cancel), then the cleanups of its stack memory run, and the unlock of a
// foreign FutoInSync (another implementation's, given to addSync) whose
// section the step is in, once, with a bsi of the section (is_same_thread
// 0 there); then the cleanups of the root's state variables (of a root
// made by C: a Go root's free, given by [Binary], releases its steps
// only). A flow of a Go Root for which C holds no root pointer (its C
// steps were added through [Binary] of its Go steps, the Root is a copy,
// or C freed the pointer first) has no free to come: the steps its stopped
// loop left are released the same way once the loop has stopped, the Go
// steps given by [Binary] included, whose cancel handler set through the
// pointer is C's (not one of the Go cancel handlers a closed loop does not
// run); its state variables go with its State.
// A success the loop did not run releases its step without its cancel
// handler and cleans up its custom objects; one that completes the lock
// step of a foreign FutoInSync counts its section as held, for free to
// unlock. A handle_error the loop did not run calls the cancel handler
// given to setCancel of its step, once, as the error would have, unless
// the step had ended, then releases the step; so does a call that fails a
// waiting step from outside its callback (add, parallel, loop, repeat,
// addSync, setTimeout, setCancel, waitExternal, breakLoop, continueLoop),
// which the loop did not run. A step whose sub-steps the stop left, which
// ignore all three on a running loop, is left with them, after them, by
// the free or the flow's end.
// The Mutex, Throttle and Limiter slots the flow holds come back with the
// loop's close, as for any flow of a closed loop.
//
// On an [asyncsteps.TestTool], which runs its callbacks on the goroutine
// that drives it, what ResetEvents drops of these runs the same way before
// ResetEvents returns, on its caller's goroutine, in the order called:
// call ResetEvents from the goroutine that drives the tool, or while none
// does. But a TestTool runs later callbacks, so a dropped free also
// cancels the flow of a root made by C, as a closed loop ends it: the
// cancel applies when the tool runs next (the C cancel handlers of its
// live steps have run already: none runs twice, nor for a step that had
// completed), the syncs the flow holds come back, and a step of the flow
// completed later, by Go or by C, runs none of the freed root's C steps. The dropped free of a Go root given by [Binary] does
// what its free does on a running tool: it releases the root pointer
// only, and the flow, Go's, keeps its steps and runs on. A dropped
// success, handle_error or call that fails a waiting step from another
// thread applies, as ResetEvents keeps Go's Success and Error from
// another goroutine: the step completes, or fails (its cancel handler
// runs once), when the tool runs next, rather than staying completed for a loop that never applies it,
// which neither its timeout nor anything but a cancel would end.
//
// A Tool of another package that may drop a callback it has accepted (a
// close, a reset) reports the drop by implementing [DropReporter]: cabi
// then posts through it, and what the tool drops runs as on a TestTool,
// when and where the tool calls it. On one that does not, cabi cannot
// learn of the drop: what the callback would have released stays
// allocated and its C cleanups never run (the state variables of a freed
// root, the stack memory and cancel handler of a waiting step, a custom
// object given to success). Such a tool must run every callback it has
// accepted, or keep no C flow when it drops them.
//
// # Memory
//
// No Go pointer is stored in C memory: each FutoInAsyncSteps this package
// hands out is a small C struct holding the table pointer and an integer id
// that a Go table maps to the Go object. When the step completes its id is
// cleared, so later calls on the pointer are ignored; the struct goes to a
// quarantine and is reused only after 1024 later pointers (of steps,
// parallels or roots) have been released (and,
// for a step that waited for an external event, a minute later at the
// earliest), so a stale pointer stays harmless for a long time.
//
// What cabi keeps of a flow for C (its rootId, its error info, its state
// variables) goes at the latest when the flow's Go State is collected,
// and keeps neither that State nor the flow's tool reachable: a flow run
// on an [asyncsteps.TestTool], or on a Tool of another package that keeps
// the callbacks it was given, is collected with its tool once both are
// dropped (and a root pointer C was given is freed), and the cleanups of
// its state variables then run. The exception is a Go step that waits and
// that [Binary] was given through a decorator without Unwrap: the engine
// cannot watch its flow's end, so its pointer, and with it the flow's
// State, stays until the flow's next C step or Binary sweeps it (see
// Binary).
package cabi
