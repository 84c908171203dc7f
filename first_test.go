package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// failAfter is waitThen of a branch that fails with code and info name.
func failAfter(tr *tracer, tt *asyncsteps.TestTool, d time.Duration, name, code string) func(as steps) {
	return waitThen(tr, tt, name, d, func(as steps) {
		traceAt(tr, tt, "fail "+name)
		as.Error(code, name)
	})
}

// firstTraced adds a First of branches whose then traces the winner, in a
// step whose error handler traces the error it sees, and recovers. (A
// failing branch's own cancel handler runs too, before the handlers, as
// for any error.)
func firstTraced(r *asyncsteps.Root, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps)) {
	r.Add(func(as steps, _ ...any) {
		asyncsteps.First(as, func(as steps, v string) {
			traceAt(tr, tt, "then "+v)
			as.Success(v)
		}, branches...)
	}, func(as steps, code string) {
		traceAt(tr, tt, "handler "+code+":"+as.State().ErrorInfo)
		as.Success()
	})
}

// The first success wins at once: the other branches are cancelled
// (their cancel handlers run), then gets the winner's value, and nothing
// records an error.
func TestFirstWinnerFirst(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	firstTraced(r, &tr, tt, succeedAfter(&tr, tt, 10*time.Millisecond, "a"),
		succeedAfter(&tr, tt, 30*time.Millisecond, "b"), succeedAfter(&tr, tt, 20*time.Millisecond, "c"))
	wantSuccess(t, run(t, r, tt), "a")
	wantTrace(t, &tr, "done a@10ms,cancel b@10ms,cancel c@10ms,then a@10ms")
	if st := r.State(); st.LastException != nil || st.ErrorInfo != "" {
		t.Errorf("State holds %v %q after a win", st.LastException, st.ErrorInfo)
	}
	if tt.HasEvents() {
		t.Error("a loser's timer is left on the tool")
	}
}

// Failed branches end alone: the last branch, the only one to succeed,
// wins.
func TestFirstWinnerLast(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	firstTraced(r, &tr, tt, failAfter(&tr, tt, 10*time.Millisecond, "a", asyncsteps.CommError),
		failAfter(&tr, tt, 20*time.Millisecond, "b", asyncsteps.ConnectError), succeedAfter(&tr, tt, 30*time.Millisecond, "c"))
	wantSuccess(t, run(t, r, tt), "c")
	wantTrace(t, &tr, "fail a@10ms,cancel a@10ms,fail b@20ms,cancel b@20ms,done c@30ms,then c@30ms")
}

// When every branch fails, the step fails with the error of the last one
// to fail, which a handler around it sees with its info; then does not
// run.
func TestFirstAllFail(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	firstTraced(r, &tr, tt, failAfter(&tr, tt, 10*time.Millisecond, "a", asyncsteps.CommError),
		failAfter(&tr, tt, 30*time.Millisecond, "b", asyncsteps.ConnectError), failAfter(&tr, tt, 20*time.Millisecond, "c", asyncsteps.Timeout))
	r.Add(func(as steps, _ ...any) { traceAt(&tr, tt, "next") })
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "fail a@10ms,cancel a@10ms,fail c@20ms,cancel c@20ms,fail b@30ms,cancel b@30ms,handler ConnectError:b@30ms,next@30ms")

	r, tt = newFlow()
	asyncsteps.First(r, func(steps, string) { t.Error("then ran") },
		func(as steps) { as.Error(asyncsteps.CommError, "one") }, func(as steps) { panic("two") })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "two")
}

