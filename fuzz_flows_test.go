package asyncsteps_test

// This file is long on purpose: the interpreter of flow programs on the
// engine is one unit, kept whole so that it can be read against the
// model's (internal/flowfuzz/model.go). Its hooks and channels are apart.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	ff "github.com/asyncsteps/asyncsteps/internal/flowfuzz"
	"github.com/asyncsteps/asyncsteps/internal/watchdog"
)

// FuzzFlows decodes a flow program (internal/flowfuzz), runs it on the
// engine with a TestTool, and checks the trace and the end against the
// reference model, plus the invariants no flow may break: exactly one
// Result; every cancel and error handler at most once; no callback after
// the flow ended; no event left on the tool once it ended; stale handles
// dead; Mutexes all given back, and no key of the KeyedMutex left in use
// (Len 0); the Throttle idle with no timer once its
// period has run out; a program of one parity (keyedRates) runs its
// Throttle and its Limiter as a key of a KeyedThrottle and of a
// KeyedLimiter, which behave as them per key, and none of their keys is
// left in use then; a panic's InternalError carrying the panic value as
// info and a *PanicError as LastException and as the Result's cause; the
// Go error given to Fail found by errors.Is in the errors that keep it; no
// goroutine left behind (the programs with Await steps run in a synctest
// bubble). With hooks, every hook call is checked too: those on the tool
// in the trace, the Await hooks' as a list (see ff.Result).
//
// The seed corpus is in testdata/fuzz/FuzzFlows and runs in every go test.
func FuzzFlows(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkProgram(t, ff.Decode(data))
	})
}

// checkProgram runs p on the engine and on the model and compares them.
func checkProgram(t *testing.T, p *ff.Program) {
	t.Helper()
	// A hang is a failure too: crash the worker, so that the fuzzer keeps
	// the input, with every goroutine's stack. The time counted is the
	// process's running time: a stall of the whole process is no hang.
	hang := watchdog.AfterFunc(flowWatchdog, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("FuzzFlows: program still running after %v\n%s\n%s", flowWatchdog, p, buf[:runtime.Stack(buf, true)]))
	})
	defer hang.Stop()
	if p.Awaits {
		// Await functions run on goroutines: in a bubble, the run waits
		// for them between the tool's events (see flowRun.settle).
		synctest.Test(t, func(t *testing.T) { compareRuns(t, p) })
		return
	}
	compareRuns(t, p)
}

