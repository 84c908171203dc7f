// Package flowfuzz holds the flow programs of the engine's fuzz test: a tree
// of AsyncSteps operations decoded from fuzz bytes, and a reference model
// that computes, independently of the engine, the trace such a program must
// produce.
//
// The package does not import the engine: the fuzz test (fuzz_flows_test.go
// at the module root) runs a [Program] on the engine and compares the trace
// with [Model]'s.
package flowfuzz

// This file is long on purpose: the program language and its decoder are
// one unit, each kind of node next to the bytes that make it.

import (
	"context"
	"fmt"
	"strings"
)

// Kind is what a node adds to its level.
type Kind uint8

const (
	KStep        Kind = iota // Add(step, onerror)
	KParallel                // Parallel(onerror) with one branch per sub-node
	KLoop                    // Loop(body, label): the body breaks itself at iteration Count
	KRepeat                  // Repeat(Count, body, label)
	KSync                    // Sync(mutex, Body, Body.Handler)
	KSuccessStep             // SuccessStep(Args...)
	numKinds

	// KForEach is ForEach(collection, body, Label) over Count elements: a
	// slice of ints, or (Map) a map with string keys. The body traces, then
	// at the iteration At calls Break(Label) (End EBreak) or Continue(Label)
	// (End EContinue), else adds Subs. Decode makes it from a KRepeat byte.
	KForEach Kind = numKinds
	// KRetry is Retry(RetryOptions{Attempts: Count, Label, and Retry's
	// options}, attempt): attempt i traces, then fails as Retry says if i
	// is below its FailUntil, else adds Subs or, with none, calls
	// Success(Args...) if there are any. Decode makes it from a KLoop byte.
	KRetry Kind = numKinds + 1
	// KAwait is an Await step (Await says which): it waits for its
	// function, or the flow it runs, to end At ms after it started, as End
	// says: EExternal succeeds with Args, EExternalErr fails with Code and
	// Info (the function's context.DeadlineExceeded where Code is
	// "Timeout"), EPanic and EGoexit are the function's, EWait never ends
	// by itself. Decode makes it from a KStep that waits, in the programs
	// Program.Awaits allows.
	KAwait Kind = numKinds + 2
	// KSettle is Settle(then, branches...) with a branch per sub-node,
	// each adding its node from the branch's step: then traces
	// SettleEvent with the outcomes. It takes no error handler, and its
	// branches may be of any kind. Decode makes it from a KParallel byte.
	KSettle Kind = numKinds + 3
	// KForEachLimit is ForEachLimit(seq, Limit, item, Handler) over an
	// iter.Seq2 of Count pairs (i, ElemValue(ID, i)) that traces each pull
	// (PullEvent) and its end (SeqEndEvent), and, with SeqPanic, panics
	// (PanicValue(ID)) after its last pair instead of running out. Item i
	// traces ForEachEvent,
	// then, if i is At, calls Break(Label) (End EBreak) or
	// Continue(Label) (End EContinue), or returns at once (End
	// ESuccess), else adds Subs. Decode makes it from a KParallel byte.
	KForEachLimit Kind = numKinds + 4
	// KRace is First(then, branches...) (Need 0) or Quorum(Need, then,
	// branches...) with a branch per sub-node, 1 to 4, each adding its
	// node from the branch's step, as a Settle's: then traces RaceEvent
	// with the results, the value of First's winner alone. It takes no
	// error handler, and its branches may be of any kind. Decode makes it
	// from a KParallel byte.
	KRace Kind = numKinds + 5
)

// AwaitKind is which Await a KAwait node is.
type AwaitKind uint8

const (
	AwaitFn   AwaitKind = iota // AsyncSteps.Await(fn): fn blocks until At ms after it started
	AwaitFlow                  // AwaitFlow(other): other's one step waits At ms, then ends
	// AwaitThen(fn, then): fn as AwaitFn's, then traces ThenEvent with
	// the value and returns (an implicit success with no args).
	AwaitThen
	// AwaitChan(ch): ch, a chan int of capacity 1 made as the step is
	// added, gets its value (Args[0]) or is closed (Closed) At ms after
	// the add, or at the add (Ready); a NilChan is nil; EWait: nothing
	// is ever sent. The value may come before the step runs, which then
	// takes it at once, or while it waits, or after it was cancelled.
	AwaitChan
	// AwaitResult(ch): as AwaitChan, over a chan Result: Args, or the
	// error Code and Info (Code "Timeout": context.DeadlineExceeded;
	// "InternalError": context.Canceled), or a closed channel.
	AwaitResult
)

// ChanValue is the value the AwaitChan id receives from its channel.
func ChanValue(id int) int { return AwaitValue(id) }

// CanceledInfo is the info of the InternalError a Result's
// context.Canceled raises in a flow: the error's text.
const CanceledInfo = "context canceled"

// ThenEvent is the event of the then of the AwaitThen id called with v:
// "t3=30".
func ThenEvent(id, v int) string { return fmt.Sprintf("t%d=%d", id, v) }

// AwaitValue is the value the Await function of the KAwait id returns.
func AwaitValue(id int) int { return id * 10 }

// AwaitTimeoutInfo is the info of the Timeout an Await function's
// context.DeadlineExceeded raises: the error's text.
const AwaitTimeoutInfo = "context deadline exceeded"

// RunDeadlineInfo is the info of the Timeout with which Run's deadline
// times out a step, an iteration, an item or a wait for a slot; a step's
// own timeout has none (rundeadline.go's deadlineInfo).
const RunDeadlineInfo = "the flow's context deadline passed"

// AwaitPanicInfo is the info of the InternalError of a panic in the Await
// function of the KAwait id: "panic: " and the value
// (docs/DESIGN.md#hooks, the faults table).
func AwaitPanicInfo(id int) string { return "panic: " + PanicValue(id) }

// CtxMode is how a program's Root is run.
type CtxMode uint8

const (
	CtxNone     CtxMode = iota // Promise
	CtxRun                     // Run(ctx), a ctx that never ends
	CtxCancel                  // Run(ctx), ctx cancelled at Program.CtxAt
	CtxDeadline                // Run(ctx), ctx's deadline passes at Program.CtxAt
)

