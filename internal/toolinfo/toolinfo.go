// Package toolinfo gives the other packages of this module what package
// asyncsteps knows of its own tools and keeps unexported, without adding
// to its API. Package asyncsteps sets the functions when it is
// initialized, so a package that imports it finds them set.
package toolinfo

import (
	"context"
	"slices"
)

// NeverCloses reports whether tool is a Loop that is never closed: the
// loop of DefaultTool, whose Done channel never is. It does not start
// that loop.
var NeverCloses func(tool any) bool

// Closing returns a channel that is closed once Close has been called on
// tool, a Loop (when Loop.Closed turns true), long before Done if the
// loop's last callback is slow to return; closed already for a zero Loop,
// and nil, never closed, for the loop of DefaultTool and for a tool that
// is not a Loop. Asking costs the loop nothing, and no wake-up: package
// cabi's FreeWait waits on it beside the release it waits for, rather
// than polling the loop.
var Closing func(tool any) <-chan struct{}

// PostOrDrop queues run on tool, if tool is a TestTool, as its Immediate
// does, and reports true; if ResetEvents drops run, it calls dropped in
// its place, on the goroutine that called ResetEvents, once the reset is
// done, in the order the callbacks were queued. For any other tool it
// queues nothing and reports false.
var PostOrDrop func(tool any, run, dropped func()) bool

// BranchID returns the id kept for the parallel branch that as runs in,
// keeping id for it first if it has none: package cabi gives each branch
// of a flow a rootId of its own, and a Go step of the branch given to C
// must have the rootId of the branch's C steps. as is a step whose
// callback runs now, on its loop. It returns 0, keeping nothing, when as
// runs in no parallel branch (in the flow itself), and known false when
// as is not such a step, or one the engine cannot reach (a decorator
// without Unwrap): where it runs is then unknown. A branch keeps its id
// until it ends: a later branch, also one that reuses its memory, has
// none.
var BranchID func(as any, id int64) (branch int64, known bool)

// AtFlowEnd makes end's function run as the execution of the flow that
// as runs in ends, however it ends (its last step, an error, a cancel,
// its Loop closed), on the flow's loop, before its outcome is delivered.
// end is the caller's key: an execution keeps each FlowEnd once, so a
// caller that asks again for the same execution (package cabi does, for
// each of its steps that waits) keeps one function there, and the
// FlowEnds of other callers stay. They run once each, in the order they
// were first kept. Package cabi releases there the pointers it gave C for
// the flow's Go steps that waited: no later step of the flow may ever
// look at them; package asynchttp ends the reads of a request's body. as
// is a step of a running execution, and the caller runs on the flow's
// loop: in the step's callback, or for a step that waits, in a callback
// of the loop. It reports false, keeping nothing, when as is not such a
// step or the engine cannot reach it (a decorator without Unwrap; one
// that unwraps is followed also once the step's callback has returned),
// when its step is over, or when end or its function is nil. The
// function must return quickly and must not panic: it runs inside the
// engine, and a panic would keep the FlowEnds after it from running. An
// execution of Execute gets the small record that Run and ExecuteWith
// give theirs, to keep the FlowEnds, only when one is kept: one that
// never meets package cabi or asynchttp pays nothing at its end, one of
// Run or ExecuteWith a test of a field.
var AtFlowEnd func(as any, end *FlowEnd) (set bool)

// FlowEnd is a function for AtFlowEnd to run as an execution ends. Each
// caller makes its own, and gives the same one for every execution: its
// address is the caller's key. Fn must not change while an execution
// keeps it.
type FlowEnd struct {
	Fn func()
	// list is set only in the FlowEnd that FlowEnds makes to hold more
	// than one: its own list.
	list *flowEndList
}

// FlowEnds is what an execution keeps of AtFlowEnd: each FlowEnd once.
// Its zero value keeps none. It is one word: an execution with a single
// FlowEnd keeps the caller's own, without an allocation; a second
// caller's makes a list, once.
type FlowEnds struct{ kept *FlowEnd }

// Keep keeps e, unless it is kept already.
func (s *FlowEnds) Keep(e *FlowEnd) {
	switch k := s.kept; {
	case k == nil:
		s.kept = e
	case k.list == nil:
		if k != e {
			l := &flowEndList{buf: [2]*FlowEnd{k, e}}
			l.all = l.buf[:]
			l.head.list = l
			s.kept = &l.head
		}
	case !slices.Contains(k.list.all, e):
		k.list.all = append(k.list.all, e)
	}
}

