package asyncsteps

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// What the module's other packages learn of a tool through toolinfo:
// only DefaultTool's loop never closes, and a callback posted to a
// TestTool with a fallback runs, or its fallback does when ResetEvents
// drops it, in the order posted, once the reset is done.
func TestToolInfo(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	if toolinfo.NeverCloses(l) || toolinfo.NeverCloses(NewTestTool()) || toolinfo.NeverCloses(nil) {
		t.Error("NeverCloses is true for a tool that may close")
	}
	if !toolinfo.NeverCloses(DefaultTool()) {
		t.Error("NeverCloses is false for DefaultTool")
	}
	if toolinfo.PostOrDrop(l, func() {}, func() {}) {
		t.Error("PostOrDrop queued on a Loop")
	}

	tt := NewTestTool()
	var tr trace
	post := func(name string) {
		toolinfo.PostOrDrop(tt, func() { tr.add("%s ran", name) }, func() {
			tr.add("%s dropped", name)
			if tt.Pending() != 0 {
				tr.add("pending")
			}
		})
	}
	post("a")
	tt.Run()
	post("b")
	tt.Immediate(func() { tr.add("immediate ran") })
	post("c")
	tt.ResetEvents()
	tt.Run()
	if got, want := tr.String(), "a ran b dropped c dropped"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// atEnd is a FlowEnd of its own for fn, the key of one caller.
func atEnd(fn func()) *toolinfo.FlowEnd { return &toolinfo.FlowEnd{Fn: fn} }

// AtFlowEnd runs its function once as the execution of the step's flow
// ends, however it ends, before the outcome is delivered, however often
// it was given; it keeps nothing for what is not a running step, for a
// step that is over, or without a function, and a later execution starts
// without it.
func TestToolInfoAtFlowEnd(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt), WithUnhandledError(func(err *Error) { tr.add("unhandled %s", err.Code) }))
	var kept AsyncSteps
	end := atEnd(func() { tr.add("end %v", r.Running()) })
	r.Add(func(as AsyncSteps, _ ...any) {
		if toolinfo.AtFlowEnd(r, atEnd(func() {})) || toolinfo.AtFlowEnd(nil, atEnd(func() {})) ||
			toolinfo.AtFlowEnd(as, nil) || toolinfo.AtFlowEnd(as, atEnd(nil)) {
			tr.add("set for what is not a step, or without a function")
		}
		for range 2 { // kept once
			if !toolinfo.AtFlowEnd(as, end) {
				tr.add("not set")
			}
		}
		kept = as
		as.WaitExternal()
	})
	fail := func(as AsyncSteps, _ ...any) {
		if toolinfo.AtFlowEnd(kept, atEnd(func() { tr.add("over ran") })) {
			tr.add("set for a step that is over")
		}
		as.Error("Failed")
	}
	r.Add(fail)
	r.Execute()
	tt.Run()
	kept.Success()
	tt.Run()
	r.Add(fail) // a Root's steps run once
	r.Execute()
	tt.Run()
	if got, want := tr.String(), "end true unhandled Failed unhandled Failed"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// AtFlowEnd keeps one function per caller, each caller's FlowEnd being its
// key: the function of each runs once as the execution ends, in the order
// each was first given, however often each caller gives its own again
// (package cabi does, for each of its steps that waits). Before, the
// engine kept one function per execution, the last given: package cabi's
// replaced package asynchttp's, or the reverse.
func TestToolInfoAtFlowEndKeepsOneFunctionPerCaller(t *testing.T) {
	for _, callers := range []int{2, 3} {
		t.Run(fmt.Sprint(callers, " callers"), func(t *testing.T) {
			tt := NewTestTool()
			var tr trace
			r := New(WithTool(tt))
			ends := make([]*toolinfo.FlowEnd, callers)
			for i := range ends {
				ends[i] = atEnd(func() { tr.add("end %d", i) })
			}
			var kept AsyncSteps
			r.Add(func(as AsyncSteps, _ ...any) {
				for _, e := range ends {
					toolinfo.AtFlowEnd(as, e)
					toolinfo.AtFlowEnd(as, ends[0])
				}
				kept = as
				as.WaitExternal()
			})
			r.Add(func(as AsyncSteps, _ ...any) {
				for i := len(ends) - 1; i >= 0; i-- {
					toolinfo.AtFlowEnd(as, ends[i])
				}
				tr.add("last step")
			})
			r.Execute()
			tt.Run()
			kept.Success()
			tt.Run()
			want := "last step end 0 end 1"
			if callers == 3 {
				want += " end 2"
			}
			if got := tr.String(); got != want {
				t.Errorf("trace %q, want %q", got, want)
			}
		})
	}
}

