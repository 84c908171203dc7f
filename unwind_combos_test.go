package asyncsteps_test

// Tests of where two rules of docs/DESIGN.md meet: error handlers that add
// steps or wait, under a timeout, a cancel or a failed sibling branch;
// Break and Continue through what handlers add; the timers each way of
// ending a step disarms. Each names the rules it combines.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// docs/DESIGN.md#error-handlers and #timeouts: the timeout of a step
// covers the steps an error handler of one of its sub-steps added in place
// of the failed one: on expiry they are cancelled (their cancel handler
// runs, not the handler that added them, which never runs twice), then the
// step's own cancel handler, then its error handler sees Timeout.
func TestOuterTimeoutCancelsTheStepsAHandlerAdded(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	elapsed := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(100 * time.Millisecond)
		as.SetCancel(tr.cancel("outer:cancel"))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("step")
			as.Error("Failed", "info")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("step:onerror:%s", code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("added")
				as.SetCancel(tr.cancel("added:cancel"))
			}, tr.handler("added:onerror"))
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("outer:onerror:%s:%q@%v", code, as.State().ErrorInfo, elapsed())
	})
	res := run(t, r, tt)
	wantError(t, res.Err, asyncsteps.Timeout, "")
	wantTrace(t, &tr, `step,step:onerror:Failed,added,added:cancel,outer:cancel,outer:onerror:Timeout:""@100ms`)
	syncWantIdle(t, tt)
}

// docs/DESIGN.md#timeouts and #error-handlers: an error disarms the
// timeout of the step it fails, so the steps its error handler adds in
// its place are not covered by it: they may wait for as long as they
// like, and no timer is left on the tool meanwhile.
func TestErrorDisarmsTheTimeoutBeforeTheHandlersSteps(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	var added asyncsteps.AsyncSteps
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(100 * time.Millisecond)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("onerror:%s", code)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("added")
			added = as
			as.WaitExternal()
		})
	})
	r.Add(tr.stepArgs("next"))
	ch := r.Promise()
	drive(t, tt)
	noResult(t, ch)
	syncWantIdle(t, tt)

	added.Success("late")
	drive(t, tt)
	wantSuccess(t, result(t, ch))
	wantTrace(t, &tr, "onerror:Failed,added,next[late]")
}

// docs/DESIGN.md#error-handlers, #timeouts and #cancel-handlers: an error
// handler that waits with a timeout of its own, and one that adds steps
// and sets a timeout, do not run again for the Timeout that replaces the
// error they handle: the outer handler sees it, after the cancel handlers
// of what still ran.
func TestHandlerTimeoutGoesOutwardNotToTheHandler(t *testing.T) {
	cases := []struct{ name, trace string }{
		{"waits", `step:onerror:Failed,handler:cancel,outer:onerror:Timeout:""@50ms`},
		{"adds", `step:onerror:Failed,added,added:cancel,outer:onerror:Timeout:""@50ms`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			elapsed := stopwatch(tt)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed", "info") },
					func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("step:onerror:%s", code)
						as.SetTimeout(50 * time.Millisecond)
						if c.name == "waits" {
							as.SetCancel(tr.cancel("handler:cancel"))
							return
						}
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							tr.add("added")
							as.SetCancel(tr.cancel("added:cancel"))
						}, tr.handler("added:onerror"))
					})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("outer:onerror:%s:%q@%v", code, as.State().ErrorInfo, elapsed())
			})
			wantError(t, run(t, r, tt).Err, asyncsteps.Timeout, "")
			wantTrace(t, &tr, c.trace)
			syncWantIdle(t, tt)
		})
	}
}

// docs/DESIGN.md#cancel-handlers and #error-handlers: the failing step's
// own cancel handler runs once, before its error handler; when that
// handler waits and the flow is then cancelled, or the timeout of a step
// around it expires, only the cancel handler the handler set runs, not
// the step's again, and Root.Cancel runs no error handler.
func TestWaitingHandlerIsCancelledWithoutTheStepsCancelAgain(t *testing.T) {
	build := func(tr *tracer, timeout bool) (*asyncsteps.Root, *asyncsteps.TestTool) {
		r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
			tr.addf("unhandled:%s", err.Code)
		}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if timeout {
				as.SetTimeout(100 * time.Millisecond)
			}
			as.SetCancel(tr.cancel("outer:cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("step:cancel"))
				as.Error("Failed")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("step:onerror:%s", code)
				as.SetCancel(tr.cancel("handler:cancel"))
			})
		}, tr.handler("outer:onerror"))
		return r, tt
	}

	var tr tracer
	r, tt := build(&tr, false)
	r.Execute()
	drive(t, tt)
	r.Cancel()
	drive(t, tt)
	wantTrace(t, &tr, "step:cancel,step:onerror:Failed,handler:cancel,outer:cancel")

	tr = tracer{}
	r, tt = build(&tr, false)
	ch := r.Promise()
	drive(t, tt)
	noResult(t, ch)
	r.Cancel()
	drive(t, tt)
	if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	wantTrace(t, &tr, "step:cancel,step:onerror:Failed,handler:cancel,outer:cancel")

	tr = tracer{}
	r, tt = build(&tr, true)
	wantError(t, run(t, r, tt).Err, asyncsteps.Timeout, "")
	wantTrace(t, &tr, "step:cancel,step:onerror:Failed,handler:cancel,outer:cancel,outer:onerror:Timeout")
	syncWantIdle(t, tt)
}

