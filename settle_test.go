package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

type settled = asyncsteps.Settled[string]

// outcomes prints the outcomes of a Settle one per branch: the value, or
// the error's code and info.
func outcomes(rs []settled) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%q", r.Value)
		if r.Err != nil {
			s[i] = r.Err.Error()
		}
	}
	return strings.Join(s, "|")
}

// traceAt records event at the virtual time of tt.
func traceAt(tr *tracer, tt *asyncsteps.TestTool, event string) {
	tr.addf("%s@%v", event, elapsed(tt))
}

// waitThen returns a branch that waits d on the flow's tool, then calls
// end with the branch's AsyncSteps; a cancel stops the timer and is
// traced as "cancel name".
func waitThen(tr *tracer, tt *asyncsteps.TestTool, name string, d time.Duration, end func(as steps)) func(as steps) {
	return func(as steps) {
		h := as.Tool().Deferred(d, func() { end(as) })
		as.SetCancel(func(steps) {
			h.Cancel()
			traceAt(tr, tt, "cancel "+name)
		})
	}
}

// succeedAfter is waitThen of a branch that succeeds with v.
func succeedAfter(tr *tracer, tt *asyncsteps.TestTool, d time.Duration, v string) func(as steps) {
	return waitThen(tr, tt, v, d, func(as steps) {
		traceAt(tr, tt, "done "+v)
		as.Success(v)
	})
}

// The outcomes come in the order of the branches, whatever order they
// complete in, and then runs once, after the last.
func TestSettleAllSucceed(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.Settle(r, func(as steps, rs []settled) {
		traceAt(&tr, tt, "then "+outcomes(rs))
	}, succeedAfter(&tr, tt, 30*time.Millisecond, "a"), succeedAfter(&tr, tt, 10*time.Millisecond, "b"),
		func(as steps) { as.Success("c") })
	if err := run(t, r, tt).Err; err != nil {
		t.Fatal(err)
	}
	wantTrace(t, &tr, `done b@10ms,done a@30ms,then "a"|"b"|"c"@30ms`)
}

var errNoQuote = errors.New("no quote")

