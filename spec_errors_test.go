package asyncsteps_test

// This file is long on purpose: one test per rule of error unwinding (spec
// 1.2, 1.7, 2.1), in the order docs/DESIGN.md states them.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Spec 1.2: an error goes to the handler of its step, then to the handlers of
// lower levels; a handler may replace the code with Error or recover with
// Success, whose args go to the next step.
func TestErrorUnwindsToLowerLevelHandlersSpec12(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("Level 0 func")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("Level 1 func")
			as.Error("myerror")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("Level 1 onerror: " + code)
			as.Error("newerror")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("Level 0 onerror: " + code)
		as.Success("Prm")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("Level 0 func2: %v", args...)
		as.Success()
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "Level 0 func,Level 1 func,Level 1 onerror: myerror,Level 0 onerror: newerror,Level 0 func2: Prm")
	wantSuccess(t, res)
}

// Spec 1.2.1 and docs/DESIGN.md#error-handlers: steps added by an error handler stay on the
// level of the failed step; when they fail, unwinding goes on outward and
// the handler that added them does not run a second time.
func TestStepsAddedInErrorHandlerSpec121(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("Level 0 func")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("Level 1 func")
			as.Error("first")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("Level 1 onerror: " + code)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("Level 2 func")
				as.Error("second")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("Level 2 onerror: " + code)
			})
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("Level 0 onerror: " + code)
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "Level 0 func,Level 1 func,Level 1 onerror: first,Level 2 func,Level 2 onerror: second,Level 0 onerror: second")
	wantError(t, res.Err, "second", "")
}

// docs/DESIGN.md#error-handlers: how each way of completing an error handler goes on.
func TestErrorHandlerCompletion(t *testing.T) {
	cases := []struct {
		name    string
		handler asyncsteps.ErrorFunc
		trace   string
		code    string // "" for success
		info    string
		args    []any
	}{
		{
			name: "Success resumes after the handler's step with its args",
			handler: func(as asyncsteps.AsyncSteps, code string) {
				as.Success("recovered", 1)
			},
			trace: "outer,failing,handler:Original:original info,next[recovered 1],outer next[]",
		},
		{
			name: "Error replaces the code and unwinding goes on",
			handler: func(as asyncsteps.AsyncSteps, code string) {
				as.Error("Replaced", "new info")
			},
			trace: "outer,failing,handler:Original:original info,outer handler:Replaced",
			code:  "Replaced", info: "new info",
		},
		{
			name:    "plain return lets unwinding go on",
			handler: func(as asyncsteps.AsyncSteps, code string) {},
			trace:   "outer,failing,handler:Original:original info,outer handler:Original",
			code:    "Original", info: "original info",
		},
		{
			name: "Add runs the added steps in place of the failed step",
			handler: func(as asyncsteps.AsyncSteps, code string) {
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("from added") })
			},
			trace: "outer,failing,handler:Original:original info,next[from added],outer next[]",
		},
		{
			name: "Add of failing steps unwinds outward without rerunning the handler",
			handler: func(as asyncsteps.AsyncSteps, code string) {
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Error("AddedFailed", "added info") })
			},
			trace: "outer,failing,handler:Original:original info,outer handler:AddedFailed",
			code:  "AddedFailed", info: "added info",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("outer")
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("failing")
					as.Error("Original", "original info")
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("handler:%s:%s", code, as.State().ErrorInfo)
					c.handler(as, code)
				})
				as.Add(tr.stepArgs("next"))
			}, tr.handler("outer handler"))
			r.Add(tr.stepArgs("outer next"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			if c.code == "" {
				wantSuccess(t, res, c.args...)
			} else {
				wantError(t, res.Err, c.code, c.info)
			}
		})
	}
}

// docs/DESIGN.md#error-handlers: an error handler that adds steps is consulted once only, even
// when the steps it added fail (its own handler then sees the new error).
func TestErrorHandlerNeverRunsTwice(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.Error("E1")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("1e:%s", code)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("2")
			as.Error("E2")
		})
	})
	r.Add(tr.step("not reached"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,1e:E1,2")
	wantError(t, res.Err, "E2", "")
}

// API: a nil ErrorFunc means "no handler": the error goes to the next level.
func TestNilErrorFuncMeansNoHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("inner")
			as.Error("E")
		}, nil)
	}, tr.handler("outer"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "inner,outer:E")
	wantError(t, res.Err, "E", "")
}

