package asyncsteps_test

// docs/DESIGN.md#cancel-handlers: a step whose Success from outside was
// claimed before the loop cancelled it has completed: its own cancel
// handler does not run, whatever cancels it, while its parents' do and
// the flow ends cancelled (or failed) as before. A claimed Error keeps
// the handler, as applying the error would have run it.
//
// On a TestTool a completion from another goroutine waits in the tool's
// queue, so each test queues the cancel first and the completion behind
// it, or claims the step from inside the cancel that reaches it.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// claimKinds are the two completions a step may be claimed by, with the
// handlers each lets run: claimed, they differ only in the step's own
// cancel handler.
var claimKinds = []struct {
	name     string
	complete func(as asyncsteps.AsyncSteps)
}{
	{"Success", func(as asyncsteps.AsyncSteps) { as.Success("late") }},
	{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Late", "late info") }},
}

// completeFrom completes the waiting step of as with complete from a
// goroutine of its own, and returns once that call has: the completion
// is claimed and queued on the tool.
func completeFrom(t *testing.T, as asyncsteps.AsyncSteps, complete func(asyncsteps.AsyncSteps)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		complete(as)
	}()
	<-done
	if as.IsValid() {
		// Not Fatal: the caller may be a callback of the tool.
		t.Error("the completion was not claimed: the step still accepts one")
	}
}

// waitingUnder adds to r a step with a cancel handler and sub-steps, the
// last of which waits with a cancel handler of its own (kept in *held).
func waitingUnder(r *asyncsteps.Root, tr *tracer, held *asyncsteps.AsyncSteps) {
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("outer:cancel"))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			*held = as
			as.SetCancel(tr.cancel("step:cancel"))
		}, tr.handler("step:onerror"))
	}, tr.handler("outer:onerror"))
	r.Add(tr.step("not reached"))
}

// Root.Cancel: the cancel is queued first, the completion behind it.
func TestRootCancelAfterAClaimedCompletion(t *testing.T) {
	want := map[string]string{
		"Success": "outer:cancel",
		"Error":   "step:cancel,outer:cancel",
	}
	for _, k := range claimKinds {
		t.Run(k.name, func(t *testing.T) {
			var tr tracer
			var held asyncsteps.AsyncSteps
			r, tt := newFlow()
			waitingUnder(r, &tr, &held)
			ch := r.Promise()
			drive(t, tt)
			noResult(t, ch)

			r.Cancel()
			completeFrom(t, held, k.complete)
			drive(t, tt)

			res := result(t, ch)
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
			}
			wantTrace(t, &tr, want[k.name])
			if n := tt.Pending(); n != 0 {
				t.Errorf("Pending() = %d after the flow ended", n)
			}
		})
	}
}

// The end of Run's context: the context ends in one task of the tool,
// Run then queues the flow's cancel behind the next task, which claims
// the completion, queued behind the cancel in turn.
func TestRunContextCancelAfterAClaimedCompletion(t *testing.T) {
	want := map[string]string{
		"Success": "outer:cancel",
		"Error":   "step:cancel,outer:cancel",
	}
	for _, k := range claimKinds {
		t.Run(k.name, func(t *testing.T) {
			var tr tracer
			var held asyncsteps.AsyncSteps
			r, _ := newFlow()
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			started := false
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("outer:cancel"))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					held, started = as, true
					as.SetCancel(tr.cancel("step:cancel"))
					as.Tool().Immediate(stop)
					as.Tool().Immediate(func() { completeFrom(t, held, k.complete) })
				}, tr.handler("step:onerror"))
			}, tr.handler("outer:onerror"))
			r.Add(tr.step("not reached"))

			_, err := r.Run(ctx)

			if !started {
				t.Fatal("the waiting step never ran")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run error = %v, want context.Canceled", err)
			}
			wantTrace(t, &tr, want[k.name])
		})
	}
}