// A loser's cancel handler that panics does not turn the win into an
// error: the panic is logged, as in any subtree that is only cancelled,
// and the State is left as the race left it.
func TestFirstLoserCancelHandlerPanics(t *testing.T) {
	log := asyncsteps.CaptureLog(t)
	var tr tracer
	r, tt := newFlow()
	firstTraced(r, &tr, tt, succeedAfter(&tr, tt, 10*time.Millisecond, "a"), func(as steps) {
		as.SetCancel(func(steps) {
			traceAt(&tr, tt, "cancel b")
			panic("in cancel")
		})
	}, succeedAfter(&tr, tt, 20*time.Millisecond, "c"))
	wantSuccess(t, run(t, r, tt), "a")
	wantTrace(t, &tr, "done a@10ms,cancel b@10ms,cancel c@10ms,then a@10ms")
	if st := r.State(); st.LastException != nil {
		t.Errorf("LastException = %v after a win", st.LastException)
	}
	if out := log.String(); !strings.Contains(out, "panic in cancel handler") || !strings.Contains(out, "in cancel") {
		t.Errorf("log = %q, want the cancel handler's panic", out)
	}
}

// Two branches that succeed in the same turn: the first to complete wins,
// the other's value is dropped, and its completed step is not cancelled.
func TestFirstSiblingSucceedsInTheSameTurn(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	firstTraced(r, &tr, tt, succeedAfter(&tr, tt, 10*time.Millisecond, "a"), succeedAfter(&tr, tt, 10*time.Millisecond, "b"),
		func(as steps) { as.Success("c") }, succeedAfter(&tr, tt, 10*time.Millisecond, "d"))
	wantSuccess(t, run(t, r, tt), "c")
	wantTrace(t, &tr, "cancel a@0s,cancel b@0s,cancel d@0s,then c@0s")

	// b succeeds from the callback where a does, before the race ends.
	tr = tracer{}
	r, tt = newFlow()
	var b steps
	firstTraced(r, &tr, tt, waitThen(&tr, tt, "a", 10*time.Millisecond, func(as steps) {
		traceAt(&tr, tt, "done a")
		as.Success("a")
		traceAt(&tr, tt, "done b")
		b.Success("b")
	}), func(as steps) {
		b = as
		as.SetCancel(func(steps) { traceAt(&tr, tt, "cancel b") })
	})
	wantSuccess(t, run(t, r, tt), "a")
	wantTrace(t, &tr, "done a@10ms,done b@10ms,then a@10ms")
}

// A timeout around First cancels every branch, as for Gather: then does
// not run, and the handler around sees Timeout.
func TestFirstUnderATimeout(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		as.SetTimeout(25 * time.Millisecond)
		asyncsteps.First(as, func(as steps, v string) { traceAt(&tr, tt, "then "+v) },
			failAfter(&tr, tt, 10*time.Millisecond, "a", asyncsteps.CommError),
			succeedAfter(&tr, tt, 50*time.Millisecond, "b"), succeedAfter(&tr, tt, 40*time.Millisecond, "c"))
	}, func(as steps, code string) {
		traceAt(&tr, tt, "handler "+code)
		as.Success()
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "fail a@10ms,cancel a@10ms,cancel b@25ms,cancel c@25ms,handler Timeout@25ms")

	// Root.Cancel: the flow ends cancelled, no handler runs.
	tr = tracer{}
	r, tt = newFlow()
	firstTraced(r, &tr, tt, succeedAfter(&tr, tt, 10*time.Millisecond, "a"), succeedAfter(&tr, tt, 20*time.Millisecond, "b"))
	ch := r.Promise()
	tt.Advance(5 * time.Millisecond)
	r.Cancel()
	drive(t, tt)
	if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", res.Err)
	}
	wantTrace(t, &tr, "cancel a@5ms,cancel b@5ms")
}

// The hooks see the error of a failed branch, and none for the win.
func TestFirstHooksSeeNoErrorForTheWin(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var errs []string
	tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
		errs = append(errs, err.Error())
	}})
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	firstTraced(r, &tr, tt, failAfter(&tr, tt, 10*time.Millisecond, "a", asyncsteps.CommError),
		succeedAfter(&tr, tt, 20*time.Millisecond, "b"), succeedAfter(&tr, tt, 30*time.Millisecond, "c"))
	wantSuccess(t, run(t, r, tt), "b")
	wantTrace(t, &tr, "fail a@10ms,cancel a@10ms,done b@20ms,cancel c@20ms,then b@20ms")
	if got := strings.Join(errs, "|"); got != "CommError: a" {
		t.Errorf("StepError saw %q, want the failed branch's error only", got)
	}
}

