package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	ff "github.com/asyncsteps/asyncsteps/internal/flowfuzz"
)

// FuzzFlows decodes a flow program (internal/flowfuzz), runs it on the
// engine with a TestTool, and checks the trace and the end against the
// reference model, plus the invariants no flow may break: exactly one
// Result; every cancel and error handler at most once; no callback after
// the flow ended; no event left on the tool once it ended; stale handles
// dead; Mutexes all given back.
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
	// the input, with every goroutine's stack.
	watchdog := time.AfterFunc(flowWatchdog, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("FuzzFlows: program still running after %v\n%s\n%s", flowWatchdog, p, buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	want := ff.Model(p)
	got := runProgram(p)
	var problems []string
	if want.End == "hang" {
		problems = append(problems, "the model did not end")
	}
	if !slices.Equal(got.trace, want.Trace) || got.end != want.End {
		problems = append(problems, fmt.Sprintf("trace mismatch\n got: %s -> %s\nwant: %s -> %s\n%s",
			strings.Join(got.trace, " "), got.end, strings.Join(want.Trace, " "), want.End,
			firstDiff(got.trace, want.Trace)))
	}
	problems = append(problems, got.violations...)
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
	trace    []string
	ended    bool
	end      string
	handles  []asyncsteps.Handle     // the tool events the program scheduled
	steps    []asyncsteps.AsyncSteps // every step's handle, for late calls
	problems []string
}

type flowOutcome struct {
	trace      []string
	end        string
	violations []string
}

const (
	flowMaxEvents = 200000
	flowWatchdog  = 10 * time.Second
)

func runProgram(p *ff.Program) flowOutcome {
	x := &flowRun{tt: asyncsteps.NewTestTool(), maxes: p.Mutexes}
	for _, m := range p.Mutexes {
		x.mutexes = append(x.mutexes, asyncsteps.NewMutex(m))
	}
	r := asyncsteps.New(asyncsteps.WithTool(x.tt))
	x.handles = append(x.handles, x.tt.Deferred(ms(p.CancelAt), r.Cancel))
	for _, n := range p.Steps {
		x.add(r, n)
	}
	x.ch = r.Promise()
	results := 0
	for range flowMaxEvents {
		if x.takeResult() {
			results++
			break
		}
		if !x.tt.NextEvent() {
			break
		}
	}
	if results == 0 && x.takeResult() {
		results++
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
	x.tt.Advance(0)
	if n := x.tt.Pending(); n != 0 {
		x.violation("%d events left on the tool after the flow ended (a timer left armed?)", n)
	}
	// Late calls on every step handle have no effect (decision 12).
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
	return flowOutcome{trace: x.trace, end: x.end, violations: x.problems}
}

func (x *flowRun) takeResult() bool {
	select {
	case res := <-x.ch:
		x.ended = true
		x.end = endString(res)
		return true
	default:
		return false
	}
}

func endString(res asyncsteps.Result) string {
	if res.Err == nil {
		return "ok(" + ff.FmtArgs(res.Args) + ")"
	}
	if errors.Is(res.Err, context.Canceled) {
		return "canceled"
	}
	var e *asyncsteps.Error
	if !errors.As(res.Err, &e) {
		return "err:?" + res.Err.Error()
	}
	if e.Code == asyncsteps.InternalError {
		return "err:InternalError"
	}
	return "err:" + e.Code + ":" + e.Info
}

// checkMutexes checks that every Mutex is free: as many parallel branches
// as its max enter at once, and a flow after them too.
func (x *flowRun) checkMutexes() {
	for i, m := range x.mutexes {
		tt := asyncsteps.NewTestTool()
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		entered := 0
		p := r.Parallel()
		for range 2 {
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
		if want := min(2, x.maxes[i]); capacity != want {
			x.violation("mutex %d: %d probe branches entered at once, want %d: a slot was never given back", i, capacity, want)
		}
	}
}

func (x *flowRun) violation(format string, args ...any) {
	x.problems = append(x.problems, "invariant: "+fmt.Sprintf(format, args...))
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// event records a callback, with the virtual time.
func (x *flowRun) event(ev string) {
	if x.ended || len(x.ch) > 0 {
		x.violation("callback %s after the flow ended", ev)
	}
	x.trace = append(x.trace, ff.AtTime(ev, x.tt.Now().Sub(asyncsteps.TestToolEpoch).Milliseconds()))
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
		as.Add(x.stepFunc(n), x.errorFunc(n.Handler))
	case ff.KParallel:
		p := as.Parallel(x.errorFunc(n.Handler))
		for _, b := range n.Subs {
			x.add(p, b)
		}
	case ff.KLoop:
		i := 0
		as.Loop(func(as asyncsteps.AsyncSteps) {
			x.iteration(as, n, i)
			i++
		}, n.Label)
	case ff.KRepeat:
		as.Repeat(n.Count, func(as asyncsteps.AsyncSteps, i int) { x.iteration(as, n, i) }, n.Label)
	case ff.KSync:
		as.Sync(x.mutexes[n.Mutex], x.stepFunc(n.Body), x.errorFunc(n.Body.Handler))
	case ff.KSuccessStep:
		as.SuccessStep(intArgs(n.Args)...)
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

func (x *flowRun) stepFunc(n *ff.Node) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, args ...any) {
		x.steps = append(x.steps, as)
		x.event(ff.StepEvent(n.ID, args))
		if n.Timeout > 0 {
			as.SetTimeout(ms(n.Timeout))
		}
		if n.Cancel {
			called := false
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				if called {
					x.violation("cancel handler of step %d called twice", n.ID)
				}
				called = true
				x.event(ff.CancelEvent(n.ID))
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
		case ff.EWait:
			as.WaitExternal()
		}
	}
}

func (x *flowRun) errorFunc(h *ff.Handler) asyncsteps.ErrorFunc {
	if h == nil {
		return nil
	}
	called := false
	return func(as asyncsteps.AsyncSteps, code string) {
		if called {
			x.violation("error handler %d called twice", h.ID)
		}
		called = true
		x.steps = append(x.steps, as)
		x.event(ff.HandlerEvent(h.ID, code, as.State().ErrorInfo))
		switch h.Action {
		case ff.HRecover:
			as.Success(intArgs(h.Args)...)
		case ff.HRethrow:
			as.Error(h.Code, h.Info)
		case ff.HAdd:
			for _, s := range h.Steps {
				x.add(as, s)
			}
		}
	}
}
