package asyncsteps_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// API: a call that is valid only inside a step, made on a Root, never
// panics: the next execution fails at once with InternalError and an info
// that names the call, and none of the Root's steps runs.
func TestStepOnlyCallOnRootFailsTheExecution(t *testing.T) {
	const only = " called on a Root: it is valid only inside a step"
	cases := []struct {
		name string
		call func(r *asyncsteps.Root)
		info string
	}{
		{"Success", func(r *asyncsteps.Root) { r.Success(1) }, "Success" + only},
		{"Error", func(r *asyncsteps.Root) { r.Error("E", "why") }, "Error(E)" + only},
		{"SetTimeout", func(r *asyncsteps.Root) { r.SetTimeout(time.Second) }, "SetTimeout" + only},
		{"SetCancel", func(r *asyncsteps.Root) { r.SetCancel(func(asyncsteps.AsyncSteps) {}) }, "SetCancel" + only},
		{"WaitExternal", func(r *asyncsteps.Root) { r.WaitExternal() }, "WaitExternal" + only},
		{"Break", func(r *asyncsteps.Root) { r.Break() }, "Break" + only},
		{"Continue", func(r *asyncsteps.Root) { r.Continue() }, "Continue" + only},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(tr.step("step"))
			c.call(r)
			r.Add(tr.step("after"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "")
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
		})
	}
}

// API: the value Parallel returns takes only calls that add a branch; any
// other call aborts the step that made it with InternalError, whose info
// names the call, and no branch runs.
func TestParallelRefusesCallsThatAddNoBranch(t *testing.T) {
	model := asyncsteps.New()
	cases := []struct {
		name string
		call func(p asyncsteps.AsyncSteps)
	}{
		{"Parallel", func(p asyncsteps.AsyncSteps) { p.Parallel() }},
		{"CopyFrom", func(p asyncsteps.AsyncSteps) { p.CopyFrom(model) }},
		{"SuccessStep", func(p asyncsteps.AsyncSteps) { p.SuccessStep(1) }},
		{"Success", func(p asyncsteps.AsyncSteps) { p.Success(1) }},
		{"Error", func(p asyncsteps.AsyncSteps) { p.Error("E") }},
		{"SetTimeout", func(p asyncsteps.AsyncSteps) { p.SetTimeout(time.Second) }},
		{"SetCancel", func(p asyncsteps.AsyncSteps) { p.SetCancel(func(asyncsteps.AsyncSteps) {}) }},
		{"WaitExternal", func(p asyncsteps.AsyncSteps) { p.WaitExternal() }},
		{"Break", func(p asyncsteps.AsyncSteps) { p.Break() }},
		{"Continue", func(p asyncsteps.AsyncSteps) { p.Continue() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			var info string
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				p := as.Parallel()
				p.Add(tr.step("branch"))
				c.call(p)
				tr.add("not aborted")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s", code)
				info = as.State().ErrorInfo
			})

			res := run(t, r, tt)

			want := c.name + " called on the value returned by Parallel"
			wantTrace(t, &tr, "step,handler:InternalError")
			if info != want {
				t.Errorf("ErrorInfo = %q, want %q", info, want)
			}
			wantError(t, res.Err, asyncsteps.InternalError, want)
		})
	}
}

// The value Parallel returns answers State, Tool, IsValid and NewInstance
// for the step that made it.
func TestParallelSharesTheStepsStateAndTool(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		tr.addf("state:%v", p.State() == as.State())
		tr.addf("tool:%v", p.Tool() == as.Tool())
		tr.addf("valid:%v", p.IsValid())
		tr.addf("instance tool:%v", p.NewInstance().Tool() == as.Tool())
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "state:true,tool:true,valid:true,instance tool:true")
}

// docs/DESIGN.md#completing-after-add across goroutines: a step that waits for
// an external event and
// has added a sub-step is completed by another goroutine before its callback
// returns. The step fails with InternalError, whose info names the call (and
// the code of an Error); the sub-step does not run.
func TestExternalCompletionAfterAddRaisesInternalError(t *testing.T) {
	for _, name := range []string{"Success", "Error"} {
		t.Run(name, func(t *testing.T) {
			var tr tracer
			var info string
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				as.Add(tr.step("sub"))
				done := make(chan struct{})
				go func() {
					defer close(done)
					if name == "Success" {
						as.Success()
					} else {
						as.Error("E")
					}
				}()
				<-done
				tr.add("callback returns")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s", code)
				info = as.State().ErrorInfo
			})

			res := run(t, r, tt)

			want := "Success called after Add in the same callback"
			if name == "Error" {
				want = "Error(E) called after Add in the same callback"
			}
			wantTrace(t, &tr, "callback returns,handler:InternalError")
			if info != want {
				t.Errorf("ErrorInfo = %q, want %q", info, want)
			}
			wantError(t, res.Err, asyncsteps.InternalError, want)
		})
	}
}

