package asyncsteps_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// docs/DESIGN.md#parallel-branches: branches start in the order they were added and interleave
// at every sub-step boundary; the step after the parallel runs when all are
// done.
func TestParallelBranchesStartInOrderAndInterleave(t *testing.T) {
	cases := []struct {
		name  string
		setup func(p asyncsteps.AsyncSteps, tr *tracer)
		trace string
	}{
		{"one sub-step each", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("1")
				as.Add(tr.step("1.1"))
			})
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2")
				as.Add(tr.step("2.1"))
			})
		}, "1,2,1.1,2.1,after"},
		{"nested and sequential sub-steps", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("1")
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("1.1")
					as.Add(tr.step("1.1.1"))
				})
			})
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2")
				as.Add(tr.step("2.1"))
				as.Add(tr.step("2.2"))
			})
			p.Add(tr.step("3"))
		}, "1,2,3,1.1,2.1,1.1.1,2.2,after"},
		{"waits on the clock", func(p asyncsteps.AsyncSteps, tr *tracer) {
			wait := func(name string, d time.Duration) asyncsteps.StepFunc {
				return func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add(name)
					as.WaitExternal()
					as.Tool().Deferred(d, func() { as.Success() })
				}
			}
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Add(wait("1 waits 10ms", 10*time.Millisecond))
				as.Add(tr.step("1 done"))
			})
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Add(wait("2 waits 5ms", 5*time.Millisecond))
				as.Add(tr.step("2 done"))
			})
		}, "1 waits 10ms,2 waits 5ms,2 done,1 done,after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			c.setup(r.Parallel(tr.handler("parallel")), &tr)
			r.Add(tr.step("after"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantSuccess(t, res)
		})
	}
}

// Spec 1.4 and docs/DESIGN.md#parallel-branches: the first error cancels the other branches
// (their cancel handlers run, their error handlers do not), then the
// parallel's own error handler and the outer ones see that error and its
// info; nothing after the parallel runs.
func TestParallelFirstErrorCancelsSiblings(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("parallel:%s:%s", code, as.State().ErrorInfo)
		})
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1")
			as.SetCancel(tr.cancel("c1"))
		}, tr.handler("e1"))
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("2")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2.1")
				as.Error("BranchFailed", "branch info")
			})
			as.Add(tr.step("2.2"))
		}, tr.handler("e2"))
		as.Add(tr.step("after parallel"))
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("outer:%s:%s", code, as.State().ErrorInfo)
	})
	r.Add(tr.step("not reached"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,2,2.1,e2:BranchFailed,c1,parallel:BranchFailed:branch info,outer:BranchFailed:branch info")
	wantError(t, res.Err, "BranchFailed", "branch info")
	if tt.HasEvents() {
		t.Errorf("HasEvents() = true (Pending %d) after the flow ended", tt.Pending())
	}
}

// docs/DESIGN.md#parallel-branches: a timeout in one branch is its first error: the sibling is
// cancelled and the parallel's handler sees Timeout.
func TestParallelBranchTimeoutCancelsSiblings(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("parallel:%s:%q", code, as.State().ErrorInfo)
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.SetCancel(tr.cancel("c1"))
		as.SetTimeout(time.Hour)
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("2")
		as.SetCancel(tr.cancel("c2"))
		as.SetTimeout(time.Second)
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, `1,2,c2,c1,parallel:Timeout:""`)
	wantError(t, res.Err, asyncsteps.Timeout, "")
	if tt.HasEvents() {
		t.Errorf("HasEvents() = true (Pending %d): the cancelled branch's timer is left", tt.Pending())
	}
}