// A parent's SetTimeout: the first branch's cancel handler, which the
// timeout runs first, completes the second branch, whose cancel handler
// comes next in the same cancel.
func TestParentTimeoutAfterAClaimedCompletion(t *testing.T) {
	want := map[string]string{
		"Success": "first:cancel,outer:cancel,outer:onerror:Timeout@1s",
		"Error":   "first:cancel,second:cancel,outer:cancel,outer:onerror:Timeout@1s",
	}
	for _, k := range claimKinds {
		t.Run(k.name, func(t *testing.T) {
			var tr tracer
			var second asyncsteps.AsyncSteps
			r, tt := newFlow()
			clock := stopwatch(tt)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.SetCancel(tr.cancel("outer:cancel"))
				p := as.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("first:cancel")
						completeFrom(t, second, k.complete)
					})
				})
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					second = as
					as.SetCancel(tr.cancel("second:cancel"))
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("outer:onerror:%s@%v", code, clock())
			})
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantError(t, res.Err, asyncsteps.Timeout, "")
			wantTrace(t, &tr, want[k.name])
		})
	}
}

// A failed sibling branch: its error is queued first, the completion of
// the other branch behind it.
func TestFailedSiblingAfterAClaimedCompletion(t *testing.T) {
	want := map[string]string{
		"Success": "failing:cancel,onerror:Boom",
		"Error":   "failing:cancel,held:cancel,onerror:Boom",
	}
	for _, k := range claimKinds {
		t.Run(k.name, func(t *testing.T) {
			var tr tracer
			var held, failing asyncsteps.AsyncSteps
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					held = as
					as.SetCancel(tr.cancel("held:cancel"))
				})
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					failing = as
					as.SetCancel(tr.cancel("failing:cancel"))
				})
			}, tr.handler("onerror"))
			r.Add(tr.step("not reached"))
			ch := r.Promise()
			drive(t, tt)
			noResult(t, ch)

			completeFrom(t, failing, func(as asyncsteps.AsyncSteps) { as.Error("Boom") })
			completeFrom(t, held, k.complete)
			drive(t, tt)

			res := result(t, ch)
			wantError(t, res.Err, "Boom", "")
			wantTrace(t, &tr, want[k.name])
		})
	}
}

// An Await whose function has returned is claimed by its result: a cancel
// that the loop applies before that result finds the call's context
// cancelled by the return already, so the step's own cancel (of that
// context) has nothing left to do, and the flow is cancelled as usual.
func TestCancelAfterAnAwaitReturned(t *testing.T) {
	for _, fails := range []bool{false, true} {
		name := "Success"
		if fails {
			name = "Error"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				release := make(chan struct{})
				var fnCtx context.Context
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("outer:cancel"))
					as.Await(func(ctx context.Context) (any, error) {
						fnCtx = ctx
						<-release
						if fails {
							return nil, &asyncsteps.Error{Code: "Late"}
						}
						return "late", nil
					}, tr.handler("await:onerror"))
				}, tr.handler("outer:onerror"))
				r.Add(tr.step("not reached"))
				ch := r.Promise()
				drive(t, tt)
				noResult(t, ch)

				r.Cancel()
				close(release)
				synctest.Wait() // the function has returned and its result is claimed
				if err := fnCtx.Err(); !errors.Is(err, context.Canceled) {
					t.Errorf("the function's context after its return: %v, want cancelled", err)
				}
				drive(t, tt)

				res := result(t, ch)
				if !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
				}
				wantTrace(t, &tr, "outer:cancel")
				if n := tt.Pending(); n != 0 {
					t.Errorf("Pending() = %d after the flow ended", n)
				}
			})
		})
	}
}

// A Success that the step's callback calls after Add, once it has set a
// cancel handler (so the call claims the step as one from outside would),
// is the misuse of docs/DESIGN.md#completing-after-add: the step has not
// completed, and the error unwinding from it runs its cancel handler.
func TestSuccessAfterAddStillRunsTheCancelHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("step:cancel"))
		as.Add(tr.step("not reached"))
		as.Success()
	}, tr.handler("step:onerror"))

	res := run(t, r, tt)

	wantError(t, res.Err, asyncsteps.InternalError, "Success called after Add in the same callback")
	wantTrace(t, &tr, "step:cancel,step:onerror:InternalError")
}
