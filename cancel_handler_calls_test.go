package asyncsteps_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The infos of a call that a cancel handler makes on its own AsyncSteps,
// after the call's name.
const (
	inCancelAdds  = " called in a cancel handler: the steps it adds never run; start a flow of its own for them"
	inCancelWaits = " called in a cancel handler: its step is cancelled or failed, and waits for nothing; start a flow of its own to wait"
	inCancelEnds  = " called in a cancel handler: its step is cancelled or failed, and takes no completion"
)

// cancelHandlerCall is a call that a cancel handler makes on its own
// AsyncSteps, and the info that reports it.
type cancelHandlerCall struct {
	name string
	call func(as asyncsteps.AsyncSteps)
	info string
}

// cancelHandlerCalls are the calls that ask the dead step of a cancel
// handler for work or for a completion: the adds (the helpers built on
// Add name it, the others themselves), the waits and the completions.
func cancelHandlerCalls(tr *tracer) []cancelHandlerCall {
	step := func(asyncsteps.AsyncSteps, ...any) { tr.add("sub-step ran") }
	branch := func(as asyncsteps.AsyncSteps) { as.Add(step) }
	return []cancelHandlerCall{
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(step) }, "Add" + inCancelAdds},
		{"Parallel", func(as asyncsteps.AsyncSteps) { as.Parallel().Add(step) }, "Parallel" + inCancelAdds},
		{"Loop", func(as asyncsteps.AsyncSteps) {
			as.Loop(func(as asyncsteps.AsyncSteps) { tr.add("body ran"); as.Break() })
		}, "Loop" + inCancelAdds},
		{"Repeat", func(as asyncsteps.AsyncSteps) {
			as.Repeat(2, func(asyncsteps.AsyncSteps, int) { tr.add("body ran") })
		}, "Repeat" + inCancelAdds},
		{"ForEach", func(as asyncsteps.AsyncSteps) {
			as.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) { tr.add("body ran") })
		}, "ForEach" + inCancelAdds},
		{"Sync", func(as asyncsteps.AsyncSteps) { as.Sync(asyncsteps.NewMutex(1), step) }, "Sync" + inCancelAdds},
		{"Mutex.Sync", func(as asyncsteps.AsyncSteps) { asyncsteps.NewMutex(1).Sync(as, step) }, "Add" + inCancelAdds},
		{"Await", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) { tr.add("await ran"); return nil, nil })
		}, "Await" + inCancelAdds},
		{"SuccessStep", func(as asyncsteps.AsyncSteps) { as.SuccessStep(1) }, "SuccessStep" + inCancelAdds},
		{"CopyFrom", func(as asyncsteps.AsyncSteps) {
			model := asyncsteps.New()
			model.Add(step)
			as.CopyFrom(model)
		}, "CopyFrom" + inCancelAdds},
		{"Retry", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(asyncsteps.AsyncSteps, int) { tr.add("attempt ran") })
		}, "Retry" + inCancelAdds},
		{"ForEachLimit", func(as asyncsteps.AsyncSteps) {
			asyncsteps.ForEachLimit(as, maps.All(map[int]int{1: 1}), 1, func(asyncsteps.AsyncSteps, int, int) { tr.add("item ran") })
		}, "ForEachLimit" + inCancelAdds},
		{"Gather", func(as asyncsteps.AsyncSteps) { asyncsteps.Gather[int](as, nil, branch) }, "Add" + inCancelAdds},
		{"First", func(as asyncsteps.AsyncSteps) { asyncsteps.First[int](as, nil, branch) }, "Add" + inCancelAdds},
		{"Then", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Then(as, func(asyncsteps.AsyncSteps, int) { tr.add("then ran") })
		}, "Add" + inCancelAdds},
		{"SetTimeout", func(as asyncsteps.AsyncSteps) { as.SetTimeout(time.Second) }, "SetTimeout" + inCancelWaits},
		{"SetCancel", func(as asyncsteps.AsyncSteps) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("second handler ran") })
		}, "SetCancel" + inCancelWaits},
		{"WaitExternal", func(as asyncsteps.AsyncSteps) { as.WaitExternal() }, "WaitExternal" + inCancelWaits},
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success(1) }, "Success" + inCancelEnds},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Refund", "card declined") }, "Error(Refund)" + inCancelEnds},
		{"Fail", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Fail(as, &asyncsteps.Error{Code: "Refund", Info: "card declined"})
		}, "Fail(Refund)" + inCancelEnds},
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }, "Break" + inCancelEnds},
		{"Break(label)", func(as asyncsteps.AsyncSteps) { as.Break("outer") }, "Break(outer)" + inCancelEnds},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }, "Continue" + inCancelEnds},
		{"Break(a, b)", func(as asyncsteps.AsyncSteps) { as.Break("a", "b") }, "Break: more than one label (2 given)" + inCancelEnds},
		{"Error()", func(as asyncsteps.AsyncSteps) { as.Error("") }, "Error()" + inCancelEnds},
	}
}

