package asyncsteps

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Root is a flow: the steps added at level 0 and its [State] (spec 2.2.3).
// Build it with Add and the other [AsyncSteps] methods, then start it with
// Execute, ExecuteThen, Promise or Run. An execution takes the steps
// queued at level 0 as it starts them, and drops those left when it ends
// early (an error, a cancel, a wrong use): a Root whose flow has ended has
// no steps left, and may be given new ones and executed again.
//
// A wrong use of a Root while it is built (Add(nil), a ForEach collection
// that cannot be iterated, Success or Break on the Root itself) does not
// panic: the next execution fails with that InternalError at once, before
// any of its steps runs.
//
// A Root is not safe for concurrent use while it is being built; Cancel and
// the start methods may be called from any goroutine. Of two starts at
// once, one runs the flow and the other panics as a start of a running
// flow does, leaving that execution as it is (a cancel asked of it
// included).
//
// The zero Root (declared, or embedded in a struct) is what New() returns:
// an empty Root on [DefaultTool] whose unhandled errors are logged. A nil
// *Root is no flow: Cancel does nothing on it, Running and IsValid report
// false, its start methods panic with "asyncsteps: a nil *Root was
// started", and every other method, which would build or copy a flow that
// is not there, panics with "asyncsteps: Add called on a nil *Root" (the
// method named). A helper given one ([Retry], [Then], ...) panics in the
// method it calls, or, adding a step of its own, with "asyncsteps: a step
// added to a nil *Root". A wrong use of a Root
// that exists is recorded for its next execution (see above); a nil one
// has nowhere to record it.
type Root struct {
	// fl is the Root's execution. It is part of the Root, so that a flow
	// costs one allocation, and reused when the Root runs again; a step API
	// kept from an earlier execution is dead, and a continuation of one is
	// recognised as stale by its step API.
	fl flow
}

// Result is the outcome of a flow, given by [Root.Promise] and
// [Root.ExecuteThen].
type Result struct {
	Args []any // the success arguments of the last completed step
	Err  error // nil, an *Error, or after a cancel an error matching context.Canceled
}

// Option configures a Root made by [New]. Options are plain values, so
// that a server making a Root per request allocates nothing for them; the
// zero Option changes nothing.
type Option struct {
	tool      Tool
	unhandled func(err *Error)
}

// WithTool makes the flow run on t instead of [DefaultTool]. A nil t keeps
// DefaultTool; a zero [Loop], or a nil *Loop or *TestTool, makes every
// execution of the Root fail at once with an InternalError that says so.
// A t of a type that embeds a *Loop or *TestTool is that loop: the flow
// runs on it as if it had been given, and the engine calls its methods,
// not those the type overrides.
func WithTool(t Tool) Option { return Option{tool: t} }

// WithUnhandledError sets the function called, on the loop, with an error
// that ends a flow started by Execute. The default logs it with log/slog.
// A flow started on a [Loop] already closed never reaches its loop: it ends
// with an InternalError, "the flow's loop is closed", passed to f on a
// goroutine of its own, after Execute has returned. [Root.ExecuteWith]
// gives one execution a function of its own.
func WithUnhandledError(f func(err *Error)) Option { return Option{unhandled: f} }

// New returns an empty Root.
func New(opts ...Option) *Root {
	var tool Tool
	var unhandled func(err *Error)
	for _, o := range opts {
		if o.tool != nil {
			tool = o.tool
		}
		if o.unhandled != nil {
			unhandled = o.unhandled
		}
	}
	if unhandled == nil {
		unhandled = logUnhandled
	}
	if tool == nil {
		// DefaultTool is resolved at the first execution, as for a zero
		// Root: building a model flow starts no loop, which inside a
		// testing/synctest bubble would belong to the bubble.
		return newRoot(nil, unhandled)
	}
	return newRoot(schedulerOf(tool), unhandled)
}

func newRoot(sched scheduler, unhandled func(err *Error)) *Root {
	r := new(Root)
	r.setUp(sched, unhandled)
	return r
}

func (r *Root) setUp(sched scheduler, unhandled func(err *Error)) {
	r.fl.unhandled = unhandled
	// Until its start task runs, the flow is not on the loop: a cancel
	// that overtakes the start finds it done and leaves the stop to run.
	r.fl.done = true
	r.fl.sched = sched
	r.fl.base.h = deadBaseAPI
	if sched != nil {
		r.fl.phase.Or(flowToolSet) // after the writes above: see ready
	}
}