// An Await function of a losing branch sees its context cancelled.
func TestFirstLoserAwaitContextCancelled(t *testing.T) {
	r, tt := newFlow()
	started, seen := make(chan struct{}), make(chan error, 1)
	asyncsteps.First(r, func(as steps, v string) { as.Success(v) },
		func(as steps) {
			asyncsteps.AwaitThen(as, func(ctx context.Context) (string, error) {
				close(started)
				<-ctx.Done()
				seen <- ctx.Err()
				return "late", nil
			}, nil)
		},
		func(as steps) {
			as.Add(func(as steps, _ ...any) {
				as.WaitExternal()
				go func() {
					<-started
					as.Success("fast")
				}()
			})
		})
	args, err := r.Run(context.Background())
	wantSuccess(t, asyncsteps.Result{Args: args, Err: err}, "fast")
	select {
	case err := <-seen:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the loser's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loser's context was not cancelled")
	}
	if tt.HasEvents() {
		t.Error("an event is left on the tool")
	}
}

// Quorum succeeds once k branches have, with their values in the order
// they succeeded, and cancels the rest.
func TestQuorumSucceeds(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.Quorum(r, 2, func(as steps, vs []string) { traceAt(&tr, tt, fmt.Sprint("then ", vs)) },
		succeedAfter(&tr, tt, 30*time.Millisecond, "a"), failAfter(&tr, tt, 5*time.Millisecond, "b", asyncsteps.CommError),
		succeedAfter(&tr, tt, 10*time.Millisecond, "c"), succeedAfter(&tr, tt, 40*time.Millisecond, "d"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "fail b@5ms,cancel b@5ms,done c@10ms,done a@30ms,cancel d@30ms,then [c a]@30ms")
}

// Quorum fails as soon as k successes can no longer be had, with the error
// that made it so, and cancels the branches still running.
func TestQuorumFailsOnceUnreachable(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		asyncsteps.Quorum(as, 3, func(steps, []string) { traceAt(&tr, tt, "then") },
			succeedAfter(&tr, tt, 10*time.Millisecond, "a"), failAfter(&tr, tt, 20*time.Millisecond, "b", asyncsteps.CommError),
			failAfter(&tr, tt, 30*time.Millisecond, "c", asyncsteps.ConnectError), succeedAfter(&tr, tt, 40*time.Millisecond, "d"))
	}, func(as steps, code string) {
		traceAt(&tr, tt, "handler "+code+":"+as.State().ErrorInfo)
		as.Success()
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "done a@10ms,fail b@20ms,cancel b@20ms,fail c@30ms,cancel c@30ms,cancel d@30ms,handler ConnectError:c@30ms")
}

// A Break that a branch raises leaves First for the loop around it, as
// from a Gather branch, cancelling the others.
func TestFirstBreakLeavesForTheLoop(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Loop(func(as steps) {
		asyncsteps.First(as, func(steps, string) { traceAt(&tr, tt, "then") },
			succeedAfter(&tr, tt, 10*time.Millisecond, "a"), waitThen(&tr, tt, "b", 5*time.Millisecond, func(as steps) {
				traceAt(&tr, tt, "break")
				as.Break()
			}))
	})
	r.Add(func(as steps, _ ...any) { traceAt(&tr, tt, "after the loop") })
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "break@5ms,cancel b@5ms,cancel a@5ms,after the loop@5ms")
}