// docs/DESIGN.md#parallel-branches: an error raised synchronously by a branch, as its first act,
// is never lost, whatever the position of the branch.
func TestParallelSynchronousBranchErrorIsNeverLost(t *testing.T) {
	fail := func(tr *tracer, name string) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add(name)
			as.Error("SyncFail", name)
		}
	}
	cases := []struct {
		name  string
		setup func(p asyncsteps.AsyncSteps, tr *tracer)
		trace string
		info  string
	}{
		{"only branch", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(fail(tr, "1"))
		}, "1,parallel:SyncFail", "1"},
		{"last branch after a successful one", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(tr.step("1"))
			p.Add(fail(tr, "2"))
		}, "1,2,parallel:SyncFail", "2"},
		{"branch after a waiting one", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("1")
				as.SetCancel(tr.cancel("c1"))
			})
			p.Add(fail(tr, "2"))
		}, "1,2,c1,parallel:SyncFail", "2"},
		{"panic in a branch", func(p asyncsteps.AsyncSteps, tr *tracer) {
			p.Add(tr.step("1"))
			p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2")
				panic(errBoom)
			})
		}, "1,2,parallel:InternalError", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			c.setup(r.Parallel(tr.handler("parallel")), &tr)
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			if c.info == "" {
				wantCode(t, res.Err, asyncsteps.InternalError)
				if !errors.Is(res.Err, errBoom) {
					t.Errorf("Result.Err = %v, does not wrap the panic value", res.Err)
				}
			} else {
				wantError(t, res.Err, "SyncFail", c.info)
			}
		})
	}
}

// docs/DESIGN.md#parallel-branches: the parallel's error handler may recover with Success; the
// flow goes on after the parallel.
func TestParallelErrorHandlerCanRecover(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("parallel:%s", code)
		as.Success("recovered")
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Error("E") })
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "parallel:E,next[recovered]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#parallel-branches: an empty Parallel succeeds at once, without calling its
// error handler.
func TestEmptyParallelSucceeds(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("before") })
	r.Parallel(tr.handler("parallel"))
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "next[]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#loop-and-branch-arguments: branches get no incoming args,
// their success args are ignored
// and the step after the parallel gets no args.
func TestParallelPassesNoArgs(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("in") })
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("1%v", args)
		as.Success("out1")
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("2%v", args)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("out2") })
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1[],2[],next[]")
	wantSuccess(t, res)
}

// A parallel as the last step gives the flow no result args.
func TestParallelAsLastStepGivesNoResultArgs(t *testing.T) {
	r, tt := newFlow()
	r.Parallel().Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("ignored") })

	wantSuccess(t, run(t, r, tt))
}

// docs/DESIGN.md#loop-and-branch-arguments and spec 1.4: all branches share one
// State with the flow.
func TestParallelBranchesShareState(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.State().Set("root", "r")
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.State().Set("result1", 1)
		tr.addf("1 sees root=%v", as.State().Get("root"))
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("2 sees result1=%v", as.State().Get("result1"))
		as.State().Set("result2", 2)
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("sum=%v", as.State().Get("result1").(int)+as.State().Get("result2").(int))
		if as.State() != r.State() {
			t.Error("a step's State differs from the root's")
		}
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "1 sees root=r,2 sees result1=1,sum=3")
	wantSuccess(t, res)
	if got := r.State().Get("result2"); got != 2 {
		t.Errorf("root State result2 = %v, want 2", got)
	}
}

// API: the object Parallel returns adds one branch per call of Add, Loop,
// Repeat, ForEach and Sync; the next step runs after all of them.
func TestParallelAcceptsEveryKindOfBranch(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	var seen []string
	record := func(s string) { seen = append(seen, s) }
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) { record("add") })
	p.Loop(func(as asyncsteps.AsyncSteps) {
		record("loop")
		as.Break()
	})
	p.Repeat(2, func(as asyncsteps.AsyncSteps, i int) { record("repeat" + string(rune('0'+i))) })
	p.ForEach([]string{"x"}, func(as asyncsteps.AsyncSteps, k, v any) { record("foreach" + v.(string)) })
	p.Sync(addSyncer{}, func(as asyncsteps.AsyncSteps, args ...any) { record("sync") })
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		sort.Strings(seen)
		tr.addf("%s", strings.Join(seen, " "))
		tr.add("after")
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "add foreachx loop repeat0 repeat1 sync,after")
	wantSuccess(t, res)
}