// ready puts a Root on DefaultTool before its first start when it has no
// tool yet: a zero Root, or one that New made without WithTool. Cancel
// reads the tool only once the start has marked the flow running; the
// methods that only read a Root (Tool, NewInstance, Clone) leave such a
// Root as it is, so that goroutines may share it as a model. Starts may
// come at once from several goroutines: ready looks at flowToolSet, not
// at sched, which the first start of a Root without a tool writes.
func (r *Root) ready() {
	if r == nil || r.fl.phase.Load()&flowToolSet == 0 {
		r.setUpZero()
	}
}

// zeroSetUps makes the set-up of a Root without a tool one at a time: of
// two starts at once, the second must neither write the Root under the
// flow the first began, nor read it as the first writes it.
var zeroSetUps sync.Mutex

// setUpZero is ready's rare case, kept out of line so that ready inlines
// into the start methods: it puts a zero Root, or one that New made
// without a tool, on DefaultTool, keeping the latter's unhandled-error
// function, unless another start has done so meanwhile.
//
//go:noinline
func (r *Root) setUpZero() {
	if r == nil {
		panic(nilRootStarted)
	}
	if testHookSetUpZero != nil {
		testHookSetUpZero()
	}
	sched := schedulerOf(DefaultTool()) // which may start it: not under the lock
	zeroSetUps.Lock()
	defer zeroSetUps.Unlock()
	if r.fl.phase.Load()&flowToolSet != 0 {
		return // another start set it up, and may run it already
	}
	unhandled := r.fl.unhandled
	if unhandled == nil {
		unhandled = logUnhandled
	}
	r.setUp(sched, unhandled)
}

// testHookSetUpZero, set by a test, runs in setUpZero once ready has
// found the Root without its tool: there another goroutine may set it up
// and start the flow first.
var testHookSetUpZero func()

// nilRootStarted is the panic of a start method of a nil *Root.
const nilRootStarted = "asyncsteps: a nil *Root was started"

// nilRoot panics, naming method, for a method of a nil *Root other than
// a start: see [Root]. It is a function of its own, so that the check
// inlines into the methods that make it.
//
//go:noinline
func nilRoot(method string) {
	panic("asyncsteps: " + method + " called on a nil *Root")
}

func logUnhandled(err *Error) {
	slog.Error("asyncsteps: unhandled error", "code", err.Code, "info", err.Info)
}

// Execute starts the flow. It only schedules it on the tool: no callback runs
// before Execute returns (docs/DESIGN.md#execute-only-schedules). It panics if the flow is already
// running, also when another goroutine has started it since Execute found
// it idle: that execution goes on untouched.
func (r *Root) Execute() { r.startIn(nil, nil, "Execute") }

// ExecuteWith starts the flow like Execute, with unhandled in place of the
// function set by [WithUnhandledError] for this execution only: an error
// that ends it goes to unhandled, on the loop, when it ends. A caller that
// starts one Root again and again, each time for someone else, reports each
// error to the one that started that execution, even when the next
// execution starts before the error is reported. A nil unhandled is the
// Root's own function. Like Execute, it panics if the flow is already
// running.
func (r *Root) ExecuteWith(unhandled func(err *Error)) {
	if unhandled == nil {
		r.startIn(nil, nil, "ExecuteWith")
		return
	}
	r.startIn(&waiter{unhandled: unhandled}, nil, "ExecuteWith")
}

// ExecuteThen starts the flow like Execute, and calls done once with the
// Result of this execution, the one [Root.Promise] would deliver, however
// the execution ends (done is no success continuation, as the function
// given to [Then] is): the success args; the error that ended the flow;
// after a cancel, an error matching context.Canceled; an InternalError,
// "the flow's loop is closed", if its [Loop] is closed first. Unlike the
// function of [Root.ExecuteWith], which gets only an error, done sees
// every end of the execution: it is where a worker settles its job. The
// unhandled-error function is not called.
//
// done runs on the flow's tool once the flow has fully stopped: no
// callback of this execution runs afterwards, and done may execute the
// Root again. As with Promise, the Loop holds the flow until it ends, so
// that done is called for a waiting flow that nothing else refers to
// when its loop is closed: on the loop's goroutine as the loop stops,
// after its last callback and before [Loop.Done] is closed; for a flow
// started once the loop had stopped, or on a zero Loop, on a goroutine of
// its own, after ExecuteThen has returned. A panic or a runtime.Goexit in
// done is the tool's, as one in an unhandled-error function: a Loop or a
// TestTool logs the panic with log/slog, a Goexit ends only the
// goroutine, and the tool goes on; on a Tool of the caller's, the panic
// reaches the code that runs the tool's callback. done is not called
// again either way.
//
// A nil done makes it Execute: an error that ends the flow goes to the
// unhandled-error function. Like Execute, it panics if the flow is already
// running. [Root.ExecuteThenContext] does the same under a context, as
// Run runs a flow: its values, its cancel, its deadline.
func (r *Root) ExecuteThen(done func(Result)) {
	if done == nil {
		r.startIn(nil, nil, "ExecuteThen")
		return
	}
	r.startIn(newThenWaiter(done), nil, "ExecuteThen")
}