// The misuses of Quorum's k, First's with no branch (with a nil then too,
// which passes the result on, as tested with Gather's) and of a nil
// branch.
func TestFirstAndQuorumMisuse(t *testing.T) {
	then := func(steps, []int) {}
	one := func(as steps) { as.Success(1) }
	cases := []struct {
		name string
		call func(as steps)
		info string
	}{
		{"First without branches", func(as steps) { asyncsteps.First(as, func(steps, int) {}) }, "First: no branches"},
		{"First without branches nor then", func(as steps) { asyncsteps.First[int](as, nil) }, "First: no branches"},
		{"First branch", func(as steps) { asyncsteps.First(as, func(steps, int) {}, one, nil) }, "First: nil branch 1"},
		{"Quorum without branches", func(as steps) { asyncsteps.Quorum(as, 1, then) }, "Quorum: no branches"},
		{"Quorum k 0", func(as steps) { asyncsteps.Quorum(as, 0, then, one, one) }, "Quorum: k must be from 1 to 2, the number of branches (0 given)"},
		{"Quorum k 3", func(as steps) { asyncsteps.Quorum(as, 3, then, one, one) }, "Quorum: k must be from 1 to 2, the number of branches (3 given)"},
	}
	for _, c := range cases {
		checkMisuse(t, c.name, c.call, c.info)
		checkMisuse(t, c.name+" through a decorator", func(as steps) { c.call(decoratedSteps{as}) }, c.info)
		t.Run(c.name+" on a decorated Parallel", func(t *testing.T) {
			r, tt := newFlow()
			c.call(decoratedSteps{r.Parallel()})
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
		})
	}
}

// Through a decorator, whose steps get a decorator too, and as a branch of
// a Parallel, First races as on the engine's AsyncSteps.
func TestFirstThroughADecoratorAndInAParallel(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	firstOf := func(as steps, a, b time.Duration) {
		asyncsteps.First(as, func(as steps, v string) { as.Success(v) },
			succeedAfter(&tr, tt, a, fmt.Sprint("a", a)), succeedAfter(&tr, tt, b, fmt.Sprint("b", b)))
	}
	r.Add(func(as steps, _ ...any) {
		firstOf(decoratedSteps{as}, 20*time.Millisecond, 10*time.Millisecond)
	})
	asyncsteps.Then(r, func(as steps, v string) {
		traceAt(&tr, tt, "then "+v)
		p := as.Parallel()
		firstOf(p, 5*time.Millisecond, 15*time.Millisecond)
		firstOf(decoratedSteps{p}, 30*time.Millisecond, 25*time.Millisecond)
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "done b10ms@10ms,cancel a20ms@10ms,then b10ms@10ms,"+
		"done a5ms@15ms,cancel b15ms@15ms,done b25ms@35ms,cancel a30ms@35ms")
}

// A result of the wrong type is the branch's failure, as Gather's.
func TestFirstWrongTypeIsTheBranchsError(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.First(r, func(as steps, v int) { as.Success(v) }, func(as steps) { as.Success("x") })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "First: the result of branch 0 is string, want int")
}

// A panic in then is an InternalError of then's step.
func TestFirstPanicInThen(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.First(r, func(steps, int) { panic("in then") }, func(as steps) { as.Success(1) })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "in then")
}

// Run's deadline while the branches run times First out as it times out
// a Gather: the branches are cancelled, then does not run, and the
// handler around sees Timeout, from which it may recover. On a Loop in a
// synctest bubble: the deadline is on the clock of the bubble.
func TestFirstUnderRunsDeadlineAsGather(t *testing.T) {
	traceOf := func(t *testing.T, fanOut func(as steps, branches ...func(as steps))) string {
		l := asyncsteps.NewLoop()
		defer l.Close()
		start := time.Now()
		var tr tracer
		branch := func(name string, d time.Duration) func(as steps) {
			return func(as steps) {
				h := as.Tool().Deferred(d, func() { as.Success(name) })
				as.SetCancel(func(steps) {
					h.Cancel()
					tr.addf("cancel %s@%v", name, time.Since(start))
				})
			}
		}
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as steps, _ ...any) {
			fanOut(as, branch("a", 50*time.Millisecond), branch("b", 40*time.Millisecond))
		}, func(as steps, code string) {
			tr.addf("handler %s@%v", code, time.Since(start))
			as.Success("fallback")
		})
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Millisecond)
		defer cancel()
		args, err := r.Run(ctx)
		wantSuccess(t, asyncsteps.Result{Args: args, Err: err}, "fallback")
		return tr.String()
	}
	synctest.Test(t, func(t *testing.T) {
		first := traceOf(t, func(as steps, branches ...func(as steps)) {
			asyncsteps.First(as, func(as steps, v string) { t.Error("then ran") }, branches...)
		})
		gather := traceOf(t, func(as steps, branches ...func(as steps)) {
			asyncsteps.Gather(as, func(as steps, vs []string) { t.Error("then ran") }, branches...)
		})
		if want := "cancel a@25ms,cancel b@25ms,handler Timeout@25ms"; first != want || gather != want {
			t.Errorf("First: %s\nGather: %s\nwant: %s", first, gather, want)
		}
	})
}

