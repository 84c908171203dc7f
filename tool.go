package asyncsteps

import (
	"context"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/printsafe"
)

// Tool is the event loop a flow runs on (the spec's AsyncTool). Every callback
// of a flow runs from a Tool callback, one at a time.
//
// The library provides two: [Loop], a real loop on its own goroutine, and
// [TestTool], a deterministic loop on virtual time driven by a test.
//
// The engine calls Immediate, Deferred, IsSameThread and the methods of the
// returned Handles from any goroutine (a step completed from another
// goroutine, [Root.Cancel], a shared [Mutex] admitting a waiter), so an
// implementation must make them safe for concurrent use; the callbacks it
// runs must run one at a time, each once. A nil Handle is a callback that
// cannot be cancelled: a step timeout armed with it still runs when due,
// and finds its step gone. A panic of Immediate called to hand the tool a
// completion from another goroutine (an Await function's result, a
// Success from outside, a Mutex slot given back on another loop) is
// logged with [log/slog] and the completion is lost, so that a stopped
// tool does not end the process: its flows wait for good. Execute, Run,
// Promise and Root.Cancel let such a panic reach their caller; a start
// whose Immediate panics is then undone, unless the tool began the flow
// before the panic (ran the task, inside Immediate or on its goroutine):
// the Root is not running, keeps its steps, may be started again, and a
// task the tool queued before panicking begins nothing. Likewise a
// panic of Deferred timing a [Throttle]'s period is logged, and the period
// ends at once; one arming a step's timeout fails that step.
type Tool interface {
	// Immediate schedules f to run on the loop soon, after the callbacks
	// already scheduled with Immediate (first in, first out).
	Immediate(f func()) Handle
	// Deferred schedules f to run on the loop once d has passed on the
	// loop's clock (Now); d <= 0 makes it due at once.
	Deferred(d time.Duration, f func()) Handle
	IsSameThread() bool // true when called on the loop's own goroutine
	Now() time.Time     // the loop's clock (virtual in TestTool)
}

// Handle refers to a callback scheduled on a [Tool].
type Handle interface {
	Cancel()       // no error if it already ran or was cancelled
	IsValid() bool // still scheduled
}

// task is a unit of work queued on a loop without an allocation: flows queue
// their own records.
type task interface{ run() }

// staleTask is a task that another goroutine queues for a flow and that
// may have lost its purpose by the time it is queued: the flow's end, on
// the driving goroutine, dropped the flow's queued continuations just
// before. A tool that counts its queued tasks (TestTool's Pending) asks
// stale under its lock and drops such a task rather than count it.
type staleTask interface {
	task
	stale() bool
}

// scheduler is what the engine needs beyond Tool from the loops of this
// package: the engine reaches [Loop] and [TestTool] only through it, and a
// Tool of another package through foreignTool. Unless a method says it is
// safe from any goroutine, it is called only on the loop's goroutine, from
// inside a callback the loop is running.
type scheduler interface {
	Tool
	// post queues t behind every task already queued, without a lock.
	post(t task)
	// busy reports whether another task is queued, i.e. whether a flow that
	// could go on should yield for fairness.
	busy() bool
	// inject queues t behind every task already queued, from any goroutine.
	inject(t task)
	// startFlow queues the first task of a flow like inject.
	startFlow(fl *flow)
	// pools is the engine state that the flows on the loop share; only
	// the loop's goroutine uses it.
	pools() *enginePools
	// deferTask arms a step's timeout, on the loop's goroutine: the engine's
	// timers need no closure. It returns nil on a closed loop.
	deferTask(d time.Duration, t task) *timerEntry
	// tool is the Tool the user gave.
	tool() Tool
	// lifetime is cancelled when the tool stops running tasks for good;
	// nil for a tool that never does.
	lifetime() context.Context
	// deferred schedules t like Deferred, from any goroutine, without a
	// closure; a closed Loop returns deadHandle{}.
	deferred(d time.Duration, t task) Handle
	// watch keeps a flow that a Promise or Run waits for, so that a Close
	// that abandons it still gives the waiter its Result (a Loop only);
	// unwatch forgets it when it ends.
	watch(fl *flow)
	unwatch(fl *flow)
	// linkSection links a critical section that a flow entered, so that a
	// Close gives back what it holds (a Loop that can close only).
	linkSection(s *section)
	// lockFreePost reports whether post, on the loop's goroutine, skips the
	// lock that inject takes (a Loop only): a gate then resumes a waiter of
	// the same loop through post.
	lockFreePost() bool
	// selfRunInfo is the info of the InternalError of Root.Run (or
	// RunHelping) called from a callback of the tool itself, after the
	// name of the method.
	selfRunInfo() string
	// waitRun waits, for Root.Run, for the Result of r's execution w,
	// cancelling it when ctx ends; from any goroutine but the tool's.
	waitRun(ctx context.Context, r *Root, w *waiter) ([]any, error)
	// postFirst queues t before every queued task: the rest of the work of
	// a goroutine that a callback ended with runtime.Goexit.
	postFirst(t task)
	// atTurnEnd is AtTurnEnd on the tool, from any goroutine.
	atTurnEnd(f func()) Handle
}