// Promise starts the flow like Execute and returns a channel that receives
// its one Result once the flow has fully stopped. An error that ends the flow
// goes to the Result only, not to the unhandled-error function. If the
// flow's [Loop] is closed before the flow ends, the Result is an
// InternalError, "the flow's loop is closed". Like Execute, it panics if the
// flow is already running.
func (r *Root) Promise() <-chan Result {
	ch := make(chan Result, 1)
	r.startIn(nil, ch, "Promise")
	return ch
}

// promiseUnder starts the flow like Promise, under ctx, which gives it
// values only (no deadline, no cancel): AwaitFlow's start, under the
// values of the awaiting flow's context (see subflowContext). It panics
// as Promise does, naming Promise, if the flow is already running.
func (r *Root) promiseUnder(ctx context.Context) <-chan Result {
	ch := make(chan Result, 1)
	r.startIn(&waiter{ctx: ctx}, ch, "Promise")
	return ch
}

// startIn starts an execution, with w as what it reports to beyond the
// Root's own unhandled-error function (nil: nothing), and promise as where
// its Result goes (nil: to the unhandled-error function); method names
// the caller in its panic. It writes only what the loop does not read for
// an ended execution: a continuation of an earlier one may still be queued
// on the loop, and run sets up the rest there.
func (r *Root) startIn(w *waiter, promise chan Result, method string) {
	r.startMisused(w, promise, method, "")
}

// executeMisused is toolinfo.ExecuteMisused.
func executeMisused(root any, unhandled any, info string) {
	var w *waiter
	if f, _ := unhandled.(func(*Error)); f != nil {
		w = &waiter{unhandled: f}
	}
	root.(*Root).startMisused(w, nil, "ExecuteWith", info)
}

// recordMisuse is toolinfo.RecordMisuse.
func recordMisuse(root any, info string) { root.(*Root).misuse(info) }

// startMisused is startIn that records the misuse info (if not empty)
// once the start is claimed: the flow is the caller's then, and the loop
// reads the record only once the start is posted.
func (r *Root) startMisused(w *waiter, promise chan Result, method, info string) {
	r.ready()
	r.panicIfRunning(method)
	if testHookBeforeClaim != nil {
		testHookBeforeClaim()
	}
	fl := &r.fl
	if !fl.claimStart() {
		panic("asyncsteps: " + method + " called on a running flow")
	}
	if w != nil {
		fl.wait = w // nil otherwise: end clears it
	}
	if promise != nil {
		fl.promise = promise // likewise
	}
	if info != "" {
		r.misuse(info)
	}
	fl.sched.startFlow(fl)
}

// testHookBeforeClaim, set by a test, runs in startIn between its check
// that the flow is not running and its claim of the flow: there another
// goroutine may start the flow first.
var testHookBeforeClaim func()

// panicIfRunning panics when the flow runs: a second start is the
// caller's mistake whatever its arguments, so that the checks of a
// context (nil, ended) come after this one and never hide it.
func (r *Root) panicIfRunning(method string) {
	if r != nil && r.fl.isRunning() {
		panic("asyncsteps: " + method + " called on a running flow")
	}
}