// Each kind of error of a branch is that branch's outcome, the *Error the
// flow would have ended with had the branch been the whole flow (code,
// info, Cause), and leaves the other branches and then to run.
func TestSettleErrorsOfEachKind(t *testing.T) {
	branches := []struct {
		name   string
		branch func(as steps)
		want   string
		cause  error
	}{
		{"success", func(as steps) { as.Success("ok") }, `"ok"`, nil},
		{"Error", func(as steps) { as.Error(asyncsteps.CommError, "down") }, "CommError: down", nil},
		{"Fail", func(as steps) { asyncsteps.Fail(as, errNoQuote) }, "InternalError: no quote", errNoQuote},
		{"panic", func(as steps) { panic("boom") }, "InternalError: boom", nil},
		{"own timeout", func(as steps) { as.SetTimeout(10 * time.Millisecond) }, "Timeout", nil},
		{"misuse", func(as steps) {
			as.Add(func(steps, ...any) {})
			as.Success()
		}, "InternalError: Success called after Add in the same callback", nil},
		{"wrong type", func(as steps) { as.Success(1) }, "InternalError: Settle: the result of branch 6 is int, want string", nil},
		{"raised by its handler", func(as steps) {
			as.Add(func(as steps, _ ...any) { asyncsteps.Fail(as, errNoQuote) }, func(as steps, code string) {
				as.Error(asyncsteps.CommError, "after "+code)
			})
		}, "CommError: after InternalError", errNoQuote},
		{"recovered by its handler", func(as steps) {
			as.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError) }, func(as steps, code string) {
				as.Success("fallback after " + code)
			})
		}, `"fallback after CommError"`, nil},
		{"Await", func(as steps) {
			asyncsteps.AwaitThen(as, func(context.Context) (string, error) { return "", errNoQuote }, nil)
		}, "InternalError: no quote", errNoQuote},
		{"Break of its own loop", func(as steps) {
			as.Loop(func(as steps) { as.Break() })
			as.SuccessStep("after the loop")
		}, `"after the loop"`, nil},
	}
	r, _ := newFlow()
	var got []settled
	thenRuns := 0
	bs := make([]func(as steps), len(branches))
	for i, b := range branches {
		bs[i] = b.branch
	}
	asyncsteps.Settle(r, func(as steps, rs []settled) {
		thenRuns++
		got = rs
	}, bs...)
	if _, err := r.Run(context.Background()); err != nil { // Run waits for the Await's answer
		t.Fatal(err)
	}
	if thenRuns != 1 || len(got) != len(branches) {
		t.Fatalf("then ran %d times with %d outcomes, want once with %d", thenRuns, len(got), len(branches))
	}
	for i, b := range branches {
		if s := outcomes(got[i : i+1]); s != b.want {
			t.Errorf("%s: outcome %s, want %s", b.name, s, b.want)
		}
		if e := got[i].Err; e != nil && e.Cause != b.cause && b.name != "panic" {
			t.Errorf("%s: Cause %#v, want %#v", b.name, e.Cause, b.cause)
		}
		alone, _ := newFlow()
		alone.Add(func(as steps, _ ...any) { b.branch(as) })
		_, err := alone.Run(context.Background())
		if b.name != "wrong type" && !sameError(got[i].Err, err) {
			t.Errorf("%s: outcome %#v, the flow of the branch alone ends with %#v", b.name, got[i].Err, err)
		}
	}
	var p *asyncsteps.PanicError
	if e := got[3].Err; !errors.As(e, &p) || p.Value != "boom" {
		t.Errorf("panic: Cause %#v, want a *PanicError of boom", e.Cause)
	}
}

// sameError reports whether e and err have the same code, info and cause
// (for a panic, the same value).
func sameError(e *asyncsteps.Error, err error) bool {
	if e == nil || err == nil {
		return e == nil && err == nil
	}
	var f *asyncsteps.Error
	if !errors.As(err, &f) || e.Code != f.Code || e.Info != f.Info {
		return false
	}
	var p, q *asyncsteps.PanicError
	if errors.As(e.Cause, &p) && errors.As(f.Cause, &q) {
		return p.Value == q.Value
	}
	return e.Cause == f.Cause
}

// A branch that times out is cancelled alone: the others go on, their
// values arrive, and then runs after the last.
func TestSettleBranchTimeoutWhileOthersRun(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.Settle(r, func(as steps, rs []settled) {
		traceAt(&tr, tt, "then "+outcomes(rs))
	}, func(as steps) {
		as.SetTimeout(10 * time.Millisecond)
		as.SetCancel(func(steps) { traceAt(&tr, tt, "cancel t") })
	}, succeedAfter(&tr, tt, 30*time.Millisecond, "b"), succeedAfter(&tr, tt, 20*time.Millisecond, "c"))
	if err := run(t, r, tt).Err; err != nil {
		t.Fatal(err)
	}
	wantTrace(t, &tr, `cancel t@10ms,done c@20ms,done b@30ms,then Timeout|"b"|"c"@30ms`)
}