// AtFlowEnd reaches the step of a decorator that unwraps also once the
// step's callback has returned and the step waits: on the loop, its flow
// is known all the same. A decorator without Unwrap keeps nothing.
func TestToolInfoAtFlowEndThroughADecoratorOfAWaitingStep(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	var kept AsyncSteps
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		kept = as
	})
	r.Execute()
	tt.Run()
	tt.Immediate(func() {
		if toolinfo.AtFlowEnd(opaqueSteps{kept}, atEnd(func() { tr.add("opaque ran") })) {
			tr.add("set through a decorator without Unwrap")
		}
		if !toolinfo.AtFlowEnd(unwrappingSteps{unwrappingSteps{kept}}, atEnd(func() { tr.add("end") })) {
			tr.add("not set")
		}
	})
	tt.Run()
	kept.Success()
	tt.Run()
	if got, want := tr.String(), "end"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

type opaqueSteps struct{ AsyncSteps }

type unwrappingSteps struct{ AsyncSteps }

func (u unwrappingSteps) Unwrap() AsyncSteps { return u.AsyncSteps }

// stepProbe traces what a toolinfo function answers of the steps it is
// asked about: "name answer known" each.
type stepProbe struct {
	tr trace
	fn func(as any) (answer, known bool)
}

func (p *stepProbe) probe(name string, as AsyncSteps) {
	answer, known := p.fn(as)
	p.tr.add("%s %v %v", name, answer, known)
}

// check fails t unless the trace is want, and starts a new one.
func (p *stepProbe) check(t *testing.T, want string) {
	t.Helper()
	if got := p.tr.String(); got != want {
		t.Errorf("trace %q,\nwant  %q", got, want)
	}
	p.tr = trace{}
}

// addOuter adds to r a step that is probed in its callback ("callback"),
// then, in a sub-step it adds, directly ("sub-step") and through a
// decorator with and without Unwrap; then, still in the sub-step, more
// runs. It sets *outer to the step.
func (p *stepProbe) addOuter(r *Root, outer *AsyncSteps, more func(sub AsyncSteps)) {
	r.Add(func(as AsyncSteps, _ ...any) {
		*outer = as
		p.probe("callback", as)
		as.Add(func(sub AsyncSteps, _ ...any) {
			p.probe("sub-step", *outer)
			p.probe("through Unwrap", unwrappingSteps{*outer})
			p.probe("without Unwrap", opaqueSteps{*outer})
			if more != nil {
				more(sub)
			}
		})
	})
}

// addWaiting adds to r a step that waits for a completion from outside,
// and sets *waiting to it.
func addWaiting(r *Root, waiting *AsyncSteps) {
	r.Add(func(as AsyncSteps, _ ...any) {
		*waiting = as
		as.WaitExternal()
	})
}

// StepRunning follows a step past its callback while a sub-step it added
// runs, and says it is over once that sub-step has ended; a recycled frame
// does not make it run again. What does not unwrap to a step is unknown.
func TestToolInfoStepRunning(t *testing.T) {
	tt := NewTestTool()
	p := &stepProbe{fn: toolinfo.StepRunning}
	probe := p.probe
	r := New(WithTool(tt))
	var outer AsyncSteps
	p.addOuter(r, &outer, nil)
	r.Add(func(as AsyncSteps, _ ...any) {
		probe("next step", outer)
		as.Add(func(AsyncSteps, ...any) { probe("next sub-step", outer) })
	})
	r.Execute()
	tt.Run()
	probe("ended", outer)
	probe("a Root", r)
	want := "callback true true sub-step true true through Unwrap true true without Unwrap false false " +
		"next step false true next sub-step false true ended false true a Root false false"
	p.check(t, want)
}

// CallbackRuns is true while the step's callback runs, also after its
// Success, and false once it has returned: while a sub-step it added runs,
// while it waits, and once it has ended. What does not unwrap to a step is
// unknown.
func TestToolInfoCallbackRuns(t *testing.T) {
	tt := NewTestTool()
	p := &stepProbe{fn: toolinfo.CallbackRuns}
	probe := p.probe
	r := New(WithTool(tt))
	var outer, waiting AsyncSteps
	p.addOuter(r, &outer, nil)
	r.Add(func(as AsyncSteps, _ ...any) {
		as.Success()
		probe("after Success", as)
	})
	addWaiting(r, &waiting)
	r.Execute()
	tt.Run()
	probe("waiting", waiting)
	waiting.Success()
	tt.Run()
	probe("ended", outer)
	probe("a Root", r)
	want := "callback true true sub-step false true through Unwrap false true without Unwrap false false " +
		"after Success true true waiting false true ended false true a Root false false"
	p.check(t, want)
}

