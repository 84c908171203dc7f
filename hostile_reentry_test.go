package asyncsteps_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// flippedDeadline is a context whose deadline passes when the test says
// so: Run's deadline without the wall clock.
type flippedDeadline struct {
	context.Context
	passed atomic.Bool
}

func (c *flippedDeadline) Deadline() (time.Time, bool) { return asyncsteps.TestToolEpoch, true }

func (c *flippedDeadline) Err() error {
	if c.passed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// The tasks that time a flow out at Run's deadline are the flow's own
// events too: a step that drives its TestTool (a misuse) must not run them
// inside itself, where they would unwind the flow under the step's feet.
// They wait until the step returns; the step fails with the InternalError
// of the misuse, as for its other events.
func TestHostileTestToolDrivenPastRunsDeadline(t *testing.T) {
	const info = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer)
		trace string
	}{
		{"the timeout of the running step", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctx.passed.Store(true)
				tt.Immediate(func() {}) // the flow yields: Run sees the deadline before B
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B")
				tt.NextEvent() // the only event queued: the deadline's
				tr.add("B returns")
			})
		}, "B,B returns"},
		{"the timeout of a step that waits after the deadline", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					ctx.passed.Store(true)
					as.SetTimeout(time.Hour) // waits: Run's deadline times it out
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("recovered " + code)
				as.Success()
			})
			p := r.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B waits")
				as.WaitExternal() // past the deadline: its timeout is queued
			})
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("C")
				tt.NextEvent() // the only event queued: B's timeout
				tr.add("C returns")
			})
		}, "recovered Timeout,B waits,C,C returns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				ctx := &flippedDeadline{Context: context.Background()}
				var tr tracer
				c.build(r, tt, ctx, &tr)
				_, err := r.Run(ctx)
				wantError(t, err, asyncsteps.InternalError, info)
				wantTrace(t, &tr, c.trace)
			})
		})
	}
}

// A StepError hook that drives its TestTool into its own flow (a misuse)
// runs none of the flow's events inside itself: they wait until the hook
// returns, and the error it was told of unwinds as if the hook had
// returned at once. Before, a step timeout that the hook's Advance
// reached ran under it: it timed out the step around the error, whose
// unwinding then went on from frames that timeout had recycled, a nil
// dereference that the tool logged.
func TestHostileStepErrorHookDrivesItsTestTool(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
			tr.addf("steperror %s", err.Code)
			tt.Advance(time.Second)
		}})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Millisecond)
			as.SetCancel(tr.cancel("outer cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("inner cancel"))
				as.Tool().Deferred(5*time.Millisecond, func() { as.Error("E") })
			}, tr.handler("inner onerror"))
		}, tr.handler("outer onerror"))
		r.Add(tr.step("not reached"))
		wantError(t, run(t, r, tt).Err, "E", "")
		wantTrace(t, &tr, "steperror E,inner cancel,inner onerror:E,outer cancel,outer onerror:E")
		syncWantIdle(t, tt)
	})
}