// RetrySpec is what a KRetry's attempts and options do.
type RetrySpec struct {
	FailUntil int    // attempts 0 to FailUntil-1 fail by Fail
	Fail      End    // EError (Code, info AttemptInfo(i)), EWait, EPanic, EBreak or EContinue (Label)
	Code      string // EError
	Label     string // EBreak, EContinue
	// Retryable, if set, retries every code but E2 and traces
	// RetryableEvent; else RetryOptions.Retryable is nil (Timeout,
	// CommError and ConnectError are retried).
	Retryable bool
	Backoff   int // < 0: no Backoff; else Backoff traces BackoffEvent and returns Backoff ms
	Timeout   int // RetryOptions.Timeout in ms; 0: none
	// Delay, with Backoff >= 0, gives that wait as RetryOptions.Delay
	// instead, which traces DelayEvent; a wait that would not end before
	// the nearest step timeout around the Retry is not waited: the
	// failure unwinds out of the Retry.
	Delay bool
}

// AttemptInfo is the info of the error the attempt i of a KRetry raises.
func AttemptInfo(i int) string { return fmt.Sprintf("a%d", i) }

// RetryCodes are the codes a KRetry's failing attempts raise.
var RetryCodes = [...]string{"CommError", "Timeout", "E1", "E2"}

// End is how a step's callback ends, after its SetTimeout, SetCancel and Add
// calls.
type End uint8

const (
	EImplicit    End = iota // return: implicit success (or wait, after SetTimeout/SetCancel)
	ESuccess                // Success(Args...)
	EError                  // Error(Code, Info)
	EBreak                  // Break(Label)
	EContinue               // Continue(Label)
	EExternal               // WaitExternal; Success(Args...) from the tool At ms later
	EExternalErr            // WaitExternal; Error(Code, Info) from the tool At ms later
	EWait                   // WaitExternal and nothing: only a cancel or timeout ends it
	numEnds

	// EPanic is panic(PanicValue(ID)) after the Add calls: an
	// InternalError whose LastException is a *PanicError. Decode makes it
	// from an EError byte.
	EPanic End = numEnds
	// EGoexit is runtime.Goexit after the Add calls: an InternalError, as
	// a panic, but with no *PanicError. Decode makes it from an EError byte.
	EGoexit End = numEnds + 1
	// EPanicEvil is a panic with a value that panics when printed (its
	// String method panics with the value itself): an InternalError whose
	// info is EvilInfo. Decode makes it from an EError byte.
	EPanicEvil End = numEnds + 2
	// EParent is Success on the AsyncSteps of the step that added this
	// one, which waits for its sub-steps (spec section 1): an
	// InternalError raised in this step. Decode makes it from an EBreak
	// byte, for a sub-step of a plain step only.
	EParent End = numEnds + 3
	// EParentBreak is Break(Label) on the AsyncSteps of the step that
	// added this one, which waits for its sub-steps: an InternalError
	// raised in this step, as for EParent; the loop, if any, goes on.
	// Decode makes it from an EContinue byte, for a sub-step of a plain
	// step only.
	EParentBreak End = numEnds + 4
	// EFail is Fail(FailErr(Fail, ID, Code)) after the Add calls: Code
	// and Info are what ErrorFrom maps that Go error to (see FailCode,
	// FailInfo), and the error raised keeps it as its Cause. Decode makes
	// it from an EError byte.
	EFail End = numEnds + 5
	// EExternalFail is WaitExternal, then Fail as for EFail from the tool
	// At ms later. Decode makes it from an EError byte.
	EExternalFail End = numEnds + 6
)

// FailKind is which Go error an EFail, EExternalFail or HFail raises
// through Fail, for the node or handler id: its text is FailInfo.
type FailKind uint8

const (
	FailCoded    FailKind = iota // a FutoInCoder of the node's Code
	FailPlain                    // an error of no known kind: InternalError
	FailWrapped                  // fmt.Errorf("w<id>: %w") of a FailCoded
	FailDeadline                 // an error that wraps context.DeadlineExceeded: Timeout
)

// FailCode is the code ErrorFrom maps the Go error of kind k to, code
// being the one a FailCoded or FailWrapped error gives.
func FailCode(k FailKind, code string) string {
	switch k {
	case FailPlain:
		return "InternalError"
	case FailDeadline:
		return "Timeout"
	}
	return code
}

// FailInfo is the info ErrorFrom maps the Go error of kind k for id to:
// its text.
func FailInfo(k FailKind, id int) string {
	if k == FailWrapped {
		return fmt.Sprintf("w%d: f%d", id, id)
	}
	return fmt.Sprintf("f%d", id)
}

// CodedError is the Go error of a FailCoded (and the one a FailWrapped
// wraps): a FutoInCoder.
type CodedError struct {
	ID   int
	Code string
}

func (e *CodedError) Error() string { return FailInfo(FailCoded, e.ID) }

// FutoInCode gives the code of the error.
func (e *CodedError) FutoInCode() string { return e.Code }

// PlainError is the Go error of a FailPlain, and, with Deadline, of a
// FailDeadline, which wraps context.DeadlineExceeded.
type PlainError struct {
	ID       int
	Deadline bool
}

func (e *PlainError) Error() string { return FailInfo(FailPlain, e.ID) }

// Unwrap returns context.DeadlineExceeded for a FailDeadline, else nil.
func (e *PlainError) Unwrap() error {
	if e.Deadline {
		return context.DeadlineExceeded
	}
	return nil
}

// FailErr makes the Go error of kind k for the node or handler id; code
// is the code of a FailCoded or FailWrapped.
func FailErr(k FailKind, id int, code string) error {
	switch k {
	case FailPlain:
		return &PlainError{ID: id}
	case FailDeadline:
		return &PlainError{ID: id, Deadline: true}
	case FailWrapped:
		return fmt.Errorf("w%d: %w", id, &CodedError{ID: id, Code: code})
	}
	return &CodedError{ID: id, Code: code}
}

// EvilInfo is the info of the InternalError of EPanicEvil.
const EvilInfo = "a flowfuzz.Evil that panics when printed"

// Evil is the panic value of EPanicEvil: printing it panics with it.
type Evil struct{}

// String panics with e, as EPanicEvil needs.
func (e Evil) String() string { panic(e) }

// Action is what an error handler does.
type Action uint8

const (
	HReturn  Action = iota // plain return: unwinding goes on
	HRecover               // Success(Args...)
	HRethrow               // Error(Code, Info)
	HAdd                   // Add(Steps...): they run in place of the failed step
	HPanic                 // panic(PanicValue(ID)): an InternalError replaces the error
	HWait                  // wait (SetTimeout(Timeout) or WaitExternal), completed by Done at At ms
	HGoexit                // runtime.Goexit: an InternalError replaces the error
	// HFail is Fail with the Go error of its Fail kind, as EFail: the
	// error it raises has that error as its Cause, not the handled one's.
	HFail
)