// ValidOffLoop reads only the step's state: a step whose callback runs is
// valid, also after its Success there; a waiting step is valid until a
// completion from outside is claimed; a step that has ended is not. What
// does not unwrap to a step is unknown.
func TestToolInfoValidOffLoop(t *testing.T) {
	tt := NewTestTool()
	p := &stepProbe{fn: toolinfo.ValidOffLoop}
	probe := p.probe
	r := New(WithTool(tt))
	var first, waiting AsyncSteps
	r.Add(func(as AsyncSteps, _ ...any) {
		first = as
		as.Success()
		probe("after Success", as)
		probe("through Unwrap", unwrappingSteps{as})
		probe("without Unwrap", opaqueSteps{as})
	})
	addWaiting(r, &waiting)
	r.Execute()
	tt.Run()
	probe("waiting", waiting)
	waiting.Success()
	probe("claimed", waiting)
	tt.Run()
	probe("ended", first)
	want := "after Success true true through Unwrap true true without Unwrap false false " +
		"waiting true true claimed false true ended false true"
	p.check(t, want)
}

// StepLive is true for a step that waits or whose sub-step runs, false
// once a completion from outside is claimed (before the loop applies it)
// and once the step has ended; a flow that its closed loop ends where it
// stands keeps the step it waited in live, and the ones that ended before
// not. What does not unwrap to a step is unknown.
func TestToolInfoStepLive(t *testing.T) {
	p := &stepProbe{fn: toolinfo.StepLive}
	probe := p.probe
	tt := NewTestTool()
	r := New(WithTool(tt))
	var outer, waiting AsyncSteps
	p.addOuter(r, &outer, func(sub AsyncSteps) {
		sub.Success()
		probe("succeeded in its callback", sub)
	})
	addWaiting(r, &waiting)
	r.Execute()
	tt.Run()
	probe("ended", outer)
	probe("waiting", waiting)
	waiting.Success()
	probe("claimed", waiting)
	tt.Run()
	probe("completed", waiting)
	probe("a Root", r)
	want := "callback true true sub-step true true through Unwrap true true without Unwrap false false " +
		"succeeded in its callback false true ended false true waiting true true claimed false true " +
		"completed false true a Root false false"
	p.check(t, want)

	l := NewLoop()
	r = New(WithTool(l))
	var done AsyncSteps
	in := make(chan struct{})
	r.Add(func(as AsyncSteps, _ ...any) { done = as })
	r.Add(func(as AsyncSteps, _ ...any) {
		as.Add(func(as AsyncSteps, _ ...any) {
			waiting = as
			as.WaitExternal()
			close(in)
		})
		outer = as
	})
	r.Execute()
	<-in
	l.Close()
	probe("completed", done)
	probe("with a sub-step left", outer)
	probe("left waiting", waiting)
	p.check(t, "completed false true with a sub-step left true true left waiting true true")
}

// An error claimed from outside a waiting step, by Error from another
// goroutine or by ClaimError, leaves StepLive true until the loop applies
// it: the step has not ended, and its cancel handler is due (a cancel
// runs it), unlike after a claimed success. Once applied, it is false.
func TestToolInfoStepLiveAfterAClaimedError(t *testing.T) {
	for _, claim := range []string{"Error", "ClaimError"} {
		p := &stepProbe{fn: toolinfo.StepLive}
		tt := NewTestTool()
		r := New(WithTool(tt))
		var waiting AsyncSteps
		addWaiting(r, &waiting)
		r.ExecuteWith(func(*Error) {})
		tt.Run()
		if claim == "Error" {
			done := make(chan struct{})
			go func() {
				defer close(done)
				waiting.Error("E1")
			}()
			<-done
		} else {
			toolinfo.ClaimError(waiting).Deliver("E1", "")
		}
		p.probe("claimed", waiting)
		tt.Run()
		p.probe("failed", waiting)
		t.Run(claim, func(t *testing.T) { p.check(t, "claimed true true failed false true") })
	}
}