// flowEndList is the FlowEnd that holds the FlowEnds of two callers or
// more, in the order kept, made with room for two in one allocation.
type flowEndList struct {
	head FlowEnd
	all  []*FlowEnd
	buf  [2]*FlowEnd
}

// Any reports whether s keeps a FlowEnd.
func (s *FlowEnds) Any() bool { return s.kept != nil }

// Run runs the function of each FlowEnd kept, in order, once: s keeps
// none from then on.
func (s *FlowEnds) Run() {
	k := s.kept
	s.kept = nil
	if k == nil {
		return
	}
	if k.list == nil {
		k.Fn()
		return
	}
	for _, e := range k.list.all {
		e.Fn()
	}
}

// AtWait makes fn run as the callback of the step of as, a step API of
// the package or a decorator that unwraps to one, returns and the step
// begins to wait for a completion from outside (it set a timeout, a
// cancel handler or called WaitExternal, and added no sub-steps, and did
// not complete or fail), on the loop, before the loop may run the step's
// timer; it replaces the fn set before for that step. It runs at most
// once, and not at all when the step ends otherwise. Package cabi claims
// there, for a Go step given to C by Binary, a completion that C made
// from another thread while the callback ran and the step did not wait
// yet, which ClaimSuccess and ClaimError refuse then. It reports false,
// keeping nothing, unless as is a step whose callback runs now and the
// caller runs on the step's loop (in that callback). fn must return
// quickly and must not panic: it runs inside the engine.
var AtWait func(as any, fn func()) (set bool)

// StepRunning reports whether the step of as, a step API of the package
// or a decorator that unwraps to one, is still running, its sub-steps
// included: its callback has returned, but a sub-step it added, or its
// wait, is not over. known is false when as does not unwrap to a step API
// of the package. Package cabi keeps the pointer that Binary gave for a
// Go step until then: C sub-steps the step added through it may read its
// stack memory. Call it on the flow's loop, or once the loop has stopped.
var StepRunning func(as any) (running, known bool)

// CallbackRuns reports whether the callback of the step of as, a step API
// of the package or a decorator that unwraps to one, is running: not
// returned yet, also once it has completed the step. known is false when
// as does not unwrap to a step API of the package. Package cabi tells by
// it, for a Go step given to C by Binary, the step's own callback from a
// sub-step's. Call it on the flow's loop.
var CallbackRuns func(as any) (runs, known bool)

// ValidOffLoop is IsValid of the step of as, a step API of the package or
// a decorator that unwraps to one, for a goroutine that is not the loop's:
// it reads only what is safe there, so a step whose callback runs counts
// as valid even once that callback has completed it (the loop's to read).
// known is false when as does not unwrap to a step API of the package.
var ValidOffLoop func(as any) (valid, known bool)

// StepLive reports whether the step of as, a step API of the package or a
// decorator that unwraps to one, has not ended: its frame still runs this
// incarnation (the step waits, or a sub-step it added runs) and no
// success from outside (Success from another goroutine, which the loop
// may not have applied) was claimed for it; an error so claimed (Error
// from another goroutine, ClaimError) leaves it live, its cancel handler
// due as a cancel would run it. Unlike StepRunning,
// it holds also once the step's flow has ended because its Loop was
// closed, which leaves the flow's steps where they stood: package cabi
// calls, once the loop has stopped, the C cancel handler of a step the
// stop left, and never that of a step that ended before, whose pointer it
// may not have released yet. known is false when as does not unwrap to a
// step API of the package. Call it on the flow's loop, or once the loop
// has stopped.
var StepLive func(as any) (live, known bool)

// StepFailer is a decorator of a step that fails its step itself when
// asyncsteps.Fail is given it, or a decorator that unwraps to it: package
// cabi's for a C step, whose C callback must return before the engine
// aborts it (a Go panic must not unwind C frames), and whose node must
// learn that the step failed. FailStep raises f.Err as Fail does, on the
// engine's step it unwraps to. Its argument is a type of this internal
// package, so that no type outside the module implements it: a user's
// decorator with a FailStep method of its own is unwrapped as any other.
type StepFailer interface{ FailStep(f Failure) }

// Failure is the Go error that asyncsteps.Fail hands a StepFailer.
type Failure struct{ Err error }

