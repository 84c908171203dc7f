//go:build cgo

package cabi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
	"github.com/asyncsteps/asyncsteps/internal/watchdog"
)

// FuzzCFlows decodes a program of C and Go steps (see cflowProgram), runs
// it through the C interface (the interpreter of ctest's cflow.c), and
// checks: the flow's outcome (its result or error code) against the set
// of outcomes the program allows (its parallel branches and threads may
// end in any order); and once everything has ended, that every value,
// state variable and block of stack memory C made was cleaned up exactly
// once, every cancel handler ran at most once, before its memory went and
// never after Go completed its step, no C thread is left, the tables of
// package cabi are back to their size before the run, and no goroutine is
// left after the Loop's Close.
//
// Every input decodes to a valid program; the seed corpus is
// cflowSeeds plus testdata/fuzz/FuzzCFlows, run in every go test. Run
// it with go test -asan or -race too (both need cgo).
func FuzzCFlows(f *testing.F) {
	for _, seed := range cflowSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCFlow(t, decodeCFlow(data))
	})
}

// cflowSeeds returns the seed corpus: inputs of a fixed random source, so
// that a plain go test covers a few hundred programs.
func cflowSeeds() [][]byte {
	r := rand.New(rand.NewPCG(23, 2026))
	seeds := make([][]byte, 0, 160)
	for range cap(seeds) {
		b := make([]byte, 16+r.IntN(112))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// ---- programs -----------------------------------------------------------------------

// The root of a run.
const (
	rootOwned    = iota // cabi.New: C's, freed at the end
	rootGoStep          // a Go Root whose Go step gives itself to C (Binary of the step)
	rootGoBinary        // a Go Root given to C (Binary of the Root), freed at the end
)

// The action of a run's CF_TRIGGER step (the first that runs).
const (
	actNone         = iota
	actCancel       // Root.Cancel of a Go root, the table's cancel of an owned one
	actCancelThread // the table's cancel from a C thread
	actFree         // free of an owned root from a goroutine
	actFreeThread   // free of an owned root from a C thread
	actClose        // Loop.Close (an owned root freed here: from a callback, after its free)
)

// How an owned root is freed once its flow has ended.
const (
	freeHere = iota
	freeThread
	freeWait
)

type cflowProgram struct {
	nodes   []ctest.Node
	onTest  bool // a TestTool, not a Loop
	root    int
	action  int
	freeBy  int
	reorder bool // Go steps completed from goroutines yield first
}

func (p *cflowProgram) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "testtool=%v root=%d action=%d free=%d\n", p.onTest, p.root, p.action, p.freeBy)
	var dump func(i, depth int)
	dump = func(i, depth int) {
		n := p.nodes[i]
		fmt.Fprintf(&b, "%s#%d %s a=%d b=%d c=%d\n", strings.Repeat("  ", depth), i, cflowKindNames[n.Kind], n.A, n.B, n.C)
		for _, k := range n.Kids {
			dump(k, depth+1)
		}
	}
	dump(0, 0)
	return b.String()
}

var cflowKindNames = []string{"OK", "FAIL", "SEQ", "PAR", "WAIT_THREAD", "TIMEOUT", "TRIGGER",
	"LOOP", "STATE", "STACK", "SYNC", "GO", "GOFAIL", "GOWAIT", "WAIT_GO"}

// byteReader gives the input's bytes, then zeros.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next(n int) int {
	if r.i >= len(r.b) {
		return 0
	}
	v := int(r.b[r.i])
	r.i++
	return v % n
}

const (
	cflowMaxNodes = 40
	cflowMaxDepth = 4
)

// decodeCFlow makes a program of data: every input gives one.
func decodeCFlow(data []byte) *cflowProgram {
	r := &byteReader{b: data}
	p := &cflowProgram{onTest: r.next(2) == 1, root: r.next(3), freeBy: r.next(3)}
	switch p.root {
	case rootOwned:
		p.action = r.next(6)
	default:
		p.action = []int{actNone, actCancel, actCancelThread, actClose}[r.next(4)]
		if p.root == rootGoStep && p.action == actCancelThread {
			p.action = actCancel // no root pointer to cancel through
		}
	}
	if p.onTest && p.action == actClose {
		p.action = actCancel
	}
	p.reorder = r.next(2) == 1
	p.nodes = append(p.nodes, ctest.Node{Kind: ctest.CFSeq})
	p.nodes[0].Kids = p.genKids(r, 0, false)
	return p
}

