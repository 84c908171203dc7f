package flowfuzz

// This file is long on purpose: the reference model is one interpreter, kept
// whole so that it can be read against docs/DESIGN.md in one sitting.

import (
	"container/heap"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
)

// The reference model.
//
// Model evaluates a program the way the spec reads: a recursive evaluator
// where running a step returns its outcome (success with args, error, or
// cancelled), levels run their steps in order, and each level unwinds an
// error through its own cancel handler, then its error handler
// (docs/DESIGN.md#arguments-between-levels to #parallel-branches). Concurrency
// is explicit: the root and every parallel
// branch is a "thread", a coroutine (iter.Pull) that runs the evaluator and
// hands control to a scheduler whenever it waits. The scheduler has what a
// TestTool has: a FIFO of runnable threads and a virtual clock with timers
// (timeouts, the external completions, the root cancel), ties broken by
// scheduling order, timers only when nothing is runnable.
//
// Turns. A thread that could go on yields to the back of the FIFO whenever
// another thread is queued, at these points only: before each step of a
// level starts, and before a level whose steps have all succeeded completes
// (a step with sub-steps, a handler that added steps, a loop iteration, a
// branch, the root). Everything else (a callback, its synchronous success or
// error, the unwinding through handlers) happens within a turn. A thread
// resumed from the FIFO, by a timer or by an external completion takes its
// first turn without yielding. That is the engine's documented fairness
// ("the flow yields after each step when something else is queued") made
// precise; a cancelled branch keeps its place in the FIFO, as a no-op.
//
// A Root.Cancel from a callback (Program.CancelFrom) is seen before the
// next step, as a root cancel is; and a stop requested by a callback turns
// the next unwind into a cancel (docs/DESIGN.md#cancel-handlers: a cancel
// requested before an error is raised wins): an error that, past a level's
// own cancel handler, would go on to its error handler or outward cancels
// the flow instead (see unwinding), so no error handler runs after the
// request, and the cancel handlers still armed run, innermost first.
//
// A panic (in a step or a handler) is an InternalError whose info is the
// panic value; handler events and the end show it as PanicInfo, since the
// state's LastException is then the recovered panic
// (docs/DESIGN.md#error-info-and-last-exception). A
// handler that waits (HWait) is a wait of its own: its completion acts as
// its Success or Error would (docs/DESIGN.md#error-handlers), its own timeout raises Timeout,
// which unwinds outward from the handler's step, never into it again.
// SetTimeout called twice counts only the second (docs/DESIGN.md#timeouts).
//
// Sync(m, f, h) follows the Mutex's documented layout (section.go): a step
// (whose cancel handler gives the Mutex back) with three sub-steps: enter,
// f with h, and leave. A full queue
// (docs/DESIGN.md#locks-and-limits) makes enter note a refusal, which the step of f raises
// instead of running f, so that h sees DefenseRejected first. A
// KeyedMutex's Sync on a key is the same section on a Mutex of the key's
// own, of the KeyedMutex's max and queue limit (mutex.go's doc: a key
// behaves as NewMutex(max, maxQueue...) in every respect).
//
// The Throttle (docs/DESIGN.md#locks-and-limits, throttle.go's doc) is a gate of
// the same layout: a period starts at the first entry after idle and arms
// a timer; up to N enter per period, the others queue; when the period ends
// a new one starts if flows wait, and up to N of them enter at once, else
// the Throttle goes idle with no timer. A flow that comes once the
// period's end has come, before its timer ran, ends the period itself,
// full or not, and arms the timer of the one it begins, as a flow that
// opens a period after idle does; the old timer does nothing when it
// runs: the flow is not counted in a period that is over. Entries are
// never given back.
//
// The channel of an AwaitChan or AwaitResult is made as its node is added
// (see added), and gets its value on a timer: a value there before the
// step runs is taken in its callback; one that comes while it waits
// completes it from the goroutine that waits, as an external completion.
//
// Settle (docs/DESIGN.md#parallel-branches) is its documented layout
// (typed.go): a step adding a Parallel and then's step; each branch a
// step adding the step that adds the branch's node, guarded by Settle's
// handler, and the step that stores the outcome. The handler turns an
// error, but Break and Continue, into the outcome; what is not an error
// goes on as from a Parallel's branch.
//
// First and Quorum (docs/DESIGN.md#first-and-quorum) are Settle's layout
// without the handler: each branch stores its result, while fewer than k
// are stored. The race's thread hears of each branch's end (sigItem), as
// a ForEachLimit of its items: a failed branch ends alone while k
// successes can still be had; the k-th success cancels the branches still
// running, in their order, and completes the step as a Parallel's last
// branch does; the failure that leaves k out of reach, a Break, a
// Continue, a cancel or Run's deadline ends it as a Parallel's failed
// branch does.
//
// ForEachLimit (docs/DESIGN.md#foreachlimit) is a Parallel whose branches,
// the items, start one per pair of its sequence as slots come free: as
// the step begins, then in the task where an item ends or a slot comes
// back, each queued behind the work already queued (see take). An Await
// function started inside an item holds the item's slot as it holds a
// section's, and gives it back in a task of its own (see slotBack).
// Items run at once, so the channel of an AwaitChan is per item (see
// added).
//
// The Go error given to Fail is the Cause of the error it raises, and of
// those that the handlers of that error raise with Error
// (docs/DESIGN.md#error-handlers): an outcome carries the ID of the Fail,
// which the end and the handler events show (see ErrEnd).
//
// Hooks (Program.Hooks, docs/DESIGN.md#hooks) are events of the trace:
// FlowStart as a flow begins, StepError at each error raised (in raise,
// and where a completion, a cancel handler's panic or the end raises
// one), FlowEnd as the flow ends, SyncWait in a task of its own between
// a waiter's admission and its completion. AwaitStart and AwaitEnd,
// which run on the functions' goroutines, are a list apart.

// Result is what the model predicts for a program.
type Result struct {
	Trace []string // callbacks in order; see the event formats in Event
	End   string   // "ok(args)", "err:Code:Info" ("err:InternalError", "err:InternalError:!<panic value>"), "canceled"
	// AwaitHooks are the calls of the AwaitStart and AwaitEnd hooks
	// (AwaitStartEvent, AwaitEndEvent), sorted: they run on the
	// functions' goroutines, in no order with the trace's events.
	AwaitHooks []string
	// Late are the hook calls after FlowEnd: the ends of the flows of
	// AwaitFlow steps cancelled as the flow ended. (A SyncWait task left
	// reports nothing: its waiter has ended.)
	Late []string
}

// Format helpers shared by the model and the engine interpreter, so that
// both write the same events.

// FmtArgs formats step args.
func FmtArgs(args []any) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = fmt.Sprint(a)
	}
	return strings.Join(s, ",")
}

// Info is how a handler event shows the error info: InternalError infos are
// the engine's own wording and are not compared, except for panics, whose
// info (the panic value) is shown as PanicInfo.
func Info(code, info string) string {
	if code == "InternalError" && !strings.HasPrefix(info, "!") {
		return "*"
	}
	return info
}

// GoexitInfo is the info of the InternalError of a runtime.Goexit in a
// callback.
const GoexitInfo = "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"

// PanicInfo is how a handler event shows the info of an InternalError
// whose LastException is a recovered panic.
func PanicInfo(info string) string { return "!" + info }

// AtTime suffixes an event with the virtual time in ms when it is not 0.
func AtTime(ev string, ms int64) string {
	if ms == 0 {
		return ev
	}
	return fmt.Sprintf("%s@%d", ev, ms)
}

// StepEvent is the event of step id running with args: "s3(1,2)".
func StepEvent(id int, args []any) string { return fmt.Sprintf("s%d(%s)", id, FmtArgs(args)) }

// IterEvent is the event of iteration i of the Loop or Repeat id: "L3#0".
func IterEvent(id, i int) string { return fmt.Sprintf("L%d#%d", id, i) }

// ForEachEvent is the event of the ForEach id visiting key and value:
// "F3#0=30".
func ForEachEvent(id int, key, value any) string {
	return fmt.Sprintf("F%d#%v=%v", id, key, value)
}

// PullEvent is the event of the sequence of the ForEachLimit id yielding
// its pair i: "P3#0".
func PullEvent(id, i int) string { return fmt.Sprintf("P%d#%d", id, i) }

// SeqEndEvent is the event of the sequence of the ForEachLimit id
// returning, run out or stopped (its deferred cleanup): "P3$".
func SeqEndEvent(id int) string { return fmt.Sprintf("P%d$", id) }

// RetryEvent is the event of attempt i of the Retry id: "R3#0".
func RetryEvent(id, i int) string { return fmt.Sprintf("R%d#%d", id, i) }

// RetryableEvent is the event of the Retryable of the Retry id asked about
// code: "q3:E1".
func RetryableEvent(id int, code string) string { return fmt.Sprintf("q%d:%s", id, code) }

// BackoffEvent is the event of the Backoff of the Retry id asked for the
// wait before retry n: "b3:1".
func BackoffEvent(id, n int) string { return fmt.Sprintf("b%d:%d", id, n) }

// DelayEvent is the event of the Delay of the Retry id asked for the wait
// before retry n, given a failure with code: "d3:1:E1".
func DelayEvent(id, n int, code string) string { return fmt.Sprintf("d%d:%d:%s", id, n, code) }

// HandlerCancelEvent is the event of the cancel handler that the error
// handler id set: "k3".
func HandlerCancelEvent(id int) string { return fmt.Sprintf("k%d", id) }

// CancelEvent is the event of the cancel handler of step id: "c3".
func CancelEvent(id int) string { return fmt.Sprintf("c%d", id) }

// Hook events: with Program.Hooks, the tool's hooks trace their calls.
// Flow k is the k-th flow of a run to begin: 0 the program's, then the
// flows of its AwaitFlow steps.

func flowTag(k int) string {
	if k == 0 {
		return ""
	}
	return fmt.Sprint(k)
}

// FlowStartEvent is the event of FlowStart for the flow k: "FS", "FS1".
func FlowStartEvent(k int) string { return "FS" + flowTag(k) }

// FlowEndEvent is the event of FlowEnd for the flow k ending as end says
// ("ok" for a nil error, else as Result.End): "FE:ok", "FE1:canceled".
func FlowEndEvent(k int, end string) string { return "FE" + flowTag(k) + ":" + end }

// StepErrorEvent is the event of StepError for the flow k seeing code and
// info, the info as Info gives it (with PanicInfo for a panic):
// "SE:E1:x", "SE1:Timeout:".
func StepErrorEvent(k int, code, info string, panic bool) string {
	if panic {
		info = PanicInfo(info)
	}
	return "SE" + flowTag(k) + ":" + code + ":" + Info(code, info)
}

// SyncWaitEvent is the event of SyncWait for a flow let into the gate (a
// Mutex index, ThrottleGate, LimiterGate or KeyedGate+k) after waiting
// ms: "SW0:10".
func SyncWaitEvent(gate int, ms int64) string { return fmt.Sprintf("SW%d:%d", gate, ms) }

// AwaitStartEvent is the call of AwaitStart for the Await function of
// the KAwait id: "as3".
func AwaitStartEvent(id int) string { return fmt.Sprintf("as%d", id) }