// API: a nil step function, loop body or Syncer, or a ForEach over what
// cannot be iterated, is reported as an InternalError step error whose info
// says what was wrong: inside a step at once, on a Root by the next
// execution, which runs none of its steps.
func TestNilFunctionsAreReportedAsInternalError(t *testing.T) {
	mu := asyncsteps.NewMutex(1)
	body := func(as asyncsteps.AsyncSteps, _ ...any) {}
	cases := []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
		info string
	}{
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(nil) }, "Add: nil step function"},
		{"Loop", func(as asyncsteps.AsyncSteps) { as.Loop(nil) }, "Loop: nil body function"},
		{"Repeat", func(as asyncsteps.AsyncSteps) { as.Repeat(3, nil) }, "Repeat: nil body function"},
		{"ForEach", func(as asyncsteps.AsyncSteps) { as.ForEach([]int{1}, nil) }, "ForEach: nil body function"},
		{"ForEach int", func(as asyncsteps.AsyncSteps) {
			as.ForEach(42, func(asyncsteps.AsyncSteps, any, any) {})
		}, "ForEach: cannot iterate over int"},
		{"Await", func(as asyncsteps.AsyncSteps) { as.Await(nil) }, "Await: nil function"},
		{"Sync nil Syncer", func(as asyncsteps.AsyncSteps) { as.Sync(nil, body) }, "Sync: nil Syncer"},
		{"Sync nil function", func(as asyncsteps.AsyncSteps) { as.Sync(mu, nil) }, "Sync: nil step function"},
		{"Sync nil Syncer and nil function", func(as asyncsteps.AsyncSteps) { as.Sync(nil, nil) }, "Sync: nil Syncer"},
		{"Sync nil Syncer of another package and nil function", func(as asyncsteps.AsyncSteps) {
			as.Sync((*otherSyncer)(nil), nil)
		}, "Sync: nil Syncer"},
	}
	for _, c := range cases {
		checkMisuse(t, c.name, c.call, c.info)
	}
}

// otherSyncer is a Syncer of another package than asyncsteps.
type otherSyncer struct{}

func (*otherSyncer) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(f, onerror...)
}

// checkMisuse checks that call, a misuse whose InternalError has info,
// fails a step at once (its error handler runs, the callback does not go
// on), and fails a Root at its next execution, which runs none of its
// steps.
func checkMisuse(t *testing.T, name string, call func(as asyncsteps.AsyncSteps), info string) {
	t.Run(name+" in a step", func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("step")
			call(as)
			tr.add("not aborted")
		}, tr.handler("handler"))

		res := run(t, r, tt)

		wantTrace(t, &tr, "step,handler:InternalError")
		wantError(t, res.Err, asyncsteps.InternalError, info)
	})
	t.Run(name+" on a Root", func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		r.Add(tr.step("step"))
		call(r)

		res := run(t, r, tt)

		wantTrace(t, &tr, "")
		wantError(t, res.Err, asyncsteps.InternalError, info)
	})
}

// stepCall is a call that only a step's own callback may make on its
// AsyncSteps: one that adds sub-steps, or makes the step wait. A step it
// adds records "added" in tr.
type stepCall struct {
	name  string // as the misuse info names it
	waits bool   // it makes the step wait, rather than adding sub-steps
	call  func(as asyncsteps.AsyncSteps, tr *tracer)
}

// stepCalls returns one call of each family that adds sub-steps or makes
// a step wait.
func stepCalls() []stepCall {
	model := asyncsteps.New()
	mu := asyncsteps.NewMutex(1)
	added := func(tr *tracer) asyncsteps.StepFunc { return tr.step("added") }
	return []stepCall{
		{"Add", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.Add(added(tr)) }},
		{"Parallel", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.Parallel().Add(added(tr)) }},
		{"Loop", false, func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Loop(func(as asyncsteps.AsyncSteps) { tr.add("added"); as.Break() })
		}},
		{"Repeat", false, func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Repeat(1, func(asyncsteps.AsyncSteps, int) { tr.add("added") })
		}},
		{"ForEach", false, func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) { tr.add("added") })
		}},
		{"Sync", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.Sync(mu, added(tr)) }},
		{"Await", false, func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Await(func(context.Context) (any, error) { tr.add("added"); return nil, nil })
		}},
		{"SuccessStep", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.SuccessStep(1) }},
		{"CopyFrom", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.CopyFrom(model) }},
		// Misplaced and wrong at once: the misplaced call is reported.
		{"CopyFrom", false, func(as asyncsteps.AsyncSteps, tr *tracer) { as.CopyFrom(nil) }},
		{"Sync", false, func(as asyncsteps.AsyncSteps, tr *tracer) { (*asyncsteps.Mutex)(nil).Sync(as, added(tr)) }},
		{"Then", false, func(as asyncsteps.AsyncSteps, tr *tracer) { asyncsteps.Then[int](as, nil) }},
		{"SetTimeout", true, func(as asyncsteps.AsyncSteps, tr *tracer) { as.SetTimeout(time.Second) }},
		{"SetCancel", true, func(as asyncsteps.AsyncSteps, tr *tracer) { as.SetCancel(tr.cancel("cancel handler")) }},
		{"WaitExternal", true, func(as asyncsteps.AsyncSteps, tr *tracer) { as.WaitExternal() }},
	}
}