// genKids makes up to 3 (the root: 4) kids of a node at depth. inSync:
// under a CF_SYNC, which must not nest another (two sections could wait
// for each other: a deadlock no program here resolves).
func (p *cflowProgram) genKids(r *byteReader, depth int, inSync bool) []int {
	most := 3
	if depth == 0 {
		most = ctest.MaxKids
	}
	n := r.next(most + 1)
	if depth == 0 && n == 0 {
		n = 1
	}
	var kids []int
	for range n {
		if len(p.nodes) >= cflowMaxNodes {
			break
		}
		kids = append(kids, p.gen(r, depth+1, inSync))
	}
	return kids
}

func (p *cflowProgram) gen(r *byteReader, depth int, inSync bool) int {
	i := len(p.nodes)
	p.nodes = append(p.nodes, ctest.Node{})
	n := ctest.Node{Kind: r.next(15), A: r.next(4), B: r.next(4), C: r.next(3)}
	parent := n.Kind == ctest.CFSeq || n.Kind == ctest.CFPar || n.Kind == ctest.CFLoop ||
		n.Kind == ctest.CFSync || n.Kind == ctest.CFGo
	if parent && depth >= cflowMaxDepth {
		n.Kind = ctest.CFOK
		parent = false
	}
	switch n.Kind {
	case ctest.CFFail, ctest.CFGoFail:
		n.A++ // codes E1.., G1..
	case ctest.CFTimeout:
		n.A++ // 1 to 4 ms
	case ctest.CFTrigger:
		if p.action == actNone {
			n.Kind = ctest.CFStack
		}
	case ctest.CFSync:
		if inSync {
			n.Kind = ctest.CFSeq
		}
	}
	if parent {
		n.Kids = p.genKids(r, depth, inSync || n.Kind == ctest.CFSync)
	}
	p.nodes[i] = n
	return i
}

// ---- the model ------------------------------------------------------------------------

// outcomes is the set of ends a step may have: "OK", an error code, or
// "hang" (it ends only when cancelled: a CF_TRIGGER waits for its run's
// action).
type outcomes map[string]bool

func (o outcomes) add(p outcomes) {
	for k := range p {
		o[k] = true
	}
}