// compareRuns runs p on the engine and on the model and compares them.
func compareRuns(t *testing.T, p *ff.Program) {
	t.Helper()
	want := ff.Model(p)
	var problems []string
	if want.End == "hang" {
		problems = append(problems, "the model did not end")
	}
	for i, got := range runProgram(p) {
		run := [...]string{"", "the clone's run (after the model's): "}[i]
		if !slices.Equal(got.trace, want.Trace) || got.end != want.End {
			problems = append(problems, fmt.Sprintf("%strace mismatch\n got: %s -> %s\nwant: %s -> %s\n%s", run,
				strings.Join(got.trace, " "), got.end, strings.Join(want.Trace, " "), want.End,
				firstDiff(got.trace, want.Trace)))
		}
		if !slices.Equal(got.awaitHooks, want.AwaitHooks) {
			problems = append(problems, fmt.Sprintf("%sAwait hooks mismatch\n got: %s\nwant: %s", run,
				strings.Join(got.awaitHooks, " "), strings.Join(want.AwaitHooks, " ")))
		}
		if !slices.Equal(got.late, want.Late) {
			problems = append(problems, fmt.Sprintf("%shooks after the flow ended mismatch\n got: %s\nwant: %s", run,
				strings.Join(got.late, " "), strings.Join(want.Late, " ")))
		}
		for _, v := range got.violations {
			problems = append(problems, run+v)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%s\n%s", p, strings.Join(problems, "\n"))
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at event %d: got %s, want %s", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("lengths differ: got %d events, want %d", len(got), len(want))
	}
	return "the ends differ"
}

// flowRun interprets a program on the engine.
type flowRun struct {
	tt       *asyncsteps.TestTool
	ch       <-chan asyncsteps.Result
	mutexes  []*asyncsteps.Mutex
	maxes    []int
	queues   []int
	throttle *asyncsteps.Throttle
	period   time.Duration
	limiter  *asyncsteps.Limiter
	keyed    *asyncsteps.KeyedMutex[int]
	// rateGate and limitGate are the Syncers of the KSync nodes on
	// ThrottleGate and LimiterGate: the Throttle and the Limiter, or a
	// key of a KeyedThrottle and of a KeyedLimiter (keyedRates), which
	// keyedLen counts the keys in use of.
	rateGate, limitGate asyncsteps.Syncer
	keyedLen            []func() int
	// throttles is how many Throttles the program has (the Limiter's
	// included), longest is the longest period among them.
	throttles int
	longest   time.Duration
	// gen counts the runs: the state of a callback of the level-0 steps,
	// which the Root and its clone share, is per run (see perRun).
	gen      int
	start    time.Time // when the current run started
	trace    []string
	ended    bool
	end      string
	handles  []asyncsteps.Handle     // the tool events the program scheduled
	steps    []asyncsteps.AsyncSteps // every step's handle, for late calls
	problems []string
	// problemsMu guards problems, which Await functions and hooks append
	// to from their goroutines.
	problemsMu sync.Mutex
	seqs       int // iter.Seq2 of ForEach nodes started and not stopped
	root       *asyncsteps.Root
	// The ID of the step whose callback (or cancel handler) or of the
	// error handler that calls root.Cancel.
	cancelFrom     int
	cancelInCancel bool

	// Await functions (in a synctest bubble): those started and not armed
	// yet, and those running.
	awaitMu        sync.Mutex
	awaitStarted   []*awaitRun
	awaitReturning []*awaitRun // cancelled, waiting for their permit to return
	awaitsLive     atomic.Int32
	// The flows of the AwaitFlow steps added, and those of the level-0
	// steps, which the clone's run runs again: a run consumes a Root's
	// steps, so they get theirs again before it.
	flows, level0Flows []flowOf
	// The channels of the AwaitChan and AwaitResult steps added before
	// the first run, which each run sends to again (see armShared);
	// noClone: one of them is closed during a run, which a channel cannot
	// undo, so the clone does not run.
	shared  []*sharedChan
	noClone bool

	p     *ff.Program
	byRun bool // the program runs by Run
	// With p.Hooks: the flows begun in the run (see ff.FlowStartEvent),
	// the last whose FlowStart panicked and the context it was given, the
	// calls of the Await hooks (under awaitMu) and the hook calls after
	// the flow ended.
	flowsBegun  int
	failedStart int // the last flow whose FlowStart panicked
	failedCtx   context.Context
	awaitCalls  []*awaitCall
	late        []string

	// failErrs are the Go errors given to Fail, by the ID of the node or
	// handler that gives it, made once: errors.Is must find that very
	// value in the errors it raises. failMu guards it: a Run drives the
	// tool on a goroutine of its own.
	failMu   sync.Mutex
	failErrs map[int]error
}

type flowOf struct {
	r *asyncsteps.Root
	n *ff.Node
}

// awaitRun is a call of a KAwait's function: it returns as its node says
// once release is closed, At ms after it started; cancelled, it returns
// once permit is closed, between two events of the tool. Its return gives
// back the slots of the sections around its step (docs/DESIGN.md#locks-and-limits),
// which, if the function returned as soon as it is cancelled, the flow
// would race with, as it goes on at once.
type awaitRun struct {
	n       *ff.Node
	release chan struct{}
	permit  chan struct{}
}

type flowOutcome struct {
	trace      []string
	end        string
	violations []string
	awaitHooks []string
	late       []string
}

// flowWatchdog is under the 10 s of wall-clock time a fuzzing worker of
// Go gives one input before it exits with no message: a hang caught by
// the watchdog prints the program and every goroutine's stack.
const (
	flowMaxEvents = 200000
	flowWatchdog  = 9 * time.Second
)

// runProgram runs p on a Root, then on a clone of it made before it ran,
// on the same tool: the clone runs the step definitions again, which the
// Root's run must have left as they were.
func runProgram(p *ff.Program) []flowOutcome {
	x := newFlowRun(p)
	if p.Hooks {
		x.tt.SetHooks(x.hooks())
	}
	r := asyncsteps.New(asyncsteps.WithTool(x.tt))
	for _, n := range p.Steps {
		x.add(r, n)
	}
	clone := r.Clone()
	x.level0Flows = x.flows
	first := x.execute(r, p)
	if first.end == "none" || x.noClone {
		return []flowOutcome{first}
	}
	return []flowOutcome{first, x.execute(clone, p)}
}

func newFlowRun(p *ff.Program) *flowRun {
	x := &flowRun{tt: asyncsteps.NewTestTool(), maxes: p.Mutexes}
	for i, m := range p.Mutexes {
		q := p.MutexQueue(i)
		x.queues = append(x.queues, q)
		if q < 0 {
			x.mutexes = append(x.mutexes, asyncsteps.NewMutex(m))
		} else {
			x.mutexes = append(x.mutexes, asyncsteps.NewMutex(m, q))
		}
	}
	if k := p.Keyed; k != nil {
		if k.MaxQueue < 0 {
			x.keyed = asyncsteps.NewKeyedMutex[int](k.Max)
		} else {
			x.keyed = asyncsteps.NewKeyedMutex[int](k.Max, k.MaxQueue)
		}
	}
	if t := p.Throttle; t != nil {
		x.period = ms(t.Period)
		if t.Queue < 0 {
			x.throttle = asyncsteps.NewThrottle(t.N, x.period)
		} else {
			x.throttle = asyncsteps.NewThrottle(t.N, x.period, t.Queue)
		}
		x.throttles++
		x.longest = x.period
	}
	if l := p.Limiter; l != nil {
		x.limiter = asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: l.Concurrent, MaxQueue: l.MaxQueue,
			Rate: l.Rate, Period: ms(l.Period), Burst: l.Burst,
		})
		if l.Rate > 0 {
			x.throttles++
			x.longest = max(x.longest, ms(l.Period))
		}
	}
	x.rateGate, x.limitGate = x.throttle, x.limiter
	if keyedRates(p) {
		x.keyRates(p)
	}
	x.cancelFrom, x.cancelInCancel = p.CancelFrom, p.CancelInCancel
	x.byRun = p.Ctx != ff.CtxNone
	x.p = p
	return x
}