// Node is one operation of a flow program.
type Node struct {
	ID   int
	Kind Kind

	// KStep (and the Body of a KSync).
	Timeout int // SetTimeout(Timeout ms) first, if > 0
	// ZeroTimeout: SetTimeout(0) first instead, which falls due at once
	// (docs/DESIGN.md#timeouts).
	ZeroTimeout bool
	Timeout2    int  // then SetTimeout(Timeout2 ms) again, if > 0: it replaces the first
	Cancel      bool // then SetCancel(handler tracing "c<ID>")
	// CancelPanic: the cancel handler then panics with
	// CancelPanicValue(ID) (docs/DESIGN.md#cancel-handlers).
	CancelPanic bool
	// CancelGoexit: the cancel handler then calls runtime.Goexit instead,
	// which fails or goes on as that panic does, with GoexitInfo as the
	// info (docs/DESIGN.md#what-a-callback-may-do-to-its-loop).
	CancelGoexit bool
	End          End
	At           int  // EExternal, EExternalErr: ms after the callback; KForEach, KForEachLimit: the iteration (item) that breaks or continues
	Map          bool // KForEach: over a map (keys MapKey(i)) instead of a slice
	Seq          bool // KForEach: over an iter.Seq2 of the slice's pairs, pulled lazily
	Limit        int  // KForEachLimit: the items at most at once, 1 to 4
	Need         int  // KRace: Quorum's k, 1 to the branches; 0: First
	SeqPanic     bool // KForEachLimit, KForEach with Seq: its sequence panics (PanicValue(ID)) after its last pair
	// SeqGoexit: the sequence of a KForEachLimit, or of a KForEach with
	// Seq, calls runtime.Goexit after its last pair instead: an
	// InternalError whose info is GoexitInfo, raised where the panic's is.
	SeqGoexit bool

	Args  []int  // ESuccess, EExternal, KSuccessStep
	Code  string // EError, EExternalErr, EFail, EExternalFail
	Info  string
	Label string // EBreak, EContinue; KLoop, KRepeat; KForEachLimit: its items' Break or Continue
	Count int    // KRepeat: iterations; KLoop: the iteration that breaks; KForEach, KForEachLimit: the pairs

	// Sub-steps added by a KStep callback, branches of a KParallel, the
	// steps added by each iteration of a KLoop or KRepeat, or by each item
	// of a KForEachLimit.
	Subs []*Node

	Body  *Node // KSync: the critical section step
	Mutex int   // KSync: index into Program.Mutexes; ThrottleGate, LimiterGate: the Program's Throttle, Limiter; KeyedGate+k: key k of its KeyedMutex

	Handler *Handler // KStep, KParallel, KSync's Body, KForEachLimit

	Retry *RetrySpec // KRetry

	Await AwaitKind // KAwait

	// AwaitChan, AwaitResult: the channel is closed instead of sent to
	// (Closed), nil (NilChan), or given its value or closed as the step
	// is added (Ready) rather than At ms later.
	Closed, NilChan, Ready bool

	Fail FailKind // EFail, EExternalFail: Code and Info are FailCode and FailInfo of it
}

// Handler is an error handler.
type Handler struct {
	ID     int
	Action Action
	Args   []int   // HRecover
	Code   string  // HRethrow, HFail
	Info   string  // HRethrow, HFail
	Steps  []*Node // HAdd

	// HWait: SetTimeout(Timeout ms) if > 0, else WaitExternal; then, At
	// ms later, Done: EExternal is Success(Args...), EExternalErr is
	// Error(Code, Info), EWait is nothing.
	Timeout int
	Done    End
	At      int

	// HAdd: SetCancel (tracing HandlerCancelEvent(ID)) before the Add
	// calls; and SetTimeout(Timeout ms), when Timeout > 0, before that.
	Cancel bool

	Fail FailKind // HFail: Code and Info are FailCode and FailInfo of it
}

// ThrottleGate is the Mutex index of a KSync on the program's Throttle.
const ThrottleGate = 2

// LimiterGate is the Mutex index of a KSync on the program's Limiter.
const LimiterGate = 3

// KeyedGate is the Mutex index of a KSync on key 0 of the program's
// KeyedMutex; KeyedGate+k is the one on key k, k < KeyedKeys. Each key
// behaves as a Mutex of the KeyedMutex's Max and MaxQueue of its own.
const KeyedGate = 4

// KeyedKeys is how many keys the KSync nodes on the KeyedMutex share.
const KeyedKeys = 3

// Keyed is NewKeyedMutex[int](Max, MaxQueue): MaxQueue < 0 is no limit.
type Keyed struct {
	Max, MaxQueue int
}

// IsKeyed reports whether the gate (a KSync's Mutex) is a key of the
// KeyedMutex.
func IsKeyed(gate int) bool { return gate >= KeyedGate }

// Limiter is NewLimiter(LimiterOptions{...}) with these fields, Period in
// ms: a zero Concurrent or Rate leaves that gate out; a MaxQueue or Burst
// of 0 lets none wait, < 0 any number.
type Limiter struct {
	Concurrent, MaxQueue, Rate, Period, Burst int
}

// Throttle is NewThrottle(N, Period ms, Queue): Queue < 0 is no limit.
type Throttle struct {
	N, Period, Queue int
}

// PanicValue is the value a step or handler with the given ID panics with.
func PanicValue(id int) string { return fmt.Sprintf("p%d", id) }

// HasTimeout reports whether the step calls SetTimeout.
func (n *Node) HasTimeout() bool { return n.Timeout > 0 || n.ZeroTimeout }

// CancelPanicValue is the value the cancel handler of the step with the
// given ID panics with.
func CancelPanicValue(id int) string { return fmt.Sprintf("cp%d", id) }

// MapKey is the key of element i of a KForEach map: the sorted order of the
// keys is the reverse of i.
func MapKey(i int) string { return string(rune('d' - i)) }

// ElemValue is the value of element i of a KForEach collection.
func ElemValue(id, i int) int { return id*10 + i }