// ErrorCallInfo returns the info of the InternalError that a call of
// Error with code and info stands for when it is a misuse (an empty code,
// more than one info): package cabi's decorators of steps fail as the
// engine's Error does, naming the code and every info.
var ErrorCallInfo func(code string, info []string) string

// OwnerKey returns what a Mutex counts as the holder for as, a step whose
// callback runs now and makes the call: its flow or parallel branch, as
// an opaque key for HoldFor; nil when as is not such a step (another
// goroutine gets nil, also while the callback runs), or one the engine
// cannot reach (a decorator without Unwrap). Package cabi's table lock, which a hidden
// flow holds on behalf of a C step, takes the key of that step's flow or
// branch, so that the step's own addSync of the same Mutex is reentrant.
var OwnerKey func(as any) any

// OuterKeys returns the keys, as OwnerKey gives them, of the flows and
// branches that the flow or branch of as was started from, the nearest
// first: for a parallel branch, the flow or branch that ran its
// Parallel, then the one that ran that one's, up to the flow; none in the
// flow itself, and none when as is not a step OwnerKey knows. Each of
// them waits for the branch of as to end. Package redissync's Mutex
// tells by them a branch that would wait for a lease held only by the
// flows that wait for it. The branches among them are kept as OwnerKey
// keeps a key: the keys stay theirs.
var OuterKeys func(as any) []any

// HoldFor makes the flow of as, a step whose callback runs now in the flow
// itself (not in a parallel branch), count as key, from OwnerKey, for
// every Mutex it enters until its execution ends. It reports false,
// keeping nothing, when as is not such a step or key is not such a key.
// A branch's key stays that branch's after it has ended (OwnerKey keeps
// its memory from another branch): a lock held for a branch that ended
// keeps other branches out.
var HoldFor func(as any, key any) bool

// ClaimSuccess claims the completion of the step of as, a step API of
// the package or a decorator that unwraps to one, for a success, as
// Success from another goroutine does, whose args are to come: package
// cabi claims so a waiting step that C completes from another thread,
// whose success it posts to the loop, so that a cancel or a timeout of
// the step that comes before the post sees the step completed, as it
// sees a Go step whose Success was claimed. It claims only a step that
// may be completed from outside (it waits) and has no completion
// claimed, and reports nil otherwise; from any goroutine.
var ClaimSuccess func(as any) Claimed

// Claimed is a success claimed by ClaimSuccess. Its methods are for the
// step's loop.
type Claimed interface {
	// Void reports whether the step ended since the claim (cancelled,
	// or its flow ended): the success is not to be delivered.
	Void() bool
	// Deliver completes the step with args, the success claimed; a
	// void claim takes nothing.
	Deliver(args []any)
}

// ClaimError is ClaimSuccess for an error, as Error from another
// goroutine claims it: package cabi claims so a waiting step that C
// fails from another thread (handle_error), whose error it posts to the
// loop, so that the step's timer falling due before the post loses, as
// it loses to a Go step's Error so claimed. A cancel that comes before
// the post finds the step failed: the step's cancel handlers run, and
// the claim is void.
var ClaimError func(as any) ClaimedError

// ClaimedError is an error claimed by ClaimError. Its methods are for
// the step's loop.
type ClaimedError interface {
	// Void reports whether the step ended since the claim (cancelled,
	// or its flow ended): the error is not to be delivered.
	Void() bool
	// Deliver fails the step with code and info, as the step's Error
	// with them from outside its callback does; a void claim takes
	// nothing.
	Deliver(code, info string)
}

// BeforeStop makes fn run on the goroutine of tool, a Loop, as the loop
// stops: it runs no callback any more, and has not yet ended the flows
// it leaves. From then on, the AsyncSteps of a step it left waiting
// reports IsValid false, whatever its state: it can never complete.
// Package cabi records there, for each Go step it gave C by Binary, what
// IsValid says of it: the cleanup after the stop calls the C cancel
// handler of a step the stop left waiting, and not that of one Go
// completed, and for a step given through a decorator without Unwrap has
// nothing else to tell them apart by. It reports false, keeping nothing, when tool is not a Loop that may
// stop (the loop of DefaultTool, a zero Loop, another tool), or when the
// loop has begun to stop. fn must return quickly and must not panic: it
// runs inside the loop's shutdown. One that calls runtime.Goexit ends the
// loop's goroutine, as a callback's does: the next one runs the functions
// given after fn, and fn's own work is left where it stopped.
var BeforeStop func(tool any, fn func()) (set bool)