// docs/DESIGN.md#cancel-handlers with spec 1.4: Root.Cancel cancels every running branch and
// calls no error handler.
func TestRootCancelCancelsAllBranches(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel(tr.handler("parallel"))
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.SetCancel(tr.cancel("c1"))
	}, tr.handler("e1"))
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("2")
		as.SetCancel(tr.cancel("c2"))
		as.SetTimeout(time.Hour)
	}, tr.handler("e2"))

	ch := r.Promise()
	tt.Advance(time.Second)
	r.Cancel()
	drive(t, tt)

	got := tr.String()
	if got != "1,2,c1,c2" && got != "1,2,c2,c1" {
		t.Errorf("trace = %s, want 1,2 then c1 and c2 in any order", got)
	}
	if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	if tt.HasEvents() {
		t.Errorf("HasEvents() = true (Pending %d) after Cancel", tt.Pending())
	}
}

// docs/DESIGN.md#parallel-branches with docs/DESIGN.md#cancel-handlers: a
// cancelled branch runs the cancel handlers
// of its running steps innermost first.
func TestParallelCancelledBranchRunsCancelHandlersInnermostFirst(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel(tr.handler("parallel"))
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.SetCancel(tr.cancel("c1"))
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1.1")
			as.SetCancel(tr.cancel("c1.1"))
		}, tr.handler("e1.1"))
	}, tr.handler("e1"))
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("2")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("2.1")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2.1.1")
				as.Error("E", "deep")
			})
		})
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,2,1.1,2.1,2.1.1,c1.1,c1,parallel:E")
	wantError(t, res.Err, "E", "deep")
}

// docs/DESIGN.md#parallel-branches: an error in a nested parallel cancels the inner siblings,
// reaches the inner parallel's handler and the enclosing branch's handler,
// then cancels the outer siblings before the outer parallel's handler.
func TestNestedParallelErrorPropagatesThroughBothLevels(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	outer := r.Parallel(tr.handler("outer parallel"))
	outer.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("A")
		inner := as.Parallel(tr.handler("inner parallel"))
		inner.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("A1")
			as.SetCancel(tr.cancel("cA1"))
		})
		inner.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("A2")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("A2.1")
				as.Error("Inner", "from A2.1")
			})
		})
	}, tr.handler("A handler"))
	outer.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("B")
		as.SetCancel(tr.cancel("cB"))
	}, tr.handler("B handler"))
	r.Add(tr.step("not reached"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "A,B,A1,A2,A2.1,cA1,inner parallel:Inner,A handler:Inner,cB,outer parallel:Inner")
	wantError(t, res.Err, "Inner", "from A2.1")
}

// docs/DESIGN.md#parallel-branches: an error that a branch's own handler recovers from is not an
// error of the parallel: no sibling is cancelled and the flow goes on.
func TestParallelBranchRecoveredErrorCancelsNothing(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel(tr.handler("parallel"))
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.SetCancel(tr.cancel("c1"))
		as.Tool().Deferred(time.Second, func() { as.Success() })
	})
	p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("2")
		as.Error("E")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e2:%s", code)
		as.Success()
	})
	r.Add(tr.step("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,2,e2:E,after")
	wantSuccess(t, res)
}

// docs/DESIGN.md#error-handlers with spec 1.4: a parallel added by an error handler runs in
// place of the failed step, like any added step.
func TestParallelAddedByErrorHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		as.Error("E")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("handler:%s", code)
		p := as.Parallel()
		p.Add(tr.step("p1"))
		p.Add(tr.step("p2"))
	})
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,handler:E,p1,p2,after[]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#parallel-branches, #stale-steps and #unhandled-errors: when
// two branches fail at the same instant, only
// the first error counts: the second branch was cancelled, its late Error has
// no effect, and the unhandled-error function is called once.
func TestParallelOnlyFirstErrorCounts(t *testing.T) {
	var tr tracer
	var unhandled []*asyncsteps.Error
	r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		unhandled = append(unhandled, err)
	}))
	p := r.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("parallel:%s:%s", code, as.State().ErrorInfo)
	})
	for _, name := range []string{"1", "2"} {
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add(name)
			as.SetCancel(tr.cancel("c" + name))
			as.Tool().Deferred(time.Second, func() { as.Error("E"+name, "from "+name) })
		}, tr.handler("e"+name))
	}

	r.Execute()
	drive(t, tt)

	wantTrace(t, &tr, "1,2,c1,e1:E1,c2,parallel:E1:from 1")
	if len(unhandled) != 1 {
		t.Fatalf("unhandled-error function called %d times, want 1", len(unhandled))
	}
	wantError(t, unhandled[0], "E1", "from 1")
}