// execute runs r, to which the program's steps are added, and checks what
// no flow may break.
// keyedRates reports whether p runs its Throttle and its Limiter as a key
// of a KeyedThrottle and of a KeyedLimiter: half the programs, by a hash
// of their text, so that a crasher runs as it did.
func keyedRates(p *ff.Program) bool {
	h := fnv.New32a()
	h.Write([]byte(p.String()))
	return h.Sum32()&1 == 1
}

// keyRates makes the gates of the Throttle and the Limiter of p, if any,
// keys of a KeyedThrottle and of a KeyedLimiter of their limits.
func (x *flowRun) keyRates(p *ff.Program) {
	const key = 7 // not the keys of the KeyedMutex, which another type has
	if t := p.Throttle; t != nil {
		var kt *asyncsteps.KeyedThrottle[int]
		if t.Queue < 0 {
			kt = asyncsteps.NewKeyedThrottle[int](t.N, x.period)
		} else {
			kt = asyncsteps.NewKeyedThrottle[int](t.N, x.period, t.Queue)
		}
		x.rateGate = kt.Key(key)
		x.keyedLen = append(x.keyedLen, kt.Len)
	}
	if l := p.Limiter; l != nil {
		kl := asyncsteps.NewKeyedLimiter[int](asyncsteps.LimiterOptions{
			Concurrent: l.Concurrent, MaxQueue: l.MaxQueue,
			Rate: l.Rate, Period: ms(l.Period), Burst: l.Burst,
		})
		x.limitGate = kl.Key(key)
		x.keyedLen = append(x.keyedLen, kl.Len)
	}
}

func (x *flowRun) execute(r *asyncsteps.Root, p *ff.Program) flowOutcome {
	x.gen++
	if x.gen > 1 {
		for _, f := range x.level0Flows {
			x.addFlowStep(f.r, f.n)
		}
	}
	x.start, x.root = x.tt.Now(), r
	x.trace, x.ended, x.end, x.handles, x.steps, x.problems = nil, false, "", nil, nil, nil
	x.flowsBegun, x.failedStart, x.failedCtx, x.awaitCalls, x.late = 0, 0, nil, nil, nil
	x.handles = append(x.handles, x.tt.Deferred(ms(p.CancelAt), r.Cancel))
	x.armShared()
	results := 0
	if p.Ctx != ff.CtxNone {
		x.ch = make(chan asyncsteps.Result) // never filled: Run returns the end
		x.runByRun(r, p)
		results = 1
	} else {
		x.ch = x.startAwaited(r)
		for range flowMaxEvents {
			if x.takeResult() {
				results++
				break
			}
			if !nextEvent(x.tt) {
				break
			}
			x.settle(p)
		}
		if results == 0 && x.takeResult() {
			results++
		}
	}
	if results == 0 {
		x.violation("no Result (the tool ran out of events or the flow ran %d events)", flowMaxEvents)
		return flowOutcome{trace: x.trace, end: "none", violations: x.problems}
	}
	// The flow has ended: the program's own events are cancelled; what is
	// left are stale queue entries, which must run nothing, and engine
	// timers, which must not be there.
	for _, h := range x.handles {
		h.Cancel()
	}
	if p.Awaits {
		x.settle(p) // the functions of cancelled Await steps return
		if n := x.awaitsLive.Load(); n != 0 {
			x.violation("%d Await functions still running after the flow ended (their steps never cancelled?)", n)
		}
	}
	x.tt.Advance(0)
	n := x.tt.Pending()
	if x.throttles > 0 && n <= x.throttles {
		// A Throttle's period may still run: once it has ended, with
		// nobody waiting, no timer is left (docs/DESIGN.md#locks-and-limits).
		x.tt.Advance(x.longest)
		n = x.tt.Pending()
	}
	if n != 0 {
		x.violation("%d events left on the tool after the flow ended (a timer left armed?)", n)
	}
	select {
	case res := <-x.ch:
		x.violation("a second Result: %s", x.endString(res))
	default:
	}
	// Late calls on every step handle have no effect (docs/DESIGN.md#stale-steps).
	for _, as := range x.steps {
		if as.IsValid() {
			x.violation("a step handle is still valid after the flow ended")
		}
		as.Success(1)
		as.Error("Late")
	}
	x.tt.Advance(0)
	if x.tt.HasEvents() {
		x.violation("late Success/Error on stale handles scheduled events")
	}
	if x.takeResult() {
		x.violation("a second Result")
	}
	x.checkMutexes()
	for i, n := range x.keyedLen {
		if k := n(); k != 0 {
			x.violation("keyed rate limit %d: %d keys still in use after the flow ended", i, k)
		}
	}
	if x.seqs != 0 {
		x.violation("%d iter.Seq2 of a ForEach never stopped", x.seqs)
	}
	return flowOutcome{trace: x.trace, end: x.end, violations: x.problems, awaitHooks: x.awaitHookCalls(), late: x.late}
}