// docs/DESIGN.md#error-info-and-last-exception: ErrorInfo holds the info of the
// latest Error call, empty when
// it had none; recovering does not clear it.
func TestErrorInfoHoldsInfoOfLatestError(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Error("First", "info1")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("e1:%s:%q", code, as.State().ErrorInfo)
			as.Error("Second")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e0:%s:%q", code, as.State().ErrorInfo)
		as.Success()
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("next:%q", as.State().ErrorInfo)
		as.Error("Third", "info3")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e3:%s:%q", code, as.State().ErrorInfo)
		as.Success()
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("last:%q", as.State().ErrorInfo)
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, `e1:First:"info1",e0:Second:"",next:"",e3:Third:"info3",last:"info3"`)
	wantSuccess(t, res)
}

// docs/DESIGN.md#error-info-and-last-exception: LastException is an *Error
// carrying the code and info of an
// Error call.
func TestLastExceptionIsErrorOfErrorCall(t *testing.T) {
	var last error
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Error(asyncsteps.InvalidRequest, "bad input")
	}, func(as asyncsteps.AsyncSteps, code string) {
		last = as.State().LastException
		as.Success()
	})

	wantSuccess(t, run(t, r, tt))
	wantError(t, last, asyncsteps.InvalidRequest, "bad input")
}

// docs/DESIGN.md#error-info-and-last-exception: after a timeout LastException
// is an *Error with code Timeout.
func TestLastExceptionIsErrorOfTimeout(t *testing.T) {
	var last error
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(time.Second)
	}, func(as asyncsteps.AsyncSteps, code string) {
		last = as.State().LastException
		as.Success()
	})

	wantSuccess(t, run(t, r, tt))
	wantError(t, last, asyncsteps.Timeout, "")
}

func asyncStackOuter(as asyncsteps.AsyncSteps, args ...any) {
	as.Add(asyncStackInner, func(as asyncsteps.AsyncSteps, code string) {
		as.State().Set("stack", append([]string(nil), as.State().AsyncStack...))
	})
}

func asyncStackInner(as asyncsteps.AsyncSteps, args ...any) {
	as.Error("E")
}

// Spec 1.7: at an error AsyncStack lists the step functions on the stack,
// outermost first.
func TestAsyncStackListsStepFunctionsOutermostFirst(t *testing.T) {
	r, tt := newFlow()
	r.Add(asyncStackOuter)

	res := run(t, r, tt)

	wantError(t, res.Err, "E", "")
	stack, _ := r.State().Get("stack").([]string)
	if len(stack) != 2 || !strings.Contains(stack[0], "asyncStackOuter") || !strings.Contains(stack[1], "asyncStackInner") {
		t.Errorf("AsyncStack = %q, want [..asyncStackOuter ..asyncStackInner]", stack)
	}
}

var errBoom = errors.New("boom")

// API: a panic in user code inside a callback becomes an InternalError step
// error with the panic value in LastException (and as the Cause).
func TestPanicInCallbackBecomesInternalError(t *testing.T) {
	cases := []struct {
		name  string
		value any
	}{
		{"error value", errBoom},
		{"string value", "boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			var last error
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("step")
				panic(c.value)
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s", code)
				last = as.State().LastException
			})
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "step,handler:InternalError")
			wantCode(t, res.Err, asyncsteps.InternalError)
			if last == nil {
				t.Fatal("LastException is nil after a panic")
			}
			if err, ok := c.value.(error); ok {
				if !errors.Is(last, err) {
					t.Errorf("LastException = %v, does not wrap the panic value", last)
				}
				if !errors.Is(res.Err, err) {
					t.Errorf("Result.Err = %v, does not wrap the panic value", res.Err)
				}
			}
		})
	}
}