// cancelHandlerRun is a way a step's cancel handler comes to run, and
// the end it gives the flow, which the handler's calls must not change.
type cancelHandlerRun struct {
	name string
	// flow adds to r, run on tt, a step whose cancel handler is h.
	flow func(r *asyncsteps.Root, tt *asyncsteps.TestTool, h asyncsteps.CancelFunc)
	// end checks the flow's end.
	end func(t *testing.T, err error)
}

// cancelHandlerRuns are the ways a cancel handler runs: under Root.Cancel,
// under its step's timeout, for a failed sibling branch, for an error
// unwinding from a sub-step through its step, and for an Error from
// outside that fails its waiting step (whose state word is claimed, not
// dead, as the handler runs).
var cancelHandlerRuns = []cancelHandlerRun{
	{
		name: "Root.Cancel",
		flow: func(r *asyncsteps.Root, tt *asyncsteps.TestTool, h asyncsteps.CancelFunc) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(h) })
			tt.Deferred(10*time.Millisecond, r.Cancel)
		},
		end: func(t *testing.T, err error) {
			t.Helper()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Result.Err = %v, want context.Canceled", err)
			}
		},
	},
	{
		name: "timeout",
		flow: func(r *asyncsteps.Root, _ *asyncsteps.TestTool, h asyncsteps.CancelFunc) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.SetCancel(h)
			})
		},
		end: func(t *testing.T, err error) { t.Helper(); wantError(t, err, asyncsteps.Timeout, "") },
	},
	{
		name: "failed sibling branch",
		flow: func(r *asyncsteps.Root, _ *asyncsteps.TestTool, h asyncsteps.CancelFunc) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(h) })
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1", "sibling") })
			})
		},
		end: func(t *testing.T, err error) { t.Helper(); wantError(t, err, "E1", "sibling") },
	},
	{
		name: "error unwinding",
		flow: func(r *asyncsteps.Root, _ *asyncsteps.TestTool, h asyncsteps.CancelFunc) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(h)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1", "below") })
			})
		},
		end: func(t *testing.T, err error) { t.Helper(); wantError(t, err, "E1", "below") },
	},
	{
		name: "Error from outside",
		flow: func(r *asyncsteps.Root, tt *asyncsteps.TestTool, h asyncsteps.CancelFunc) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(h)
				tt.Deferred(10*time.Millisecond, func() { as.Error("E1", "outside") })
			})
		},
		end: func(t *testing.T, err error) { t.Helper(); wantError(t, err, "E1", "outside") },
	},
}