// A cancel of the Settle step is no outcome of a branch: every branch
// still running is cancelled, then does not run, and the flow ends as it
// would with Gather.
func TestSettleCancelledCancelsEveryBranch(t *testing.T) {
	fail := func(tr *tracer, tt *asyncsteps.TestTool) func(as steps) {
		return waitThen(tr, tt, "f", 5*time.Millisecond, func(as steps) {
			traceAt(tr, tt, "fail f")
			as.Error(asyncsteps.CommError, "f")
		})
	}
	addSettle := func(as steps, tr *tracer, tt *asyncsteps.TestTool) {
		asyncsteps.Settle(as, func(as steps, rs []settled) { traceAt(tr, tt, "then "+outcomes(rs)) },
			fail(tr, tt), succeedAfter(tr, tt, time.Hour, "a"), succeedAfter(tr, tt, time.Hour, "b"))
	}
	for _, c := range []struct {
		name  string
		add   func(r *asyncsteps.Root, tr *tracer, tt *asyncsteps.TestTool)
		trace string
		err   string
	}{
		{"timeout around it", func(r *asyncsteps.Root, tr *tracer, tt *asyncsteps.TestTool) {
			r.Add(func(as steps, _ ...any) {
				as.SetTimeout(20 * time.Millisecond)
				addSettle(as, tr, tt)
			}, func(as steps, code string) { traceAt(tr, tt, "handler "+code) })
		}, "fail f@5ms,cancel f@5ms,cancel a@20ms,cancel b@20ms,handler Timeout@20ms", "Timeout"},
		{"Root.Cancel", func(r *asyncsteps.Root, tr *tracer, tt *asyncsteps.TestTool) {
			addSettle(r, tr, tt)
			tt.Deferred(20*time.Millisecond, r.Cancel)
		}, "fail f@5ms,cancel f@5ms,cancel a@20ms,cancel b@20ms", "context canceled"},
		{"failed sibling of a Parallel around it", func(r *asyncsteps.Root, tr *tracer, tt *asyncsteps.TestTool) {
			p := r.Parallel()
			addSettle(p, tr, tt)
			p.Add(func(as steps, _ ...any) {
				waitThen(tr, tt, "s", 20*time.Millisecond, func(as steps) { as.Error(asyncsteps.NotImplemented, "sibling") })(as)
			})
		}, "fail f@5ms,cancel f@5ms,cancel s@20ms,cancel a@20ms,cancel b@20ms", "NotImplemented: sibling"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			c.add(r, &tr, tt)
			if err := run(t, r, tt).Err; fmt.Sprint(err) != c.err {
				t.Errorf("err %v, want %s", err, c.err)
			}
			wantTrace(t, &tr, c.trace)
		})
	}
}

// A Break or Continue that a branch raises for a loop around the helper
// leaves a Settle branch as it leaves a Gather branch: the other branches
// are cancelled, then does not run, and the loop takes it; with no loop
// around, the flow ends with InternalError.
func TestSettleBreakFromABranchActsAsInGather(t *testing.T) {
	type helper func(as steps, tr *tracer, branches ...func(as steps))
	helpers := map[string]helper{
		"Gather": func(as steps, tr *tracer, branches ...func(as steps)) {
			asyncsteps.Gather(as, func(as steps, vs []string) { tr.add("then") }, branches...)
		},
		"Settle": func(as steps, tr *tracer, branches ...func(as steps)) {
			asyncsteps.Settle(as, func(as steps, rs []settled) { tr.add("then") }, branches...)
		},
	}
	for _, c := range []struct {
		name   string
		signal func(as steps)
		loop   bool
		trace  string
		err    string
	}{
		{"Break", func(as steps) { as.Break() }, true, "iteration 0@0s,cancel b@5ms,cancel a@5ms", "<nil>"},
		{"Continue", func(as steps) { as.Continue() }, true,
			"iteration 0@0s,cancel b@5ms,cancel a@5ms,iteration 1@5ms,cancel b@10ms,cancel a@10ms,iteration 2@10ms,cancel b@15ms,cancel a@15ms", "<nil>"},
		{"Break outside of a loop", func(as steps) { as.Break() }, false, "iteration 0@0s,cancel b@5ms,cancel a@5ms",
			"InternalError: Break outside of a loop"},
	} {
		for _, name := range []string{"Gather", "Settle"} {
			t.Run(c.name+" in "+name, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				iteration := func(as steps, i int) {
					traceAt(&tr, tt, fmt.Sprint("iteration ", i))
					helpers[name](as, &tr, succeedAfter(&tr, tt, time.Hour, "a"),
						waitThen(&tr, tt, "b", 5*time.Millisecond, c.signal))
				}
				if c.loop {
					r.Repeat(3, iteration)
				} else {
					r.Add(func(as steps, _ ...any) { iteration(as, 0) })
				}
				if err := run(t, r, tt).Err; fmt.Sprint(err) != c.err {
					t.Errorf("err %v, want %s", err, c.err)
				}
				wantTrace(t, &tr, c.trace)
			})
		}
	}
}