// Spec section 1: only a step's own callback adds sub-steps or makes it
// wait. A call that adds to a step waiting for an external completion,
// or makes it wait, once its callback has returned, from a callback of
// the tool or from another goroutine, fails the step with InternalError,
// as an Error from outside would: the first completion wins, and the
// Success that follows has no effect. The steps are not added.
func TestCallAfterTheCallbackReturnedFailsTheStep(t *testing.T) {
	for _, c := range stepCalls() {
		for _, from := range []string{"tool", "goroutine"} {
			t.Run(c.name+"/"+from, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					late := func() {
						c.call(as, &tr)
						as.Success("late")
					}
					if from == "tool" {
						tt.Immediate(late)
						return
					}
					done := make(chan struct{})
					tt.Immediate(func() {
						go func() { defer close(done); late() }()
						<-done
					})
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("handler %s: %s", code, as.State().ErrorInfo)
				})
				r.Add(tr.stepArgs("next"))

				res := run(t, r, tt)

				what := "adds sub-steps"
				if c.waits {
					what = "makes it wait"
				}
				info := c.name + " called on a step whose callback has returned: only the step's own callback " + what
				wantTrace(t, &tr, "handler InternalError: "+info)
				wantError(t, res.Err, asyncsteps.InternalError, info)
			})
		}
	}
}

// Stale steps: a call on the AsyncSteps of a step that has completed has
// no effect and does not panic, from a later step's callback or from a
// callback of the tool; nor do Success, Error, Break and Continue.
func TestCallOnACompletedStepHasNoEffect(t *testing.T) {
	finals := []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
	}{
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success(2) }},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Late") }},
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }},
	}
	calls := stepCalls()
	for _, f := range finals {
		calls = append(calls, stepCall{f.name, false, func(as asyncsteps.AsyncSteps, _ *tracer) { f.call(as) }})
	}
	for _, c := range calls {
		for _, from := range []string{"step", "tool"} {
			t.Run(c.name+"/"+from, func(t *testing.T) {
				var tr tracer
				var kept asyncsteps.AsyncSteps
				r, tt := newFlow()
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					kept = as
					as.Add(tr.step("sub"))
				})
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						if from == "step" {
							c.call(kept, &tr)
							tr.add("not aborted")
							as.Success(1)
							return
						}
						as.WaitExternal()
						tt.Immediate(func() {
							c.call(kept, &tr)
							tr.add("not aborted")
							as.Success(1)
						})
					})
				})
				r.Add(tr.stepArgs("next"))

				res := run(t, r, tt)

				if kept.IsValid() {
					t.Error("IsValid reports true on a completed step")
				}
				wantTrace(t, &tr, "sub,not aborted,next[1]")
				wantSuccess(t, res)
			})
		}
	}
}

// A misuse recorded on a Root, then a cancel requested of the execution
// before it has begun (Cancel right after the start, or the end of the
// context given to PromiseContext): the execution ends with the misuse,
// the InternalError it was bound to fail with before any step runs, not
// cancelled; the hooks see that error, and the cancel's stop does nothing
// once it runs. (A FlowStart hook's own fault, raised as the flow begins,
// is what a cancel requested before wins over:
// TestFlowStartHookFaultAfterACancelEndsCancelled.)
func TestRootMisuseThenACancelEndsWithTheMisuse(t *testing.T) {
	const info = "Success called on a Root: it is valid only inside a step"
	starts := []struct {
		name  string
		start func(r *asyncsteps.Root) <-chan asyncsteps.Result
	}{
		{"Cancel", func(r *asyncsteps.Root) <-chan asyncsteps.Result {
			ch := r.Promise()
			r.Cancel()
			return ch
		}},
		{"the end of PromiseContext's context", func(r *asyncsteps.Root) <-chan asyncsteps.Result {
			ctx, cancel := context.WithCancel(context.Background())
			ch := r.PromiseContext(ctx)
			cancel()
			return ch
		}},
	}
	for _, s := range starts {
		t.Run(s.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			tt.SetHooks(&asyncsteps.Hooks{
				FlowStart: func(ctx context.Context) context.Context { tr.add("flowstart"); return ctx },
				StepError: func(_ context.Context, err *asyncsteps.Error) { tr.addf("steperror %v", err) },
				FlowEnd:   func(_ context.Context, err error) { tr.addf("flowend %v", err) },
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("cancel"))
				tr.add("step")
			})
			r.Success()

			ch := s.start(r)
			drive(t, tt)

			wantError(t, result(t, ch).Err, asyncsteps.InternalError, info)
			wantTrace(t, &tr, "flowstart,steperror InternalError: "+info+",flowend InternalError: "+info)
			if n := tt.Pending(); n != 0 {
				t.Errorf("%d events left", n)
			}
		})
	}
}