// A Goexit in a loser's cancel handler (on a Loop, whose goroutine the
// flow goes on from after it) does not stop the win: it is logged, the
// other losers are cancelled, and then gets the winner's value.
func TestFirstLoserCancelHandlerGoexit(t *testing.T) {
	log := asyncsteps.CaptureLog(t)
	l := asyncsteps.NewLoop()
	defer l.Close()
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(l))
	asyncsteps.First(r, func(as steps, v string) {
		tr.add("then " + v)
		as.Success(v)
	}, func(as steps) {
		h := as.Tool().Deferred(10*time.Millisecond, func() { as.Success("a") })
		as.SetCancel(func(steps) { h.Cancel() })
	}, func(as steps) {
		as.SetCancel(func(steps) {
			tr.add("cancel b")
			runtime.Goexit()
		})
	}, func(as steps) {
		as.SetCancel(func(steps) { tr.add("cancel c") })
	})
	args, err := r.Run(context.Background())
	wantSuccess(t, asyncsteps.Result{Args: args, Err: err}, "a")
	wantTrace(t, &tr, "cancel b,cancel c,then a")
	if exc := r.State().LastException; exc != nil {
		t.Errorf("LastException = %v after a win", exc)
	}
	if out := log.String(); !strings.Contains(out, "runtime.Goexit in cancel handler") {
		t.Errorf("log = %q, want the Goexit", out)
	}
}

// A branch's failure that the race drops may be a cancel handler's fault,
// raised in place of the branch's error as it unwound: no handler sees
// that failure, so the fault is logged, once, besides being told to the
// StepError hook and kept in the State as the branch's error. The failure
// that ends the race reaches the handler around, which sees the fault:
// nothing is logged then.
func TestFirstDroppedBranchsCancelFaultIsLogged(t *testing.T) {
	faulty := func(tr *tracer, tt *asyncsteps.TestTool, name string) func(as steps) {
		return func(as steps) {
			as.Add(func(as steps, _ ...any) {
				as.SetCancel(func(steps) {
					traceAt(tr, tt, "cleanup "+name)
					panic("cleanup " + name)
				})
				as.Tool().Deferred(10*time.Millisecond, func() { as.Error(asyncsteps.CommError, name) })
			})
		}
	}
	log := asyncsteps.CaptureLog(t)
	tt := asyncsteps.NewTestTool()
	var errs []string
	tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
		errs = append(errs, err.Error())
	}})
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	firstTraced(r, &tr, tt, faulty(&tr, tt, "a"), succeedAfter(&tr, tt, 20*time.Millisecond, "b"))
	wantSuccess(t, run(t, r, tt), "b")
	wantTrace(t, &tr, "cleanup a@10ms,done b@20ms,then b@20ms")
	if got := strings.Join(errs, "|"); got != "CommError: a|InternalError: cleanup a" {
		t.Errorf("StepError saw %q, want the branch's error, then its cancel handler's panic", got)
	}
	if exc := r.State().LastException; exc == nil || exc.Error() != "panic: cleanup a" {
		t.Errorf("LastException = %v, want the dropped branch's fault", exc)
	}
	if out := log.String(); strings.Count(out, "panic in cancel handler") != 1 || !strings.Contains(out, "cleanup a") {
		t.Errorf("log = %q, want the dropped fault once", out)
	}

	// The last branch's fault is the step's: its handler sees it.
	log = asyncsteps.CaptureLog(t)
	tr = tracer{}
	r, tt = newFlow()
	firstTraced(r, &tr, tt, faulty(&tr, tt, "a"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "cleanup a@10ms,handler InternalError:cleanup a@10ms")
	if out := log.String(); out != "" {
		t.Errorf("log = %q, want nothing: the handler saw the fault", out)
	}
}