// An error or a panic in then is an error of the added step, for the
// handlers around it, as Gather's then.
func TestSettlePanickingThen(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		asyncsteps.Settle(as, func(as steps, rs []settled) {
			tr.add("then " + outcomes(rs))
			panic("in then")
		}, func(as steps) { as.Error(asyncsteps.CommError) })
	}, func(as steps, code string) { tr.addf("handler %s %s", code, as.State().ErrorInfo) })
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "in then")
	wantTrace(t, &tr, "then CommError,handler InternalError in then")
}

// Without branches then runs at once with an empty slice, and each
// execution of a Root, or of its Clone, has outcomes of its own.
func TestSettleEmptyAndPerExecution(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.Settle(r, func(as steps, rs []settled) { as.Success(fmt.Sprintf("%d %v", len(rs), rs == nil)) })
	if res := run(t, r, tt); fmt.Sprint(res.Args, res.Err) != "[0 false] <nil>" {
		t.Errorf("got %v, %v; want [0 false] <nil>", res.Args, res.Err)
	}

	model, tt := newFlow()
	n := 0
	var got [][]settled
	asyncsteps.Settle(model, func(as steps, rs []settled) { got = append(got, rs) },
		func(as steps) { n++; as.Success(fmt.Sprint(n)) },
		func(as steps) { n++; as.Error(fmt.Sprint("E", n)) })
	for range 2 {
		run(t, model.Clone(), tt)
	}
	if len(got) != 2 || outcomes(got[0])+" "+outcomes(got[1]) != `"1"|E2 "3"|E4` {
		t.Fatalf("outcomes %v", got)
	}
	got[0][0].Value = "changed" // the first execution's slice is not the second's
	if got[1][0].Value != "3" {
		t.Errorf("the executions share one slice: %v", got)
	}
}

// A branch's error, a result of the wrong type too, is an error of the
// flow that a handler recovered from: the StepError hook is told of the
// very *Error that becomes the outcome, and the State keeps the last one's
// info and its AsyncStack, which names the branch.
func TestSettleBranchErrorsAreTheFlows(t *testing.T) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	var seen []*asyncsteps.Error
	l.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) { seen = append(seen, err) }})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	var rs []asyncsteps.Settled[int]
	asyncsteps.Settle(r, func(as steps, got []asyncsteps.Settled[int]) { rs = got },
		stackBranchFails, stackBranchString, stackBranchOK)
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || len(seen) != 2 || rs[0].Err != seen[0] || rs[1].Err != seen[1] || rs[2] != (asyncsteps.Settled[int]{Value: 1}) {
		t.Fatalf("outcomes %+v, hook saw %v", rs, seen)
	}
	wantError(t, rs[1].Err, asyncsteps.InternalError, "Settle: the result of branch 1 is string, want int")
	st := r.State()
	want := []string{"github.com/asyncsteps/asyncsteps_test.stackBranchString"}
	if st.ErrorInfo != rs[1].Err.Info || st.LastException != rs[1].Err || !slices.Equal(st.AsyncStack, want) {
		t.Errorf("State: ErrorInfo %q, LastException %v, AsyncStack %q; want the mismatch's, %q",
			st.ErrorInfo, st.LastException, st.AsyncStack, want)
	}
}