// ClaimSuccess claims a waiting step for a success whose args Deliver
// writes later, on the loop: the step's timer that falls due meanwhile
// loses, as to a Success claimed from another goroutine, and the step
// completes with the args delivered. A cancel that comes between the two
// finds the step completed: its cancel handler does not run, the claim
// is void and Deliver does nothing. A step that does not wait, or is
// claimed already, is not claimed.
func TestToolInfoClaimSuccess(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		var waiting AsyncSteps
		r.Add(func(as AsyncSteps, _ ...any) {
			if toolinfo.ClaimSuccess(as) != nil {
				tr.add("claimed before it waits")
			}
			as.SetTimeout(10 * time.Millisecond)
			as.SetCancel(func(AsyncSteps) { tr.add("cancel handler") })
			waiting = as
		})
		r.Add(func(_ AsyncSteps, args ...any) { tr.add("next %v", args) })
		r.ExecuteWith(func(err *Error) { tr.add("ended %s", err.Code) })
		tt.Advance(0)
		c := toolinfo.ClaimSuccess(waiting)
		if c == nil || toolinfo.ClaimSuccess(waiting) != nil || waiting.IsValid() {
			t.Fatalf("cancel=%v: claimed %v, again %v, valid after %v", cancel, c != nil, toolinfo.ClaimSuccess(waiting) != nil, waiting.IsValid())
		}
		if cancel {
			r.Cancel()
		}
		tt.Advance(10 * time.Millisecond) // the timer, or the cancel, first
		tt.Immediate(func() {
			tr.add("void %v", c.Void())
			c.Deliver([]any{7})
		})
		tt.Run()
		want := "void false next [7]"
		if cancel {
			want = "void true"
		}
		if got := tr.String(); got != want {
			t.Errorf("cancel=%v: trace %q, want %q", cancel, got, want)
		}
	}
}

// ClaimError claims a waiting step for an error whose code and info
// Deliver writes later, on the loop: the step's timer that falls due
// meanwhile loses, as to an Error claimed from another goroutine, and
// the step fails with the error delivered, its cancel handler running as
// the error unwinds through it. A cancel that comes between the two
// finds the step failed: its cancel handler runs, the claim is void and
// Deliver does nothing. An empty code is the InternalError that Error
// makes of it. A step that does not wait, or is claimed already (for a
// success too), is not claimed.
func TestToolInfoClaimError(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		cancel     bool
		want       string
	}{
		{"timer", "E1", false, "void false cancel handler ended E1 (from a thread)"},
		{"cancel", "E1", true, "cancel handler void true"},
		{"empty code", "", false, "void false cancel handler ended InternalError (" + errorCallInfo("", []string{"from a thread"}) + ")"},
	} {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		var waiting AsyncSteps
		r.Add(func(as AsyncSteps, _ ...any) {
			if toolinfo.ClaimError(as) != nil {
				tr.add("claimed before it waits")
			}
			as.SetTimeout(10 * time.Millisecond)
			as.SetCancel(func(AsyncSteps) { tr.add("cancel handler") })
			waiting = as
		})
		r.Add(func(_ AsyncSteps, args ...any) { tr.add("next %v", args) })
		r.ExecuteWith(func(err *Error) { tr.add("ended %s (%s)", err.Code, err.Info) })
		tt.Advance(0)
		c := toolinfo.ClaimError(waiting)
		if c == nil || toolinfo.ClaimError(waiting) != nil || toolinfo.ClaimSuccess(waiting) != nil || waiting.IsValid() {
			t.Fatalf("%s: claimed %v, again %v, valid after %v", tc.name, c != nil, toolinfo.ClaimError(waiting) != nil, waiting.IsValid())
		}
		if tc.cancel {
			r.Cancel()
		}
		tt.Advance(10 * time.Millisecond) // the timer, or the cancel, first
		tt.Immediate(func() {
			tr.add("void %v", c.Void())
			c.Deliver(tc.code, "from a thread")
		})
		tt.Run()
		if got := tr.String(); got != tc.want {
			t.Errorf("%s: trace %q, want %q", tc.name, got, tc.want)
		}
	}
}