// Program is a flow: the level-0 steps of a root, the Mutexes its Sync
// nodes share, and the virtual time at which the root is cancelled.
type Program struct {
	Steps       []*Node
	Mutexes     []int     // the max of each Mutex
	MutexQueues []int     // the maxQueue of each Mutex; < 0 (or missing): no limit
	Throttle    *Throttle // shared by the KSync nodes on ThrottleGate
	Limiter     *Limiter  // shared by the KSync nodes on LimiterGate
	Keyed       *Keyed    // shared by the KSync nodes on KeyedGate+k
	CancelAt    int       // ms; SafetyCancel if the program has none
	// CancelFrom is the ID of the KStep whose callback (or, with
	// CancelInCancel, its cancel handler) or of the Handler that calls
	// Root.Cancel right after its event, each time it runs; 0 for none.
	CancelFrom     int
	CancelInCancel bool

	// Ctx is how the Root runs; CtxAt when its ctx ends (CtxCancel,
	// CtxDeadline). Run drives the tool on its own goroutine, which a
	// runtime.Goexit would end: no callback of a program run by Run calls
	// it. Past Run's deadline a step that waits is timed out by a task the
	// flow queues, which a Mutex's or a Throttle's admission queued first
	// would outrun: programs with a deadline have no Sync.
	Ctx   CtxMode
	CtxAt int
	// Helping: RunHelping(ctx) instead of Run(ctx), which it is on a
	// TestTool (docs/DESIGN.md#await).
	Helping bool
	// Ext: the program has the extensions (Ctx, KAwait, Handler.Timeout
	// and Cancel for HAdd), which older inputs do not.
	Ext bool
	// Awaits: the program has KAwait nodes, whose functions run on
	// goroutines: the fuzz test runs them in a testing/synctest bubble,
	// and waits between the tool's events for them, which Run, driving
	// the tool itself, does not. So in a program run by Run, where no
	// goroutine may complete a step, only a cancel ends an Await,
	// AwaitThen or AwaitFlow, an AwaitChan or AwaitResult has its value
	// waiting (Ready) or none, and none is inside a section of a Mutex or
	// Limiter, or an item of a ForEachLimit, whose slot its function
	// would give back as it returns.
	Awaits bool
	// Hooks: the tool has every hook of a TestTool, which trace their
	// calls (StepErrorEvent and the others; AwaitStart and AwaitEnd in
	// Result.AwaitHooks).
	Hooks bool
}

// SyncWaitPanics reports whether the SyncWait hook of p panics, with
// SyncWaitPanicValue(gate), for a flow let into the gate: with hooks, it
// does for Mutex 1 when its max is 2, where flows wait behind two others.
func (p *Program) SyncWaitPanics(gate int) bool {
	return p.Hooks && gate == 1 && len(p.Mutexes) > 1 && p.Mutexes[1] == 2
}

// FlowStartPanics reports whether the FlowStart hook of p panics, with
// FlowStartPanicValue(k), for the k-th flow to begin in a run (see
// FlowStartEvent): with hooks, it does for the even ones of the AwaitFlow
// steps of a Promise program (under Run no goroutine may bring the failed
// flow's Result in: see Program.Awaits).
func (p *Program) FlowStartPanics(k int) bool {
	return p.Hooks && p.Ctx == CtxNone && k > 0 && k%2 == 0
}

// FlowStartPanicValue is the value the FlowStart hook panics with for the
// k-th flow.
func FlowStartPanicValue(k int) string { return fmt.Sprintf("fs%d", k) }

// AwaitEndPanics reports whether the AwaitEnd hook of p panics, with
// AwaitEndPanicValue(id), after the Await function of the KAwait id
// succeeded: with hooks, it does for the IDs that are multiples of 3.
func (p *Program) AwaitEndPanics(id int) bool { return p.Hooks && id%3 == 0 }

// AwaitEndPanicValue is the value the AwaitEnd hook panics with after the
// function of the KAwait id.
func AwaitEndPanicValue(id int) string { return fmt.Sprintf("ae%d", id) }

// SyncWaitPanicValue is the value the SyncWait hook panics with for a flow
// let into the gate.
func SyncWaitPanicValue(gate int) string { return fmt.Sprintf("sw%d", gate) }

// MutexQueue is the maxQueue of Mutex i, < 0 for none.
func (p *Program) MutexQueue(i int) int {
	if i < len(p.MutexQueues) {
		return p.MutexQueues[i]
	}
	return -1
}

// SafetyCancel is when a program without a root cancel of its own is
// cancelled, so that a program whose steps wait forever still ends.
const SafetyCancel = 100000

// Limits of decoded programs: they keep every run short and finite.
const (
	maxDepth = 4
	maxNodes = 40
)

// decoder reads fuzz bytes; past the end it reads zeros, so every input is
// a valid program.
type decoder struct {
	data  []byte
	nodes int
	ids   int
	p     *Program
	ext   bool // the program has the extensions (Decode's m&0x80)
}

// run reports whether the program runs by Run: no Goexit (see Program.Ctx).
func (d *decoder) run() bool { return d.p.Ctx != CtxNone }

// awaits reports whether KAwait nodes may be decoded where sc says: in a
// program run by Run, outside of the sections of Mutexes and Limiters and
// of the items of a ForEachLimit, whose slots an Await function holds
// until it returns (see Program.Awaits).
func (d *decoder) awaits(sc scope) bool {
	return d.ext && (d.p.Ctx == CtxNone || sc.held == 0 && sc.forbidden == 0 && !sc.item)
}

func (d *decoder) byte() int {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return int(b)
}

func (d *decoder) id() int {
	d.ids++
	return d.ids
}

// scope is what the decoder knows about where a node is: unless a bit of
// the Sync says otherwise, Sync restrictions keep programs free of the
// deadlocks the Mutex reports (docs/DESIGN.md#locks-and-limits), which
// the model finds as the Mutex does, so that the fuzzer need not make
// them all the time.
type scope struct {
	depth     int
	underStep bool // the node is a sub-step added by a plain step's callback
	held      uint // mutexes the current flow or branch holds (bit LimiterGate: the Limiter's; KeyedGate+k: key k's)
	forbidden uint // mutexes held by a flow this branch runs inside of
	// item: the node is inside an item of a KForEachLimit, whose slot an
	// Await function holds until it returns, as a section's (see
	// Program.Awaits).
	item bool
}

func (s scope) deeper() scope { s.depth++; s.underStep = false; return s }

// Decode turns fuzz bytes into a program. Every input decodes; programs are
// finite and bounded (depth, node count, loop iterations).
func Decode(data []byte) *Program {
	p := &Program{}
	d := &decoder{data: data, p: p}
	if c := d.byte(); c != 0 {
		p.CancelAt = (c % 50) * 5
	} else {
		p.CancelAt = SafetyCancel
	}
	m := d.byte()
	p.Mutexes = []int{1 + m&1, 1 + (m>>1)&1}
	// Queue limits: 0 is none, v is v-1.
	p.MutexQueues = []int{(m>>2)&3 - 1, (m>>4)&3 - 1}
	if m&0x40 != 0 {
		c := d.byte()
		p.CancelFrom = 1 + c%maxNodes
		p.CancelInCancel = c/maxNodes&1 != 0
	}
	if m&0x80 != 0 {
		// The extensions: Run and its ctx, Await, handlers that add steps
		// under a timeout or a cancel handler of their own.
		d.ext, p.Ext = true, true
		x := d.byte()
		p.Ctx = CtxMode(x & 3)
		p.Helping = p.Ctx != CtxNone && x&4 != 0
		if p.Ctx >= CtxCancel {
			p.CtxAt = x >> 3 & 15 * 5
		}
		p.Hooks = x&0x80 != 0
	}
	n := d.byte() % 5
	for range n {
		p.Steps = append(p.Steps, d.node(scope{}, false))
	}
	return p
}