func (o outcomes) sorted() []string {
	var s []string
	for k := range o {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// model returns the outcomes of node i.
func (p *cflowProgram) model(i int) outcomes {
	n := p.nodes[i]
	switch n.Kind {
	case ctest.CFOK, ctest.CFState, ctest.CFStack:
		return outcomes{"OK": true}
	case ctest.CFFail:
		return outcomes{fmt.Sprintf("E%d", n.A): true}
	case ctest.CFGoFail:
		return outcomes{fmt.Sprintf("G%d", n.A): true}
	case ctest.CFTimeout:
		return outcomes{asyncsteps.Timeout: true}
	case ctest.CFTrigger:
		return outcomes{"hang": true}
	case ctest.CFWaitThread:
		return codeOutcome("E", n.A)
	case ctest.CFWaitGo:
		o := codeOutcome("E", n.A)
		if n.C == waitGoTimeout && n.B >= 2 {
			o[asyncsteps.Timeout] = true // a TestTool's virtual time may reach the hour first
		}
		return o
	case ctest.CFGoWait:
		if n.C == 1 || n.C == 2 && n.B%2 == 1 { // completed through the C table
			return codeOutcome("E", n.A)
		}
		return codeOutcome("G", n.A)
	case ctest.CFGo:
		if n.C == goParallel {
			return p.handled(i, p.parallel(n.Kids))
		}
		return p.handled(i, p.sequence(n.Kids))
	case ctest.CFSeq, ctest.CFSync:
		return p.handled(i, p.sequence(n.Kids))
	case ctest.CFLoop:
		if n.A == 0 {
			return outcomes{"OK": true}
		}
		return p.sequence(n.Kids)
	case ctest.CFPar:
		return p.handled(i, p.parallel(n.Kids))
	}
	panic("unknown kind")
}

// The ways of CF_GO's Go hook to add the kids (its C).
const (
	goAdd      = iota // a Go step per kid
	goParallel        // a parallel branch per kid
	goRepeat          // a Repeat(1) whose body adds a Go step per kid
)

// The waits of CF_WAIT_GO (its C): C's setCancel, or through Wrap.
const (
	waitGoC       = iota // C's setCancel
	waitGoCancel         // Go's SetCancel
	waitGoTimeout        // Go's WaitExternal, or SetTimeout of an hour for B >= 2
)

// parallel returns the outcomes of branches run at once.
func (p *cflowProgram) parallel(kids []int) outcomes {
	all := outcomes{"OK": true}
	for _, k := range kids {
		o := p.model(k)
		if !o["OK"] {
			delete(all, "OK")
		}
		for c := range o {
			if c != "OK" {
				all[c] = true
			}
		}
	}
	return all
}

func codeOutcome(prefix string, code int) outcomes {
	if code == 0 {
		return outcomes{"OK": true}
	}
	return outcomes{fmt.Sprintf("%s%d", prefix, code): true}
}

// sequence returns the outcomes of steps run one after the other.
func (p *cflowProgram) sequence(kids []int) outcomes {
	cur := outcomes{"OK": true}
	for _, k := range kids {
		if !cur["OK"] {
			break
		}
		delete(cur, "OK")
		cur.add(p.model(k))
	}
	return cur
}

// handled applies the error handler of node i to o.
func (p *cflowProgram) handled(i int, o outcomes) outcomes {
	eh := p.nodes[i].B
	if eh != ctest.EHRecover && eh != ctest.EHRethrow {
		return o
	}
	out := outcomes{}
	for c := range o {
		switch {
		case c == "OK" || c == "hang":
			out[c] = true
		case eh == ctest.EHRecover:
			out["OK"] = true
		default:
			out[fmt.Sprintf("R%d", i)] = true
		}
	}
	return out
}

// ---- running --------------------------------------------------------------------------

// cflowDeadline bounds a run, and then the wait for what it leaves to
// settle, on the time the process runs (see package watchdog): a hang is
// a failure, a stall of the whole process is not. The two together, and
// the watchdog that crashes a hung run (cflowHang), stay under the 10 s
// of wall-clock time a fuzzing worker of Go gives one input before it
// exits with no message: a failure past it would only tell the
// coordinator that the worker died.
const (
	cflowDeadline = 4 * time.Second
	cflowHang     = 2*cflowDeadline + time.Second
)

// flowSyncs are the syncs of the CF_SYNC steps, shared by every run: a
// slot a run failed to give back blocks the next run that enters.
var flowSyncs = sync.OnceValues(func() (unsafe.Pointer, unsafe.Pointer) {
	a, b := Sync(asyncsteps.NewMutex(1)), Sync(asyncsteps.NewMutex(2))
	ctest.SetFlowSyncs(a, b)
	return a, b
})

// cflowRun is one run of a program.
type cflowRun struct {
	p      *cflowProgram
	loop   *asyncsteps.Loop
	tt     *asyncsteps.TestTool
	tool   asyncsteps.Tool
	mu     sync.Mutex
	cptr   unsafe.Pointer // the root pointer C has, nil for rootGoStep or once freed
	goRoot *asyncsteps.Root
	before ctest.Counters // the C side's counters before the run
	fired  atomic.Bool
	goros  sync.WaitGroup // the goroutines the run started
	// ctx is the context of a Go root's Run, cancelled once the run has
	// lasted cflowDeadline of the process's running time (deadline).
	ctx      context.Context
	deadline *watchdog.Timer
	clock    *watchdog.Timer // the run's, crashing the worker after a hang
}

func checkCFlow(t *testing.T, p *cflowProgram) {
	t.Helper()
	// A hang crashes the worker, so that the fuzzer keeps the input, with
	// every goroutine's stack. Both timers start before the goroutines are
	// counted, and stop after the count is checked.
	hang := watchdog.AfterFunc(cflowHang, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("FuzzCFlows: still running after %v\n%s\n%s", cflowHang, p, buf[:runtime.Stack(buf, true)]))
	})
	defer hang.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline := watchdog.AfterFunc(cflowDeadline, cancel)
	defer deadline.Stop()
	flowSyncs()
	runtime.GC()
	goroutines := runtime.NumGoroutine()
	tables := cabiTables()
	before := ctest.FlowCounters()
	ctest.LoadFlow(p.nodes)

	r := &cflowRun{p: p, before: before, ctx: ctx, deadline: deadline, clock: hang}
	if p.onTest {
		r.tt = asyncsteps.NewTestTool()
		r.tool = r.tt
	} else {
		r.loop = asyncsteps.NewLoop()
		r.tool = r.loop
	}
	ctest.FlowHook = r.hook
	got, ok := r.run()
	var problems []string
	want := p.model(0)
	delete(want, "hang")
	if r.fired.Load() {
		want.add(r.actionOutcomes())
	}
	switch {
	case !ok:
		problems = append(problems, fmt.Sprintf("the flow did not end within %v", cflowDeadline))
	case !want[got]:
		problems = append(problems, fmt.Sprintf("outcome %q, want one of %q", got, want.sorted()))
	}
	problems = append(problems, r.finish(before, tables, goroutines)...)
	if len(problems) > 0 {
		t.Fatalf("%s\n%s", p, strings.Join(problems, "\n"))
	}
}