// A Quorum of every branch is Gather but for its values: the first
// failure cancels the other branches and is the step's, as Gather's is,
// and then gets the values in the order the branches succeeded.
func TestQuorumOfEveryBranchIsGatherButForTheOrder(t *testing.T) {
	traceOf := func(failing bool, fanOut func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps))) string {
		var tr tracer
		r, tt := newFlow()
		c := succeedAfter(&tr, tt, 20*time.Millisecond, "c")
		if failing {
			c = failAfter(&tr, tt, 20*time.Millisecond, "c", asyncsteps.CommError)
		}
		r.Add(func(as steps, _ ...any) {
			fanOut(as, &tr, tt, succeedAfter(&tr, tt, 30*time.Millisecond, "a"), succeedAfter(&tr, tt, 10*time.Millisecond, "b"), c)
		}, func(as steps, code string) {
			traceAt(&tr, tt, "handler "+code+":"+as.State().ErrorInfo)
			as.Success()
		})
		wantSuccess(t, run(t, r, tt))
		return tr.String()
	}
	quorum := func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps)) {
		asyncsteps.Quorum(as, 3, func(as steps, vs []string) { traceAt(tr, tt, fmt.Sprint("then ", vs)) }, branches...)
	}
	gather := func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps)) {
		asyncsteps.Gather(as, func(as steps, vs []string) { traceAt(tr, tt, fmt.Sprint("then ", vs)) }, branches...)
	}
	if got, want := traceOf(false, quorum), "done b@10ms,done c@20ms,done a@30ms,then [b c a]@30ms"; got != want {
		t.Errorf("Quorum:\n got: %s\nwant: %s", got, want)
	}
	if got, want := traceOf(false, gather), "done b@10ms,done c@20ms,done a@30ms,then [a b c]@30ms"; got != want {
		t.Errorf("Gather:\n got: %s\nwant: %s", got, want)
	}
	want := "done b@10ms,fail c@20ms,cancel c@20ms,cancel a@20ms,handler CommError:c@20ms"
	if q, g := traceOf(true, quorum), traceOf(true, gather); q != want || g != want {
		t.Errorf("a failure\nQuorum: %s\nGather: %s\nwant:   %s", q, g, want)
	}
}

// A Root holding a Quorum runs it anew in each execution of its clones,
// each with a slice of its own, also at once on a Loop: the race is made
// as its step runs, never kept in the Root.
func TestQuorumCollectsPerExecution(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	n := 0
	var got [][]int
	next := func(as steps) { n++; as.Success(n) }
	asyncsteps.Quorum(model, 2, func(as steps, vs []int) { got = append(got, vs) }, next, next, next)
	for range 2 {
		if _, err := model.Clone().Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[[1 2] [4 5]]" {
		t.Errorf("results %v, want [[1 2] [4 5]]", got)
	}
	got[0][0] = 99 // the first execution's slice is not the second's
	if got[1][0] != 4 {
		t.Errorf("the executions share one slice: %v", got)
	}

	l := asyncsteps.NewLoop()
	defer l.Close()
	model = asyncsteps.New(asyncsteps.WithTool(l))
	answer := func(v int) func(as steps) {
		return func(as steps) {
			asyncsteps.AwaitThen(as, func(context.Context) (int, error) { return v, nil }, nil)
		}
	}
	asyncsteps.Quorum(model, 2, func(as steps, vs []int) { as.Success(vs[0] + vs[1]) }, answer(1), answer(1), answer(1))
	results := make(chan error, 20)
	for range cap(results) {
		go func() {
			args, err := model.Clone().Run(context.Background())
			if err == nil && (len(args) != 1 || args[0] != 2) {
				err = fmt.Errorf("args %v, want [2]", args)
			}
			results <- err
		}()
	}
	for range cap(results) {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
}

// plainDecorator wraps every AsyncSteps it hands out, also a Parallel's,
// as a tracing decorator would, but is no Unwrapper.
type plainDecorator struct{ asyncsteps.AsyncSteps }

func (w plainDecorator) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as steps, args ...any) { fn(plainDecorator{as}, args...) }, onerror...)
	return w
}