// A call that a cancel handler makes on its own AsyncSteps to add steps,
// to make its step wait or to complete it can have no effect: the step
// is cancelled or failed, dead as a completed step. It is reported,
// "asyncsteps: misuse in cancel handler" with an info that names the
// call and says what to do instead, once, and the handler goes on: the
// cleanup after the call still runs, and the flow ends as it would have.
// Before, the call had no effect without a word: a compensation added as
// a step was lost unseen.
func TestCancelHandlerCallsAreReported(t *testing.T) {
	for _, how := range cancelHandlerRuns {
		for i, named := range cancelHandlerCalls(nil) {
			t.Run(how.name+"/"+named.name, func(t *testing.T) {
				log := asyncsteps.CaptureLog(t)
				var tr tracer
				c := cancelHandlerCalls(&tr)[i]
				r, tt := newFlow()
				how.flow(r, tt, func(as asyncsteps.AsyncSteps) {
					tr.add("handler")
					c.call(as)
					tr.add("after the call")
				})

				res := run(t, r, tt)

				how.end(t, res.Err)
				wantTrace(t, &tr, "handler,after the call")
				wantCancelMisuseLogged(t, log.String(), c.info)
			})
		}
	}
}

// A cancel handler that makes such calls again and again (in a loop, say)
// is reported once per run, for its first call: the log is not flooded,
// and the first call tells what is wrong. Each handler's run is reported
// on its own.
func TestCancelHandlerCallsAreReportedOncePerRun(t *testing.T) {
	log := asyncsteps.CaptureLog(t)
	var tr tracer
	r, tt := newFlow()
	handler := func(name string) asyncsteps.CancelFunc {
		return func(as asyncsteps.AsyncSteps) {
			for range 100 {
				as.Add(func(asyncsteps.AsyncSteps, ...any) {})
				as.WaitExternal()
				as.Success()
				as.Error("E2")
			}
			tr.add(name)
		}
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(handler("first")) })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(handler("second"))
			as.WaitExternal()
		})
	})
	tt.Deferred(10*time.Millisecond, r.Cancel)

	res := run(t, r, tt)

	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
	}
	wantTrace(t, &tr, "first,second")
	want := `level=ERROR msg="asyncsteps: misuse in cancel handler" info="Add` + inCancelAdds + `"`
	if out := log.String(); strings.Count(out, "asyncsteps:") != 2 || strings.Count(out, want) != 2 {
		t.Errorf("the engine logged:\n%s\nwant %s, twice", out, want)
	}
}

// What a cancel handler may still ask of its AsyncSteps is no misuse:
// State, IsValid (false), Tool and NewInstance, the flow of its own that
// a compensation takes.
func TestCancelHandlerQueriesAreNotReported(t *testing.T) {
	for _, how := range cancelHandlerRuns {
		t.Run(how.name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			r, tt := newFlow()
			how.flow(r, tt, func(as asyncsteps.AsyncSteps) {
				as.State().Set("k", 1)
				own := as.NewInstance()
				own.Add(func(asyncsteps.AsyncSteps, ...any) { tr.add("own flow") })
				own.Execute()
				tr.addf("valid %v, same tool %v", as.IsValid(), as.Tool() == asyncsteps.Tool(tt))
			})

			res := run(t, r, tt)

			how.end(t, res.Err)
			wantTrace(t, &tr, "valid false, same tool true,own flow")
			if out := log.String(); out != "" {
				t.Errorf("logged %q", out)
			}
		})
	}
}

// Only the handler's own calls are reported: another goroutine's call on
// the handler's AsyncSteps, made while the handler runs, has no effect
// and no report, as on any completed step.
func TestCancelHandlerStepCalledFromAnotherGoroutine(t *testing.T) {
	log := asyncsteps.CaptureLog(t)
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(as asyncsteps.AsyncSteps) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				as.Add(func(asyncsteps.AsyncSteps, ...any) { tr.add("sub-step ran") })
				as.Success()
				as.Error("E2")
			}()
			<-done
			tr.add("handler")
		})
	})
	tt.Deferred(10*time.Millisecond, r.Cancel)

	res := run(t, r, tt)

	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
	}
	wantTrace(t, &tr, "handler")
	if out := log.String(); out != "" {
		t.Errorf("logged %q", out)
	}
}