// actionOutcomes are the outcomes the run's action may give the flow.
func (r *cflowRun) actionOutcomes() outcomes {
	switch {
	case r.p.root == rootOwned && r.p.action == actClose:
		return outcomes{"": true, asyncsteps.InternalError: true}
	case r.p.root == rootOwned:
		return outcomes{"": true} // a cancel or free reports nothing
	case r.p.action == actClose:
		return outcomes{asyncsteps.InternalError: true}
	}
	return outcomes{"cancel": true}
}

// run runs the flow and returns its outcome; false if it did not end.
func (r *cflowRun) run() (string, bool) {
	switch r.p.root {
	case rootOwned:
		return r.runOwned()
	case rootGoStep:
		r.goRoot = asyncsteps.New(asyncsteps.WithTool(r.tool))
		r.goRoot.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ctest.FlowAdd(Binary(as), 0) })
	case rootGoBinary:
		r.goRoot = asyncsteps.New(asyncsteps.WithTool(r.tool))
		r.cptr = Binary(r.goRoot)
		ctest.FlowAdd(r.cptr, 0)
	}
	_, err := r.goRoot.Run(r.ctx)
	var e *asyncsteps.Error
	switch {
	case err == nil:
		return "OK", true
	case r.ctx.Err() != nil:
		return "", false
	case errors.Is(err, context.Canceled):
		return "cancel", true
	case errors.As(err, &e):
		return e.Code, true
	}
	return err.Error(), true
}

func (r *cflowRun) runOwned() (string, bool) {
	r.cptr = New(r.tool)
	ctest.FlowAdd(r.cptr, 0)
	if r.p.action == actClose {
		// A Close that comes while the end step runs stops the flow
		// there, with InternalError, after that step reported OK: the
		// run ends once the loop has stopped.
		ctest.FlowCloseMayEnd()
	}
	ctest.FlowExecute(r.cptr)
	ended := func() bool {
		if r.p.action == actClose && r.fired.Load() {
			select {
			case <-r.loop.Done():
				return true
			default:
				return false
			}
		}
		if ctest.FlowCounters().Outcomes > 0 {
			return true
		}
		// A cancel or free reports nothing: the flow has ended once
		// every step that waited is released.
		if !r.fired.Load() {
			return false
		}
		c := ctest.FlowCounters()
		return c.StackAllocs-r.before.StackAllocs == c.StackCleanups-r.before.StackCleanups && c.Threads == 0
	}
	if !r.drive(ended) {
		return "", false
	}
	return ctest.FlowOutcome(), true
}

// drive runs the tool (a TestTool) or waits (a Loop) until cond holds;
// false if it does not within the deadline.
func (r *cflowRun) drive(cond func() bool) bool {
	for !cond() {
		if r.deadline.Expired() {
			return false
		}
		if r.tt != nil && r.tt.NextEvent() {
			continue
		}
		time.Sleep(100 * time.Microsecond) // a thread or goroutine owes an event
	}
	return true
}

