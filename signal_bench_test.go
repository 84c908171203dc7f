package asyncsteps

import "testing"

// BenchmarkFlowBreak runs, per op, one new flow on a Loop whose loop
// body adds a step, as the demo gateway's attempt does, that leaves the
// loop with Break: what a flow pays for a caught Break (the error, the
// AsyncStack) on top of the same flow ending its loop otherwise.
func BenchmarkFlowBreak(b *testing.B) { flowLeavingLoop(b, breakLoop) }

// BenchmarkFlowContinueBreak is BenchmarkFlowBreak with one Continue
// before the Break: two signals of different codes in one flow.
func BenchmarkFlowContinueBreak(b *testing.B) { flowLeavingLoop(b, continueThenBreak) }

func breakLoop(as AsyncSteps, _ ...any) { as.Break("retry") }

func continueThenBreak(as AsyncSteps, _ ...any) {
	if as.State().Get("again") == nil {
		as.State().Set("again", true)
		as.Continue("retry")
	}
	as.Break("retry")
}

// flowLeavingLoop runs the flows one after another on a Loop, each
// started by the last step of the one before: no goroutine hand-off, and
// b.Loop is called on the loop's goroutine only.
func flowLeavingLoop(b *testing.B, leave StepFunc) {
	l := NewLoop()
	defer l.Close()
	done := make(chan struct{})
	var next func()
	body := func(as AsyncSteps) { as.Add(leave) }
	branch := func(as AsyncSteps, _ ...any) { as.Loop(body, "retry") }
	last := func(AsyncSteps, ...any) { next() }
	next = func() {
		if !b.Loop() {
			close(done)
			return
		}
		r := New(WithTool(l))
		r.Add(branch)
		r.Add(last)
		r.Execute()
	}
	b.ReportAllocs()
	l.Immediate(next)
	<-done
}