// docs/DESIGN.md#parallel-branches: many branches all run once and the next step runs once, after
// all of them.
func TestParallelManyBranches(t *testing.T) {
	const n = 1000
	r, tt := newFlow()
	ran := make([]int, n)
	p := r.Parallel()
	for i := range n {
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) { ran[i]++ })
		})
	}
	after := 0
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		for i, c := range ran {
			if c != 1 {
				t.Errorf("branch %d ran %d times before the next step", i, c)
			}
		}
		after++
	})

	wantSuccess(t, run(t, r, tt))
	if after != 1 {
		t.Errorf("the step after the parallel ran %d times", after)
	}
}

// docs/DESIGN.md#parallel-branches: the Parallel's handler sees the branch's error with its info
// and as LastException, also when a sibling's cancel handler panics while
// the siblings are cancelled (a panic that has nothing left to fail).
func TestParallelHandlerSeesTheBranchErrorPastASiblingsCancelPanic(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Parallel(func(as asyncsteps.AsyncSteps, code string) {
		st := as.State()
		tr.addf("handler %s: %s", code, st.ErrorInfo)
		var e *asyncsteps.Error
		if !errors.As(st.LastException, &e) || e.Code != "E" || e.Info != "info1" {
			t.Errorf("LastException = %v, want the branch's E: info1", st.LastException)
		}
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { panic("boom") })
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error("E", "info1")
	})

	wantError(t, run(t, r, tt).Err, "E", "info1")
	wantTrace(t, &tr, "handler E: info1")
}

// lateBranchInfo is the info of a branch added to a Root's Parallel once
// an execution took its step, after the name of the call.
const lateBranchInfo = " called on the value returned by a Root's Parallel once an execution took its step: the branch would never run"

// A branch added to a Root's Parallel whose step an execution has begun
// would run in no execution: the call is a misuse recorded on the Root,
// as a call valid only inside a step made on a Root is. The running
// flow goes on without it; the next execution fails before any step
// runs, and the one after runs as usual.
func TestBranchAddedToARootsParallelOnceBegunIsAMisuse(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("b1")
		p.Add(tr.step("late"))
	})
	p.Add(tr.step("b2"))
	r.Add(tr.step("after"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "b1,b2,after")

	r.Add(tr.step("next"))
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "Add"+lateBranchInfo)
	wantTrace(t, &tr, "b1,b2,after")
	r.Add(tr.step("again"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "b1,b2,after,again")
}

// A Root's execution that ends before its Parallel drops the step: a
// branch added to it afterwards is the same misuse, named by its call.
func TestBranchAddedToARootsDroppedParallelIsAMisuse(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
	p := r.Parallel()
	p.Add(tr.step("b1"))
	wantError(t, run(t, r, tt).Err, "Boom", "")

	p.Loop(func(as asyncsteps.AsyncSteps) { tr.add("late"); as.Break() })
	r.Add(tr.step("next"))
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "Loop"+lateBranchInfo)
	wantTrace(t, &tr, "")
}

// A branch added to a Root's Parallel still queued, by an earlier step
// of the running flow, runs with the others: no execution has taken it.
func TestBranchAddedToARootsQueuedParallelRuns(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	var p asyncsteps.AsyncSteps
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("s1")
		p.Add(tr.step("added by s1"))
	})
	p = r.Parallel()
	p.Add(tr.step("b1"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "s1,b1,added by s1")
}