func labelOf(b int) string { return [...]string{"", "A", "B", ""}[b&3] }

func codeOf(b int) string { return fmt.Sprintf("E%d", b&3%3) }

func (d *decoder) args(id int) []int {
	n := d.byte() % 3
	a := make([]int, n)
	for i := range a {
		a[i] = id*10 + i
	}
	return a
}

// node decodes one node; inBranch restricts the kinds to what the value
// returned by Parallel accepts.
func (d *decoder) node(sc scope, inBranch bool) *Node {
	d.nodes++
	n := &Node{ID: d.id()}
	k := Kind(d.byte() % int(numKinds))
	if sc.depth >= maxDepth || d.nodes >= maxNodes {
		k = KStep
	}
	if inBranch && (k == KParallel || k == KSuccessStep) {
		k = KStep
	}
	if k == KSync && d.p.Ctx == CtxDeadline {
		k = KStep // see Program.Ctx
	}
	n.Kind = k
	switch k {
	case KStep:
		d.step(n, sc, d.awaits(sc))
	case KParallel:
		b := d.byte()
		branches := b & 3
		inner := sc.deeper()
		inner.forbidden |= inner.held
		inner.held = 0
		if b&0xc0 == 0xc0 {
			// Bits 64 and 128 together, which no earlier input of the
			// corpus sets: a ForEachLimit.
			return d.limit(n, b, sc, inner)
		}
		if b&0xc0 == 0x80 {
			// Bit 128 without bit 64, which no earlier input of the
			// corpus sets: a First or Quorum.
			return d.race(n, b, inner)
		}
		// Settle's branches add their nodes from steps of their own: any
		// kind. It takes no error handler. Bit 8, like those that make
		// EFail and HFail, is one no earlier input of the corpus sets.
		settle := b&8 != 0
		if settle {
			n.Kind = KSettle
		}
		for range branches {
			n.Subs = append(n.Subs, d.node(inner, !settle))
		}
		if b&4 != 0 && !settle {
			n.Handler = d.handler(sc)
		}
	case KLoop, KRepeat:
		b := d.byte()
		n.Label = labelOf(b)
		n.Count = (b >> 2) % 4
		if k == KLoop && b&0xc0 != 0 {
			n.Kind = KRetry
			n.Count++ // attempts: 1 to 4
			d.retry(n)
		}
		if k == KRepeat && b&0xc0 != 0 {
			n.Kind = KForEach
			n.Map = b&0x80 != 0
			c := d.byte()
			n.End = [...]End{EImplicit, EBreak, EContinue, EImplicit}[c&3]
			n.At = (c >> 2) % 4
			n.Seq = !n.Map && c&16 != 0
			// End 3, an EImplicit as 0 is, which no earlier input of the
			// corpus gives a sequence: the sequence panics, or (bit 32)
			// calls runtime.Goexit.
			if n.Seq && c&3 == 3 {
				n.SeqPanic = true
				d.seqExits(n, c&32 != 0)
			}
		}
		for range (b >> 4) & 3 % 3 {
			n.Subs = append(n.Subs, d.node(sc.deeper(), false))
		}
	case KSync:
		b := d.byte()
		if b&6 == 6 {
			return d.limited(n, sc, b&8 != 0)
		}
		if b&2 == 0 && b&0xc0 == 0xc0 {
			// Bits 64 and 128 together, which no earlier input of the
			// corpus sets: the KeyedMutex.
			return d.keyed(n, sc, b)
		}
		if b&2 != 0 {
			// The Throttle: never held, no deadlock to avoid.
			if d.p.Throttle == nil {
				t := d.byte()
				d.p.Throttle = &Throttle{N: 1 + t&1, Period: (1 + (t>>1)%4) * 10, Queue: (t>>3)&3 - 1}
			}
			n.Mutex = ThrottleGate
			body := &Node{ID: d.id(), Kind: KStep}
			d.step(body, sc.deeper(), false)
			n.Body = body
			return n
		}
		m := b & 1
		deadlocks := b&4 != 0 // the model finds the deadlocks the Mutex reports
		if sc.forbidden&(1<<m) != 0 && !deadlocks {
			m = 1 - m
		}
		body := &Node{ID: d.id(), Kind: KStep}
		if sc.forbidden&(1<<m) != 0 && !deadlocks {
			// Both Mutexes are held by an outer flow: a plain step.
			n.Kind = KStep
			d.step(n, sc, false)
			return n
		}
		n.Mutex = m
		inner := sc.deeper()
		inner.held |= 1 << m
		d.step(body, inner, false)
		n.Body = body
	case KSuccessStep:
		n.Args = d.args(n.ID)
	}
	return n
}

// race decodes the KRace n from the byte b of its KParallel: 1+b&3
// branches, of any kind, as a Settle's, in the scope inner; with b&4 a
// First, else a Quorum whose k is read from the next byte.
func (d *decoder) race(n *Node, b int, inner scope) *Node {
	n.Kind = KRace
	branches := 1 + b&3
	if b&4 == 0 {
		n.Need = 1 + d.byte()%branches
	}
	for range branches {
		n.Subs = append(n.Subs, d.node(inner, false))
	}
	return n
}

// limit decodes the KForEachLimit n from the byte b of its KParallel: b&3
// nodes in its items, b&4 an error handler; then a byte for the limit
// (c&3) and the pairs ((c>>2)%9), and one for the item that breaks,
// continues or ends at once (e&3), which (e>>2)%8, the label (e>>5) and
// whether the sequence panics (e&128).
// Its items are branches: inner is their scope, sc the step's.
func (d *decoder) limit(n *Node, b int, sc, inner scope) *Node {
	n.Kind = KForEachLimit
	c, e := d.byte(), d.byte()
	n.Limit, n.Count = 1+c&3, (c>>2)%9
	n.End = [...]End{EImplicit, EBreak, EContinue, ESuccess}[e&3]
	n.At, n.Label, n.SeqPanic = (e>>2)%8, labelOf(e>>5), e&0x80 != 0
	// Label 3, "" as 0 is, which no earlier input of the corpus gives a
	// sequence that panics: it calls runtime.Goexit instead.
	d.seqExits(n, n.SeqPanic && (e>>5)&3 == 3)
	inner.item = true
	for range b & 3 {
		n.Subs = append(n.Subs, d.node(inner, false))
	}
	if b&4 != 0 {
		n.Handler = d.handler(sc)
	}
	return n
}