// AwaitEndEvent is the call of AwaitEnd for the function of the KAwait
// id, with the error it reports as "code:info" (see StepErrorEvent), or
// "ok": "ae3:ok", "ae3:InternalError:*".
func AwaitEndEvent(id int, end string) string { return fmt.Sprintf("ae%d:%s", id, end) }

// HandlerEvent is the event of the error handler id seeing code and info,
// the info as Info gives it: "h3:E1:x".
func HandlerEvent(id int, code, info string) string {
	return fmt.Sprintf("h%d:%s:%s", id, code, Info(code, info))
}

// CauseSuffix shows that an error has the Go error of the EFail,
// EExternalFail or HFail id as its Cause, which errors.Is finds: "<-f3";
// "" for 0 (none).
func CauseSuffix(id int) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("<-f%d", id)
}

// ErrEnd is how Result.End shows an error after "err:", and SettleEvent
// a branch's: "E1:x"; "InternalError" (its info is the engine's wording);
// "InternalError:!p3" for a panic; and, for an error whose Cause is the
// Go error of a Fail (cause, see CauseSuffix), its info whole:
// "InternalError:f3<-f3".
func ErrEnd(code, info string, panic bool, cause int) string {
	switch {
	case panic:
		return "InternalError:" + PanicInfo(info)
	case cause != 0:
		return code + ":" + info + CauseSuffix(cause)
	case code == "InternalError":
		return "InternalError"
	}
	return code + ":" + info
}

// SettledOk and SettledErr are how SettleEvent shows a branch that
// succeeded with the value v, or failed (as ErrEnd shows it).
func SettledOk(v int) string { return fmt.Sprintf("ok=%d", v) }

// SettledErr: see SettledOk.
func SettledErr(end string) string { return "err:" + end }

// SettleEvent is the event of the then of the Settle id, called with the
// outcomes: "S3[ok=40|err:E1:x]".
func SettleEvent(id int, outcomes []string) string {
	return fmt.Sprintf("S%d[%s]", id, strings.Join(outcomes, "|"))
}

// RaceEvent is the event of the then of the First or Quorum id, called
// with the results vs (First's winner alone): "Q3[40|0]".
func RaceEvent(id int, vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return fmt.Sprintf("Q%d[%s]", id, strings.Join(s, "|"))
}

type outKind uint8

const (
	okK outKind = iota
	errK
	cancelK
)

// outcome is how a step, a level or a thread ended.
type outcome struct {
	kind   outKind
	args   []any
	code   string
	info   string
	target *act // cancelK: the step whose timeout fired, nil for a plain cancel
	panic  bool // errK: an InternalError from a recovered panic
	// errK: the ID of the EFail, EExternalFail or HFail whose Go error is
	// the error's Cause, 0 for none; an error a handler raises keeps the
	// one of the error it handles (docs/DESIGN.md#error-handlers).
	cause int
}

func ok(args []any) outcome          { return outcome{kind: okK, args: args} }
func fail(code, info string) outcome { return outcome{kind: errK, code: code, info: info} }
func cancelled(target *act) outcome  { return outcome{kind: cancelK, target: target} }
func (o outcome) is(k outKind) bool  { return o.kind == k }
func (o outcome) loopCode() bool {
	return o.kind == errK && (o.code == "LoopBreak" || o.code == "LoopCont")
}
func intsToArgs(a []int) []any {
	r := make([]any, len(a))
	for i, v := range a {
		r[i] = v
	}
	return r
}
func (o outcome) String() string { return fmt.Sprintf("%d %v %s %s", o.kind, o.args, o.code, o.info) }

// act is one execution of a step with a callback.
type act struct {
	node      *Node
	th        *thread
	timer     *timer
	cancel    bool // cancel handler armed
	waiting   bool // blocked waiting for an external completion
	succeeded bool // a Success from outside claimed the wait: a cancel before it runs no cancel handler
	flowDone  bool // KAwait AwaitFlow: its flow has ended
	// KAwait AwaitFlow: the number of its flow once begun (see
	// FlowStartEvent), and whether FlowEnd has seen it end.
	flowNo    int
	flowEnded bool
	// KAwait AwaitFn: the sections its function holds until it returns;
	// the due time of the nearest step timeout around it (see stepDue),
	// and whether it was cancelled at or past it.
	holds    []*entry
	returned bool
	due      int64
	late     bool
}

// request is what a thread asks of the scheduler when it hands control back.
type reqKind uint8

const (
	reqTurn     reqKind = iota // requeue me at the back of the FIFO
	reqWait                    // I wait: an external completion, a Mutex, or a timer wakes me
	reqParallel                // start these branches; I wait for them
	reqCancel                  // cancel this branch now, then resume me
	reqDone                    // I ended with out
	reqStop                    // cancel the flow (a Root.Cancel from a callback), me included
)

type request struct {
	kind     reqKind
	branches []*Node
	bodies   []func(*thread) outcome // reqParallel: what each branch runs, if not its node
	child    *thread
	out      outcome
}

// signal is what a thread is resumed with.
type sigKind uint8

const (
	sigRun      sigKind = iota // go on
	sigComplete                // the external completion (or Mutex admission) in out
	sigCancel                  // unwind: cancelled, target set for a timeout
	sigBranches                // every branch succeeded
	sigFailed                  // a branch failed with out
	sigDeadline                // Run's deadline times out what waits here
	sigItem                    // an item of the ForEachLimit ended (child), as out says
	sigSlot                    // a slot of the ForEachLimit came back
)

type signal struct {
	kind  sigKind
	out   outcome
	child *thread // sigItem: the item's thread
}

type thread struct {
	m        *model
	parent   *thread
	next     func() (request, bool)
	stop     func()
	sig      signal
	yield    func(request) bool
	fresh    bool // resumed from the FIFO: the next turn is taken without yielding
	started  bool
	done     bool
	branches []*thread // of the Parallel it waits for
	pending  int
	loops    []*loopExec // the loops running in this thread, outermost first
	sections []*entry    // the Mutex sections whose body this thread runs
	waitSeq  int         // counts the waits, to tell a stale deadline entry
	inWait   bool
	timeouts []*timer // the armed timeouts of the steps it runs
	// item is the ForEachLimit whose item this thread runs; nil for any
	// other thread. inItem is the innermost item thread this thread runs
	// in (itself for one), nil outside of items.
	item   *limitExec
	inItem *thread
	slot   *entry // an item's: the slot its Await functions hold
	// raced: the thread runs a branch of a First or Quorum, whose end
	// gives the race's thread the hand (sigItem), as an item's does.
	raced bool
}

// itemOf returns the item thread th runs in, nil outside of items (and
// for no thread).
func (th *thread) itemOf() *thread {
	if th == nil {
		return nil
	}
	return th.inItem
}

// loopExec is one execution of a Loop, Repeat, ForEach or Retry. It has a
// field: pointers to distinct zero-size values may be equal.
type loopExec struct{ _ byte }

// ask hands control to the scheduler and returns the signal it resumes with.
func (th *thread) ask(r request) signal {
	th.yield(r)
	return th.sig
}

// turn yields to other queued threads (see Turns above); a non-nil result
// means the thread was cancelled while queued.
func (th *thread) turn() *outcome {
	if m := th.m; m.stop && !m.stopApplied {
		// A Root.Cancel from a callback: the flow sees it before its
		// next step (docs/DESIGN.md#cancel).
		o := th.seeStop()
		return &o
	}
	if th.fresh {
		th.fresh = false
		return nil
	}
	if len(th.m.fifo) == 0 {
		return nil
	}
	s := th.ask(request{kind: reqTurn})
	th.fresh = false
	if s.kind == sigCancel {
		o := s.out
		return &o
	}
	return nil
}

// seeStop cancels the flow, th included, for a Root.Cancel from a
// callback that the flow sees now, and returns th's outcome: cancelled.
func (th *thread) seeStop() outcome {
	m := th.m
	th.fresh = false
	if th == m.root {
		m.stopApplied = true
		return cancelled(nil)
	}
	return th.ask(request{kind: reqStop}).out
}

// unwinding is where the error o, past a level's own cancel handler, goes
// on to its error handler or outward: a Root.Cancel from a callback that
// the flow has not seen yet turns it into the cancel of the flow
// (docs/DESIGN.md#cancel-handlers: a cancel requested before an error is
// raised wins; no error handler runs once it is requested). Any other
// outcome goes on as it is.
func (th *thread) unwinding(o outcome) outcome {
	if m := th.m; o.is(errK) && m.stop && !m.stopApplied {
		return th.seeStop()
	}
	return o
}

type timerKind uint8

const (
	tTimeout timerKind = iota
	tExternal
	tRootCancel
	tThrottle
	tCtxCancel // Run's ctx is cancelled
	tDeadline  // Run's ctx's deadline passes
	tFlowStep  // an AwaitFlow's flow: its step completes
	tChanSend  // an AwaitChan's or AwaitResult's channel gets its value or is closed
)