// API: a panic inside an error handler is an InternalError that goes on to
// the outer handlers.
func TestPanicInErrorHandlerBecomesInternalError(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("step")
			as.Error("E")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("inner:%s", code)
			panic(errBoom)
		})
	}, tr.handler("outer"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,inner:E,outer:InternalError")
	wantCode(t, res.Err, asyncsteps.InternalError)
	if !errors.Is(r.State().LastException, errBoom) {
		t.Errorf("LastException = %v, want the panic value", r.State().LastException)
	}
}

// addSyncer is a minimal Syncer: it adds the critical section as a step.
type addSyncer struct{}

func (addSyncer) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(f, onerror...)
}

// Spec 1 and docs/DESIGN.md#completing-after-add: Success or Error after adding
// sub-steps in the same
// callback raises InternalError whose info names the call (and for Error the
// original code); the sub-steps added do not run.
func TestCompletionAfterAddRaisesInternalError(t *testing.T) {
	adders := []struct {
		name string
		add  func(as asyncsteps.AsyncSteps, tr *tracer)
	}{
		{"Add", func(as asyncsteps.AsyncSteps, tr *tracer) { as.Add(tr.step("sub")) }},
		{"Parallel", func(as asyncsteps.AsyncSteps, tr *tracer) { as.Parallel().Add(tr.step("sub")) }},
		{"Loop", func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Loop(func(as asyncsteps.AsyncSteps) { tr.add("sub"); as.Break() })
		}},
		{"Repeat", func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Repeat(1, func(as asyncsteps.AsyncSteps, i int) { tr.add("sub") })
		}},
		{"ForEach", func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.ForEach([]int{1}, func(as asyncsteps.AsyncSteps, k, v any) { tr.add("sub") })
		}},
		{"Sync", func(as asyncsteps.AsyncSteps, tr *tracer) { as.Sync(addSyncer{}, tr.step("sub")) }},
		{"Await", func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.Await(func(ctx context.Context) (any, error) { tr.add("sub"); return nil, nil })
		}},
		{"SuccessStep", func(as asyncsteps.AsyncSteps, tr *tracer) {
			as.SuccessStep(1)
			as.Add(tr.step("sub"))
		}},
	}
	completions := []struct {
		name     string
		complete func(as asyncsteps.AsyncSteps)
		infoHas  string
	}{
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success("x") }, "success"},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("MyCode", "my info") }, "mycode"},
	}
	for _, a := range adders {
		for _, c := range completions {
			t.Run(c.name+" after "+a.name, func(t *testing.T) {
				var tr tracer
				var info string
				r, tt := newFlow()
				r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("step")
					a.add(as, &tr)
					c.complete(as)
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("handler:%s", code)
					info = as.State().ErrorInfo
				})
				r.Add(tr.step("not reached"))

				res := run(t, r, tt)

				wantTrace(t, &tr, "step,handler:InternalError")
				wantError(t, res.Err, asyncsteps.InternalError, info)
				if !strings.Contains(strings.ToLower(info), c.infoHas) {
					t.Errorf("ErrorInfo %q does not name %q", info, c.infoHas)
				}
			})
		}
	}
}

// API: a nil step function is reported as an InternalError step error with
// an info saying what was wrong.
func TestNilStepFunctionRaisesInternalError(t *testing.T) {
	var tr tracer
	var info string
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		as.Add(nil)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("handler:%s", code)
		info = as.State().ErrorInfo
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,handler:InternalError")
	wantCode(t, res.Err, asyncsteps.InternalError)
	if info == "" {
		t.Error("ErrorInfo is empty: it should say what was wrong")
	}
}