// seqExits makes the panic of n's sequence a runtime.Goexit if exits says
// so, where the program may call it (see Program.Ctx).
func (d *decoder) seqExits(n *Node, exits bool) {
	if exits && n.SeqPanic && !d.run() {
		n.SeqPanic, n.SeqGoexit = false, true
	}
}

// keyed decodes a KSync on the key (b>>3)&3%3 of the program's
// KeyedMutex, from its byte b: b&4 lets it deadlock, as for a Mutex; else
// where a flow outside holds that key, another key, or a plain step where
// it holds them all (see scope). The first one reads the KeyedMutex's
// max (1+t&1) and queue limit ((t>>1)&3-1).
func (d *decoder) keyed(n *Node, sc scope, b int) *Node {
	if d.p.Keyed == nil {
		t := d.byte()
		d.p.Keyed = &Keyed{Max: 1 + t&1, MaxQueue: (t>>1)&3 - 1}
	}
	key := (b >> 3) & 3 % KeyedKeys
	if b&4 == 0 {
		for i := 0; i < KeyedKeys && sc.forbidden&(1<<(KeyedGate+key)) != 0; i++ {
			key = (key + 1) % KeyedKeys
		}
		if sc.forbidden&(1<<(KeyedGate+key)) != 0 {
			n.Kind = KStep
			d.step(n, sc, false)
			return n
		}
	}
	n.Mutex = KeyedGate + key
	inner := sc.deeper()
	inner.held |= 1 << n.Mutex
	body := &Node{ID: d.id(), Kind: KStep}
	d.step(body, inner, false)
	n.Body = body
	return n
}

// retry decodes a KRetry's RetrySpec and Args.
func (d *decoder) retry(n *Node) {
	r, t := d.byte(), d.byte()
	rs := &RetrySpec{
		FailUntil: (r >> 3) & 3,
		Fail:      [...]End{EError, EError, EWait, EPanic, EBreak, EContinue, EError, EError}[r&7],
		Retryable: r&0x80 != 0,
		Backoff:   ((t & 3) - 1) * 10,
		Delay:     t&0x80 != 0 && t&3 != 0,
		Timeout:   (t >> 2) & 7 % 6 * 10,
	}
	switch rs.Fail {
	case EError:
		rs.Code = RetryCodes[(r>>5)&3]
	case EBreak, EContinue:
		rs.Label = labelOf(r >> 5)
	}
	if rs.Backoff < 0 {
		rs.Backoff = -1
	}
	n.Retry = rs
	n.Args = make([]int, (t>>5)&3%3)
	for i := range n.Args {
		n.Args[i] = n.ID*10 + i
	}
}

// limited decodes a KSync on the program's Limiter, or a plain step where
// a flow outside holds the Limiter's Mutex (a deadlock, see scope).
func (d *decoder) limited(n *Node, sc scope, deadlocks bool) *Node {
	if d.p.Limiter == nil {
		l, t := d.byte(), d.byte()
		d.p.Limiter = &Limiter{
			Concurrent: l & 3, MaxQueue: (l>>2)&3 - 1,
			Rate: (l >> 4) & 3, Burst: (l>>6)&3 - 1,
			Period: (1 + t%4) * 10,
		}
	}
	if sc.forbidden&(1<<LimiterGate) != 0 && !deadlocks {
		n.Kind = KStep
		d.step(n, sc, false)
		return n
	}
	n.Mutex = LimiterGate
	inner := sc.deeper()
	inner.held |= 1 << LimiterGate
	body := &Node{ID: d.id(), Kind: KStep}
	d.step(body, inner, false)
	n.Body = body
	return n
}

func (d *decoder) step(n *Node, sc scope, awaitable bool) {
	f := d.byte()
	exits := false // the cancel handler's panic is a Goexit (CancelGoexit)
	if f&1 != 0 {
		t := d.byte()
		n.Timeout = (1 + t&7%6) * 10
		if t&7 == 7 {
			n.Timeout, n.ZeroTimeout = 0, true
		}
		if t&8 != 0 {
			n.Timeout2 = (1 + (t>>4)&7%6) * 10
		}
		n.CancelPanic = t&0x80 != 0
		// Bit 64 without a second timeout (bit 8), which no earlier
		// input of the corpus sets with bit 128: the panic is a Goexit.
		exits = t&0xc8 == 0xc0
	}
	n.Cancel = f&2 != 0
	defer func() {
		n.CancelPanic = n.CancelPanic && n.Cancel
		if exits && n.CancelPanic && !d.run() {
			n.CancelPanic, n.CancelGoexit = false, true
		}
	}()
	hasHandler := f&4 != 0
	subs := (f >> 3) % 4
	n.End = End((f >> 5) % int(numEnds))
	switch n.End {
	case ESuccess:
		n.Args = d.args(n.ID)
	case EError, EExternalErr:
		b := d.byte()
		n.Code = codeOf(b)
		if b&4 != 0 {
			n.Info = fmt.Sprintf("i%d", n.ID)
		}
		if n.End == EExternalErr {
			n.At = (b >> 3) % 6 * 10
			break
		}
		n.CancelPanic = n.CancelPanic || b&0x80 != 0
		exits = exits || b&0xc0 == 0xc0 // bit 64 is unused here
		if b&8 != 0 {
			n.End, n.Code, n.Info = EPanic, "", ""
			switch {
			case b&16 != 0 && !d.run():
				n.End = EGoexit
			case b&32 != 0:
				n.End = EPanicEvil
			}
		} else if b&16 != 0 {
			d.fail(n, codeOf(b))
		}
	case EBreak, EContinue:
		b := d.byte()
		n.Label = labelOf(b)
		n.CancelPanic = n.CancelPanic || b&0x80 != 0
		exits = exits || b&0xc0 == 0xc0 // bit 64 is unused here
		if b&4 != 0 && sc.underStep {
			if n.End == EBreak {
				n.End, n.Label = EParent, ""
			} else {
				n.End = EParentBreak
			}
		}
	case EExternal:
		b := d.byte()
		n.At = (b & 7) % 6 * 10
		n.Args = make([]int, (b>>3)%3)
		for i := range n.Args {
			n.Args[i] = n.ID*10 + i
		}
	}
	if awaitable && (n.End == EExternal || n.End == EExternalErr || n.End == EWait) && d.await(n) {
		if hasHandler {
			n.Handler = d.handler(sc)
		}
		return
	}
	if sc.depth < maxDepth {
		inner := sc.deeper()
		inner.underStep = true
		for range subs {
			if d.nodes >= maxNodes {
				break
			}
			n.Subs = append(n.Subs, d.node(inner, false))
		}
	}
	if hasHandler {
		n.Handler = d.handler(sc)
	}
}