// runByRun runs r by Run, with a ctx that ends as p says, on a goroutine
// of its own: Run drives the tool.
func (x *flowRun) runByRun(r *asyncsteps.Root, p *ff.Program) {
	ctx := &toolCtx{done: make(chan struct{})}
	switch p.Ctx {
	case ff.CtxCancel:
		x.handles = append(x.handles, x.tt.Deferred(ms(p.CtxAt), func() { ctx.end(context.Canceled) }))
	case ff.CtxDeadline:
		x.handles = append(x.handles, x.tt.Deferred(ms(p.CtxAt), func() { ctx.end(context.DeadlineExceeded) }))
	}
	type ran struct {
		args []any
		err  error
	}
	done := make(chan ran, 1)
	go func() {
		run := r.Run
		if p.Helping {
			run = r.RunHelping
		}
		args, err := run(ctx)
		done <- ran{args, err}
	}()
	res := <-done
	x.ended = true
	x.end = x.endString(asyncsteps.Result{Args: res.args, Err: res.err})
	var e *asyncsteps.Error
	if errors.As(res.err, &e) && e.Code == asyncsteps.Timeout && !errors.Is(res.err, context.DeadlineExceeded) {
		x.violation("Run's Timeout does not match context.DeadlineExceeded")
	}
	if e != nil && e.Code == asyncsteps.Timeout && e.Info == ff.RunDeadlineInfo && e.Cause != context.Cause(ctx) {
		x.violation("the Timeout of Run's deadline has the Cause %v, not context.Cause(ctx) = %v", e.Cause, context.Cause(ctx))
	}
	if errors.Is(res.err, context.Canceled) && ctx.Err() == context.Canceled && !errors.Is(res.err, ctx.Err()) {
		x.violation("Run's error %v does not match ctx.Err()", res.err)
	}
}

// toolCtx is a context that ends at a virtual time of the tool: Run
// notices it between the tool's events.
type toolCtx struct {
	done chan struct{}
	err  atomic.Pointer[error]
}

func (c *toolCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *toolCtx) Done() <-chan struct{}       { return c.done }
func (c *toolCtx) Value(any) any               { return nil }

func (c *toolCtx) Err() error {
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (c *toolCtx) end(err error) {
	if c.err.CompareAndSwap(nil, &err) {
		close(c.done)
	}
}

// settle waits, in a program with Await steps, until the functions the
// event just run started have started, and arms their completions in the
// order of their IDs (as the model does), and until the completions of
// those it released are queued on the tool. The functions it cancelled
// return one by one, in the order of their IDs.
func (x *flowRun) settle(p *ff.Program) {
	if !p.Awaits {
		return
	}
	synctest.Wait()
	x.awaitMu.Lock()
	started, returning := x.awaitStarted, x.awaitReturning
	x.awaitStarted, x.awaitReturning = nil, nil
	x.awaitMu.Unlock()
	slices.SortFunc(returning, func(a, b *awaitRun) int { return a.n.ID - b.n.ID })
	for _, a := range returning {
		close(a.permit)
		synctest.Wait()
	}
	slices.SortFunc(started, func(a, b *awaitRun) int { return a.n.ID - b.n.ID })
	for _, a := range started {
		x.handles = append(x.handles, x.tt.Deferred(ms(a.n.At), func() { close(a.release) }))
	}
}

// awaitFunc is the function of the KAwait n (AwaitFn).
func (x *flowRun) awaitFunc(n *ff.Node) asyncsteps.AwaitFunc {
	return func(ctx context.Context) (any, error) {
		x.awaitsLive.Add(1)
		defer x.awaitsLive.Add(-1)
		if c, ok := ctx.Value(awaitKey{}).(*awaitCall); ok {
			x.awaitMu.Lock()
			c.id = n.ID
			x.awaitMu.Unlock()
		} else if x.p.Hooks {
			x.violation("the Await function of %d got no context of AwaitStart", n.ID)
		}
		a := &awaitRun{n: n, release: make(chan struct{}), permit: make(chan struct{})}
		if n.End != ff.EWait {
			x.awaitMu.Lock()
			x.awaitStarted = append(x.awaitStarted, a)
			x.awaitMu.Unlock()
		}
		select {
		case <-a.release:
		case <-ctx.Done():
			if x.byRun {
				// Run drives the tool: nothing waits for this
				// goroutine between its events (see ff.Program.Awaits).
				return nil, ctx.Err()
			}
			x.awaitMu.Lock()
			x.awaitReturning = append(x.awaitReturning, a)
			x.awaitMu.Unlock()
			<-a.permit
			return nil, ctx.Err()
		}
		switch n.End {
		case ff.EExternal:
			return n.Args[0], nil
		case ff.EPanic:
			panic(ff.PanicValue(n.ID))
		case ff.EGoexit:
			runtime.Goexit()
		}
		if n.Code == "Timeout" {
			return nil, context.DeadlineExceeded
		}
		return nil, &asyncsteps.Error{Code: n.Code, Info: n.Info}
	}
}

// awaitFlow is the flow of the KAwait n (AwaitFlow): its one step waits,
// then ends as n says.
func (x *flowRun) awaitFlow(n *ff.Node) *asyncsteps.Root {
	other := asyncsteps.New(asyncsteps.WithTool(x.tt))
	x.addFlowStep(other, n)
	x.flows = append(x.flows, flowOf{other, n})
	return other
}

func (x *flowRun) addFlowStep(other *asyncsteps.Root, n *ff.Node) {
	other.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		x.steps = append(x.steps, as)
		as.WaitExternal()
		switch n.End {
		case ff.EExternal:
			x.handles = append(x.handles, x.tt.Deferred(ms(n.At), func() { as.Success(intArgs(n.Args)...) }))
		case ff.EExternalErr:
			x.handles = append(x.handles, x.tt.Deferred(ms(n.At), func() { as.Error(n.Code, n.Info) }))
		}
	})
}