type timer struct {
	due   int64
	seq   int
	kind  timerKind
	act   *act
	thr   *throttle // tThrottle
	inst  *chanInst // tChanSend
	out   outcome
	dead  bool
	index int
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)   { t := x.(*timer); t.index = len(*h); *h = append(*h, t) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

type fifoEntry struct {
	th    *thread
	sig   signal
	token int // a deadline's expiry of the wait token of th: stale once th waits no more

	// An AwaitFlow's flow: its task, which starts it (arming its step's
	// completion) or, with out set, ends it (its Result goes to the
	// waiting step).
	flow       *act
	flowEnd    bool
	flowCancel bool // the task of the flow's Cancel: it ends cancelled
	out        outcome

	// The task of the SyncWait hook of a flow let into a gate: it
	// reports the wait, then goes on with the completion then.
	syncWait *syncWaitTask

	// The task that gives back to the ForEachLimit slot the slot of an
	// ended item once its last Await function has returned.
	slot *limitExec
}

type syncWaitTask struct {
	gate   int
	waited int64
	then   fifoEntry
}

// mutex is the model of a Mutex: holders counted per thread (reentrant),
// waiters first in, first out.
type mutex struct {
	max      int
	maxQueue int // < 0: no limit
	holders  map[*thread]int
	queue    []*entry
	gate     int // its index in SyncWaitEvent
	// workHeld counts the slots of sections left while Await functions
	// started inside them still run: a slot comes back once they have
	// all returned (the flow moves on at once).
	workHeld int
}

// full reports whether every slot is taken.
func (mx *mutex) full() bool { return len(mx.holders)+mx.workHeld >= mx.max }

// throttle is the model of a Throttle.
type throttle struct {
	n, queueMax int
	period      int64
	entered     int   // in the current period
	running     bool  // a period runs: its timer is armed
	ends        int64 // when the current period ends
	// timer is the current period's. A flow that outruns a period arms
	// the next one's at once: the old timer, no longer this one, does
	// nothing when it runs.
	timer *timer
	queue []*entry
	gate  int // its index in SyncWaitEvent
}

type entry struct {
	th    *thread
	chain []*thread // the outer flows of a queued branch (Mutex)
	state uint8     // 0 none, 1 queued, 2 held, 3 left, 4 left but its slot held by Await functions
	mx    *mutex    // a Mutex's entry
	holds int       // Await functions started inside the section and running
	since int64     // when it began to wait in the queue
	// The entry of an item of a ForEachLimit (th), whose slot the Await
	// functions started inside it hold as a section's (state 2 while it
	// runs, 4 once it has ended while they run).
	item *limitExec
}

type model struct {
	p      *Program
	now    int64
	seq    int
	timers timerHeap
	fifo   []fifoEntry
	trace  []string
	info   string // the state's ErrorInfo
	panic  bool   // the state's LastException is a recovered panic
	thr    *throttle
	// The gates of the Limiter: nil where its limit is 0.
	limMutex    *mutex
	limThrottle *throttle
	root        *thread
	end         string
	ended       bool
	mutexes     []*mutex
	keys        [KeyedKeys]*mutex // the KeyedMutex's, a Mutex per key
	threads     []*thread
	budget      int
	// A Root.Cancel from the callback (or, with cancelInCancel, the
	// cancel handler) of the step cancelFrom, or from the error handler
	// cancelFrom: stop is set by the call (or a root cancel),
	// stopApplied once the flow has seen it.
	cancelFrom        int
	cancelInCancel    bool
	stop, stopApplied bool
	// late: Run's deadline has passed; hit are the loops through whose
	// iteration a timeout of it went (rundeadline.go's lateRun).
	late bool
	hit  []*loopExec
	// The Await functions started in the current event: the fuzz test
	// arms their completions, in ID order, once the event is over; those
	// cancelled, which return once it is over.
	started, returning []*act
	// hooks: the program's tool has hooks; flows counts the flows begun
	// (see FlowStartEvent); awaitHooks are the AwaitStart and AwaitEnd
	// calls.
	hooks      bool
	flows      int
	awaitHooks []string
	over       bool // the flow has ended: hook calls go to lateHooks
	lateHooks  []string
	// The channels of the AwaitChan and AwaitResult nodes, by node and
	// the item of a ForEachLimit they run in: the one made when the node
	// was last added there (a node has one execution at a time in an
	// item, or outside of them, of the last add).
	chans map[chanKey]*chanInst
}

// chanKey is where a channel was made: its node, and the item thread it
// was added in, nil outside of items.
type chanKey struct {
	n    *Node
	item *thread
}

// chanInst is the channel of an AwaitChan or AwaitResult, made as its
// node was added.
type chanInst struct {
	ready bool // its value waits in it, or it is closed
	act   *act // the step waiting on it, if it runs
}

// Model computes the trace and the end a program must produce.
func Model(p *Program) Result {
	m := &model{p: p, budget: 200000, cancelFrom: p.CancelFrom, cancelInCancel: p.CancelInCancel, chans: map[chanKey]*chanInst{}, hooks: p.Hooks}
	for i, mx := range p.Mutexes {
		m.mutexes = append(m.mutexes, &mutex{max: mx, maxQueue: p.MutexQueue(i), holders: map[*thread]int{}, gate: i})
	}
	if k := p.Keyed; k != nil {
		for i := range m.keys {
			m.keys[i] = &mutex{max: k.Max, maxQueue: k.MaxQueue, holders: map[*thread]int{}, gate: KeyedGate + i}
		}
	}
	if t := p.Throttle; t != nil {
		m.thr = &throttle{n: t.N, queueMax: t.Queue, period: int64(t.Period), gate: ThrottleGate}
	}
	if l := p.Limiter; l != nil {
		if l.Concurrent > 0 {
			m.limMutex = &mutex{max: l.Concurrent, maxQueue: l.MaxQueue, holders: map[*thread]int{}, gate: LimiterGate}
		}
		if l.Rate > 0 {
			m.limThrottle = &throttle{n: l.Rate, queueMax: l.Burst, period: int64(l.Period), gate: LimiterGate}
		}
	}
	defer func() {
		for _, th := range m.threads {
			th.stop()
		}
	}()
	// The root cancel is scheduled before the flow starts: first in order.
	m.arm(int64(p.CancelAt), &timer{kind: tRootCancel})
	// The channels of the steps added before the run get theirs as it
	// starts.
	m.added(nil, p.Steps)
	switch p.Ctx {
	case CtxCancel:
		m.arm(int64(p.CtxAt), &timer{kind: tCtxCancel})
	case CtxDeadline:
		m.arm(int64(p.CtxAt), &timer{kind: tDeadline})
	}
	m.root = m.spawn(nil, func(th *thread) outcome {
		m.hook(FlowStartEvent(0))
		return m.level(th, p.Steps)
	})
	m.fifo = append(m.fifo, fifoEntry{th: m.root})
	for !m.ended {
		m.armStarted()
		if len(m.fifo) > 0 {
			e := m.fifo[0]
			m.fifo = m.fifo[1:]
			// The tasks of other flows, and those of the SyncWait hook,
			// are not the flow's.
			if e.flow != nil {
				m.flowTask(e)
				continue
			}
			if lx := e.slot; lx != nil {
				// The task takes the next pair before the flow, going
				// on, would see a Root.Cancel.
				m.slotTask(lx)
				continue
			}
			if w := e.syncWait; w != nil {
				if !w.then.th.done { // a waiter that ended since is not reported
					m.hook(SyncWaitEvent(w.gate, w.waited))
				}
				// The flow goes on in the hook's task, not behind the
				// tasks queued since the gate let it in: where it would
				// have gone on without the hook. A hook that panicked
				// fails the step instead, from outside, as an Await
				// function's failure does: in a task queued behind those.
				if w.then.sig.out.is(errK) {
					m.fifo = append(m.fifo, w.then)
				} else {
					m.fifo = slices.Insert(m.fifo, 0, w.then)
				}
				continue
			}
			if m.stop && !m.stopApplied {
				// Whatever the flow runs next sees the cancel first:
				// the task the call queued, or a step of the flow.
				m.applyStop()
				continue
			}
			if e.th == nil || e.th.done {
				continue // a cancelled branch's place: a no-op
			}
			if e.token != 0 && (!e.th.inWait || e.th.waitSeq != e.token) {
				continue // the wait the deadline would expire is over
			}
			e.th.fresh = true
			m.resume(e.th, e.sig)
			continue
		}
		if len(m.timers) == 0 {
			m.end = "hang"
			break
		}
		t := heap.Pop(&m.timers).(*timer)
		t.dead = true
		m.now = t.due
		switch t.kind {
		case tRootCancel, tCtxCancel:
			if m.stop {
				continue // a callback cancelled the flow: this call does nothing
			}
			m.stop, m.stopApplied = true, true
			m.root.fresh = true
			m.resume(m.root, signal{kind: sigCancel, out: cancelled(nil)})
		case tTimeout:
			t.act.th.fresh = true
			m.resume(t.act.th, signal{kind: sigCancel, out: cancelled(t.act)})
		case tExternal:
			if a := t.act; a.node != nil && a.node.Kind == KAwait {
				m.returned(a, false) // before the step completes
			}
			if a := t.act; a.waiting {
				a.waiting = false
				a.succeeded = t.out.is(okK)
				m.fifo = append(m.fifo, fifoEntry{th: a.th, sig: signal{kind: sigComplete, out: t.out}})
			}
		case tThrottle:
			if t == t.thr.timer {
				m.periodEnd(t.thr)
			}
		case tDeadline:
			// Run queues the expiry, which runs next: nothing else is
			// queued when a timer runs.
			m.late = true
			m.root.fresh = true // its first turn is the expiry's
			m.resume(m.root, signal{kind: sigDeadline})
		case tChanSend:
			if a := t.inst.act; a != nil && a.waiting {
				// The goroutine of the waiting step takes the value and
				// completes the step from outside.
				a.waiting = false
				m.fifo = append(m.fifo, fifoEntry{th: a.th, sig: signal{kind: sigComplete, out: t.out}})
			} else {
				t.inst.ready = true // taken at once when the step runs, if it does
			}
		case tFlowStep:
			if t.act.waiting {
				// The step's Success or Error queues its completion.
				m.fifo = append(m.fifo, fifoEntry{flow: t.act, flowEnd: true, out: t.out})
			}
		}
	}
	m.armStarted() // the functions cancelled as the flow ended return
	m.lateTasks()
	slices.Sort(m.awaitHooks)
	return Result{Trace: m.trace, End: m.end, AwaitHooks: m.awaitHooks, Late: m.lateHooks}
}

// lateTasks runs, once the flow has ended, the tasks left of other flows
// and of SyncWait hooks.
func (m *model) lateTasks() {
	m.over = true
	for len(m.fifo) > 0 {
		e := m.fifo[0]
		m.fifo = m.fifo[1:]
		switch {
		case e.flow != nil:
			m.flowTask(e)
		case e.syncWait != nil && !e.syncWait.then.th.done:
			m.hook(SyncWaitEvent(e.syncWait.gate, e.syncWait.waited))
		}
	}
}

// hook traces the call of a hook, if the program has hooks.
func (m *model) hook(ev string) {
	switch {
	case !m.hooks:
	case m.over:
		m.lateHooks = append(m.lateHooks, AtTime(ev, m.now))
	default:
		m.event(ev)
	}
}

// stepError traces StepError seeing an error of the flow k; Break and
// Continue are not errors.
func (m *model) stepError(k int, o outcome) {
	if !o.loopCode() {
		m.hook(StepErrorEvent(k, o.code, o.info, o.panic))
	}
}

// endEvent is how FlowEndEvent shows the end o.
func endEvent(o outcome) string {
	if o.is(okK) {
		return "ok"
	}
	return endOf(o)
}

// armStarted arms the completions of the Await functions started in the
// event just run, as the fuzz test does once they have all started.
func (m *model) armStarted() {
	slices.SortFunc(m.returning, func(a, b *act) int { return a.node.ID - b.node.ID })
	for _, a := range m.returning {
		m.returned(a, true)
	}
	m.returning = m.returning[:0]
	slices.SortFunc(m.started, func(a, b *act) int { return a.node.ID - b.node.ID })
	for _, a := range m.started {
		out := awaitOutcome(a.node)
		if out.is(okK) && m.p.AwaitEndPanics(a.node.ID) {
			// A panic of the hook is the function's (docs/DESIGN.md#hooks).
			out = fail("InternalError", "panic: "+AwaitEndPanicValue(a.node.ID))
			out.panic = true
		}
		m.arm(int64(a.node.At), &timer{kind: tExternal, act: a, out: out})
	}
	m.started = m.started[:0]
}

// cancelCall cancels the context of the Await function of a, which
// returns once the event is over.
func (m *model) cancelCall(a *act) {
	a.late = a.due >= 0 && m.now >= a.due
	m.returning = append(m.returning, a)
}

// returned gives back the holds of the Await function of a: it has
// returned as its node says, or with its context's error if cancelled;
// AwaitEnd sees that.
func (m *model) returned(a *act, cancelled bool) {
	o := awaitOutcome(a.node)
	if a.returned {
		return
	}
	a.returned = true
	if m.hooks {
		end := "ok"
		switch {
		case cancelled && a.late:
			end = "Timeout:" + AwaitTimeoutInfo
		case cancelled:
			end = "InternalError:*" // context.Canceled
		case !o.is(okK):
			end = strings.TrimPrefix(StepErrorEvent(0, o.code, o.info, o.panic), "SE:")
		}
		m.awaitHooks = append(m.awaitHooks, AwaitEndEvent(a.node.ID, end))
	}
	for _, e := range a.holds {
		switch e.holds--; {
		case e.holds > 0 || e.state != 4:
		case e.item != nil:
			m.slotBack(e)
		default:
			m.leave(e.mx, e)
		}
	}
}

// flowTask runs a task of an AwaitFlow's flow (see fifoEntry).
func (m *model) flowTask(e fifoEntry) {
	a := e.flow
	switch {
	case e.flowCancel:
		m.endFlow(a, cancelled(nil))
		return
	case !e.flowEnd:
		m.flows++
		a.flowNo = m.flows
		m.hook(FlowStartEvent(a.flowNo))
		if m.p.FlowStartPanics(a.flowNo) {
			m.failStart(a)
			return
		}
	}
	if !a.waiting {
		// Cancelled: the flow, which sees its cancel before its next
		// step, ends without its step, or its Result is dropped.
		m.endFlow(a, cancelled(nil))
		return
	}
	if !e.flowEnd {
		if a.node.End != EWait {
			m.arm(int64(a.node.At), &timer{kind: tFlowStep, act: a, out: awaitOutcome(a.node)})
		}
		return
	}
	if e.out.is(errK) {
		m.stepError(a.flowNo, e.out)
	}
	m.endFlow(a, e.out)
	a.flowDone = true
	// The goroutine of AwaitFlow brings the Result in: a task of its own.
	m.fifo = append(m.fifo, fifoEntry{th: a.th, sig: signal{kind: sigComplete, out: e.out}})
}

// failStart ends the flow of the AwaitFlow a, whose FlowStart hook
// panicked, before its first step (docs/DESIGN.md#hooks, "A failed
// start"). The step, if it still waits, fails with the flow's error, as
// AwaitResult describes: an InternalError whose cause is the flow's
// error, not the panic. A step cancelled meanwhile has cancelled the
// flow, a cancel requested before the hook's error, which wins over it
// (docs/DESIGN.md#cancel-handlers): StepError sees the error, and the
// flow ends cancelled.
func (m *model) failStart(a *act) {
	o := fail("InternalError", FlowStartPanicValue(a.flowNo))
	o.panic = true
	m.stepError(a.flowNo, o)
	if !a.waiting {
		m.endFlow(a, cancelled(nil))
		return
	}
	m.endFlow(a, o)
	a.flowDone = true
	m.fifo = append(m.fifo, fifoEntry{th: a.th, sig: signal{kind: sigComplete, out: fail(o.code, o.info)}})
}

// endFlow ends the flow of the AwaitFlow a with o, once.
func (m *model) endFlow(a *act, o outcome) {
	if a.flowEnded || a.flowNo == 0 {
		return
	}
	a.flowEnded = true
	m.hook(FlowEndEvent(a.flowNo, endEvent(o)))
}

// admit lets the waiter w into a gate: its step completes, after the
// SyncWait hook, if any, has seen the wait in a task of its own.
func (m *model) admit(w *entry, gate int) {
	done := fifoEntry{th: w.th, sig: signal{kind: sigComplete, out: ok(nil)}}
	if !m.hooks {
		m.fifo = append(m.fifo, done)
		return
	}
	if m.p.SyncWaitPanics(gate) {
		// The step let in fails instead; its slot comes back as the flow
		// unwinds (docs/DESIGN.md#hooks).
		done.sig.out = fail("InternalError", "panic: "+SyncWaitPanicValue(gate))
		done.sig.out.panic = true
	}
	m.fifo = append(m.fifo, fifoEntry{syncWait: &syncWaitTask{gate: gate, waited: m.now - w.since, then: done}})
}

// awaitOutcome is how the KAwait n completes.
func awaitOutcome(n *Node) outcome {
	switch n.End {
	case EExternal:
		return ok(intsToArgs(n.Args))
	case EPanic:
		o := fail("InternalError", AwaitPanicInfo(n.ID))
		o.panic = true
		return o
	case EGoexit:
		return fail("InternalError", GoexitInfo)
	}
	if n.Code == "Timeout" {
		return fail("Timeout", AwaitTimeoutInfo)
	}
	return fail(n.Code, n.Info)
}

// added notes that the steps nodes were added by th (as a step's
// callback, a loop's iteration, an item or an error handler adds its
// steps, or the program its level 0, th nil, a Parallel its branches):
// the channel of each AwaitChan or AwaitResult among them is made, and
// gets its value or is closed now (Ready) or At ms later.
func (m *model) added(th *thread, nodes []*Node) {
	for _, n := range nodes {
		key := chanKey{n, th.itemOf()}
		switch {
		case n.Kind == KParallel:
			m.added(th, n.Subs)
		case n.Kind != KAwait || n.Await != AwaitChan && n.Await != AwaitResult:
		case n.NilChan || n.End == EWait:
			m.chans[key] = &chanInst{}
		case n.Ready:
			m.chans[key] = &chanInst{ready: true}
		default:
			inst := &chanInst{}
			m.chans[key] = inst
			m.arm(int64(n.At), &timer{kind: tChanSend, inst: inst, out: awaitOutcome(n)})
		}
	}
}

// recv runs an AwaitChan or AwaitResult: a value waiting in its channel,
// or a closed channel, completes the step at once, in its callback;
// otherwise the step waits for the goroutine that takes it, or a cancel.
func (m *model) recv(th *thread, n *Node) outcome {
	inst := m.chans[chanKey{n, th.itemOf()}]
	if inst == nil {
		panic(fmt.Sprintf("flowfuzz: the channel of %d was never made", n.ID))
	}
	a := &act{node: n, th: th}
	var o outcome
	if inst.ready {
		o = awaitOutcome(n)
		if o.is(errK) {
			o = m.raise(o.code, o.info)
		}
	} else {
		inst.act = a
		o = m.wait(th, a)
	}
	if o.is(errK) && n.Handler != nil {
		return m.handle(th, n.Handler, o)
	}
	return o
}

func (m *model) spawn(parent *thread, body func(th *thread) outcome) *thread {
	th := &thread{m: m, parent: parent, inItem: parent.itemOf()}
	th.next, th.stop = iter.Pull(func(yield func(request) bool) {
		th.yield = yield
		out := body(th)
		yield(request{kind: reqDone, out: out})
	})
	m.threads = append(m.threads, th)
	return th
}

// resume runs th with s until it hands control back, and acts on its
// request.
func (m *model) resume(th *thread, s signal) {
	for {
		th.sig = s
		th.started = true
		r, more := th.next()
		if !more {
			panic("flowfuzz: model thread resumed after its end")
		}
		switch r.kind {
		case reqTurn:
			m.fifo = append(m.fifo, fifoEntry{th: th})
		case reqWait:
		case reqParallel:
			th.branches = th.branches[:0]
			th.pending = len(r.branches)
			for i, b := range r.branches {
				body := func(bt *thread) outcome { return m.level(bt, []*Node{b}) }
				if r.bodies != nil {
					body = r.bodies[i]
				}
				bt := m.spawn(th, body)
				th.branches = append(th.branches, bt)
				m.fifo = append(m.fifo, fifoEntry{th: bt})
			}
		case reqStop:
			m.applyStop()
			return
		case reqCancel:
			if !r.child.started {
				r.child.done = true // nothing of it ran: nothing to cancel
			} else if !r.child.done {
				m.resume(r.child, signal{kind: sigCancel, out: cancelled(nil)})
			}
			s = signal{kind: sigRun}
			continue
		case reqDone:
			th.done = true
			m.ended = m.ended || th == m.root
			if th == m.root {
				if r.out.loopCode() {
					// Break or Continue that found no loop: an
					// InternalError raised as the flow ends.
					m.hook(StepErrorEvent(0, "InternalError", "", false))
				}
				m.hook(FlowEndEvent(0, endEvent(r.out)))
				m.end = endOf(r.out)
				return
			}
			if r.out.is(cancelK) {
				return // cancelled by its parallel, which goes on
			}
			p := th.parent
			if th.item != nil || th.raced {
				// The ForEachLimit or race goes on in the task the item
				// or branch ended in, as a Parallel does.
				p.fresh = th.fresh
				m.resume(p, signal{kind: sigItem, out: r.out, child: th})
				return
			}
			if r.out.is(errK) {
				// The Parallel goes on in the task the branch failed in:
				// if that task has not yielded yet, neither has it.
				p.fresh = th.fresh
				m.resume(p, signal{kind: sigFailed, out: r.out})
				return
			}
			p.pending--
			if p.pending == 0 {
				p.fresh = false
				m.resume(p, signal{kind: sigBranches})
			}
		}
		return
	}
}

// rootCancel is Root.Cancel called from a callback: it queues the task
// that applies it; a second call, or one after the root cancel of the
// tool, does nothing.
func (m *model) rootCancel() {
	if !m.stop {
		m.stop = true
		m.fifo = append(m.fifo, fifoEntry{})
	}
}

// applyStop cancels the flow for a Root.Cancel from a callback, as a root
// cancel from the tool would.
func (m *model) applyStop() {
	m.stopApplied = true
	m.root.fresh = true
	m.resume(m.root, signal{kind: sigCancel, out: cancelled(nil)})
}

func endOf(o outcome) string {
	switch o.kind {
	case okK:
		return "ok(" + FmtArgs(o.args) + ")"
	case errK:
		code := o.code
		if o.loopCode() {
			code = "InternalError" // Break or Continue outside of a loop (docs/DESIGN.md#break-and-continue)
		}
		return "err:" + ErrEnd(code, o.info, o.panic, o.cause)
	}
	return "canceled"
}

func (m *model) event(ev string) {
	m.budget--
	if m.budget < 0 {
		panic("flowfuzz: model runaway")
	}
	m.trace = append(m.trace, AtTime(ev, m.now))
}

func (m *model) arm(d int64, t *timer) *timer {
	t.due = m.now + d
	t.seq = m.seq
	m.seq++
	heap.Push(&m.timers, t)
	return t
}

// armStep arms the timeout of a step th runs (or of an error handler's):
// the Await functions started under it see it as their deadline.
func (m *model) armStep(th *thread, d int64, t *timer) *timer {
	th.timeouts = append(th.timeouts, t)
	return m.arm(d, t)
}

// disarmStep disarms the timeout t of a step of th, which has ended.
func (m *model) disarmStep(th *thread, t *timer) {
	if t == nil {
		return
	}
	th.timeouts = slices.DeleteFunc(th.timeouts, func(e *timer) bool { return e == t })
	m.disarm(t)
}

// stepDue is the time the nearest step timeout armed around where th is
// falls due, -1 for none: an Await function cancelled from then on sees
// context.DeadlineExceeded, not context.Canceled (awaitCall.cause).
func (th *thread) stepDue() int64 {
	due := int64(-1)
	for t := th; t != nil; t = t.parent {
		for _, e := range t.timeouts {
			if !e.dead && (due < 0 || e.due < due) {
				due = e.due
			}
		}
	}
	return due
}

// outlasts reports whether a wait of d from now would not end before the
// nearest step timeout around th: one due at its end runs first.
func (th *thread) outlasts(d int64) bool {
	due := th.stepDue()
	return due >= 0 && th.m.now+d >= due
}

func (m *model) disarm(t *timer) {
	if t != nil && !t.dead {
		t.dead = true
		heap.Remove(&m.timers, t.index)
	}
}

// raise notes an error in the state (docs/DESIGN.md#error-info-and-last-exception) and returns it.
func (m *model) raise(code, info string) outcome { return m.raiseAs(code, info, false) }

// raiseAs is raise; panic: the error is a recovered panic's, which the
// state's LastException shows.
func (m *model) raiseAs(code, info string, panic bool) outcome {
	m.info = info
	m.panic = panic
	o := fail(code, info)
	o.panic = panic
	m.stepError(0, o)
	return o
}

// goexit is a runtime.Goexit in a callback: an InternalError, raised as
// the flow goes on in a task queued before every other (afterGoexit), as
// it would have gone on. The event ends with the goroutine that ran it,
// though: the Await functions cancelled until then return, and those
// started until then are armed, as between any two events (armStarted),
// before the flow goes on; a slot a function gives back is free for it.
func (m *model) goexit() outcome {
	m.armStarted()
	return m.raise("InternalError", GoexitInfo)
}

// raiseFail notes the error that Fail raises with the Go error of the
// EFail or HFail id as its Cause (docs/DESIGN.md#error-info-and-last-exception).
func (m *model) raiseFail(code, info string, id int) outcome {
	o := m.raise(code, info)
	o.cause = id
	return o
}

// raisePanic notes a recovered panic: an InternalError whose info is the
// panic value (docs/DESIGN.md#error-info-and-last-exception, and "A panic in user code...").
func (m *model) raisePanic(id int) outcome { return m.raiseAs("InternalError", PanicValue(id), true) }

// level runs steps in order (docs/DESIGN.md#arguments-between-levels): the
// first gets no args, each next
// one the previous one's success args; the level's result is the last one's.
func (m *model) level(th *thread, steps []*Node) outcome {
	var args []any
	for _, n := range steps {
		if c := th.turn(); c != nil {
			return *c
		}
		o := m.step(th, n, args)
		if !o.is(okK) {
			return o
		}
		args = o.args // nil after a loop or a parallel (docs/DESIGN.md#loop-and-branch-arguments), unless a handler recovered
	}
	if c := th.turn(); c != nil {
		return *c
	}
	return ok(args)
}

// step runs one node of a level with its incoming args.
func (m *model) step(th *thread, n *Node, args []any) outcome {
	switch n.Kind {
	case KParallel:
		return m.parallel(th, n)
	case KSettle:
		return m.settle(th, n)
	case KLoop, KRepeat, KForEach:
		return m.loop(th, n)
	case KRetry:
		return m.retry(th, n)
	case KSync:
		return m.sync(th, n, args)
	case KSuccessStep:
		return ok(intsToArgs(n.Args))
	case KForEachLimit:
		return m.forEachLimit(th, n)
	case KRace:
		return m.race(th, n)
	case KAwait:
		return m.await(th, n)
	}
	return m.call(th, n, args)
}

// call runs a step's callback, its sub-steps or its wait, then its own
// cancel and error handlers (docs/DESIGN.md#error-handlers, #cancel-handlers, #timeouts).
func (m *model) call(th *thread, n *Node, args []any) outcome {
	a := &act{node: n, th: th}
	m.event(StepEvent(n.ID, args))
	if n.ID == m.cancelFrom && !m.cancelInCancel {
		m.rootCancel()
	}
	if n.HasTimeout() {
		d := n.Timeout
		if n.Timeout2 > 0 {
			d = n.Timeout2 // docs/DESIGN.md#timeouts: calling it again re-arms it
		}
		a.timer = m.armStep(th, int64(d), &timer{kind: tTimeout, act: a})
	}
	a.cancel = n.Cancel
	m.added(th, n.Subs) // before the step's own completion is armed
	var o outcome
	subs := len(n.Subs) > 0
	switch {
	case n.End == EPanic:
		o = m.raisePanic(n.ID) // the sub-steps added do not run
	case n.End == EPanicEvil:
		o = m.raiseAs("InternalError", EvilInfo, true)
	case n.End == EGoexit:
		o = m.goexit() // like a panic, without a PanicError
	case n.End == EParent:
		o = m.raise("InternalError", "Success called on the AsyncSteps of a step that waits for its sub-steps")
	case n.End == EParentBreak:
		o = m.raise("InternalError", breakName(n.Label)+" called on the AsyncSteps of a step that waits for its sub-steps")
	case subs && n.End == ESuccess:
		o = m.raise("InternalError", "Success called after Add") // docs/DESIGN.md#completing-after-add
	case subs && (n.End == EError || n.End == EFail):
		o = m.raise("InternalError", "Error called after Add") // no Cause: Fail's error is not raised
	case n.End == EError:
		o = m.raise(n.Code, n.Info)
	case n.End == EFail:
		o = m.raiseFail(n.Code, n.Info, n.ID)
	case n.End == EBreak:
		o = m.raise("LoopBreak", n.Label) // docs/DESIGN.md#break-and-continue
	case n.End == EContinue:
		o = m.raise("LoopCont", n.Label)
	default:
		if n.End == EExternal || n.End == EExternalErr || n.End == EExternalFail {
			t := &timer{kind: tExternal, act: a, out: ok(intsToArgs(n.Args))}
			if n.End != EExternal {
				t.out = fail(n.Code, n.Info)
			}
			if n.End == EExternalFail {
				t.out.cause = n.ID
			}
			m.arm(int64(n.At), t)
		}
		switch {
		case subs:
			o = m.level(th, n.Subs) // sub-steps win over waiting
		case n.End == ESuccess:
			o = ok(intsToArgs(n.Args))
		case n.End == EImplicit && !n.HasTimeout() && !n.Cancel:
			o = ok(nil) // implicit success (spec 1.6)
		default:
			o = m.wait(th, a)
		}
	}
	if o.is(cancelK) && o.target == a {
		o = m.raise("Timeout", "") // docs/DESIGN.md#timeouts: the timer of this very step
	}
	m.disarmStep(th, a.timer)
	if !o.is(okK) && a.cancel && !a.succeeded {
		m.event(CancelEvent(n.ID))
		if n.ID == m.cancelFrom && m.cancelInCancel {
			m.rootCancel()
		}
		if n.CancelPanic && o.is(errK) {
			// On the path of an error, the panic replaces it
			// (docs/DESIGN.md#cancel-handlers); in a subtree that is only
			// cancelled it replaces nothing.
			o = m.raiseAs("InternalError", CancelPanicValue(n.ID), true)
		} else if n.CancelPanic {
			// Reported all the same (docs/DESIGN.md#hooks).
			m.stepError(0, outcome{kind: errK, code: "InternalError", info: CancelPanicValue(n.ID), panic: true})
		} else if n.CancelGoexit && o.is(errK) {
			o = m.goexit() // as the panic, without a PanicError
		} else if n.CancelGoexit {
			m.armStarted() // the event ends there, as in goexit
			m.stepError(0, fail("InternalError", GoexitInfo))
		}
	}
	// After the step's own cancel handler, which may have called
	// Root.Cancel, as unwind looks (flow.stopped).
	o = th.unwinding(o)
	if o.is(errK) && n.Handler != nil {
		return m.handle(th, n.Handler, o)
	}
	return o
}

// wait blocks the thread until an external completion or a cancel.
func (m *model) wait(th *thread, a *act) outcome {
	a.waiting = true
	s := th.waitSignal()
	a.waiting = false
	o := s.out
	if s.kind == sigDeadline {
		return m.deadline(th)
	}
	if s.kind == sigComplete && o.is(errK) {
		m.info = o.info
		m.panic = o.panic
		m.stepError(0, o)
	}
	return o
}

// waitSignal waits; past Run's deadline the flow queues the expiry of the
// wait at once (flow.settle).
func (th *thread) waitSignal() signal {
	th.waitSeq++
	if th.m.late {
		th.m.fifo = append(th.m.fifo, fifoEntry{th: th, sig: signal{kind: sigDeadline}, token: th.waitSeq})
	}
	th.inWait = true
	s := th.ask(request{kind: reqWait})
	th.inWait = false
	return s
}

// deadline is the Timeout of Run's deadline where th waits: it goes
// through every loop around (lateRun.timedOut).
func (m *model) deadline(th *thread) outcome {
	m.hitLoops(th, nil)
	return m.raise("Timeout", RunDeadlineInfo)
}

// hitLoops notes the loops around th's wait as hit by a timeout of the
// deadline; with below set, only those around that loop of th.
func (m *model) hitLoops(th *thread, below *loopExec) {
	for t := th; t != nil; t = t.parent {
		loops := t.loops
		if t == th && below != nil {
			loops = loops[:slices.Index(loops, below)]
		}
		for _, l := range loops {
			if !slices.Contains(m.hit, l) {
				m.hit = append(m.hit, l)
			}
		}
	}
}

// lateIteration reports whether the iteration of l that begins fails with
// Timeout, a timeout of the deadline having gone through an earlier one
// (rundeadline.go's lateIteration), and notes the loops around l.
func (m *model) lateIteration(th *thread, l *loopExec) bool {
	i := slices.Index(m.hit, l)
	if i < 0 {
		return false
	}
	m.hit = slices.Delete(m.hit, i, i+1)
	m.hitLoops(th, l)
	return true
}

// enterLoop notes a loop's execution in th until the returned func is
// called.
func (th *thread) enterLoop() (*loopExec, func()) {
	l := &loopExec{}
	th.loops = append(th.loops, l)
	return l, func() { th.loops = th.loops[:len(th.loops)-1] }
}

// awaitThen runs the rest of an AwaitThen, whose function a runs: the
// step AwaitThen adds has two sub-steps, the Await step (with the
// handler) and then's.
func (m *model) awaitThen(th *thread, n *Node, a *act) outcome {
	o := m.wait(th, a)
	if !a.returned {
		m.cancelCall(a)
	}
	if o.is(errK) && n.Handler != nil {
		o = m.handle(th, n.Handler, o)
	}
	if !o.is(okK) {
		return o
	}
	if c := th.turn(); c != nil { // then's step
		return *c
	}
	v := 0
	if len(o.args) > 0 {
		v = o.args[0].(int)
	}
	m.event(ThenEvent(n.ID, v))
	if c := th.turn(); c != nil { // the added step completes
		return *c
	}
	return ok(nil)
}

// await runs a KAwait: it waits for the completion armed when its
// function, or its flow, has started.
func (m *model) await(th *thread, n *Node) outcome {
	if n.Await == AwaitChan || n.Await == AwaitResult {
		return m.recv(th, n)
	}
	if n.Await == AwaitThen {
		// The step AwaitThen adds: its callback adds the Await step,
		// which starts after the turn of that level.
		if c := th.turn(); c != nil {
			return *c
		}
	}
	a := &act{node: n, th: th}
	switch {
	case n.Await == AwaitFlow:
		m.fifo = append(m.fifo, fifoEntry{flow: a}) // Promise queues the flow's start
	default:
		if n.End != EWait {
			m.started = append(m.started, a)
		}
		if m.hooks {
			m.awaitHooks = append(m.awaitHooks, AwaitStartEvent(n.ID))
		}
		a.due = th.stepDue()
		// The sections and items around the step, innermost first, the
		// order in which the function gives their slots back as it
		// returns (their waiters let in, their next pairs taken).
		for t := th; t != nil; t = t.parent {
			for i := len(t.sections) - 1; i >= 0; i-- {
				e := t.sections[i]
				e.holds++
				a.holds = append(a.holds, e)
			}
		}
	}
	if n.Await == AwaitThen {
		return m.awaitThen(th, n, a)
	}
	o := m.wait(th, a)
	if n.Await != AwaitFlow && !a.returned {
		m.cancelCall(a) // it returns once the event is over
	}
	if n.Await == AwaitFlow && !a.flowDone { // cancelled, or timed out by Run's deadline
		m.fifo = append(m.fifo, fifoEntry{flow: a, flowCancel: true}) // the Cancel of the flow queues its task
	}
	if o.is(errK) && n.Handler != nil {
		return m.handle(th, n.Handler, o)
	}
	return o
}

// handle runs an error handler for the error o (docs/DESIGN.md#error-handlers),
// unless a Root.Cancel from a callback is seen first; an error the handler
// raises or lets go on unwinds on.
func (m *model) handle(th *thread, h *Handler, o outcome) outcome {
	if o = th.unwinding(o); !o.is(errK) {
		return o
	}
	return th.unwinding(m.runHandler(th, h, o))
}

// runHandler runs the error handler h for the error o.
func (m *model) runHandler(th *thread, h *Handler, o outcome) outcome {
	info := m.info
	if m.panic && o.code == "InternalError" {
		info = PanicInfo(info)
	}
	m.event(HandlerEvent(h.ID, o.code, info) + CauseSuffix(o.cause))
	if h.ID == m.cancelFrom {
		m.rootCancel()
	}
	switch h.Action {
	case HPanic:
		return m.raisePanic(h.ID)
	case HGoexit:
		return m.goexit()
	case HWait:
		// The handler waits like a step; its completion decides as its
		// synchronous Success or Error would (docs/DESIGN.md#error-handlers), its timeout
		// raises Timeout, which goes on outward.
		a := &act{th: th}
		if h.Timeout > 0 {
			a.timer = m.armStep(th, int64(h.Timeout), &timer{kind: tTimeout, act: a})
		}
		switch h.Done {
		case EExternal:
			m.arm(int64(h.At), &timer{kind: tExternal, act: a, out: ok(intsToArgs(h.Args))})
		case EExternalErr:
			// Raised by the handler: the Cause of the error it handles.
			out := fail(h.Code, h.Info)
			out.cause = o.cause
			m.arm(int64(h.At), &timer{kind: tExternal, act: a, out: out})
		}
		w := m.wait(th, a)
		if w.is(cancelK) && w.target == a {
			w = m.raise("Timeout", "")
		}
		m.disarmStep(th, a.timer)
		return w
	case HRecover:
		return ok(intsToArgs(h.Args))
	case HRethrow:
		return m.raiseFail(h.Code, h.Info, o.cause) // the Cause of the error it handles
	case HFail:
		return m.raiseFail(h.Code, h.Info, h.ID)
	case HAdd:
		// A failure goes on outward: never this handler again. Its own
		// timeout and cancel handler act as a step's.
		a := &act{th: th}
		if h.Timeout > 0 {
			a.timer = m.armStep(th, int64(h.Timeout), &timer{kind: tTimeout, act: a})
		}
		m.added(th, h.Steps)
		o := m.level(th, h.Steps)
		if o.is(cancelK) && o.target == a {
			o = m.raise("Timeout", "")
		}
		m.disarmStep(th, a.timer)
		if !o.is(okK) && h.Cancel {
			m.event(HandlerCancelEvent(h.ID))
		}
		return o
	}
	return o
}

// parallel starts the branches as threads and waits for them (docs/DESIGN.md#parallel-branches).
func (m *model) parallel(th *thread, n *Node) outcome {
	o := m.branches(th, n.Subs, nil)
	if o.is(errK) && n.Handler != nil {
		return m.handle(th, n.Handler, o)
	}
	return o
}

// branches runs a Parallel: a thread per branch, which runs the branch's
// node, or its body if bodies are given; the first that fails cancels
// the others.
func (m *model) branches(th *thread, subs []*Node, bodies []func(*thread) outcome) outcome {
	var o outcome
	if len(subs) == 0 {
		o = ok(nil)
	} else {
		s := th.ask(request{kind: reqParallel, branches: subs, bodies: bodies})
		switch s.kind {
		case sigBranches:
			o = ok(nil)
		case sigFailed, sigCancel, sigDeadline:
			for _, b := range th.branches {
				if !b.done {
					th.ask(request{kind: reqCancel, child: b})
				}
			}
			o = s.out
			if s.kind == sigDeadline {
				o = m.deadline(th)
			}
			o = th.unwinding(o) // a cancel handler of a branch may have called Root.Cancel
		default:
			panic("flowfuzz: parallel resumed with " + fmt.Sprint(s.kind))
		}
	}
	return o
}

// settle runs a Settle (docs/DESIGN.md#parallel-branches): the step it
// adds, whose callback adds a Parallel and then's step.
func (m *model) settle(th *thread, n *Node) outcome {
	outcomes := make([]string, len(n.Subs))
	bodies := make([]func(*thread) outcome, len(n.Subs))
	for i, b := range n.Subs {
		bodies[i] = func(bt *thread) outcome { return m.settleBranch(bt, b, &outcomes[i]) }
	}
	if c := th.turn(); c != nil { // the Parallel
		return *c
	}
	if o := m.branches(th, n.Subs, bodies); !o.is(okK) {
		return o
	}
	if c := th.turn(); c != nil { // then's step
		return *c
	}
	m.event(SettleEvent(n.ID, outcomes))
	if c := th.turn(); c != nil { // the added step completes
		return *c
	}
	return ok(nil)
}

// settleBranch runs the branch b of a Settle: a step whose callback adds
// the step that adds b, guarded by Settle's handler, which recovers from
// an error but Break and Continue with the error as the outcome, and the
// step that stores the outcome in *out.
func (m *model) settleBranch(th *thread, b *Node, out *string) outcome {
	for range 2 { // the branch's step, the guarded one
		if c := th.turn(); c != nil {
			return *c
		}
	}
	m.added(th, []*Node{b})
	switch o := th.unwinding(m.level(th, []*Node{b})); { // before Settle's handler
	case o.is(okK):
		v := 0
		if len(o.args) > 0 {
			v = o.args[0].(int)
		}
		*out = SettledOk(v)
	case o.is(errK) && !o.loopCode():
		*out = SettledErr(ErrEnd(o.code, o.info, o.panic, o.cause))
	default:
		return o
	}
	for range 3 { // the step that stores, the ends of the two levels
		if c := th.turn(); c != nil {
			return *c
		}
	}
	return ok(nil)
}

// raceExec is one execution of a First or Quorum.
type raceExec struct {
	need    int   // the successes it needs: Quorum's k, 1 for First
	results []int // the results stored, at most need, in the order stored
}

// race runs a First or Quorum (docs/DESIGN.md#first-and-quorum): the step
// it adds, whose callback adds the race, a Parallel's branches, and
// then's step. A branch that fails ends alone while need successes can
// still be had; the need-th success, or the failure after which need
// can no longer be had, a Break or Continue, a cancel or Run's deadline
// cancels the branches still running, in their order, as a Parallel's
// failed branch does its siblings.
func (m *model) race(th *thread, n *Node) outcome {
	rx := &raceExec{need: max(n.Need, 1)}
	spare := len(n.Subs) - rx.need
	if c := th.turn(); c != nil { // the race
		return *c
	}
	th.branches = th.branches[:0]
	for _, b := range n.Subs {
		bt := m.spawn(th, func(bt *thread) outcome { return m.raceBranch(bt, rx, b) })
		bt.raced = true
		th.branches = append(th.branches, bt)
		m.fifo = append(m.fifo, fifoEntry{th: bt})
	}
	won := 0
	for won < rx.need {
		s := th.ask(request{kind: reqWait})
		switch {
		case s.kind == sigItem && s.out.is(okK):
			won++
		case s.kind == sigItem && spare > 0 && !s.out.loopCode():
			spare-- // the branch ends alone
		case s.kind == sigItem, s.kind == sigCancel, s.kind == sigDeadline:
			return m.raceFails(th, s)
		default:
			panic("flowfuzz: race resumed with " + fmt.Sprint(s.kind))
		}
	}
	m.cancelBranches(th)
	if c := th.turn(); c != nil { // then's step
		return *c
	}
	vs := rx.results
	if n.Need == 0 {
		vs = vs[:1]
	}
	m.event(RaceEvent(n.ID, vs))
	if c := th.turn(); c != nil { // the added step completes
		return *c
	}
	return ok(nil)
}

// cancelBranches cancels the branches of th still running, in their
// order (one not started is dropped).
func (m *model) cancelBranches(th *thread) {
	for _, b := range th.branches {
		if !b.done {
			th.ask(request{kind: reqCancel, child: b})
		}
	}
}

// raceFails ends a race as s says, as a Parallel ends at a failed branch,
// a cancel or Run's deadline.
func (m *model) raceFails(th *thread, s signal) outcome {
	m.cancelBranches(th)
	o := s.out
	if s.kind == sigDeadline {
		o = m.deadline(th)
	}
	return th.unwinding(o) // a cancel handler of a branch may have called Root.Cancel
}

// raceBranch runs the branch b of rx: a step whose callback adds the step
// that adds b and the step that stores its result, read as Gather reads
// it, while fewer than need are stored.
func (m *model) raceBranch(th *thread, rx *raceExec, b *Node) outcome {
	for range 2 { // the branch's step, the one that adds b
		if c := th.turn(); c != nil {
			return *c
		}
	}
	m.added(th, []*Node{b})
	o := m.level(th, []*Node{b})
	if !o.is(okK) {
		return th.unwinding(o) // at the branch, before the race sees it
	}
	if c := th.turn(); c != nil { // the step that stores
		return *c
	}
	if len(rx.results) < rx.need {
		v := 0
		if len(o.args) > 0 {
			v = o.args[0].(int)
		}
		rx.results = append(rx.results, v)
	}
	for range 2 { // the ends of the two levels
		if c := th.turn(); c != nil {
			return *c
		}
	}
	return ok(nil)
}

// limitExec is one execution of a ForEachLimit.
type limitExec struct {
	n       *Node
	th      *thread   // the thread of the step, which waits for its items
	loop    *loopExec // the step, as Run's deadline goes through its items
	pulled  int       // the pairs pulled
	pending int       // the items running
	held    int       // the slots of ended items that their Await functions keep
	taken   bool      // no further pair is taken: run out, a Break, an error
	ahead   bool      // a pair is pulled and its item not started
	stopped bool      // the sequence has returned: SeqEndEvent is traced
	ended   bool      // the step has ended: its slots matter no more
}

// free reports whether a slot is free for the next item: the items
// running and the slots that ended items' Await functions keep are
// below the limit.
func (lx *limitExec) free() bool { return lx.pending+lx.held < lx.n.Limit }

// forEachLimit runs a ForEachLimit (docs/DESIGN.md#foreachlimit): a
// Parallel whose branches, the items, start one per pair of the
// sequence, pulled as slots come free (see take). An item's end, or a
// slot that comes back, gives the step's thread the hand (sigItem,
// sigSlot), in the task where that happened, as a Parallel's branch
// does. The step's cancel handler stops the sequence; it gives no args.
func (m *model) forEachLimit(th *thread, n *Node) outcome {
	l, done := th.enterLoop()
	lx := &limitExec{n: n, th: th, loop: l}
	th.branches = th.branches[:0]
	for {
		switch completed, failed := m.take(th, lx); {
		case completed:
			done()
			return ok(nil)
		case failed != nil:
			return m.limitFails(th, lx, signal{kind: sigFailed, out: *failed}, done)
		}
		s := th.ask(request{kind: reqWait})
		switch {
		case s.kind == sigSlot:
		case s.kind == sigItem && !itemFails(s.out):
			m.itemEnds(lx, s.child, s.out)
		case s.kind == sigItem, s.kind == sigCancel, s.kind == sigDeadline:
			return m.limitFails(th, lx, s, done)
		default:
			panic("flowfuzz: ForEachLimit resumed with " + fmt.Sprint(s.kind))
		}
	}
}

// limitFails ends the ForEachLimit lx as s says: an item's error, the
// panic of its sequence (sigFailed), a cancel, Run's deadline. The items
// running are cancelled (one not started yet is dropped), then the step's
// cancel handler stops the sequence, and its handler sees the error; no
// further pair is taken. done ends the step's loop, which Run's deadline
// times out as a whole.
func (m *model) limitFails(th *thread, lx *limitExec, s signal, done func()) outcome {
	lx.ended, lx.taken = true, true
	for _, b := range th.branches {
		if !b.done {
			th.ask(request{kind: reqCancel, child: b})
		}
	}
	done()
	o := s.out
	if s.kind == sigDeadline {
		o = m.deadline(th) // noted before the step's own cancel handler runs
	}
	m.seqStop(lx)
	if o = th.unwinding(o); o.is(errK) && lx.n.Handler != nil {
		return m.handle(th, lx.n.Handler, o)
	}
	return o
}

// itemFails reports whether an item that ended with o fails the step: an
// error, or a Break or Continue with a label, meant for a loop around
// the step. An unlabelled Continue ends the item as a success does, and
// an unlabelled Break too, once it has stopped the sequence.
func itemFails(o outcome) bool { return o.is(errK) && (!o.loopCode() || o.info != "") }

// take starts items, one per pair pulled in the sequence's order, while a
// slot is free, and reports whether the step has completed: the sequence
// has run out (a pull found nothing, and the sequence returned) or was
// stopped, and no item runs; or the error that fails it: the panic of the
// sequence, raised at the step as the pull returns, after the sequence's
// cleanup has run (its deferred calls run as it panics). No pair is pulled while every slot is taken
// and an item runs, whose end comes first; when no item runs and the
// Await functions of ended items keep every slot, one pair is pulled
// ahead, to learn whether the sequence has run out, and its item starts
// once a slot comes back (see slotBack).
func (m *model) take(th *thread, lx *limitExec) (completed bool, failed *outcome) {
	for !lx.taken {
		if !lx.ahead {
			if !lx.free() && lx.pending > 0 {
				return false, nil
			}
			if lx.pulled == lx.n.Count {
				lx.taken = true
				m.seqStop(lx)
				if lx.n.SeqPanic || lx.n.SeqGoexit {
					o := m.seqFault(lx.n)
					return false, &o
				}
				break
			}
			m.event(PullEvent(lx.n.ID, lx.pulled))
			lx.pulled++
			lx.ahead = true
		}
		if !lx.free() {
			return false, nil
		}
		lx.ahead = false
		m.startItem(th, lx, lx.pulled-1)
	}
	if lx.pending > 0 {
		return false, nil
	}
	lx.ended = true
	return true, nil
}

// seqFault raises the error of the sequence of n, which panics or calls
// runtime.Goexit after its last pair.
func (m *model) seqFault(n *Node) outcome {
	if n.SeqGoexit {
		return m.goexit()
	}
	return m.raisePanic(n.ID)
}

// seqStop notes that the sequence of lx returns, once: it ran out, or was
// stopped (at a Break, by the step's cancel handler).
func (m *model) seqStop(lx *limitExec) {
	if !lx.stopped {
		lx.stopped = true
		m.event(SeqEndEvent(lx.n.ID))
	}
}

// startItem starts the item of pair i: a branch thread, queued behind the
// work already queued, as a Parallel's branches are. The Await functions
// started inside it hold its slot (entry), as a section's.
func (m *model) startItem(th *thread, lx *limitExec, i int) {
	lx.pending++
	bt := m.spawn(th, func(bt *thread) outcome { return m.item(bt, lx, i) })
	bt.item, bt.inItem = lx, bt
	bt.slot = &entry{th: bt, item: lx, state: 2}
	bt.sections = []*entry{bt.slot}
	th.branches = append(th.branches, bt)
	m.fifo = append(m.fifo, fifoEntry{th: bt})
}

// item runs the item i of lx: a branch that runs its step itself, so a
// level of one step, whose callback traces, then calls Break or Continue
// at the item At, or returns at once there, else adds the Subs. Once a timeout of Run's deadline
// has gone through an earlier item, the item fails with Timeout instead,
// before its callback, as a loop's next iteration does.
func (m *model) item(th *thread, lx *limitExec, i int) outcome {
	n := lx.n
	if c := th.turn(); c != nil {
		return *c
	}
	var o outcome
	switch {
	case m.lateIteration(lx.th, lx.loop):
		o = m.raise("Timeout", RunDeadlineInfo)
	default:
		m.event(ForEachEvent(n.ID, i, ElemValue(n.ID, i)))
		switch {
		case i == n.At && n.End == EBreak:
			o = m.raise("LoopBreak", n.Label)
		case i == n.At && n.End == EContinue:
			o = m.raise("LoopCont", n.Label)
		case i == n.At && n.End == ESuccess:
			o = ok(nil) // an item that ends at once frees its slot first
		case len(n.Subs) > 0:
			m.added(th, n.Subs)
			o = m.level(th, n.Subs)
		default:
			o = ok(nil)
		}
	}
	if !o.is(okK) {
		return th.unwinding(o) // at the branch, before the step sees it
	}
	if c := th.turn(); c != nil { // the branch completes
		return *c
	}
	return ok(nil)
}

// itemEnds counts out the item b, which ended with o, a success or an
// unlabelled Break or Continue: its slot is free, unless Await functions
// started inside it still run, which keep it until the last returns. A
// Break stops the sequence at once, unless no further pair was to be
// taken anyway.
func (m *model) itemEnds(lx *limitExec, b *thread, o outcome) {
	lx.pending--
	if e := b.slot; e.holds > 0 {
		e.state = 4
		lx.held++
	} else {
		e.state = 3
	}
	if o.is(errK) && o.code == "LoopBreak" && !lx.taken {
		lx.taken = true
		m.seqStop(lx)
	}
}

// slotBack runs as the last Await function of the ended item of e has
// returned: unless the step has ended (its goroutine reads that), it
// queues the task that gives the slot back (see slotTask).
func (m *model) slotBack(e *entry) {
	e.state = 3
	if !e.item.ended {
		m.fifo = append(m.fifo, fifoEntry{slot: e.item})
	}
}

// slotTask gives back a slot of lx, then takes the next pairs, unless the
// step has ended meanwhile. The step goes on where it completes, after a
// turn, as a flow driven from outside goes on.
func (m *model) slotTask(lx *limitExec) {
	if lx.ended {
		return
	}
	lx.held--
	lx.th.fresh = false
	m.resume(lx.th, signal{kind: sigSlot})
}

// loop runs iterations; each is a step whose callback traces and adds the
// body. Break and Continue are caught by the innermost loop, or the one with
// their label (docs/DESIGN.md#break-and-continue).
func (m *model) loop(th *thread, n *Node) outcome {
	var keys, values []any // KForEach: the collection in iteration order
	if n.Kind == KForEach {
		type kv struct {
			k string
			v int
		}
		var elems []kv
		for i := range n.Count {
			elems = append(elems, kv{MapKey(i), ElemValue(n.ID, i)})
		}
		if n.Map {
			slices.SortFunc(elems, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		}
		for i, e := range elems {
			if n.Map {
				keys = append(keys, e.k)
			} else {
				keys = append(keys, i)
			}
			values = append(values, e.v)
		}
	}
	counted := n.Kind != KLoop // Repeat and ForEach end after Count iterations
	l, done := th.enterLoop()
	defer done()
	for i := 0; ; i++ {
		if counted && i >= n.Count {
			return m.loopEnd(th, n)
		}
		if c := th.turn(); c != nil {
			return *c
		}
		if m.lateIteration(th, l) {
			return m.raise("Timeout", RunDeadlineInfo)
		}
		if n.Kind == KForEach {
			m.event(ForEachEvent(n.ID, keys[i], values[i]))
		} else {
			m.event(IterEvent(n.ID, i))
		}
		var o outcome
		switch {
		case n.Kind == KLoop && i >= n.Count:
			o = m.raise("LoopBreak", "")
		case n.Kind == KForEach && i == n.At && n.End == EBreak:
			o = m.raise("LoopBreak", n.Label)
		case n.Kind == KForEach && i == n.At && n.End == EContinue:
			o = m.raise("LoopCont", n.Label)
		case len(n.Subs) > 0:
			m.added(th, n.Subs)
			o = m.level(th, n.Subs)
		default:
			o = ok(nil)
		}
		if o.loopCode() && (o.info == "" || o.info == n.Label) {
			if o.code == "LoopBreak" {
				return ok(nil)
			}
			continue
		}
		if !o.is(okK) {
			return o
		}
		if counted && i+1 >= n.Count {
			// The check that ends the loop takes a turn of its own too.
			if c := th.turn(); c != nil {
				return *c
			}
			return m.loopEnd(th, n)
		}
		if c := th.turn(); c != nil {
			return *c
		}
	}
}

// loopEnd ends the loop n once its iterations are over: a success, or the
// error of its sequence, which fails as it is pulled after the last pair
// (SeqPanic, SeqGoexit). The pull queues an iteration that raises it,
// which takes a turn as any step does, and raises it before it would
// check Run's deadline.
func (m *model) loopEnd(th *thread, n *Node) outcome {
	if !n.SeqPanic && !n.SeqGoexit {
		return ok(nil)
	}
	if n.SeqGoexit {
		m.armStarted() // the Goexit ends the event as the pull runs
	}
	if c := th.turn(); c != nil {
		return *c
	}
	return m.seqFault(n)
}

// gate is one admission stage of a critical section: a Mutex or a
// Throttle (a Limiter has one of each, in that order).
type gate struct {
	mx  *mutex
	thr *throttle
}

func (m *model) gatesOf(n *Node) []gate {
	switch n.Mutex {
	case ThrottleGate:
		return []gate{{thr: m.thr}}
	case LimiterGate:
		var g []gate
		if m.limMutex != nil {
			g = append(g, gate{mx: m.limMutex})
		}
		if m.limThrottle != nil {
			g = append(g, gate{thr: m.limThrottle})
		}
		return g
	}
	if IsKeyed(n.Mutex) {
		return []gate{{mx: m.keys[n.Mutex-KeyedGate]}}
	}
	return []gate{{mx: m.mutexes[n.Mutex]}}
}

func (m *model) enterGate(th *thread, g gate, e *entry) (outcome, string) {
	if g.thr != nil {
		return m.throttleEnter(th, g.thr, e)
	}
	return m.enter(th, g.mx, e)
}

func (m *model) leaveGate(g gate, e *entry) {
	if g.thr != nil {
		m.throttleLeave(g.thr, e)
	} else {
		m.leave(g.mx, e)
	}
}

// sync runs a critical section: a step whose sub-steps are an enter step
// per gate, the body with its handler, and leave.
func (m *model) sync(th *thread, n *Node, args []any) outcome {
	gates := m.gatesOf(n)
	entries := make([]*entry, len(gates))
	for i := range entries {
		entries[i] = &entry{th: th}
	}
	left := false
	leave := func() {
		if left {
			return
		}
		left = true
		for i := len(gates) - 1; i >= 0; i-- {
			m.leaveGate(gates[i], entries[i])
		}
	}
	o := func() outcome {
		var refusal string
		for i, g := range gates {
			if c := th.turn(); c != nil { // enter
				return *c
			}
			if refusal != "" {
				continue // refused by a gate before: not asked
			}
			var o outcome
			o, refusal = m.enterGate(th, g, entries[i])
			if !o.is(okK) {
				return o
			}
			if refusal != "" && i > 0 {
				leave() // the slots of the gates before go back at once
			}
		}
		if c := th.turn(); c != nil { // the body
			return *c
		}
		var o outcome
		if refusal != "" {
			// The body's step raises the refusal instead of running f.
			code := "DefenseRejected"
			if refusal == MutexDeadlock {
				code = "InternalError"
			}
			o = m.raise(code, refusal)
			if h := n.Body.Handler; h != nil {
				o = m.handle(th, h, o)
			}
		} else {
			// Await functions started in the body hold its slots.
			depth := len(th.sections)
			for i, g := range gates {
				if g.mx != nil && entries[i].state == 2 {
					th.sections = append(th.sections, entries[i])
				}
			}
			o = m.call(th, n.Body, args)
			th.sections = th.sections[:depth]
		}
		if !o.is(okK) {
			return o
		}
		if c := th.turn(); c != nil { // leave
			return *c
		}
		leave()
		return o
	}()
	if !o.is(okK) {
		leave() // the Sync step's cancel handler
		return o
	}
	if c := th.turn(); c != nil { // the Sync step completes
		return *c
	}
	return o
}

// enter asks the Mutex for a slot: at once when free or held by the same
// flow; a refusal when the queue is full; else the thread waits in the queue.
func (m *model) enter(th *thread, mx *mutex, e *entry) (outcome, string) {
	e.mx = mx
	if mx.holders[th] > 0 || !mx.full() {
		mx.holders[th]++
		e.state = 2
		return ok(nil), ""
	}
	if mx.maxQueue >= 0 && len(mx.queue) >= mx.maxQueue {
		return ok(nil), "Mutex queue limit"
	}
	e.chain = th.outer()
	if mx.deadlocked(e.chain) {
		return ok(nil), MutexDeadlock
	}
	e.state, e.since = 1, m.now
	mx.queue = append(mx.queue, e)
	return m.admitted(th.ask(request{kind: reqWait})), ""
}

// admitted is the outcome of a wait in a gate's queue: let in, cancelled,
// or failed by a panic of the SyncWait hook.
func (m *model) admitted(s signal) outcome {
	if o := s.out; s.kind == sigComplete && o.is(errK) {
		m.info, m.panic = o.info, o.panic
		m.stepError(0, o)
	}
	return s.out
}

func (m *model) leave(mx *mutex, e *entry) {
	switch e.state {
	case 1:
		mx.queue = removeEntry(mx.queue, e)
		e.state = 3
		return
	case 2:
		e.state = 3
		if mx.holders[e.th]--; mx.holders[e.th] > 0 {
			return
		}
		delete(mx.holders, e.th)
		if e.holds > 0 {
			e.state = 4
			mx.workHeld++
			return
		}
	case 4:
		e.state = 3
		mx.workHeld--
	default:
		return
	}
	for !mx.full() && len(mx.queue) > 0 {
		w := mx.queue[0]
		mx.queue = mx.queue[1:]
		mx.holders[w.th]++
		w.state = 2
		m.admit(w, mx.gate)
	}
}

// MutexDeadlock is the info of the InternalError of a Mutex deadlock.
const MutexDeadlock = "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"

// outer returns the flows th runs inside of: the threads of the Parallels
// around it, innermost first.
func (th *thread) outer() []*thread {
	var chain []*thread
	for p := th.parent; p != nil; p = p.parent {
		chain = append(chain, p)
	}
	return chain
}

// deadlocked reports whether a waiter inside the flows chain would wait
// for ever (docs/DESIGN.md#locks-and-limits): every holder of the full
// Mutex is a flow that waits for a branch queued for it, or for this one.
func (mx *mutex) deadlocked(chain []*thread) bool {
	waits := func(p *thread) bool {
		if slices.Contains(chain, p) {
			return true
		}
		for _, w := range mx.queue {
			if slices.Contains(w.chain, p) {
				return true
			}
		}
		return false
	}
	if mx.workHeld > 0 {
		return false // an Await function gives its slot back
	}
	for p := range mx.holders {
		if !waits(p) {
			return false
		}
	}
	return true
}

func removeEntry(q []*entry, e *entry) []*entry {
	for i, w := range q {
		if w == e {
			return append(q[:i:i], q[i+1:]...)
		}
	}
	return q
}

// throttleEnter asks the Throttle for an entry in the current period,
// starting one if it is idle.
func (m *model) throttleEnter(th *thread, t *throttle, e *entry) (outcome, string) {
	if !t.running {
		t.running = true
		t.entered = 0
		m.timePeriod(t)
	}
	if m.now >= t.ends {
		// The period is over, its timer not run yet: the flow ends it,
		// full or not, the waiters first, and times the period begun now
		// from its entry, as one that opens a period after idle does.
		m.timePeriod(t)
		m.admitWaiters(t)
	}
	if t.entered < t.n {
		t.entered++
		e.state = 2
		return ok(nil), ""
	}
	if t.queueMax >= 0 && len(t.queue) >= t.queueMax {
		return ok(nil), "Throttle queue limit"
	}
	e.state, e.since = 1, m.now
	t.queue = append(t.queue, e)
	return m.admitted(th.ask(request{kind: reqWait})), ""
}

// throttleLeave takes a waiter out of the queue; an entry is never given
// back.
func (m *model) throttleLeave(t *throttle, e *entry) {
	if e.state == 1 {
		t.queue = removeEntry(t.queue, e)
	}
	e.state = 3
}

// periodEnd ends the Throttle's period: a new one starts for the flows
// that wait, else the Throttle goes idle.
func (m *model) periodEnd(t *throttle) {
	if len(t.queue) == 0 {
		t.running, t.timer = false, nil
		return
	}
	m.timePeriod(t)
	m.admitWaiters(t)
}

// timePeriod arms the timer of the Throttle's period that begins now.
func (m *model) timePeriod(t *throttle) {
	t.ends = m.now + t.period
	t.timer = m.arm(t.period, &timer{kind: tThrottle, thr: t})
}

// admitWaiters starts a period: the waiters at the head of the queue
// enter, up to the limit.
func (m *model) admitWaiters(t *throttle) {
	t.entered = 0
	for t.entered < t.n && len(t.queue) > 0 {
		w := t.queue[0]
		t.queue = t.queue[1:]
		t.entered++
		w.state = 2
		m.admit(w, t.gate)
	}
}

// retry runs the attempts of a Retry (docs/DESIGN.md#retry): a Repeat
// whose iteration is the attempt, with an error handler that, for a
// retryable failure with attempts left, waits the backoff and swallows the
// error, so that the next attempt runs; a success ends the loop with the
// attempt's args.
func (m *model) retry(th *thread, n *Node) outcome {
	rs := n.Retry
	l, done := th.enterLoop()
	defer done()
	for i := 0; ; i++ {
		if c := th.turn(); c != nil {
			return *c
		}
		var o outcome
		if m.lateIteration(th, l) {
			o = m.raise("Timeout", RunDeadlineInfo) // the attempt's step: its handler retries nothing past the deadline
		} else {
			o = m.attempt(th, n, i)
		}
		o = th.unwinding(o) // before the attempt's handler
		switch {
		case o.is(okK):
			if c := th.turn(); c != nil {
				return *c
			}
			return o
		case o.is(cancelK):
			return o
		case o.loopCode():
			if o.info != "" && o.info != n.Label {
				return o // an outer loop's
			}
			if o.code == "LoopBreak" || i+1 >= n.Count {
				return ok(nil)
			}
			continue // the next attempt at once, without the backoff
		}
		if i+1 >= n.Count || m.late || !m.retryable(n, o.code) {
			return o
		}
		if rs.Backoff >= 0 {
			if rs.Delay {
				m.event(DelayEvent(n.ID, i+1, o.code))
				if rs.Backoff > 0 && th.outlasts(int64(rs.Backoff)) {
					return o // the next attempt could not begin
				}
			} else {
				m.event(BackoffEvent(n.ID, i+1))
			}
			if rs.Backoff > 0 {
				// The handler adds the step that waits on the tool.
				if c := th.turn(); c != nil {
					return *c
				}
				a := &act{th: th}
				m.arm(int64(rs.Backoff), &timer{kind: tExternal, act: a, out: ok(nil)})
				if w := m.wait(th, a); !w.is(okK) {
					return w
				}
				if c := th.turn(); c != nil {
					return *c
				}
			}
		}
	}
}

// attempt runs the attempt i of the Retry n, within its timeout, which
// bounds it without making it wait (docs/DESIGN.md#retry).
func (m *model) attempt(th *thread, n *Node, i int) outcome {
	rs := n.Retry
	m.event(RetryEvent(n.ID, i))
	a := &act{node: n, th: th}
	if rs.Timeout > 0 {
		a.timer = m.armStep(th, int64(rs.Timeout), &timer{kind: tTimeout, act: a})
	}
	var o outcome
	switch {
	case i < rs.FailUntil && rs.Fail == EError:
		o = m.raise(rs.Code, AttemptInfo(i))
	case i < rs.FailUntil && rs.Fail == EPanic:
		o = m.raisePanic(n.ID)
	case i < rs.FailUntil && rs.Fail == EBreak:
		o = m.raise("LoopBreak", rs.Label)
	case i < rs.FailUntil && rs.Fail == EContinue:
		o = m.raise("LoopCont", rs.Label)
	case i < rs.FailUntil:
		o = m.wait(th, a) // EWait: only the timeout or a cancel ends it
	case len(n.Subs) > 0:
		m.added(th, n.Subs)
		o = m.level(th, n.Subs)
	case len(n.Args) > 0:
		o = ok(intsToArgs(n.Args))
	default:
		o = ok(nil) // a Retry's timeout does not make the attempt wait
	}
	if o.is(cancelK) && o.target == a {
		o = m.raise("Timeout", "")
	}
	m.disarmStep(th, a.timer)
	return o
}

// retryable is the Retry's Retryable: its own, or the default.
func (m *model) retryable(n *Node, code string) bool {
	if n.Retry.Retryable {
		m.event(RetryableEvent(n.ID, code))
		return code != "E2"
	}
	return code == "Timeout" || code == "CommError" || code == "ConnectError"
}

// breakName is how a misuse info names Break(label): "Break", or
// "Break(A)".
func breakName(label string) string {
	if label == "" {
		return "Break"
	}
	return "Break(" + label + ")"
}