// foreignTool makes a Tool that is not one of this package's loops a
// scheduler: the engine then has one code path. Such a tool gets no pools,
// and a flow on it yields to the tool after every step.
type foreignTool struct{ Tool }

func (t foreignTool) post(tk task)        { t.Immediate(tk.run) }
func (t foreignTool) busy() bool          { return true }
func (t foreignTool) pools() *enginePools { return nil }
func (t foreignTool) tool() Tool          { return t.Tool }

// startFlow hands the flow's first task to the tool. A panic of
// Immediate reaches the caller of Execute (or Run, Promise, ...), which
// takes it that the flow did not start: a task the tool queued before it
// panicked must not begin the flow later, while one that began it already
// cannot be undone. So the task and the withdrawal of the start claim
// this start in turn (see foreignStart). A deferred check, not a recover,
// so that the panic goes on unchanged.
func (t foreignTool) startFlow(fl *flow) {
	s := &foreignStart{fl: fl}
	handed := false
	defer func() {
		if !handed && s.claim() {
			fl.withdrawStart()
		}
	}()
	t.Immediate(s.begin)
	handed = true
}

// foreignStart is one start of a flow on a foreign tool, which its task
// and its withdrawal claim: the first of them begins the flow or undoes
// the start. It is the start's own, not a bit of the flow, because a
// start made while Immediate is still on the stack (from a callback that
// Immediate ran at once, or from another goroutine once the flow has
// ended) is not the one whose Immediate may still panic.
type foreignStart struct {
	fl    *flow
	taken atomic.Bool
}

func (s *foreignStart) claim() bool { return s.taken.CompareAndSwap(false, true) }

// begin is the start's task: it begins the flow unless the start was
// withdrawn.
func (s *foreignStart) begin() {
	if s.claim() {
		s.fl.run()
	}
}

func (foreignTool) lifetime() context.Context { return nil }
func (foreignTool) watch(*flow)               { /* a foreign tool never abandons a flow */ }
func (foreignTool) unwatch(*flow)             {}
func (foreignTool) linkSection(*section)      {}
func (foreignTool) lockFreePost() bool        { return false }
func (t foreignTool) postFirst(tk task)       { t.post(tk) }

// inject hands tk to the tool from any goroutine: often one of the
// engine's own (an Await function's, a Mutex admitting a waiter from
// another loop), where a panic of the tool's Immediate, say a send on the
// closed channel of a stopped tool, would end the process. It is logged
// instead, and tk is lost: the tool cannot run it.
func (t foreignTool) inject(tk task) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("asyncsteps: Tool.Immediate panicked: a completion for a flow on that tool is lost",
				"panic", printsafe.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	t.Immediate(tk.run)
}

// deferred times what is not a step's timeout (a Throttle's period), from
// whatever goroutine needs it: a panic of the tool's Deferred is logged,
// like inject's, and reported as a closed loop's deadHandle, which the
// caller knows will never run its task.
func (t foreignTool) deferred(d time.Duration, tk task) (h Handle) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("asyncsteps: Tool.Deferred panicked: the timer is not armed",
				"panic", printsafe.Sprint(r), "stack", string(debug.Stack()))
			h = deadHandle{}
		}
	}()
	return t.Deferred(d, tk.run)
}

func (foreignTool) selfRunInfo() string { return runOnToolInfo }

func (foreignTool) waitRun(ctx context.Context, r *Root, w *waiter) ([]any, error) {
	return waitResult(ctx, r, w)
}

// runOnToolInfo is the info of Root.Run called from a callback of the
// flow's own tool, one of the user's that runs on its own goroutine, after
// the name of the method.
const runOnToolInfo = " called on the loop of the flow: it would deadlock"

// runOnLoopInfo is the info of Root.Run called on the goroutine of a Loop,
// the flow's or another one, after the name of the method.
const runOnLoopInfo = " called on the goroutine of a Loop: it would block the loop until the flow ends;" +
	" in a step, wait for the flow with AwaitFlow"

// onLoopGoroutine reports whether the caller runs on the goroutine of a
// Loop. The usual caller of Run, a goroutine of a server's, is told apart
// by the mark every Loop's goroutine carries (markLoopGoroutine), at the
// cost of two calls: Run asks this before every flow. A callback that
// takes the mark off is still known on its own Loop (IsSameThread).
func onLoopGoroutine() bool { return loopMarked() && onSomeLoop() }

func (t foreignTool) deferTask(d time.Duration, tk task) *timerEntry {
	h := t.Deferred(d, tk.run)
	if h == nil {
		// A Tool that gives no handle gives no way to cancel: the timer
		// then runs when due and finds its step gone, like one whose
		// Cancel came too late.
		h = deadHandle{}
	}
	return &timerEntry{t: foreignTimer{h}}
}