// nextEvent runs tt's next event on a goroutine of its own: a callback
// that calls runtime.Goexit ends the goroutine driving the tool, which must
// not be the test's. It reports whether an event ran.
func nextEvent(tt *asyncsteps.TestTool) bool {
	ran := make(chan bool, 1)
	go func() {
		event := true // a Goexit leaves it so: an event ran
		defer func() { ran <- event }()
		event = tt.NextEvent()
	}()
	return <-ran
}

// panicInfo is the info the InternalError of a recovered panic carries:
// the value as PanicError prints it (which a value that panics when
// printed does not crash).
func panicInfo(pe *asyncsteps.PanicError) string {
	return strings.TrimPrefix(pe.Error(), "panic: ")
}

// startAwaited starts r and returns where its Result comes: the first
// execution of a program through Promise, the clone's through
// ExecuteThen, whose function must be called once with the same Result.
func (x *flowRun) startAwaited(r *asyncsteps.Root) <-chan asyncsteps.Result {
	if x.gen == 1 {
		return r.Promise()
	}
	ch := make(chan asyncsteps.Result, 2) // room for a second call, to see it
	r.ExecuteThen(func(res asyncsteps.Result) { ch <- res })
	return ch
}

func (x *flowRun) takeResult() bool {
	select {
	case res := <-x.ch:
		x.ended = true
		x.end = x.endString(res)
		return true
	default:
		return false
	}
}

func (x *flowRun) endString(res asyncsteps.Result) string {
	if res.Err == nil {
		return "ok(" + ff.FmtArgs(res.Args) + ")"
	}
	var e *asyncsteps.Error
	if !errors.As(res.Err, &e) {
		if errors.Is(res.Err, context.Canceled) {
			return "canceled"
		}
		return "err:?" + res.Err.Error()
	}
	return "err:" + x.errEnd(e)
}

// errEnd is how ff.ErrEnd shows the error e.
func (x *flowRun) errEnd(e *asyncsteps.Error) string {
	pe, ok := e.Cause.(*asyncsteps.PanicError)
	panicked := ok && e.Code == asyncsteps.InternalError && (e.Info == panicInfo(pe) || e.Info == pe.Error())
	return ff.ErrEnd(e.Code, e.Info, panicked, x.failCause(e))
}

// failCause returns the ID of the node or handler whose Fail error is in
// err's chain, 0 for none, and records a violation if errors.Is does not
// find the very error given to Fail.
func (x *flowRun) failCause(err error) int {
	id := 0
	var coded *ff.CodedError
	var plain *ff.PlainError
	switch {
	case errors.As(err, &coded):
		id = coded.ID
	case errors.As(err, &plain):
		id = plain.ID
	default:
		return 0
	}
	x.failMu.Lock()
	given := x.failErrs[id]
	x.failMu.Unlock()
	if !errors.Is(err, given) {
		x.violation("errors.Is does not find the error given to Fail by %d in %v", id, err)
	}
	return id
}

// failErr returns the Go error that the node or handler id gives to
// Fail, made once.
func (x *flowRun) failErr(id int, k ff.FailKind, code string) error {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	if x.failErrs == nil {
		x.failErrs = map[int]error{}
	}
	if x.failErrs[id] == nil {
		x.failErrs[id] = ff.FailErr(k, id, code)
	}
	return x.failErrs[id]
}

// checkMutexes checks that every Mutex is free: as many parallel branches
// as its max enter at once, and a flow after them too; and that the
// KeyedMutex has no key in use, and lets as many in on each key.
func (x *flowRun) checkMutexes() {
	gates := make([]asyncsteps.Syncer, len(x.mutexes))
	for i, m := range x.mutexes {
		gates[i] = m
	}
	maxes, queues := x.maxes, x.queues
	if k := x.keyed; k != nil {
		if n := k.Len(); n != 0 {
			x.violation("KeyedMutex: %d keys still in use after the flow ended", n)
		}
		maxes, queues = slices.Clone(maxes), slices.Clone(queues)
		for key := range ff.KeyedKeys {
			gates = append(gates, k.Key(key))
			maxes, queues = append(maxes, x.p.Keyed.Max), append(queues, x.p.Keyed.MaxQueue)
		}
	}
	for i, m := range gates {
		tt := asyncsteps.NewTestTool()
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		entered := 0
		p := r.Parallel()
		probes := 2
		if queues[i] == 0 {
			probes = maxes[i] // one more would be rejected, not queued
		}
		for range probes {
			p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				entered++
				as.WaitExternal()
				tt.Deferred(time.Millisecond, func() { as.Success() })
			})
		}
		ch := r.Promise()
		tt.Advance(0)
		capacity := entered
		tt.Run()
		select {
		case res := <-ch:
			if res.Err != nil {
				x.violation("mutex %d: probe flow failed: %v", i, res.Err)
			}
		default:
			x.violation("mutex %d: probe flow did not end: a slot was never given back", i)
		}
		if want := min(2, maxes[i]); capacity != want {
			x.violation("mutex %d: %d probe branches entered at once, want %d: a slot was never given back", i, capacity, want)
		}
	}
}