func (w plainDecorator) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	return plainDecorator{w.AsyncSteps.Parallel(onerror...)}
}

// unwrappingDecorator is plainDecorator with Unwrap.
type unwrappingDecorator struct{ asyncsteps.AsyncSteps }

func (w unwrappingDecorator) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	w.AsyncSteps.Add(func(as steps, args ...any) { fn(unwrappingDecorator{as}, args...) }, onerror...)
	return w
}

func (w unwrappingDecorator) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	return unwrappingDecorator{w.AsyncSteps.Parallel(onerror...)}
}

func (w unwrappingDecorator) Unwrap() asyncsteps.AsyncSteps { return w.AsyncSteps }

// Unlike Gather, which adds its Parallel through the decorator, so that
// its branches get the decorator's AsyncSteps, a race is the engine's:
// First and Quorum add it to what an Unwrapper wraps, their branches get
// this package's AsyncSteps and then what the decorator's Add gives; a
// decorator that is no Unwrapper cannot hold it, and fails.
func TestFirstAndQuorumOnADecorator(t *testing.T) {
	type fanOut func(as steps, then func(as steps, v int), branches ...func(as steps))
	first := func(as steps, then func(as steps, v int), branches ...func(as steps)) {
		asyncsteps.First(as, then, branches...)
	}
	quorum := func(as steps, then func(as steps, v int), branches ...func(as steps)) {
		asyncsteps.Quorum(as, 1, func(as steps, vs []int) { then(as, vs[0]) }, branches...)
	}
	gather := func(as steps, then func(as steps, v int), branches ...func(as steps)) {
		asyncsteps.Gather(as, func(as steps, vs []int) { then(as, vs[0]) }, branches...)
	}
	seen := func(decorate func(as steps) steps, helper fanOut) (string, error) {
		r, tt := newFlow()
		var got []string
		branch := func(as steps) {
			got = append(got, fmt.Sprintf("%T", as))
			as.Success(1)
		}
		r.Add(func(as steps, _ ...any) {
			helper(decorate(as), func(as steps, v int) {
				got = append(got, fmt.Sprintf("then %T", as))
			}, branch, branch)
		})
		err := run(t, r, tt).Err
		return strings.Join(got, ","), err
	}
	plain := func(as steps) steps { return plainDecorator{as} }
	unwrapping := func(as steps) steps { return unwrappingDecorator{as} }
	for _, c := range []struct {
		name     string
		decorate func(as steps) steps
		helper   fanOut
		want     string
	}{
		{"Gather", plain, gather, "asyncsteps_test.plainDecorator,asyncsteps_test.plainDecorator,then asyncsteps_test.plainDecorator"},
		{"Gather", unwrapping, gather, "asyncsteps_test.unwrappingDecorator,asyncsteps_test.unwrappingDecorator,then asyncsteps_test.unwrappingDecorator"},
		{"First", unwrapping, first, "*asyncsteps.stepAPI,*asyncsteps.stepAPI,then asyncsteps_test.unwrappingDecorator"},
		{"Quorum", unwrapping, quorum, "*asyncsteps.stepAPI,*asyncsteps.stepAPI,then asyncsteps_test.unwrappingDecorator"},
	} {
		if got, err := seen(c.decorate, c.helper); got != c.want || err != nil {
			t.Errorf("%s: %s, %v\nwant %s", c.name, got, err, c.want)
		}
	}
	for name, helper := range map[string]fanOut{"First": first, "Quorum": quorum} {
		got, err := seen(plain, helper)
		if got != "" {
			t.Errorf("%s: %s ran on a decorator that is no Unwrapper", name, got)
		}
		wantError(t, err, asyncsteps.InternalError, name+": asyncsteps_test.plainDecorator is not an AsyncSteps of this package")
	}
}