// docs/DESIGN.md#parallel-branches and #error-handlers: a branch whose
// error handler waits has not failed the Parallel; a sibling's later
// error is the first to reach it, cancels the waiting handler (its cancel
// handler runs) and is the one the Parallel's handler sees.
func TestSiblingErrorCancelsABranchsWaitingHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	elapsed := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("step:cancel"))
		p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("parallel:onerror:%s:%s@%v", code, as.State().ErrorInfo, elapsed())
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("one:cancel"))
			as.Error("One", "first")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("one:onerror:%s", code)
			as.SetCancel(tr.cancel("one:handler:cancel"))
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.SetCancel(tr.cancel("two:cancel"))
			as.Tool().Deferred(time.Millisecond, func() { as.Error("Two", "second") })
		}, tr.handler("two:onerror"))
	}, tr.handler("step:onerror"))
	wantError(t, run(t, r, tt).Err, "Two", "second")
	wantTrace(t, &tr, "one:cancel,one:onerror:One,two:cancel,two:onerror:Two,"+
		"one:handler:cancel,parallel:onerror:Two:second@1ms,step:cancel,step:onerror:Two")
	syncWantIdle(t, tt)
}

// docs/DESIGN.md#cancel-handlers and #parallel-branches: the order of the
// handlers when a branch fails deep inside: the failing branch unwinds
// first (each level's cancel handler, then its error handler), then the
// siblings are cancelled innermost first, then the Parallel's handler,
// then the levels around it.
func TestHandlerOrderWhenADeepBranchFails(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("step:cancel"))
		p := as.Parallel(tr.handler("parallel:onerror"))
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("one:cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(tr.cancel("one/sub:cancel")) })
		}, tr.handler("one:onerror"))
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("two:cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("two/sub:cancel"))
				as.Tool().Deferred(time.Millisecond, func() { as.Error("Failed") })
			}, tr.handler("two/sub:onerror"))
		}, tr.handler("two:onerror"))
	}, tr.handler("step:onerror"))
	wantError(t, run(t, r, tt).Err, "Failed", "")
	wantTrace(t, &tr, "two/sub:cancel,two/sub:onerror:Failed,two:cancel,two:onerror:Failed,"+
		"one/sub:cancel,one:cancel,parallel:onerror:Failed,step:cancel,step:onerror:Failed")
}

// docs/DESIGN.md#parallel-branches and #error-handlers: a branch's error
// handler that adds a step that fails lets that error go on to the
// Parallel (the branch's handler does not run twice), which cancels the
// sibling and whose handler sees the added step's code and info.
func TestBranchHandlersFailingStepReachesTheParallel(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("parallel:onerror:%s:%s", code, as.State().ErrorInfo)
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("First", "one") }, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("branch:onerror:%s", code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Added", "two") })
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("sibling")
			as.SetCancel(tr.cancel("sibling:cancel"))
		})
	})
	wantError(t, run(t, r, tt).Err, "Added", "two")
	wantTrace(t, &tr, "branch:onerror:First,sibling,sibling:cancel,parallel:onerror:Added:two")
}

// docs/DESIGN.md#timeouts and #cancel-handlers: on expiry the sub-steps'
// cancel handlers run with their steps' AsyncSteps dead: a Success or an
// Error called there has no effect but its report as a misuse of the
// handler, and the step's error handler sees Timeout with an empty info.
func TestCompletionsInACancelHandlerOfATimeoutHaveNoEffect(t *testing.T) {
	calls := map[string]func(as asyncsteps.AsyncSteps){
		"Success": func(as asyncsteps.AsyncSteps) { as.Success("from the cancel handler") },
		"Error":   func(as asyncsteps.AsyncSteps) { as.Error("FromCancel", "from the cancel handler") },
	}
	reported := map[string]string{"Success": "Success", "Error": "Error(FromCancel)"}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Millisecond)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(as asyncsteps.AsyncSteps) {
						tr.addf("sub:cancel:valid=%v", as.IsValid())
						call(as)
					})
				}, tr.handler("sub:onerror"))
				as.Add(tr.step("not reached"))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("onerror:%s:%q", code, as.State().ErrorInfo)
			})
			wantError(t, run(t, r, tt).Err, asyncsteps.Timeout, "")
			wantTrace(t, &tr, `sub:cancel:valid=false,onerror:Timeout:""`)
			syncWantIdle(t, tt)
			wantCancelMisuseLogged(t, log.String(), reported[name]+inCancelEnds)
		})
	}
}