// violation records a broken invariant; the Await hooks and functions
// report theirs from their goroutines.
func (x *flowRun) violation(format string, args ...any) {
	x.problemsMu.Lock()
	defer x.problemsMu.Unlock()
	x.problems = append(x.problems, "invariant: "+fmt.Sprintf(format, args...))
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// event records a callback, with the virtual time.
func (x *flowRun) event(ev string) {
	if x.ended || len(x.ch) > 0 {
		x.violation("callback %s after the flow ended", ev)
	}
	x.trace = append(x.trace, ff.AtTime(ev, x.tt.Now().Sub(x.start).Milliseconds()))
}

func intArgs(a []int) []any {
	r := make([]any, len(a))
	for i, v := range a {
		r[i] = v
	}
	return r
}

// add adds node n to as (a Root, a step, or the value Parallel returned).
func (x *flowRun) add(as asyncsteps.AsyncSteps, n *ff.Node) {
	switch n.Kind {
	case ff.KStep:
		as.Add(x.stepFunc(n, as), x.errorFunc(n.Handler))
	case ff.KParallel:
		p := as.Parallel(x.errorFunc(n.Handler))
		for _, b := range n.Subs {
			x.add(p, b)
		}
	case ff.KSettle:
		x.addSettle(as, n)
	case ff.KRace:
		x.addRace(as, n)
	case ff.KLoop:
		var i perRun
		as.Loop(func(as asyncsteps.AsyncSteps) {
			x.iteration(as, n, *i.of(x))
			*i.of(x)++
		}, n.Label)
	case ff.KRepeat:
		as.Repeat(n.Count, func(as asyncsteps.AsyncSteps, i int) { x.iteration(as, n, i) }, n.Label)
	case ff.KForEach:
		var coll any
		if n.Map {
			m := map[string]int{}
			for i := range n.Count {
				m[ff.MapKey(i)] = ff.ElemValue(n.ID, i)
			}
			coll = m
		} else {
			s := make([]int, n.Count)
			for i := range s {
				s[i] = ff.ElemValue(n.ID, i)
			}
			coll = s
			if n.Seq {
				coll = x.lazySeq(n, s)
			}
		}
		var i perRun
		as.ForEach(coll, func(as asyncsteps.AsyncSteps, key, value any) {
			x.event(ff.ForEachEvent(n.ID, key, value))
			at := *i.of(x)
			*i.of(x)++ // Break and Continue abort the callback
			if at == n.At {
				switch n.End {
				case ff.EBreak:
					as.Break(n.Label)
				case ff.EContinue:
					as.Continue(n.Label)
				}
			}
			for _, s := range n.Subs {
				x.add(as, s)
			}
		}, n.Label)
	case ff.KRetry:
		x.retry(as, n)
	case ff.KForEachLimit:
		x.forEachLimit(as, n)
	case ff.KAwait:
		switch n.Await {
		case ff.AwaitFlow:
			asyncsteps.AwaitFlow(as, x.awaitFlow(n), x.errorFunc(n.Handler))
		case ff.AwaitChan:
			asyncsteps.AwaitChan(as, x.channel(n).ints, x.errorFunc(n.Handler))
		case ff.AwaitResult:
			asyncsteps.AwaitResult(as, x.channel(n).results, x.errorFunc(n.Handler))
		case ff.AwaitThen:
			f := x.awaitFunc(n)
			asyncsteps.AwaitThen(as, func(ctx context.Context) (int, error) {
				v, err := f(ctx)
				i, _ := v.(int)
				return i, err
			}, func(as asyncsteps.AsyncSteps, v int) {
				x.steps = append(x.steps, as)
				x.event(ff.ThenEvent(n.ID, v))
			}, x.errorFunc(n.Handler))
		default:
			as.Await(x.awaitFunc(n), x.errorFunc(n.Handler))
		}
	case ff.KSync:
		var obj asyncsteps.Syncer
		switch n.Mutex {
		case ff.ThrottleGate:
			obj = x.rateGate
		case ff.LimiterGate:
			obj = x.limitGate
		default:
			if ff.IsKeyed(n.Mutex) {
				x.syncKey(as, n)
				return
			}
			obj = x.mutexes[n.Mutex]
		}
		as.Sync(obj, x.stepFunc(n.Body, nil), x.errorFunc(n.Body.Handler))
	case ff.KSuccessStep:
		as.SuccessStep(intArgs(n.Args)...)
	}
}

// syncKey adds the KSync n on a key of the KeyedMutex to as: through the
// KeyedMutex's Sync for key 0, through the Syncer of the key for the
// others, which must be the same.
func (x *flowRun) syncKey(as asyncsteps.AsyncSteps, n *ff.Node) {
	key := n.Mutex - ff.KeyedGate
	if key == 0 {
		x.keyed.Sync(as, key, x.stepFunc(n.Body, nil), x.errorFunc(n.Body.Handler))
		return
	}
	as.Sync(x.keyed.Key(key), x.stepFunc(n.Body, nil), x.errorFunc(n.Body.Handler))
}

// addSettle adds the Settle n to as: each branch adds its node, then traces
// the outcomes.
func (x *flowRun) addSettle(as asyncsteps.AsyncSteps, n *ff.Node) {
	branches := make([]func(asyncsteps.AsyncSteps), len(n.Subs))
	for i, b := range n.Subs {
		branches[i] = func(as asyncsteps.AsyncSteps) { x.add(as, b) }
	}
	asyncsteps.Settle(as, func(as asyncsteps.AsyncSteps, rs []asyncsteps.Settled[int]) {
		x.steps = append(x.steps, as)
		outcomes := make([]string, len(rs))
		for i, r := range rs {
			outcomes[i] = ff.SettledOk(r.Value)
			if r.Err != nil {
				outcomes[i] = ff.SettledErr(x.errEnd(r.Err))
			}
		}
		x.event(ff.SettleEvent(n.ID, outcomes))
	}, branches...)
}

// addRace adds the First (Need 0) or Quorum n to as: each branch adds its
// node, then traces the results.
func (x *flowRun) addRace(as asyncsteps.AsyncSteps, n *ff.Node) {
	branches := make([]func(asyncsteps.AsyncSteps), len(n.Subs))
	for i, b := range n.Subs {
		branches[i] = func(as asyncsteps.AsyncSteps) { x.add(as, b) }
	}
	then := func(as asyncsteps.AsyncSteps, vs []int) {
		x.steps = append(x.steps, as)
		x.event(ff.RaceEvent(n.ID, vs))
	}
	if n.Need == 0 {
		asyncsteps.First(as, func(as asyncsteps.AsyncSteps, v int) { then(as, []int{v}) }, branches...)
		return
	}
	asyncsteps.Quorum(as, n.Need, then, branches...)
}

// forEachLimit adds the ForEachLimit n to as: over a sequence that traces
// its pulls and its end (and may panic or Goexit after its last pair), items that trace, then Break, Continue or return
// at the item n.At, else add n.Subs.
func (x *flowRun) forEachLimit(as asyncsteps.AsyncSteps, n *ff.Node) {
	seq := func(yield func(int, int) bool) {
		x.seqs++
		defer func() {
			x.seqs--
			x.event(ff.SeqEndEvent(n.ID))
		}()
		for i := range n.Count {
			x.event(ff.PullEvent(n.ID, i))
			if !yield(i, ff.ElemValue(n.ID, i)) {
				return
			}
		}
		seqFault(n)
	}
	asyncsteps.ForEachLimit(as, seq, n.Limit, func(as asyncsteps.AsyncSteps, i, v int) {
		x.steps = append(x.steps, as)
		x.event(ff.ForEachEvent(n.ID, i, v))
		if i == n.At {
			switch n.End {
			case ff.EBreak:
				as.Break(n.Label)
			case ff.EContinue:
				as.Continue(n.Label)
			case ff.ESuccess:
				return
			}
		}
		for _, s := range n.Subs {
			x.add(as, s)
		}
	}, x.errorFunc(n.Handler))
}

// retry adds the Retry n to as.
func (x *flowRun) retry(as asyncsteps.AsyncSteps, n *ff.Node) {
	rs := n.Retry
	o := asyncsteps.RetryOptions{Attempts: n.Count, Timeout: ms(rs.Timeout), Label: n.Label}
	if rs.Retryable {
		o.Retryable = func(code string) bool {
			x.event(ff.RetryableEvent(n.ID, code))
			return code != "E2"
		}
	}
	if rs.Backoff >= 0 && rs.Delay {
		o.Delay = func(k int, err error) time.Duration {
			x.event(ff.DelayEvent(n.ID, k, asyncsteps.ErrorFrom(err).Code))
			return ms(rs.Backoff)
		}
	} else if rs.Backoff >= 0 {
		o.Backoff = func(k int) time.Duration {
			x.event(ff.BackoffEvent(n.ID, k))
			return ms(rs.Backoff)
		}
	}
	asyncsteps.Retry(as, o, func(as asyncsteps.AsyncSteps, i int) {
		x.steps = append(x.steps, as)
		x.event(ff.RetryEvent(n.ID, i))
		if i < rs.FailUntil {
			switch rs.Fail {
			case ff.EError:
				as.Error(rs.Code, ff.AttemptInfo(i))
			case ff.EPanic:
				panic(ff.PanicValue(n.ID))
			case ff.EBreak:
				as.Break(rs.Label)
			case ff.EContinue:
				as.Continue(rs.Label)
			default:
				as.WaitExternal()
			}
			return
		}
		for _, s := range n.Subs {
			x.add(as, s)
		}
		if len(n.Subs) == 0 && len(n.Args) > 0 {
			as.Success(intArgs(n.Args)...)
		}
	})
}

// perRun is a counter of a callback, zero at the start of each run.
type perRun struct{ gen, n int }

func (c *perRun) of(x *flowRun) *int {
	if c.gen != x.gen {
		c.gen, c.n = x.gen, 0
	}
	return &c.n
}

// lazySeq returns the pairs of s as an iter.Seq2 that counts its runs and
// cleanups (a ForEach must stop, clean up, every sequence it started),
// and ends after its last pair as the KForEach n says.
func (x *flowRun) lazySeq(n *ff.Node, s []int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		x.seqs++
		defer func() { x.seqs-- }()
		for i, v := range s {
			if !yield(i, v) {
				return
			}
		}
		seqFault(n)
	}
}