// Cancel stops the running flow, from any goroutine: on the loop, the cancel
// handlers of the running steps run (innermost first, no error handler),
// then the flow ends with an error matching context.Canceled. It does
// nothing when the flow is not running.
//
// Cancel is asynchronous: it returns at once, and the flow sees the cancel
// before its next step or at the next level an error unwinds through,
// whichever comes first; from then on no error handler runs in that
// execution. So a cancel requested before an error is raised wins over
// it, also when the callback that called Cancel raises the error itself,
// and the flow ends cancelled. An error handler that is running when
// another goroutine calls Cancel runs to its end.
//
// Cancel acts on the execution running when it is called: if that one
// ends first, the cancel does nothing, and it never stops an execution
// started afterwards, even one started before Cancel has returned.
func (r *Root) Cancel() {
	if r != nil { // a nil Root runs nothing: nothing to cancel
		r.cancel(context.Canceled)
	}
}

func (r *Root) cancel(cause error) {
	fl := &r.fl
	gen, running := fl.execution()
	if !running {
		return
	}
	if testHookCancelChecked != nil {
		testHookCancelChecked()
	}
	if req := fl.requestStop(gen, cause); req != nil {
		fl.postCancel(req)
	}
}

// testHookCancelChecked, set by a test, runs in Cancel once it has found
// the flow running, before its request.
var testHookCancelChecked func()

// cancelOutside is Cancel from a goroutine of the engine's own: its task
// is queued through injectCancel, which logs the panic of a stopped
// tool's Immediate that would end the process there.
func (r *Root) cancelOutside() {
	fl := &r.fl
	if gen, running := fl.execution(); running {
		if req := fl.requestStop(gen, context.Canceled); req != nil {
			fl.injectCancel(req)
		}
	}
}

// stopRequest is a cancel requested of one execution of a flow: its
// cause, and the generation of the execution it is meant for (see
// flow.execution). The generation keeps it to that execution: a Cancel
// finds the flow running, and before its request is made that execution
// may end and another one start, which the request must not stop.
type stopRequest struct {
	cause error
	gen   uint32
}

// requestStop requests the cancel, with cause, of the execution gen of
// fl, and returns the request, for the caller to queue the task that
// applies it (see cancelOf); or nil when that execution is not running,
// or has a cancel requested already, whose task applies it. It replaces
// only a stale request, of an execution that has ended: none may be
// newer while gen runs. The execution may still end between the check
// and the request, which is then stale at once, and does nothing.
func (fl *flow) requestStop(gen uint32, cause error) *stopRequest {
	var req *stopRequest
	for {
		cur := fl.stop.Load()
		if cur != nil && cur.gen == gen {
			return nil // requested already: its task applies it
		}
		if now, running := fl.execution(); !running || now != gen {
			return nil // it has ended: what runs now, if anything, is not its
		}
		if req == nil {
			req = &stopRequest{cause: cause, gen: gen}
		}
		if fl.stop.CompareAndSwap(cur, req) {
			return req
		}
	}
}

// stopsThis reports whether req, a cancel requested of fl, is meant for
// the execution that runs, or ran last; else it is stale. It is cheap
// enough to inline where drive looks at the request before each step.
func (fl *flow) stopsThis(req *stopRequest) bool {
	gen, _ := fl.execution()
	return req.gen == gen
}

// dropStale drops the cancel requested of fl if it is stale: one of an
// ended execution, applied or not, would otherwise cost each step of the
// next execution a look at it. On the loop, as an execution begins, or
// as a stale request's task runs: one made as its execution ended.
func (fl *flow) dropStale() {
	if req := fl.stop.Load(); req != nil && !fl.stopsThis(req) {
		fl.stop.CompareAndSwap(req, nil)
	}
}

// postCancel queues the task that applies req, a requested cancel: the
// flow sees req before its next step, but a flow that waits needs the
// loop to look.
func (fl *flow) postCancel(req *stopRequest) { fl.postStop(fl.cancelOf(req)) }

// injectCancel is postCancel from a goroutine of the engine's own, where
// a panic of a stopped tool's Immediate is logged (see inject).
func (fl *flow) injectCancel(req *stopRequest) { fl.injectStop(fl.cancelOf(req)) }

// postStop queues apply, which applies a stop requested of the flow (a
// cancel, its context's deadline), on the flow's tool: on a TestTool as a
// flowStop, which ResetEvents keeps.
func (fl *flow) postStop(apply func()) {
	if t, ok := fl.sched.(*TestTool); ok {
		t.post(flowStop{fl: fl, apply: apply})
		return
	}
	fl.sched.Immediate(apply)
}

// injectStop is postStop from a goroutine of the engine's own (see
// inject).
func (fl *flow) injectStop(apply func()) {
	if _, ok := fl.sched.(*TestTool); ok {
		fl.postStop(apply) // a TestTool's post does not panic
		return
	}
	fl.sched.inject(funcTask(apply))
}