// hook runs the steps of the program that involve Go, on the loop.
func (r *cflowRun) hook(step unsafe.Pointer, i int) {
	n := r.p.nodes[i]
	switch n.Kind {
	case ctest.CFTrigger:
		if r.fired.CompareAndSwap(false, true) {
			r.fire()
		}
	case ctest.CFWaitGo:
		r.waitGo(step, i)
	case ctest.CFGo:
		r.goKids(step, i)
	case ctest.CFGoFail:
		Wrap(step).Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(fmt.Sprintf("G%d", n.A)) })
	case ctest.CFGoWait:
		Wrap(step).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			if n.C == 1 { // through the C table, from a goroutine
				p := Binary(as)
				r.later(func() { ctest.FlowComplete(p, n.A) })
				return
			}
			if n.C == 2 { // with a C cancel handler, completed in its callback
				p := Binary(as)
				mem := ctest.FlowGuard(p, i)
				if n.A != 0 {
					// An error runs the failing step's own cancel handler
					// first, as the engine's rule is, through the C table
					// too.
					if n.B%2 == 1 {
						ctest.FlowComplete(p, n.A) // E<a>, not G<a>: see model
						return
					}
					as.Error(fmt.Sprintf("G%d", n.A))
					return
				}
				// Over as the callback returns, its pointer swept later:
				// no cancel handler may run from now on.
				ctest.FlowGoEnded(mem)
				as.Success(int32(i))
				return
			}
			r.later(func() {
				if n.A == 0 {
					as.Success(int32(i))
				} else {
					as.Error(fmt.Sprintf("G%d", n.A))
				}
			})
		})
	default:
		panic(fmt.Sprintf("hook for kind %d", n.Kind))
	}
}

// goKids is CF_GO's hook: through Wrap of the C step's pointer, in its
// callback, it adds a Go step per kid that adds the kid on Binary of
// itself, and a last one that checks that the C step is still live:
// sub-steps Go adds keep the step, its pointer and its stack memory, as
// those C adds do.
func (r *cflowRun) goKids(step unsafe.Pointer, i int) {
	n := r.p.nodes[i]
	mem := ctest.FlowStack(step, i)
	w := Wrap(step)
	kid := func(k int) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) { ctest.FlowAdd(Binary(as), k) }
	}
	switch n.C {
	case goParallel:
		par := w.Parallel()
		for _, k := range n.Kids {
			par.Add(kid(k))
		}
	case goRepeat:
		w.Repeat(1, func(as asyncsteps.AsyncSteps, _ int) {
			for _, k := range n.Kids {
				as.Add(kid(k))
			}
		})
	default:
		for _, k := range n.Kids {
			w.Add(kid(k))
		}
	}
	w.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.FlowLive(step, mem) })
}

// waitGo is CF_WAIT_GO's hook: the step waits (C's setCancel, or Go's
// SetCancel, WaitExternal or SetTimeout through Wrap of its pointer, in
// its callback), then a goroutine completes it through the C table or
// through Wrap: the pointer stays valid for that, whichever side made
// the step wait.
func (r *cflowRun) waitGo(step unsafe.Pointer, i int) {
	n := r.p.nodes[i]
	if n.C != waitGoC {
		mem := ctest.FlowStack(step, i)
		w := Wrap(step)
		switch {
		case n.C == waitGoCancel:
			w.SetCancel(func(asyncsteps.AsyncSteps) { ctest.FlowCancelled(mem) })
		case n.B >= 2:
			w.SetTimeout(time.Hour)
		default:
			w.WaitExternal()
		}
	}
	if n.B%2 == 0 {
		r.later(func() { ctest.FlowComplete(step, n.A) })
		return
	}
	r.later(func() {
		w := Wrap(step)
		switch {
		case w == nil: // over already: cancelled, timed out, freed
		case n.A == 0:
			w.Success(int32(i))
		default:
			w.Error(fmt.Sprintf("E%d", n.A))
		}
	})
}

// later runs f on a goroutine of the run's.
func (r *cflowRun) later(f func()) {
	r.goros.Add(1)
	go func() {
		defer r.goros.Done()
		if r.p.reorder {
			runtime.Gosched()
		}
		f()
	}()
}

// fire starts the run's action, from another thread than the loop's.
func (r *cflowRun) fire() {
	switch r.p.action {
	case actCancel:
		if r.goRoot != nil {
			r.later(r.goRoot.Cancel)
		} else {
			p := r.rootPointer(false)
			r.later(func() { ctest.FlowCancel(p) })
		}
	case actCancelThread:
		ctest.FlowCancelOnThread(r.rootPointer(false))
	case actFree:
		p := r.rootPointer(true)
		r.later(func() { ctest.FlowFree(p) })
	case actFreeThread:
		ctest.FlowFreeOnThread(r.rootPointer(true))
	case actClose:
		if r.p.root == rootOwned && r.p.freeBy == freeHere {
			// The free first, on the loop, which the close then drops:
			// its release runs once the loop has stopped. A callback the
			// run's end beats leaves the pointer for finish to free.
			r.later(func() {
				r.loop.Immediate(func() {
					if p := r.rootPointer(true); p != nil {
						ctest.FlowFree(p)
					}
					r.loop.Close()
				})
			})
			return
		}
		r.later(r.loop.Close)
	}
}