// seqFault ends the sequence of the KForEach or KForEachLimit n after its
// last pair as n says: a panic, a runtime.Goexit, or a plain return.
func seqFault(n *ff.Node) {
	switch {
	case n.SeqPanic:
		panic(ff.PanicValue(n.ID))
	case n.SeqGoexit:
		runtime.Goexit()
	}
}

func (x *flowRun) iteration(as asyncsteps.AsyncSteps, n *ff.Node, i int) {
	x.event(ff.IterEvent(n.ID, i))
	if n.Kind == ff.KLoop && i >= n.Count {
		as.Break()
	}
	for _, s := range n.Subs {
		x.add(as, s)
	}
}

// stepFunc returns the callback of step n, which parent adds.
func (x *flowRun) stepFunc(n *ff.Node, parent asyncsteps.AsyncSteps) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, args ...any) {
		x.steps = append(x.steps, as)
		x.event(ff.StepEvent(n.ID, args))
		if n.ID == x.cancelFrom && !x.cancelInCancel {
			x.root.Cancel()
		}
		if n.HasTimeout() {
			as.SetTimeout(ms(n.Timeout))
		}
		if n.Timeout2 > 0 {
			as.SetTimeout(ms(n.Timeout2))
		}
		if n.Cancel {
			called := false
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				if called {
					x.violation("cancel handler of step %d called twice", n.ID)
				}
				called = true
				x.event(ff.CancelEvent(n.ID))
				if n.ID == x.cancelFrom && x.cancelInCancel {
					x.root.Cancel()
				}
				if n.CancelPanic {
					panic(ff.CancelPanicValue(n.ID))
				}
				if n.CancelGoexit {
					runtime.Goexit()
				}
			})
		}
		for _, s := range n.Subs {
			x.add(as, s)
		}
		switch n.End {
		case ff.ESuccess:
			as.Success(intArgs(n.Args)...)
		case ff.EError:
			as.Error(n.Code, n.Info)
		case ff.EBreak:
			as.Break(n.Label)
		case ff.EContinue:
			as.Continue(n.Label)
		case ff.EExternal:
			as.WaitExternal()
			x.handles = append(x.handles, x.tt.Deferred(ms(n.At), func() { as.Success(intArgs(n.Args)...) }))
		case ff.EExternalErr:
			as.WaitExternal()
			x.handles = append(x.handles, x.tt.Deferred(ms(n.At), func() { as.Error(n.Code, n.Info) }))
		case ff.EFail:
			asyncsteps.Fail(as, x.failErr(n.ID, n.Fail, n.Code))
		case ff.EExternalFail:
			as.WaitExternal()
			err := x.failErr(n.ID, n.Fail, n.Code)
			x.handles = append(x.handles, x.tt.Deferred(ms(n.At), func() { asyncsteps.Fail(as, err) }))
		case ff.EWait:
			as.WaitExternal()
		case ff.EPanic:
			panic(ff.PanicValue(n.ID))
		case ff.EPanicEvil:
			panic(ff.Evil{})
		case ff.EGoexit:
			runtime.Goexit()
		case ff.EParent:
			parent.Success(n.ID)
		case ff.EParentBreak:
			parent.Break(n.Label)
		}
	}
}