// cancelOf returns the task that applies req, on the loop, if it is
// still the cancel requested of the flow, and meant for the execution
// that runs: a later execution of the Root is not req's.
func (fl *flow) cancelOf(req *stopRequest) func() {
	var apply func()
	apply = func() {
		if fl.stop.Load() != req {
			return
		}
		if !fl.stopsThis(req) {
			fl.dropStale()
			return
		}
		if fl.inCall { // a callback of the flow drives its TestTool
			// The flow sees req at its next step or unwind, before this
			// runs: a stop of the flow, the flow's end drops it, and
			// Pending counts it no more.
			fl.deferTask(flowStop{fl: fl, apply: apply})
			return
		}
		fl.cancel(req.cause)
	}
	return apply
}

// Run executes the flow and waits for its end. Run returns only once the
// flow has fully stopped; no callback of it runs afterwards. So on a Tool
// of the caller's, Run waits for the tool to run the flow's callbacks, the
// cancel of an ended ctx included: a tool that has stopped running them
// keeps Run waiting. (A closed [Loop] ends its flows itself.)
//
// When ctx is cancelled first, the flow is cancelled as by [Root.Cancel]
// (cancel handlers only) and Run returns an error matching ctx.Err().
// When ctx's deadline passes first, the deadline is a timeout of the whole
// flow instead: the innermost running step fails with Timeout, as if its
// own SetTimeout had expired (a Parallel fails as a whole, its branches
// cancelled), so the error handlers on the way run and may recover, say
// with a fallback value. From then on every step that waits fails with
// Timeout at once, so the flow cannot outlive the deadline by waiting;
// what it does without waiting still runs, but a loop through whose
// iteration such a Timeout went begins no further iteration (the next
// fails with Timeout), so that a loop whose iterations each wait and
// recover cannot spin for ever. If the Timeout ends the flow,
// the error matches ctx.Err() (context.DeadlineExceeded). A ctx that has
// ended already starts nothing: Run returns ctx.Err() for a cancel, and
// for a deadline the Timeout the flow would have ended with. The
// functions given to [AsyncSteps.Await] see ctx's values and deadline.
//
// Every Timeout the deadline raises has the info "the flow's context
// deadline passed" and context.Cause(ctx) as its Cause:
// context.DeadlineExceeded, or the cause given to
// [context.WithTimeoutCause] or [context.WithDeadlineCause]. A step's own
// timeout (SetTimeout) has an empty info and no Cause. So an error
// handler tells the request's budget (give up) from a step's limit (retry
// it, or do without) with errors.Is(as.State().LastException, cause), and
// a log line or an HTTP answer by the info.
//
// On a [TestTool], Run drives the tool itself, taking turns, event by
// event, with other goroutines that drive it; while one of them holds the
// tool, Run waits for its turn, its flow's end (which that goroutine may
// drive) and ctx's end at once. ctx's deadline is on the wall clock, not
// on the tool's virtual one. Run must not be called on the goroutine of any [Loop]
// (a callback of the flow's own Loop or of another one), nor from a
// callback of the flow's own tool: it would block that loop until the flow
// ends, and two loops waiting so for each other's flows would never end.
// It then returns an InternalError at once, as it does for a nil ctx; a
// step waits for another flow with [AwaitFlow]. Like Execute, it panics if
// the flow is already running, whatever ctx is (nil or ended included).
func (r *Root) Run(ctx context.Context) ([]any, error) { return r.run(ctx, "Run") }

// run is Run, called as the method named method: the name its misuse
// errors give.
func (r *Root) run(ctx context.Context, method string) ([]any, error) {
	if err := r.runnable(ctx, method); err != nil {
		return nil, err
	}
	w := newContextWaiter(make(chan Result, 1), ctx)
	r.startIn(w, w.promise, method)
	return r.fl.sched.waitRun(ctx, r, w)
}