// foreignTimer is the entry of a timeout armed on a foreignTool: Cancel
// goes to the tool's own handle, never nil.
type foreignTimer struct{ Handle }

func (foreignTimer) run() {}

// The package's tools implement scheduler: schedulerOf would otherwise
// treat them as foreign tools.
var (
	_ scheduler = (*Loop)(nil)
	_ scheduler = (*TestTool)(nil)
	_ scheduler = foreignTool{}
)

// schedulerOf returns t as a scheduler: only this package's tools can
// implement its unexported methods.
func schedulerOf(t Tool) scheduler {
	// A Loop made by NewLoop, the usual tool, is told apart without the
	// cost of asserting an interface type, in a function small enough to
	// inline into New.
	if l, _ := t.(*Loop); l != nil && l.done != nil {
		return l
	}
	return otherScheduler(t)
}

// otherScheduler is schedulerOf for every tool but a Loop made by NewLoop.
func otherScheduler(t Tool) scheduler {
	switch s := t.(type) {
	case *Loop:
		return unmadeLoop(s, "*Loop")
	case *TestTool:
		if s == nil {
			return unmadeLoop(nil, "*TestTool")
		}
		return s
	case scheduler:
		return embeddedScheduler(s)
	}
	return foreignTool{t}
}

// embeddedScheduler returns the Loop or TestTool that s, a Tool of the
// user's, embeds: s has their unexported methods, promoted, tool among
// them, which returns the loop itself. The flow runs on that loop, which
// is checked as if it had been given (a nil or zero Loop fails its flows
// at once) and is known by its type wherever the engine asks (IsValid
// after the Loop's stop, a stop that a TestTool's ResetEvents keeps).
// Taken as it was, s made the engine call the methods of a nil pointer,
// leave the flows of a zero Loop waiting for good, and keep the steps a
// stopped Loop left valid.
func embeddedScheduler(s scheduler) scheduler {
	if nilTool := nilOnTheWay(s); nilTool != "" {
		return unmadeLoop(nil, nilTool)
	}
	switch inner := s.tool().(type) {
	case *Loop:
		return schedulerOf(inner)
	case *TestTool:
		return schedulerOf(inner)
	}
	return s
}

// nilOnTheWay returns the type of the nil pointer that s, a Tool of the
// user's, holds on the way to the *Loop or *TestTool it embeds (s itself,
// or a struct that s embeds by pointer), or "" if there is none: the
// promoted tool method would dereference it. Such a tool fails its flows
// at once, as a nil *Loop does.
func nilOnTheWay(s scheduler) string {
	v := reflect.ValueOf(s)
	for _, i := range embeddedLoopPath(v.Type()) {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v.Type().String()
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return "" // the loop itself: a nil one is told by its own check
}

// embeddedLoopPath returns the indexes of the embedded fields, from t
// down, through which the loop's methods are promoted to t: the way to the
// shallowest Loop or TestTool that t embeds, itself or by pointer, as Go's
// selectors take it. A struct embedding another loop on a deeper way is
// not misled by it. t implements scheduler: the search ends.
func embeddedLoopPath(t reflect.Type) []int {
	type way struct {
		t    reflect.Type
		path []int
	}
	level := []way{{t: t}}
	seen := map[reflect.Type]bool{}
	for len(level) > 0 {
		var next []way
		for _, w := range level {
			st := w.t
			if st.Kind() == reflect.Pointer {
				st = st.Elem()
			}
			if st.Kind() != reflect.Struct || seen[st] || isLoopType(st) {
				continue
			}
			seen[st] = true
			for i := range st.NumField() {
				f := st.Field(i)
				if !f.Anonymous {
					continue
				}
				path := append(append([]int(nil), w.path...), i)
				if isLoopType(f.Type) {
					return path
				}
				next = append(next, way{f.Type, path})
			}
		}
		level = next
	}
	return nil
}

// isLoopType reports whether t is Loop or TestTool, or a pointer to one.
func isLoopType(t reflect.Type) bool {
	return t == loopType || t == testToolType || t == loopType.Elem() || t == testToolType.Elem()
}

var (
	loopType     = reflect.TypeFor[*Loop]()
	testToolType = reflect.TypeFor[*TestTool]()
)

// nilToolInfo is the info of the error of a flow whose tool is a nil
// pointer of type nilTool.
func nilToolInfo(nilTool string) string { return "the flow's tool is a nil " + nilTool }

// unmadeLoop marks the zero Loop l stopped, so that its flows end at once
// with an InternalError (see Loop.endClosed); for a nil l, it returns such a
// Loop standing in for the nil pointer of type nilTool.
func unmadeLoop(l *Loop, nilTool string) *Loop {
	if l == nil {
		l = &Loop{unmadeInfo: nilToolInfo(nilTool)}
	}
	l.unmadeStarted()
	return l
}