// fail makes n an EFail or, as the next byte says, an EExternalFail, of
// the Go error that byte says, code being that of a FailCoded.
func (d *decoder) fail(n *Node, code string) {
	f := d.byte()
	n.Fail, n.End = FailKind(f&3), EFail
	if f&4 != 0 {
		n.End, n.At = EExternalFail, (f>>3)%6*10
	}
	n.Code, n.Info = FailCode(n.Fail, code), FailInfo(n.Fail, n.ID)
}

// await makes n, a step that waits, a KAwait if the next byte says so.
func (d *decoder) await(n *Node) bool {
	a := d.byte()
	if a&3 == 0 {
		return false
	}
	d.p.Awaits = true
	n.Kind, n.Await = KAwait, AwaitKind(a&3-1)
	n.Timeout, n.ZeroTimeout, n.Timeout2, n.Cancel, n.CancelPanic = 0, false, 0, false, false
	if n.End == EWait {
		n.At = 0
	}
	if d.run() {
		defer d.runnable(n)
	}
	if n.Await == AwaitFlow && a&12 != 0 {
		d.channel(n, a)
		return true
	}
	if n.Await != AwaitFlow {
		n.Args = nil
		switch {
		case n.End == EExternal:
			n.Args = []int{AwaitValue(n.ID)}
		case n.End != EExternalErr:
		case a&12 == 4:
			n.Code, n.Info = "Timeout", ""
		case a&12 == 8:
			n.End, n.Code, n.Info = EPanic, "", ""
		case a&12 == 12:
			n.End, n.Code, n.Info = EGoexit, "", ""
		}
	}
	if n.End == EExternal || n.End == EExternalErr {
		n.At = (a >> 4) % 6 * 10
	}
	return true
}

// runnable makes the KAwait n of a program run by Run one that no
// goroutine completes (see Program.Awaits).
func (d *decoder) runnable(n *Node) {
	switch {
	case n.Await == AwaitChan || n.Await == AwaitResult:
		n.Ready = n.Ready || !n.NilChan && n.End != EWait
		n.At = 0
	case n.End != EWait:
		n.End, n.Code, n.Info, n.Args, n.At = EWait, "", "", nil, 0
	}
}

// channel makes the KAwait n an AwaitChan (a&12 == 4) or an AwaitResult,
// as the next byte v says: v&64 a nil channel, v&32 one nothing is sent
// to; else v&128 Ready, and v&3 what comes: a value (0; AwaitResult:
// (v>>2)%3 args), an error (1; AwaitChan: a value), a Go error (2:
// v&16 context.Canceled, else context.DeadlineExceeded; AwaitChan: a
// value) or a closed channel (3).
func (d *decoder) channel(n *Node, a int) {
	v := d.byte()
	n.Await = AwaitChan
	if a&12 != 4 {
		n.Await = AwaitResult
	}
	result := n.Await == AwaitResult
	n.Code, n.Info, n.Args, n.At = "", "", nil, (a>>4)%6*10
	switch {
	case v&64 != 0:
		n.End, n.NilChan, n.At = EWait, true, 0
		return
	case v&32 != 0:
		n.End, n.At = EWait, 0
		return
	}
	n.Ready = v&128 != 0
	n.End = EExternal
	switch {
	case v&3 == 3:
		n.Closed = true
		if !result {
			n.Args = []int{0} // the zero value
		}
	case !result:
		n.Args = []int{ChanValue(n.ID)}
	case v&3 == 0:
		n.Args = make([]int, (v>>2)%3)
		for i := range n.Args {
			n.Args[i] = n.ID*10 + i
		}
	case v&3 == 1:
		n.End, n.Code = EExternalErr, codeOf(v>>2)
		if v&16 != 0 {
			n.Info = fmt.Sprintf("i%d", n.ID)
		}
	case v&16 != 0:
		n.End, n.Code, n.Info = EExternalErr, "InternalError", CanceledInfo
	default:
		n.End, n.Code, n.Info = EExternalErr, "Timeout", AwaitTimeoutInfo
	}
}

func (d *decoder) handler(sc scope) *Handler {
	b := d.byte()
	h := &Handler{ID: d.id(), Action: Action(b & 3)}
	if b&32 != 0 {
		h.Action = HPanic
		if b&64 == 0 && b&128 != 0 && !d.run() {
			h.Action = HGoexit
		}
		if b&64 != 0 {
			h.Action = HWait
			e := d.byte()
			h.Done = [...]End{EExternal, EExternalErr, EWait, EExternal}[e&3]
			h.At = (e >> 2) & 7 % 6 * 10
			switch h.Done {
			case EExternal:
				h.Args = make([]int, (e>>6)%3)
				for i := range h.Args {
					h.Args[i] = h.ID*10 + i
				}
			case EExternalErr:
				h.Code = codeOf(e >> 6)
				h.Info = fmt.Sprintf("i%d", h.ID)
			}
			if e&32 != 0 {
				h.Timeout = (1 + d.byte()%6) * 10
			}
		}
		return h
	}
	if b&128 != 0 {
		h.Action, h.Fail = HFail, FailKind(d.byte()&3)
		h.Code, h.Info = FailCode(h.Fail, codeOf(b>>2)), FailInfo(h.Fail, h.ID)
		return h
	}
	switch h.Action {
	case HRecover:
		h.Args = d.args(h.ID)
	case HRethrow:
		h.Code = codeOf(b >> 2)
		if b&16 != 0 {
			h.Info = fmt.Sprintf("i%d", h.ID)
		}
	case HAdd:
		if sc.depth >= maxDepth || d.nodes >= maxNodes {
			// Steps added by a handler are nodes like any other: without
			// this, a chain of handlers adding steps that fail into handlers
			// adding steps grew with the input, past every bound.
			h.Action = HReturn
			break
		}
		if d.ext {
			if b&8 != 0 {
				h.Timeout = (1 + d.byte()%6) * 10
			}
			h.Cancel = b&16 != 0
		}
		for range 1 + (b>>2)%2 {
			h.Steps = append(h.Steps, d.node(sc.deeper(), false))
		}
	}
	return h
}