// rootPointer returns the root pointer C has, nil once freed; with free,
// it is freed from then on.
func (r *cflowRun) rootPointer(free bool) unsafe.Pointer {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.cptr
	if free {
		r.cptr = nil
	}
	return p
}

// finish frees what the run holds, closes its Loop, and checks that
// everything is back where it was.
func (r *cflowRun) finish(before ctest.Counters, tables map[string]int, goroutines int) []string {
	r.goros.Wait()
	if p := r.rootPointer(true); p != nil {
		switch {
		case r.p.root != rootOwned: // a Go root given by Binary: free releases the pointer only
			ctest.FlowFree(p)
		case r.p.freeBy == freeThread:
			ctest.FlowFreeOnThread(p)
		case r.p.freeBy == freeWait && r.tt == nil:
			FreeWait(p)
		default:
			ctest.FlowFree(p)
		}
	}
	var problems []string
	// A Go root's state variables are cleaned up once its State is
	// collected: after the run, once nothing of it is left (a Loop lets
	// its flows go once closed, a dropped TestTool with itself).
	settled := func(vars bool) bool {
		c := ctest.FlowCounters()
		return c.Threads == 0 && c.StackAllocs-before.StackAllocs == c.StackCleanups-before.StackCleanups &&
			(!vars || c.StateAllocs-before.StateAllocs == c.StateCleanups-before.StateCleanups) &&
			c.ValuesMade-before.ValuesMade == c.ValuesCleaned-before.ValuesCleaned
	}
	if !r.drive(func() bool { return settled(r.p.root == rootOwned) }) {
		problems = append(problems, "C memory not released while the tool runs")
	}
	if r.loop != nil {
		r.loop.Close()
	} else {
		r.tt.Run()
	}
	// Nothing of the run may keep its flows from the collector now.
	ctest.FlowHook = nil
	r.goRoot, r.loop, r.tt, r.tool = nil, nil, nil, nil
	start := r.clock.Elapsed()
	for {
		runtime.GC()
		c := ctest.FlowCounters()
		now := cabiTables()
		if settled(true) && noLarger(now, tables) && runtime.NumGoroutine() <= goroutines {
			break
		}
		if r.clock.Elapsed()-start > cflowDeadline {
			problems = append(problems, fmt.Sprintf("after the run: counters %+v (before %+v), tables %v (before %v), %d goroutines (before %d)",
				c, before, now, tables, runtime.NumGoroutine(), goroutines))
			if runtime.NumGoroutine() > goroutines {
				buf := make([]byte, 1<<20)
				problems = append(problems, string(buf[:runtime.Stack(buf, true)]))
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	if c := ctest.FlowCounters(); c.Violations != before.Violations {
		problems = append(problems, fmt.Sprintf("%d violations on the C side (see stderr)", c.Violations-before.Violations))
	}
	return problems
}

// noLarger reports whether no table of now is larger than in before. A
// table may be smaller: an entry of an earlier run, whose flow the
// collector had not yet found unreachable when before was taken, may go
// during this run.
func noLarger(now, before map[string]int) bool {
	for name, n := range now {
		if n > before[name] {
			return false
		}
	}
	return true
}

// cabiTables returns the sizes of the package's tables of live objects.
func cabiTables() map[string]int {
	size := func(mu *sync.Mutex, n func() int) int {
		mu.Lock()
		defer mu.Unlock()
		return n()
	}
	return map[string]int{
		"registry": size(&registry.mu, func() int { return len(registry.m) }),
		"goValues": size(&goValues.mu, func() int { return len(goValues.m) }),
		"goRoots":  size(&goRoots.mu, func() int { return len(goRoots.m) }),
		"flows":    size(&flows.mu, func() int { return len(flows.m) }),
		"scheds":   size(&scheds.mu, func() int { return len(scheds.m) }),
		"frecs":    size(&frecs.mu, func() int { return len(frecs.m) }),
	}
}