func (x *flowRun) errorFunc(h *ff.Handler) asyncsteps.ErrorFunc {
	if h == nil {
		return nil
	}
	var calls perRun
	return func(as asyncsteps.AsyncSteps, code string) {
		if *calls.of(x) > 0 {
			x.violation("error handler %d called twice", h.ID)
		}
		*calls.of(x)++
		x.steps = append(x.steps, as)
		st := as.State()
		info := st.ErrorInfo
		if pe, ok := st.LastException.(*asyncsteps.PanicError); ok && code == asyncsteps.InternalError {
			// An Await function's panic is "panic: " and the value.
			if want := panicInfo(pe); info != want && info != pe.Error() {
				x.violation("handler %d: ErrorInfo %q after a panic of %q", h.ID, info, want)
			}
			info = ff.PanicInfo(info)
		}
		x.event(ff.HandlerEvent(h.ID, code, info) + ff.CauseSuffix(x.failCause(st.LastException)))
		if h.ID == x.cancelFrom {
			x.root.Cancel()
		}
		switch h.Action {
		case ff.HPanic:
			panic(ff.PanicValue(h.ID))
		case ff.HGoexit:
			runtime.Goexit()
		case ff.HWait:
			if h.Timeout > 0 {
				as.SetTimeout(ms(h.Timeout))
			} else {
				as.WaitExternal()
			}
			switch h.Done {
			case ff.EExternal:
				x.handles = append(x.handles, x.tt.Deferred(ms(h.At), func() { as.Success(intArgs(h.Args)...) }))
			case ff.EExternalErr:
				x.handles = append(x.handles, x.tt.Deferred(ms(h.At), func() { as.Error(h.Code, h.Info) }))
			}
		case ff.HRecover:
			as.Success(intArgs(h.Args)...)
		case ff.HRethrow:
			as.Error(h.Code, h.Info)
		case ff.HFail:
			asyncsteps.Fail(as, x.failErr(h.ID, h.Fail, h.Code))
		case ff.HAdd:
			if h.Timeout > 0 {
				as.SetTimeout(ms(h.Timeout))
			}
			if h.Cancel {
				called := false
				as.SetCancel(func(asyncsteps.AsyncSteps) {
					if called {
						x.violation("cancel handler of handler %d called twice", h.ID)
					}
					called = true
					x.event(ff.HandlerCancelEvent(h.ID))
				})
			}
			for _, s := range h.Steps {
				x.add(as, s)
			}
		}
	}
}