// runnable returns why Run or RunHelping, the method named method, may not
// start the flow under ctx, or nil.
func (r *Root) runnable(ctx context.Context, method string) error {
	r.ready()
	if onLoopGoroutine() {
		// The flow's own loop or another: a Loop blocked here may be
		// the one the flow needs, or one that waits for this one.
		return &Error{Code: InternalError, Info: method + runOnLoopInfo}
	}
	if r.fl.sched.IsSameThread() {
		// A TestTool's or a foreign tool's callback, or the flow's own
		// Loop whose callback took the goroutine's mark off.
		return &Error{Code: InternalError, Info: method + r.fl.sched.selfRunInfo()}
	}
	r.panicIfRunning(method)
	if ctx == nil {
		// A misuse like the others here: an InternalError that says so,
		// not a nil dereference on the caller's goroutine.
		return &Error{Code: InternalError, Info: method + nilContextInfo}
	}
	return endedContextError(ctx) // a Go API starts no work under an ended context
}

// waitResult is how Run waits on a Loop or a foreign tool, which run the
// flow on their own: for its Result, cancelling the flow when ctx ends.
func waitResult(ctx context.Context, r *Root, w *waiter) ([]any, error) {
	// The flow always delivers: a closed Loop ends the flows it abandons.
	select {
	case res := <-w.promise:
		return res.Args, res.Err
	case <-ctx.Done():
		r.stopFor(ctx, w)
		res := <-w.promise
		return res.Args, res.Err
	}
}

// Clone returns a new Root with a copy of r's steps and state variables, not
// started: the spec's model flows (1.5). The copy is shallow: the steps'
// functions, with what their closures captured, and the variables' values
// (a map, a slice, a pointer) are shared by r and its clones; a flow that
// changes such a value in place changes it for all of them, which is a
// data race between clones running on different loops. Clone only reads r: goroutines may
// clone one idle model at once. While r's flow runs, its loop changes its
// steps (a clone gets the level-0 steps not started yet) and state, so
// Clone may then be called only from the flow's own
// callbacks (or, on a [TestTool], while no goroutine drives it): called on
// another goroutine, it copies nothing, and the clone's execution fails at
// once with an InternalError that says so.
//
// The clone runs on r's tool, as [Root.NewInstance] does. To spread the
// flows made from one model over the loops of a [LoopGroup], make each on
// the loop it is to run on and copy the model into it:
// r := group.New(); r.CopyFrom(model).
func (r *Root) Clone() *Root {
	if r == nil {
		nilRoot("Clone")
	}
	c := r.NewInstance()
	if !r.readableHere() {
		c.misuse(runningCopyInfo("Clone"))
		return c
	}
	c.fl.base.queue = copySteps(nil, r.fl.base.queue)
	if err := r.fl.base.err; err != nil {
		// A misuse of the model is the clone's too, as an error of its
		// own: the Result of each run is its caller's to change or wrap.
		own := *err
		c.fl.base.err = &own
	}
	if s := r.fl.state; s != nil {
		c.State().copyVars(s)
	}
	return c
}

// idleTestTool reports whether s is a TestTool that no goroutine drives:
// its flows change nothing until one does.
func idleTestTool(s scheduler) bool {
	t, ok := s.(*TestTool)
	return ok && t.runner.Load() == 0
}

// readableHere reports whether the steps and state of r may be read by the
// caller: r's flow does not run, or runs on the caller's goroutine, or on
// a TestTool that no goroutine drives. Otherwise its loop changes them
// meanwhile, and a copy (Clone, CopyFrom) would race with its steps.
func (r *Root) readableHere() bool {
	return !r.fl.isRunning() || r.fl.sched.IsSameThread() || idleTestTool(r.fl.sched)
}

// copyRefusal returns the info of the InternalError that a CopyFrom of
// model raises instead of copying it, or "" when it may copy: model is
// nil, runs on another goroutine, or has a wrong use recorded, which is
// its copies' too.
func copyRefusal(model *Root) string {
	switch {
	case model == nil:
		return "CopyFrom: nil model"
	case !model.readableHere():
		return runningModelInfo
	case model.fl.base.err != nil:
		return model.fl.base.err.Info
	}
	return ""
}

// runningCopyInfo is the info of a copy (call is Clone or CopyFrom) of a
// flow that runs on another goroutine.
func runningCopyInfo(call string) string {
	return call + " called on a running flow outside its loop: it would race with the flow's steps"
}

// runningModelInfo is the info of a CopyFrom whose model runs on another
// goroutine: the flow running elsewhere is the model, not the receiver.
const runningModelInfo = "CopyFrom of a model whose flow runs outside its loop: it would race with the model's steps"

