package asyncsteps_test

import (
	"errors"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// wantAbortedInfo is the info of the step whose callback an abort meant for
// another flow's callback cut short.
const wantAbortedInfo = "the callback was aborted by its call on the AsyncSteps of another flow's step: " +
	"the error was raised in that flow's running callback"

// docs/DESIGN.md#stale-steps and #step-api-states: a callback of flow B
// that runs inside a callback of flow A (A's step drives the TestTool)
// calls the AsyncSteps of a step of A: the AsyncSteps of A's step that
// waits for its sub-steps, kept, or that of A's running sub-step. The
// engine cannot tell B's callback from A's running one, and raises the
// error in A's; the abort that follows unwinds B's callback. B's step
// then fails with InternalError, its callback cut short at the call: it
// went on as if its callback had returned, a silent success of a step
// whose callback never ran to its end.
func TestAbortMeantForAnotherFlowFailsTheStepItCutShort(t *testing.T) {
	cases := []struct {
		name  string
		call  func(waiting, running asyncsteps.AsyncSteps)
		wantA string
	}{
		{
			"kept AsyncSteps of a step waiting for its sub-steps",
			func(waiting, _ asyncsteps.AsyncSteps) { waiting.Success("from B") },
			"A handler InternalError: Success called on the AsyncSteps of a step that waits for its sub-steps",
		},
		{
			"AsyncSteps of the running step",
			func(_, running asyncsteps.AsyncSteps) { running.Error("FromB") },
			"A handler FromB: ",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			var waiting, running asyncsteps.AsyncSteps
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B before")
				c.call(waiting, running)
				tr.add("B after")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("B handler %s: %s", code, as.State().ErrorInfo)
				as.Success("B recovered")
			}).Add(tr.stepArgs("B next"))
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				waiting = as
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					running = as
					chB := b.Promise()
					for len(chB) == 0 && tt.NextEvent() { // B's events, inside this callback
					}
					select {
					case res := <-chB:
						tr.addf("A sub: B ended %v %v", res.Args, res.Err)
					default:
						tr.add("A sub: B still runs")
					}
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("A handler %s: %s", code, as.State().ErrorInfo)
			})

			resA := run(t, a, tt)

			wantTrace(t, &tr, "B before,B handler InternalError: "+wantAbortedInfo+
				",B next[B recovered],A sub: B ended [] <nil>,"+c.wantA)
			if resA.Err == nil {
				t.Error("A succeeded: want the error its handler saw")
			}
		})
	}
}

// As above, with the call made by B's error handler: the handler fails
// with that InternalError, whose Cause is the Go error under the error it
// handled, as for an error the handler raises itself, and the error goes
// on from there.
func TestAbortMeantForAnotherFlowFailsTheHandlerItCutShort(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	var running asyncsteps.AsyncSteps
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			panic("boom")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("B inner handler %s", code)
			running.Error("FromB")
			tr.add("B inner handler after")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		var p *asyncsteps.PanicError
		isPanic := errors.As(as.State().LastException, &p) && p.Value == "boom"
		tr.addf("B handler %s: %s, cause is the panic: %v", code, as.State().ErrorInfo, isPanic)
	})
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		running = as
		chB := b.Promise()
		for len(chB) == 0 && tt.NextEvent() {
		}
		select {
		case res := <-chB:
			tr.addf("A: B ended %v", res.Err)
		default:
			tr.add("A: B still runs")
		}
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("A handler %s", code)
	})

	run(t, a, tt)

	wantTrace(t, &tr, "B inner handler InternalError,B handler InternalError: "+wantAbortedInfo+", cause is the panic: true,"+
		"A: B ended InternalError: "+wantAbortedInfo+",A handler FromB")
}

// As above, across two Loops: a step's callback on one Loop calls Error
// on the AsyncSteps of a step of a flow of another Loop while that step's
// callback runs (it waits for the call). The goroutine of a Loop passes
// for the callback's own, so the error is that step's; the caller's step
// fails with the InternalError of an abort meant for another flow.
func TestAbortMeantForAFlowOfAnotherLoopFailsTheStepItCutShort(t *testing.T) {
	var tr tracer
	l1, l2 := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	defer l1.Close()
	defer l2.Close()
	a := asyncsteps.New(asyncsteps.WithTool(l1))
	b := asyncsteps.New(asyncsteps.WithTool(l2))
	running := make(chan asyncsteps.AsyncSteps)
	called := make(chan struct{})
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		running <- as
		<-called // B's callback has called Error on as
	})
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		aAs := <-running
		tr.add("B before")
		func() {
			defer close(called)
			aAs.Error("FromB")
		}()
		tr.add("B after")
	})
	chA, chB := a.Promise(), b.Promise()
	resA, resB := <-chA, <-chB

	wantTrace(t, &tr, "B before")
	wantError(t, resA.Err, "FromB", "")
	wantError(t, resB.Err, asyncsteps.InternalError, wantAbortedInfo)
}