// The deadline of Run's context times out the Settle step as a whole, as
// a timeout around it: its branches are cancelled, then does not run.
// (The branches wait for nothing that comes: the outcome does not depend
// on when the deadline falls due.)
func TestSettleRunDeadlineCancelsEveryBranch(t *testing.T) {
	var tr tracer
	r, _ := newFlow()
	waits := func(name string) func(as steps) {
		return func(as steps) {
			as.SetCancel(tr.cancel("cancel " + name))
			as.WaitExternal()
		}
	}
	r.Add(func(as steps, _ ...any) {
		asyncsteps.Settle(as, func(as steps, rs []settled) { tr.add("then " + outcomes(rs)) },
			func(as steps) { as.Error(asyncsteps.CommError) }, waits("a"), waits("b"))
	}, func(as steps, code string) { tr.add("handler " + code) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := r.Run(ctx)
	wantError(t, err, asyncsteps.Timeout, deadlineInfo)
	wantTrace(t, &tr, "cancel a,cancel b,handler Timeout")
}

// deepDecorator decorates every AsyncSteps a flow hands on, the value
// Parallel returns and the error handlers' too.
type deepDecorator struct{ asyncsteps.AsyncSteps }

func (d deepDecorator) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	handlers := make([]asyncsteps.ErrorFunc, len(onerror))
	for i, h := range onerror {
		handlers[i] = func(as steps, code string) { h(deepDecorator{as}, code) }
	}
	d.AsyncSteps.Add(func(as steps, args ...any) { fn(deepDecorator{as}, args...) }, handlers...)
	return d
}

func (d deepDecorator) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	return deepDecorator{d.AsyncSteps.Parallel(onerror...)}
}

func (d deepDecorator) Unwrap() asyncsteps.AsyncSteps { return d.AsyncSteps }

// Through a decorator of every level, each branch and its steps are
// added with the decorator's Add, and the outcomes are the same.
func TestSettleThroughADecorator(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	decorated := func(as steps) string {
		_, ok := as.(deepDecorator)
		return fmt.Sprint(ok)
	}
	asyncsteps.Settle(deepDecorator{r}, func(as steps, rs []settled) {
		tr.add("then " + decorated(as) + " " + outcomes(rs))
		if !errors.Is(rs[1].Err, errNoQuote) {
			t.Errorf("Err %#v, want one whose Cause is errNoQuote", rs[1].Err)
		}
	}, func(as steps) {
		tr.add("0 " + decorated(as))
		as.Success("ok")
	}, func(as steps) {
		tr.add("1 " + decorated(as))
		asyncsteps.Fail(as, errNoQuote)
	}, func(as steps) {
		tr.add("2 " + decorated(as))
		as.Success(2)
	})
	if err := run(t, r, tt).Err; err != nil {
		t.Fatal(err)
	}
	wantTrace(t, &tr, `0 true,1 true,2 true,then true "ok"|InternalError: no quote|InternalError: Settle: the result of branch 2 is int, want string`)
}

// opaqueDecorator decorates every step and error handler as deepDecorator
// does, but without Unwrap: Settle sees its branches' errors through the
// State only.
type opaqueDecorator struct{ asyncsteps.AsyncSteps }

func (d opaqueDecorator) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	handlers := make([]asyncsteps.ErrorFunc, len(onerror))
	for i, h := range onerror {
		handlers[i] = func(as steps, code string) { h(opaqueDecorator{as}, code) }
	}
	d.AsyncSteps.Add(func(as steps, args ...any) { fn(opaqueDecorator{as}, args...) }, handlers...)
	return d
}

func (d opaqueDecorator) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	return opaqueDecorator{d.AsyncSteps.Parallel(onerror...)}
}