// NewInstance returns a new, empty Root on the same tool (docs/DESIGN.md#new-instances).
func (r *Root) NewInstance() *Root {
	if r == nil {
		nilRoot("NewInstance")
	}
	if r.fl.sched == nil {
		// On DefaultTool once started, like r: read-only, as for a set-up
		// Root, and leaving the default loop unstarted.
		return newRoot(nil, r.fl.unhandled)
	}
	return r.fl.newInstance()
}

// push queues s at level 0: in the running flow, it runs after the steps
// queued there.
func (r *Root) push(s step) AsyncSteps {
	if r == nil { // a helper's step: the methods check their own
		panic("asyncsteps: a step added to a nil *Root")
	}
	r.fl.base.queue = appendStep(r.fl.base.queue, s)
	return r
}

func (r *Root) adding() bool { return true }

func (r *Root) addRefused(string) {} // a Root refuses no step

// misuse records the first wrong use of the Root; the next execution fails
// with it as an InternalError.
func (r *Root) misuse(info string) {
	if r == nil { // a helper's misuse: the methods check their own
		panic("asyncsteps: a step added to a nil *Root")
	}
	// The base frame runs no callback: its err is free to carry this.
	if r.fl.base.err == nil {
		r.fl.base.err = &Error{Code: InternalError, Info: info}
	}
}

func (r *Root) stepOnly(call string) {
	if r == nil {
		nilRoot(call)
	}
	r.misuse(call + " called on a Root: it is valid only inside a step")
}

// Add implements [AsyncSteps].
func (r *Root) Add(f StepFunc, onerror ...ErrorFunc) AsyncSteps {
	if r == nil {
		nilRoot("Add")
	}
	if f != nil && len(onerror) <= 1 { // addStep's valid case, without its calls through host
		return r.push(plainStep(f, firstHandler(onerror)))
	}
	return addStep(r, f, onerror)
}

// Parallel implements [AsyncSteps]. The value it returns adds branches
// until an execution of r takes the step: begins it, or ends before it
// and drops it. A branch added afterwards would never run; the call is a
// wrong use recorded on r (see [Root]), also when a step of the running
// flow makes it, which goes on without the branch.
func (r *Root) Parallel(onerror ...ErrorFunc) AsyncSteps {
	if r == nil {
		nilRoot("Parallel")
	}
	return addParallel(r, onerror)
}

// State implements [AsyncSteps].
func (r *Root) State() *State {
	if r == nil {
		nilRoot("State")
	}
	return r.fl.State()
}

// CopyFrom implements [AsyncSteps]: it appends the steps of model and copies
// its state variables that r does not have, shallowly as [Root.Clone] does.
// As with Clone, a wrong use recorded on model (see [Root]) is r's too, and
// a model whose flow runs on another goroutine is not read: either way
// CopyFrom copies nothing, and r's next execution fails at once with that
// InternalError.
func (r *Root) CopyFrom(model *Root) AsyncSteps {
	if r == nil {
		nilRoot("CopyFrom")
	}
	if info := copyRefusal(model); info != "" {
		r.misuse(info)
		return r
	}
	for _, s := range model.fl.base.queue {
		r.push(s.detached())
	}
	if model.fl.state != nil {
		r.State().fillMissing(model.fl.state)
	}
	return r
}

// Sync implements [AsyncSteps].
func (r *Root) Sync(obj Syncer, f StepFunc, onerror ...ErrorFunc) AsyncSteps {
	if r == nil {
		nilRoot("Sync")
	}
	return addSync(r, obj, f, onerror)
}

// SuccessStep implements [AsyncSteps].
func (r *Root) SuccessStep(args ...any) AsyncSteps {
	if r == nil {
		nilRoot("SuccessStep")
	}
	if len(args) == 0 {
		return r.push(plainStep(succeedNoArgs, nil))
	}
	// Not through addSuccess, whose step of a running step keeps args:
	// here args only is copied, so that a caller's variadic slice stays
	// on its stack.
	return r.push(modelSuccess(args))
}

// Await implements [AsyncSteps].
func (r *Root) Await(f AwaitFunc, onerror ...ErrorFunc) AsyncSteps {
	if r == nil {
		nilRoot("Await")
	}
	return addAwait(r, f, onerror)
}

// IsValid implements [AsyncSteps]: a Root is always valid, a nil *Root
// never.
func (r *Root) IsValid() bool { return r != nil }