// AtWait runs its function once, as the step's callback returns and the
// step begins to wait, before the step's timer may fall due: there a
// claim of the step, which ClaimSuccess refuses while the callback runs
// before it waits, takes, and the timer then loses to it. It is set only
// from the running callback of the step, also through a decorator that
// unwraps; the one set last runs. It does not run for a step that
// completes in its callback, adds sub-steps (nor as a sub-step waits),
// or fails, the error handler then waiting in its frame.
func TestToolInfoAtWait(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	var waiting AsyncSteps
	var claimed toolinfo.Claimed
	never := func() { tr.add("never") }
	r.Add(func(as AsyncSteps, _ ...any) {
		if toolinfo.AtWait(r, never) || toolinfo.AtWait(nil, never) || toolinfo.AtWait(opaqueSteps{as}, never) {
			tr.add("set for what is not a step")
		}
		offLoop := make(chan bool)
		go func() { offLoop <- toolinfo.AtWait(as, never) }()
		if <-offLoop {
			tr.add("set off the loop")
		}
		toolinfo.AtWait(as, never)
		if !toolinfo.AtWait(unwrappingSteps{as}, func() {
			runs, _ := toolinfo.CallbackRuns(as)
			claimed = toolinfo.ClaimSuccess(as)
			tr.add("waits, callback runs %v, claimed %v", runs, claimed != nil)
		}) {
			tr.add("not set")
		}
		if toolinfo.ClaimSuccess(as) != nil {
			tr.add("claimed before it waits")
		}
		as.SetTimeout(time.Millisecond)
		waiting = as
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		toolinfo.AtWait(as, never)
		as.Success()
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		toolinfo.AtWait(as, never)
		as.Add(func(sub AsyncSteps, _ ...any) {
			sub.SetTimeout(time.Millisecond)
			tr.add("sub-step waits")
		})
	}, func(as AsyncSteps, code string) {
		tr.add("handled %s", code)
		as.Success()
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		toolinfo.AtWait(as, never)
		as.SetTimeout(time.Hour)
		as.Error("Failed")
	}, func(as AsyncSteps, code string) {
		tr.add("handler of %s waits", code)
		as.WaitExternal()
		waiting = as
	})
	r.Add(func(AsyncSteps, ...any) { tr.add("ended ok") })
	r.ExecuteWith(func(err *Error) { tr.add("ended %s", err.Code) })
	tt.Advance(0)
	if toolinfo.AtWait(waiting, never) {
		tr.add("set once the callback returned")
	}
	tt.Advance(time.Millisecond) // the step's timer loses to the claim
	if claimed != nil {
		tt.Immediate(func() { claimed.Deliver(nil) })
	}
	tt.Run()
	waiting.Success()
	tt.Run()
	want := "waits, callback runs false, claimed true sub-step waits handled Timeout handler of Failed waits ended ok"
	if got := tr.String(); got != want {
		t.Errorf("trace %q,\nwant  %q", got, want)
	}
}

// BeforeStop runs its functions once each, in the order given, on the
// loop's goroutine as it stops, while a step the loop leaves waiting
// still reports IsValid true; once they have run, it reports false. It
// keeps nothing for a tool that is not a Loop that may stop, nor for a
// loop that has begun to stop.
func TestToolInfoBeforeStop(t *testing.T) {
	never := func() { t.Error("a function kept for a tool that never stops ran") }
	for _, tool := range []any{DefaultTool(), &Loop{}, NewTestTool(), nil} {
		if toolinfo.BeforeStop(tool, never) {
			t.Errorf("BeforeStop kept a function for %T", tool)
		}
	}
	l := NewLoop()
	var tr trace
	waiting := make(chan AsyncSteps, 1)
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	r.ExecuteWith(func(*Error) {})
	kept := <-waiting
	for _, name := range []string{"first", "second"} {
		if !toolinfo.BeforeStop(l, func() {
			tr.add("%s on loop %v, valid %v", name, l.IsSameThread(), kept.IsValid())
		}) {
			t.Fatalf("BeforeStop kept nothing for a running Loop")
		}
	}
	l.Close()
	if toolinfo.BeforeStop(l, never) {
		t.Error("BeforeStop kept a function for a stopped Loop")
	}
	tr.add("after valid %v", kept.IsValid())
	want := "first on loop true, valid true second on loop true, valid true after valid false"
	if got := tr.String(); got != want {
		t.Errorf("trace %q,\nwant  %q", got, want)
	}
}

// A function given to BeforeStop that calls runtime.Goexit ends the
// loop's goroutine as the loop stops; the loop goes on with another, as
// after a callback's Goexit, which runs the functions given after it,
// on the loop, before the steps it leaves turn invalid. Before, they
// were lost with the goroutine.
func TestToolInfoBeforeStopAfterAGoexit(t *testing.T) {
	l := NewLoop()
	waiting := make(chan AsyncSteps, 1)
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	r.ExecuteWith(func(*Error) {})
	kept := <-waiting
	var tr trace
	toolinfo.BeforeStop(l, func() {
		tr.add("first")
		runtime.Goexit()
	})
	toolinfo.BeforeStop(l, func() {
		tr.add("second on loop %v, valid %v", l.IsSameThread(), kept.IsValid())
	})
	l.Close()
	want := "first second on loop true, valid true"
	if got := tr.String(); got != want {
		t.Errorf("trace %q,\nwant  %q", got, want)
	}
}