// Through a decorator that does not unwrap, a branch's Err is rebuilt
// from the State, and is still the error the branch alone ends its flow
// with: an *Error with an empty code that an Await function returns
// becomes an InternalError whose Cause is that *Error, which errors.Is
// finds, as a panic keeps its *PanicError.
func TestSettleThroughAnOpaqueDecoratorKeepsTheCause(t *testing.T) {
	noCode := &asyncsteps.Error{Info: "no code"}
	branches := []func(as steps){
		func(as steps) {
			asyncsteps.AwaitThen(as, func(context.Context) (string, error) { return "", noCode }, nil)
		},
		func(as steps) { panic("boom") },
		func(as steps) { as.Error(asyncsteps.CommError, "down") },
	}
	r, _ := newFlow()
	var got []settled
	asyncsteps.Settle(opaqueDecorator{r}, func(as steps, rs []settled) { got = rs }, branches...)
	if _, err := r.Run(context.Background()); err != nil { // Run waits for the Await's answer
		t.Fatal(err)
	}
	want := `InternalError: *Error: empty error code; info: no code|InternalError: boom|CommError: down`
	if s := outcomes(got); s != want {
		t.Fatalf("outcomes %s, want %s", s, want)
	}
	if !errors.Is(got[0].Err, noCode) || got[0].Err.Cause != noCode {
		t.Errorf("Err %#v, want its Cause to be the *Error the Await function returned", got[0].Err)
	}
	for i, b := range branches {
		alone, _ := newFlow()
		alone.Add(func(as steps, _ ...any) { b(as) })
		_, err := alone.Run(context.Background())
		if !sameError(got[i].Err, err) {
			t.Errorf("branch %d: outcome %#v, the flow of the branch alone ends with %#v", i, got[i].Err, err)
		}
	}
}

// Once Run's deadline has passed, a step that waits fails with Timeout at
// once. A Settle that an error handler starts then runs each branch to
// its end all the same: a branch that waits has Timeout as its outcome
// (its cancel handler runs, as at its own timeout), one that does not
// wait its result, and then runs with them; the flow goes on. A Gather
// started there meets the same Timeouts, and fails as a whole, as at any
// branch's error: then does not run, and the Timeout goes to the
// handlers around it.
func TestSettleAfterRunDeadlineTimesOutEachWaitingBranch(t *testing.T) {
	for _, c := range []struct {
		name  string
		fan   func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps))
		trace string
		res   string
	}{
		{"Settle", func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps)) {
			asyncsteps.Settle(as, func(as steps, rs []settled) {
				traceAt(tr, tt, "then "+outcomes(rs))
				as.Success("partial")
			}, branches...)
		}, `call:Timeout@0s,cancel fresh@0s,cancel fresher@0s,then "cached"|Timeout: ` + deadlineInfo + `|Timeout: ` + deadlineInfo + `@0s`, "[partial] <nil>"},
		{"Gather", func(as steps, tr *tracer, tt *asyncsteps.TestTool, branches ...func(as steps)) {
			asyncsteps.Gather(as, func(as steps, vs []string) {
				traceAt(tr, tt, fmt.Sprint("then ", vs))
				as.Success("partial")
			}, branches...)
		}, "call:Timeout@0s,cancel fresh@0s,cancel fresher@0s,outer:Timeout@0s", "[] Timeout: " + deadlineInfo},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			ctx := asyncsteps.NewPassingCtx()
			r.Add(func(as steps, _ ...any) {
				as.Add(func(as steps, _ ...any) {
					ctx.Pass() // the deadline passes while the call waits
					as.WaitExternal()
				}, func(as steps, code string) {
					traceAt(&tr, tt, "call:"+code)
					c.fan(as, &tr, tt, func(as steps) { as.Success("cached") },
						succeedAfter(&tr, tt, time.Millisecond, "fresh"),
						succeedAfter(&tr, tt, time.Millisecond, "fresher"))
				})
			}, func(as steps, code string) { traceAt(&tr, tt, "outer:"+code) })
			args, err := r.Run(ctx)
			wantTrace(t, &tr, c.trace)
			if got := fmt.Sprint(args, " ", err); got != c.res {
				t.Errorf("Run: %s, want %s", got, c.res)
			}
		})
	}
}