// docs/DESIGN.md#break-and-continue: Break or Continue with no enclosing loop
// of its label unwinds as LoopBreak or LoopCont through the handlers, then
// ends the flow with InternalError, whose info names the call and the label.
// A loop of another label around a labelled call does not take it.
func TestBreakOutsideLoopEndsFlowWithInternalError(t *testing.T) {
	const plain, inLoop = false, true
	cases := []struct {
		name   string
		call   func(as asyncsteps.AsyncSteps)
		inLoop bool // in a loop labelled "inner"
		code   string
		info   string
	}{
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }, plain, asyncsteps.LoopBreak,
			"Break outside of a loop"},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }, plain, asyncsteps.LoopCont,
			"Continue outside of a loop"},
		{"Break(outer)", func(as asyncsteps.AsyncSteps) { as.Break("outer") }, plain, asyncsteps.LoopBreak,
			`Break("outer") outside of a loop labelled "outer"`},
		{"Continue(outer)", func(as asyncsteps.AsyncSteps) { as.Continue("outer") }, plain, asyncsteps.LoopCont,
			`Continue("outer") outside of a loop labelled "outer"`},
		{"Break(outer) in inner", func(as asyncsteps.AsyncSteps) { as.Break("outer") }, inLoop, asyncsteps.LoopBreak,
			`Break("outer") outside of a loop labelled "outer"`},
		{"Continue(outer) in inner", func(as asyncsteps.AsyncSteps) { as.Continue("outer") }, inLoop, asyncsteps.LoopCont,
			`Continue("outer") outside of a loop labelled "outer"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				step := func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("step")
					c.call(as)
					tr.add("not aborted")
				}
				if !c.inLoop {
					as.Add(step, tr.handler("inner"))
					return
				}
				as.Repeat(2, func(as asyncsteps.AsyncSteps, _ int) {
					as.Add(step, tr.handler("inner"))
				}, "inner")
			}, tr.handler("outer"))
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "step,inner:"+c.code+",outer:"+c.code)
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
		})
	}
}

// docs/DESIGN.md#stale-steps: a call on the AsyncSteps of a completed step has no effect on
// any flow and does not panic; IsValid reports false on it.
func TestCallsOnCompletedStepHaveNoEffect(t *testing.T) {
	var tr tracer
	var saved asyncsteps.AsyncSteps
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		saved = as
		tr.addf("1 valid=%v", as.IsValid())
		as.Success("a")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("2%v stale valid=%v", args, saved.IsValid())
		saved.Success("stale")
		saved.Error("Stale", "stale info")
		saved.Add(tr.step("stale step"))
		saved.SetTimeout(time.Millisecond)
		tr.addf("2 valid=%v", as.IsValid())
		as.Success("b")
	})
	r.Add(tr.stepArgs("3"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1 valid=true,2[a] stale valid=false,2 valid=true,3[b]")
	wantSuccess(t, res)
	if saved.IsValid() {
		t.Error("IsValid() is true on a completed step")
	}
	if info := r.State().ErrorInfo; info != "" {
		t.Errorf("ErrorInfo = %q after a stale Error", info)
	}
}

// docs/DESIGN.md#stale-steps: once a callback completed its step, a second Success or a
// late Error in that callback has no effect and does not abort it.
func TestSecondCompletionInCallbackHasNoEffect(t *testing.T) {
	cases := []struct {
		name string
		late func(as asyncsteps.AsyncSteps)
	}{
		{"second Success", func(as asyncsteps.AsyncSteps) { as.Success("second") }},
		{"Error after Success", func(as asyncsteps.AsyncSteps) { as.Error("Late", "late") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("1")
				as.Success("first")
				c.late(as)
				tr.addf("1 went on valid=%v", as.IsValid())
			}, tr.handler("handler"))
			r.Add(tr.stepArgs("2"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "1,1 went on valid=false,2[first]")
			wantSuccess(t, res)
		})
	}
}

// docs/DESIGN.md#unhandled-errors: an error that reaches the root ends the flow: the unhandled-
// error function of a plain Execute gets it once, as *Error.
func TestUnhandledErrorEndsFlowAndIsReported(t *testing.T) {
	var tr tracer
	var got []*asyncsteps.Error
	r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		tr.addf("unhandled:%s", err.Code)
		got = append(got, err)
	}))
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1.1")
			as.Error(asyncsteps.NotImplemented, "not yet")
		})
		as.Add(tr.step("1.2"))
	}, tr.handler("1e"))
	r.Add(tr.step("2"))

	r.Execute()
	drive(t, tt)

	wantTrace(t, &tr, "1,1.1,1e:NotImplemented,unhandled:NotImplemented")
	if len(got) != 1 {
		t.Fatalf("unhandled-error function called %d times, want 1", len(got))
	}
	wantError(t, got[0], asyncsteps.NotImplemented, "not yet")
}

// docs/DESIGN.md#unhandled-errors: with Promise the Result carries the unhandled error as *Error.
func TestUnhandledErrorIsResultErr(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Error(asyncsteps.Unauthorized, "who are you")
	})

	res := run(t, r, tt)

	wantError(t, res.Err, asyncsteps.Unauthorized, "who are you")
	if len(res.Args) != 0 {
		t.Errorf("Result.Args = %v with an error", res.Args)
	}
}

// API: errors.Is matches an *Error template by code, and a Timeout error
// matches context.DeadlineExceeded.
func TestErrorsIsMatchesCodeAndDeadline(t *testing.T) {
	t.Run("code", func(t *testing.T) {
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Error(asyncsteps.CommError, "x") })
		err := run(t, r, tt).Err

		if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.CommError}) {
			t.Errorf("errors.Is(%v, CommError) = false", err)
		}
		if errors.Is(err, &asyncsteps.Error{Code: asyncsteps.ConnectError}) {
			t.Errorf("errors.Is(%v, ConnectError) = true", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("errors.Is(%v, context.DeadlineExceeded) = true", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.SetTimeout(time.Second) })
		err := run(t, r, tt).Err

		wantError(t, err, asyncsteps.Timeout, "")
		if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout}) {
			t.Errorf("errors.Is(%v, Timeout) = false", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = true", err)
		}
	})
}

// Spec 2.1 and docs/DESIGN.md#completing-after-add: an error handler that adds steps and then calls
// Success violates the rules like a step does: InternalError goes outward
// and the added steps do not run.
func TestSuccessAfterAddInErrorHandlerRaisesInternalError(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("step")
			as.Error("E")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("handler:%s", code)
			as.Add(tr.step("added"))
			as.Success()
		})
	}, tr.handler("outer"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,handler:E,outer:InternalError")
	wantCode(t, res.Err, asyncsteps.InternalError)
}

// docs/DESIGN.md#error-handlers: SuccessStep in an error handler is an added step: it runs in
// place of the failed step and its args go to the next step.
func TestSuccessStepInErrorHandlerReplacesFailedStep(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		as.Error("E")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("handler:%s", code)
		as.SuccessStep("default", 0)
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,handler:E,next[default 0]")
	wantSuccess(t, res)
}

// Spec 1.7: AsyncStack is the stack of the latest error: raised again at
// the same place it is the same, raised elsewhere it changes, whether or
// not the engine reuses the previous record; and a stack the user replaced
// is written anew.
func TestAsyncStackFollowsEachError(t *testing.T) {
	var stacks [][]string
	note := func(as asyncsteps.AsyncSteps, code string) {
		stacks = append(stacks, slices.Clone(as.State().AsyncStack))
		as.Success()
	}
	replace := func(as asyncsteps.AsyncSteps, code string) {
		note(as, code)
		as.State().AsyncStack = []string{"replaced"}
	}
	r, tt := newFlow()
	r.Add(asyncStackInner, note).
		Add(asyncStackInner, replace).
		Add(asyncStackInner, note).
		Add(asyncStackOther, note).
		Add(asyncStackOuterStep, note).
		Add(asyncStackInner, note)
	wantSuccess(t, run(t, r, tt))
	want := [][]string{{"asyncStackInner"}, {"asyncStackInner"}, {"asyncStackInner"}, {"asyncStackOther"}, {"asyncStackOuterStep", "asyncStackInner"}, {"asyncStackInner"}}
	if len(stacks) != len(want) {
		t.Fatalf("%d errors handled, want %d", len(stacks), len(want))
	}
	for i, s := range stacks {
		if len(s) != len(want[i]) {
			t.Fatalf("error %d: AsyncStack = %q, want %q", i, s, want[i])
		}
		for j := range s {
			if !strings.HasSuffix(s[j], "."+want[i][j]) {
				t.Errorf("error %d: AsyncStack = %q, want %q", i, s, want[i])
			}
		}
	}
}

// Spec 1.7: AsyncStack lists every level of a flow deeper than the 16
// levels the engine walks without allocating, outermost first, and an
// error at the same depth in another function is recorded anew.
func TestAsyncStackOfADeepFlow(t *testing.T) {
	const depth = 20
	var stacks [][]string
	note := func(as asyncsteps.AsyncSteps, code string) {
		stacks = append(stacks, slices.Clone(as.State().AsyncStack))
		as.Success()
	}
	r, tt := newFlow()
	r.State().Set("left", depth-1)
	r.State().Set("leaf", asyncsteps.StepFunc(asyncStackInner))
	r.Add(deepStep, note).
		Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.State().Set("left", depth-1)
			as.State().Set("leaf", asyncsteps.StepFunc(asyncStackOther))
			as.Success()
		}).
		Add(deepStep, note)
	wantSuccess(t, run(t, r, tt))
	if len(stacks) != 2 {
		t.Fatalf("%d errors handled, want 2", len(stacks))
	}
	for i, leaf := range []string{"asyncStackInner", "asyncStackOther"} {
		var names []string
		for _, s := range stacks[i] {
			names = append(names, s[strings.LastIndex(s, ".")+1:])
		}
		want := strings.Repeat("deepStep,", depth) + leaf
		if got := strings.Join(names, ","); got != want {
			t.Errorf("error %d: AsyncStack = %s, want %s", i, got, want)
		}
	}
}

// deepStep adds itself as its sub-step until the State's "left" runs out,
// then the State's "leaf".
func deepStep(as asyncsteps.AsyncSteps, _ ...any) {
	st := as.State()
	left := st.Get("left").(int)
	if left == 0 {
		as.Add(st.Get("leaf").(asyncsteps.StepFunc))
		return
	}
	st.Set("left", left-1)
	as.Add(deepStep)
}

func asyncStackOuterStep(as asyncsteps.AsyncSteps, args ...any) { as.Add(asyncStackInner) }

func asyncStackOther(as asyncsteps.AsyncSteps, args ...any) { as.Error("E") }

// The functions of the failing steps below, named for AsyncStack.
func stackLoopBody(as asyncsteps.AsyncSteps, i int)                 { as.Error("E") }
func stackEachBody(as asyncsteps.AsyncSteps, k, v any)              { as.Error("E") }
func stackSection(as asyncsteps.AsyncSteps, _ ...any)               { as.Error("E") }
func stackBranch(as asyncsteps.AsyncSteps, _ ...any)                { as.Error("E") }
func stackInner(as asyncsteps.AsyncSteps, _ ...any)                 { as.Error("E") }
func stackPassOn(as asyncsteps.AsyncSteps, _ string)                {}
func stackOuterWithInnerHandler(as asyncsteps.AsyncSteps, _ ...any) { as.Add(stackInner, stackPassOn) }

// Spec 1.7: AsyncStack names the user's functions, not the engine's: the
// body of a loop, the function given to Sync, a Parallel's branch. An
// error that a handler lets go on keeps the stack of where it was raised.
func TestAsyncStackNamesTheUsersFunctions(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(as asyncsteps.AsyncSteps)
		want string
	}{
		{"Repeat", func(as asyncsteps.AsyncSteps) { as.Repeat(1, stackLoopBody) }, "stackLoopBody"},
		{"ForEach", func(as asyncsteps.AsyncSteps) { as.ForEach([]int{1}, stackEachBody) }, "stackEachBody"},
		{"Sync", func(as asyncsteps.AsyncSteps) { as.Sync(asyncsteps.NewMutex(1), stackSection) }, "stackSection"},
		{"Parallel", func(as asyncsteps.AsyncSteps) { as.Parallel().Add(stackBranch) }, "stackBranch"},
		{"handler that returns", func(as asyncsteps.AsyncSteps) { as.Add(stackOuterWithInnerHandler) }, "stackOuterWithInnerHandler,stackInner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stack []string
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tc.add(as) }, func(as asyncsteps.AsyncSteps, _ string) {
				stack = slices.Clone(as.State().AsyncStack)
				as.Success()
			})
			wantSuccess(t, run(t, r, tt))
			var names []string
			for _, s := range stack[1:] { // the first is the test's own step
				names = append(names, s[strings.LastIndex(s, ".")+1:])
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Errorf("AsyncStack = %q, want the test's step, then %s", stack, tc.want)
			}
		})
	}
}