// KeyedKey reports, of obj, whether it is the Syncer of one key of an
// asyncsteps.KeyedMutex, KeyedThrottle or KeyedLimiter (what its Key
// returns, and what the SyncWait hook is told of), whose types are not
// exported: kind is then the primitive each key has, "mutex",
// "throttle" or "limiter" ("" for any other obj); and whether the keyed
// primitive is nil. Package otelsteps times a key's waits as those of
// its primitive, and package cabi refuses a nil one's key as the engine
// does.
var KeyedKey func(obj any) (kind string, nilKeyed bool)

// SubflowKey is the key under which the context that a flow run by
// asyncsteps.AwaitFlow begins with (what its FlowStart hook gets) holds a
// token of that start, unique to it; a context that is not derived from
// such a context holds none. That context has the values of the
// awaiting flow's context, what the awaiting flow's hooks put there
// included: package otelsteps remembers the token its record of a flow
// was made under, and takes a record made under another one, found in
// the context that a flow whose FlowStart failed is left with, for the
// awaiting flow's, not its own.
type SubflowKey struct{}

// AwaitFlowKey is the key under which a flow's context (the one its
// FlowStart hook returned) may hold an AwaitFlowObserver, which each
// asyncsteps.AwaitFlow step of the flow reports to: package otelsteps
// gives the step a span of its own, the parent of the awaited flow's.
// The public hooks see an Await function's call, not the wait of an
// AwaitFlow step, which runs no function of the user's; found in the
// flow's context, the observer follows the flow's record of otelsteps
// through the hooks of an application that wrap otelsteps' and derive
// the flow's context from theirs.
type AwaitFlowKey struct{}

// AwaitFlowObserver observes the AwaitFlow steps of the flows whose
// context holds it under AwaitFlowKey.
//
// AwaitFlowStart is called on the flow's loop, in the step's callback,
// before the step starts the awaited flow, with the step's context: the
// values of the flow's context, the deadline around the step, cancelled
// as the step is cancelled (Err then says context.DeadlineExceeded for a
// timeout, as an Await function's context does). The awaited flow
// begins with the values of the context it returns, which must be ctx or
// derived from it (nil keeps ctx). A panic in it fails the step, as one
// in the step's callback does, and no AwaitFlowEnd follows.
//
// AwaitFlowEnd is called once, as the step ends, with the context
// AwaitFlowStart returned and the step's outcome: err is nil on success,
// else the *asyncsteps.Error the step fails with; for a step that a
// cancel or a timeout ends (or the closing of its Loop), ctx has been
// cancelled and err is nil. It runs on the flow's loop, or on the
// goroutine that waited for the awaited flow, there once that goroutine
// has claimed the step's completion, before it writes it: the end told
// is the step's, as the step takes it. A cancel or a timeout that ends
// the step before that claim is the end told, and the awaited flow's
// outcome comes to nothing; one that comes after a success claimed finds
// the step completed, and the success is told; one that comes after a
// failure claimed runs the step's cancel handler, as applying the
// failure would, and the failure is told. ctx is cancelled only for a
// cancel that is the end told: never under a told success or failure.
// A panic in it is logged, and the step ends as it would have.
type AwaitFlowObserver interface {
	AwaitFlowStart(ctx context.Context) context.Context
	AwaitFlowEnd(ctx context.Context, err error)
}

// ExecuteMisused starts root, a *Root of the package, as ExecuteWith does
// with unhandled (a func(*Error), or nil for the Root's own function), its
// execution failing at once with an InternalError of info, as after a
// misuse recorded on the Root: the misuse is recorded once the start is
// the caller's, so that no other start or running flow sees it. It panics
// as ExecuteWith does on a running flow, recording nothing. Package cabi
// reports by it an add that a root's owner made from another thread
// while the flow ran, which had no effect.
var ExecuteMisused func(root any, unhandled any, info string)

// RecordMisuse records info on root, a *Root of the package, as a misuse
// of the Root: its next execution fails at once with an InternalError of
// info, unless a misuse is recorded already. Only where a misuse of the
// Root may be recorded: on its flow's loop, or while nothing else uses
// the Root. Package cabi records by it the misuse that C makes through
// the pointer of a Go Root given by Binary, which Go executes too.
var RecordMisuse func(root any, info string)