// docs/DESIGN.md#break-and-continue and #error-handlers: a Continue or a
// Break raised by a step an error handler added goes past that handler
// to the loop around; a loop an error handler added takes its own Break,
// and the flow goes on after the failed step.
func TestBreakAndContinueThroughAHandlersSteps(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("body%d", i)
			as.Error("Failed")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("onerror%d:%s", i, code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Continue() })
		})
		as.Add(tr.step("not reached"))
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Again") }, func(as asyncsteps.AsyncSteps, code string) {
		as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("fallback%d", i)
			if i == 1 {
				as.Break()
			}
		})
	})
	r.Add(tr.stepArgs("next"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "body0,onerror0:Failed,body1,onerror1:Failed,fallback0,fallback1,next[]")
}

// docs/DESIGN.md#break-and-continue and #parallel-branches: a Break whose
// label no loop around has, raised in a branch of a Parallel inside a
// loop of another label, reaches the Parallel's handler as LoopBreak with
// the label in ErrorInfo, passes the loop, and ends the flow with
// InternalError naming the label.
func TestBreakOfAnUnknownLabelFromABranch(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Loop(func(as asyncsteps.AsyncSteps) {
		p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("parallel:onerror:%s:%s", code, as.State().ErrorInfo)
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Break("nope") })
	}, "outer")
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, `Break("nope") outside of a loop labelled "nope"`)
	wantTrace(t, &tr, "parallel:onerror:LoopBreak:nope")
}

// docs/DESIGN.md#timeouts: a cancelled or disarmed timer no longer counts
// as an event of the tool, whichever way the step it times ends: the
// flow's cancel, a failed sibling branch, a Break or a Continue out of
// it, a handler's completion, or re-arming (which leaves one timer).
func TestEveryWayOfEndingAStepDisarmsItsTimer(t *testing.T) {
	failLater := func(as asyncsteps.AsyncSteps, fail func()) {
		as.WaitExternal()
		as.Tool().Deferred(time.Millisecond, fail)
	}
	cases := []struct {
		name   string
		add    func(r *asyncsteps.Root)
		cancel bool
	}{
		{"Root.Cancel", func(r *asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Minute) })
			})
		}, true},
		{"failed sibling", func(r *asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Second) })
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					failLater(as, func() { as.Error("Failed") })
				})
			}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
		}, false},
		{"Break and Continue", func(r *asyncsteps.Root) {
			n := 0
			r.Loop(func(as asyncsteps.AsyncSteps) {
				n++
				as.SetTimeout(time.Second)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(time.Minute)
					if n < 3 {
						failLater(as, func() { as.Continue() })
					} else {
						failLater(as, func() { as.Break() })
					}
				})
			})
		}, false},
		{"handler completes", func(r *asyncsteps.Root) {
			for _, code := range []string{"", "Replaced"} {
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(time.Second)
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") }, func(as asyncsteps.AsyncSteps, _ string) {
						as.SetTimeout(time.Minute)
						if code == "" {
							failLater(as, func() { as.Success() })
						} else {
							failLater(as, func() { as.Error(code) })
						}
					})
				}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
			}
		}, false},
		{"re-armed", func(r *asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.SetTimeout(time.Minute)
				as.SetTimeout(time.Hour)
				if tt := as.Tool().(*asyncsteps.TestTool); tt.Pending() != 1 {
					t.Errorf("%d events pending after re-arming, want the one timer", tt.Pending())
				}
				failLater(as, func() { as.Success() })
			})
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			c.add(r)
			ch := r.Promise()
			tt.Advance(0)
			if c.cancel {
				r.Cancel()
			}
			for range 4 {
				tt.Advance(time.Millisecond)
			}
			res := result(t, ch)
			if c.cancel != errors.Is(res.Err, context.Canceled) || !c.cancel && res.Err != nil {
				t.Errorf("Result.Err = %v", res.Err)
			}
			syncWantIdle(t, tt)
		})
	}
}

// docs/DESIGN.md#timeouts and #new-instances: each clone of a model whose
// step sets a timeout arms its own, from when its step runs, with its own
// state; the model's state is untouched.
func TestClonesOfAModelWithATimeoutTimeOutOnTheirOwn(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	elapsed := stopwatch(tt)
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	model.State().Set("name", "model")
	model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(100 * time.Millisecond)
		as.SetCancel(func(as asyncsteps.AsyncSteps) { tr.addf("%v:cancel@%v", as.State().Get("name"), elapsed()) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("%v:onerror:%s@%v", as.State().Get("name"), code, elapsed())
		as.Success(as.State().Get("name"))
	})
	one, two := model.Clone(), model.Clone()
	one.State().Set("name", "one")
	two.State().Set("name", "two")
	chOne := one.Promise()
	tt.Advance(50 * time.Millisecond)
	chTwo := two.Promise()
	drive(t, tt)
	wantSuccess(t, result(t, chOne), "one")
	wantSuccess(t, result(t, chTwo), "two")
	wantTrace(t, &tr, "one:cancel@100ms,one:onerror:Timeout@100ms,two:cancel@150ms,two:onerror:Timeout@150ms")
	if name := model.State().Get("name"); name != "model" {
		t.Errorf("the model's state holds %v", name)
	}
	syncWantIdle(t, tt)
}