// Tool implements [AsyncSteps]. A Root not yet started that New made
// without a tool, or a zero Root, returns [DefaultTool], which Tool then
// starts.
func (r *Root) Tool() Tool {
	if r == nil {
		nilRoot("Tool")
	}
	if r.fl.sched == nil { // not started on the default tool yet
		return DefaultTool()
	}
	return r.fl.sched.tool()
}

// Success on a Root is a misuse: it completes nothing and does not panic,
// and the Root's next execution fails at once with InternalError "Success
// called on a Root: it is valid only inside a step", before any of its
// steps runs; an execution running meanwhile, even the one whose step
// made the call, goes on without it (see [Root]). A step succeeds with
// Success on the [AsyncSteps] it is given.
func (r *Root) Success(...any) { r.stepOnly("Success") }

// Error on a Root is a misuse: it raises nothing and does not panic, and
// the Root's next execution fails at once with InternalError "Error(code)
// called on a Root: it is valid only inside a step" (the code given, the
// info dropped), before any of its steps runs; an execution running
// meanwhile, even the one whose step made the call, goes on without it
// (see [Root]). A step fails with Error on the [AsyncSteps] it is given.
func (r *Root) Error(code string, _ ...string) {
	if r == nil {
		nilRoot("Error")
	}
	r.stepOnly("Error(" + code + ")")
}

// SetTimeout on a Root is a misuse: it arms nothing and does not panic,
// and the Root's next execution fails at once with InternalError
// "SetTimeout called on a Root: it is valid only inside a step" (see
// [Root.Success]). Bound a step with SetTimeout on the [AsyncSteps] it is
// given, and a whole flow with the deadline of [Root.Run]'s context.
func (r *Root) SetTimeout(time.Duration) { r.stepOnly("SetTimeout") }

// SetCancel on a Root is a misuse: it sets nothing and does not panic, and
// the Root's next execution fails at once with InternalError "SetCancel
// called on a Root: it is valid only inside a step" (see [Root.Success]).
// A step sets its cancel handler with SetCancel on the [AsyncSteps] it is
// given.
func (r *Root) SetCancel(CancelFunc) { r.stepOnly("SetCancel") }

// WaitExternal on a Root is a misuse: it does not panic, and the Root's
// next execution fails at once with InternalError "WaitExternal called on
// a Root: it is valid only inside a step" (see [Root.Success]). A step
// waits with WaitExternal on the [AsyncSteps] it is given.
func (r *Root) WaitExternal() { r.stepOnly("WaitExternal") }

// Loop implements [AsyncSteps].
func (r *Root) Loop(f LoopFunc, label ...string) AsyncSteps {
	if r == nil {
		nilRoot("Loop")
	}
	return addLoop(r, f, label)
}

// Repeat implements [AsyncSteps].
func (r *Root) Repeat(count int, f RepeatFunc, label ...string) AsyncSteps {
	if r == nil {
		nilRoot("Repeat")
	}
	return addRepeat(r, count, f, label)
}

// ForEach implements [AsyncSteps].
func (r *Root) ForEach(collection any, f ForEachFunc, label ...string) AsyncSteps {
	if r == nil {
		nilRoot("ForEach")
	}
	return addForEach(r, collection, f, label)
}

// Break on a Root is a misuse: it breaks nothing and does not panic, and
// the Root's next execution fails at once with InternalError "Break called
// on a Root: it is valid only inside a step", before any of its steps
// runs; an execution running meanwhile, even the one whose step made the
// call, goes on without it (see [Root]). A loop's body or a step under it
// breaks the loop with Break on the [AsyncSteps] it is given.
func (r *Root) Break(...string) { r.stepOnly("Break") }

// Continue on a Root is a misuse: it does not panic, and the Root's next
// execution fails at once with InternalError "Continue called on a Root:
// it is valid only inside a step", before any of its steps runs; an
// execution running meanwhile, even the one whose step made the call, goes
// on without it (see [Root]). A loop's body or a step under it goes on to
// the next iteration with Continue on the [AsyncSteps] it is given.
func (r *Root) Continue(...string) { r.stepOnly("Continue") }

// Running reports whether the Root's flow is running: from the start of an
// execution (Execute, ExecuteWith, ExecuteThen, Promise, Run) until it has
// ended. Safe for concurrent use; the answer may be stale by the time it
// is read. The C interface uses it for a root's isValid, which is false
// while its flow runs, as on the FutoIn C++ reference implementation.
func (r *Root) Running() bool { return r != nil && r.fl.isRunning() }