// String prints the program as an indented tree, for failure reports.
func (p *Program) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program (mutexes %v, queues %v, throttle %+v, limiter %+v, root cancel at %dms and from %d, in its cancel handler %v, ctx %d at %dms, helping %v, hooks %v)\n", p.Mutexes, p.MutexQueues, p.Throttle, p.Limiter, p.CancelAt, p.CancelFrom, p.CancelInCancel, p.Ctx, p.CtxAt, p.Helping, p.Hooks)
	for _, n := range p.Steps {
		n.write(&b, 1)
	}
	return b.String()
}

func (n *Node) write(b *strings.Builder, depth int) {
	ind := strings.Repeat("  ", depth)
	switch n.Kind {
	case KStep:
		fmt.Fprintf(b, "%sstep %d%s\n", ind, n.ID, n.describe())
	case KParallel:
		fmt.Fprintf(b, "%sparallel %d\n", ind, n.ID)
	case KSettle:
		fmt.Fprintf(b, "%ssettle %d\n", ind, n.ID)
	case KRace:
		fmt.Fprintf(b, "%srace %d need=%d (0: First)\n", ind, n.ID, n.Need)
	case KLoop:
		fmt.Fprintf(b, "%sloop %d label=%q breaks at %d\n", ind, n.ID, n.Label, n.Count)
	case KRepeat:
		fmt.Fprintf(b, "%srepeat %d label=%q count=%d\n", ind, n.ID, n.Label, n.Count)
	case KRetry:
		fmt.Fprintf(b, "%sretry %d label=%q attempts=%d args=%v %+v\n", ind, n.ID, n.Label, n.Count, n.Args, *n.Retry)
	case KForEach:
		fmt.Fprintf(b, "%sforEach %d label=%q map=%v seq=%v len=%d at %d: %v%s\n", ind, n.ID, n.Label, n.Map, n.Seq, n.Count, n.At, n.End, n.seqFault())
	case KForEachLimit:
		fmt.Fprintf(b, "%sforEachLimit %d limit=%d len=%d at %d: %v label=%q panics=%v%s\n", ind, n.ID, n.Limit, n.Count, n.At, n.End, n.Label, n.SeqPanic, n.seqFault())
	case KSync:
		fmt.Fprintf(b, "%ssync %d mutex=%d (2: the throttle, 3: the limiter)\n", ind, n.ID, n.Mutex)
		n.Body.write(b, depth+1)
	case KSuccessStep:
		fmt.Fprintf(b, "%ssuccessStep %d %v\n", ind, n.ID, n.Args)
	case KAwait:
		fmt.Fprintf(b, "%sawait %d %s%s\n", ind, n.ID, [...]string{"fn", "flow", "then", "chan", "result"}[n.Await], n.describe())
	}
	for _, s := range n.Subs {
		s.write(b, depth+1)
	}
	if h := n.Handler; h != nil {
		fmt.Fprintf(b, "%s  onerror %d: %s\n", ind, h.ID, h.describe())
		for _, s := range h.Steps {
			s.write(b, depth+2)
		}
	}
}

// seqFault describes how the sequence of a KForEach ends, if not by
// running out, and a KForEachLimit's Goexit (its panic is printed apart).
func (n *Node) seqFault() string {
	switch {
	case n.SeqGoexit:
		return " (sequence goexits)"
	case n.SeqPanic && n.Kind == KForEach:
		return " (sequence panics)"
	}
	return ""
}

func (n *Node) describe() string {
	var s []string
	if n.HasTimeout() {
		s = append(s, fmt.Sprintf("timeout=%d", n.Timeout))
	}
	if n.Timeout2 > 0 {
		s = append(s, fmt.Sprintf("rearm=%d", n.Timeout2))
	}
	if n.Cancel {
		s = append(s, "cancel")
	}
	if n.CancelPanic {
		s = append(s, "(panics)")
	}
	if n.CancelGoexit {
		s = append(s, "(goexits)")
	}
	if n.NilChan {
		s = append(s, "nil channel")
	}
	if n.Ready {
		s = append(s, "ready")
	}
	if n.Closed {
		s = append(s, "closed")
	}
	switch n.End {
	case EImplicit:
		s = append(s, "implicit")
	case ESuccess:
		s = append(s, fmt.Sprintf("success%v", n.Args))
	case EError:
		s = append(s, fmt.Sprintf("error(%s,%q)", n.Code, n.Info))
	case EBreak:
		s = append(s, fmt.Sprintf("break(%q)", n.Label))
	case EContinue:
		s = append(s, fmt.Sprintf("continue(%q)", n.Label))
	case EExternal:
		s = append(s, fmt.Sprintf("external success%v at +%d", n.Args, n.At))
	case EExternalErr:
		s = append(s, fmt.Sprintf("external error(%s,%q) at +%d", n.Code, n.Info, n.At))
	case EWait:
		s = append(s, "wait")
	case EPanic:
		s = append(s, "panic")
	case EGoexit:
		s = append(s, "goexit")
	case EPanicEvil:
		s = append(s, "panic(unprintable)")
	case EParent:
		s = append(s, "success on the parent")
	case EParentBreak:
		s = append(s, fmt.Sprintf("break(%s) on the parent", n.Label))
	case EFail:
		s = append(s, fmt.Sprintf("fail(%s,%q)", n.Code, n.Info))
	case EExternalFail:
		s = append(s, fmt.Sprintf("external fail(%s,%q) at +%d", n.Code, n.Info, n.At))
	}
	return ": " + strings.Join(s, " ")
}

func (h *Handler) describe() string {
	switch h.Action {
	case HRecover:
		return fmt.Sprintf("recover%v", h.Args)
	case HRethrow:
		return fmt.Sprintf("rethrow(%s,%q)", h.Code, h.Info)
	case HAdd:
		return fmt.Sprintf("add steps, timeout=%d cancel=%v", h.Timeout, h.Cancel)
	case HPanic:
		return "panic"
	case HGoexit:
		return "goexit"
	case HFail:
		return fmt.Sprintf("fail(%s,%q)", h.Code, h.Info)
	case HWait:
		w := fmt.Sprintf("wait external, timeout=%d", h.Timeout)
		switch h.Done {
		case EExternal:
			w += fmt.Sprintf(", success%v at +%d", h.Args, h.At)
		case EExternalErr:
			w += fmt.Sprintf(", error(%s,%q) at +%d", h.Code, h.Info, h.At)
		}
		return w
	}
	return "return"
}
