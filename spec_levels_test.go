package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Spec 1.1: sub-steps form Level n+1 and all of them run before the next
// step of Level n; each parallel() counts as one step.
func TestLevelsRunInSpecSequence(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("Level 0 add #1")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("Level 1 add #1")
			as.Add(tr.step("Level 2 add #1"))
			as.Parallel().Add(tr.step("Level 2 parallel #2"))
			as.Add(tr.step("Level 2 add #3"))
		})
		as.Parallel().Add(tr.step("Level 1 parallel #2"))
		as.Add(tr.step("Level 1 add #3"))
	})
	r.Parallel().Add(tr.step("Level 0 parallel #2"))
	r.Add(tr.step("Level 0 add #3"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "Level 0 add #1,Level 1 add #1,Level 2 add #1,Level 2 parallel #2,"+
		"Level 2 add #3,Level 1 parallel #2,Level 1 add #3,Level 0 parallel #2,Level 0 add #3")
	wantSuccess(t, res)
}

// Spec 2.2.1: add() returns the current level for chaining; steps of one
// level run in the order they were added.
func TestAddChainsStepsOfOneLevelInOrder(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(tr.step("1")).Add(tr.step("2")).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("3")
		as.Add(tr.step("3.1")).Add(tr.step("3.2"))
	}).Add(tr.step("4"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,2,3,3.1,3.2,4")
	wantSuccess(t, res)
}

// Spec 1: the success result of any step becomes the input of the next one.
func TestSuccessArgsBecomeInputOfNextStep(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("1%v", args)
		as.Success(1, "a", true)
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("2%v", args)
		wantArgs(t, "args of step 2", args, 1, "a", true)
		as.Success("b")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("3%v", args)
		as.Success(2.5, nil)
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "1[],2[1 a true],3[b]")
	wantSuccess(t, res, 2.5, nil)
}

// docs/DESIGN.md#arguments-between-levels: a parent step's input args are not passed to its first
// sub-step; the last sub-step's success args become the parent's result.
func TestSubStepArgsFlow(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Success("in")
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("parent%v", args)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("sub1%v", args)
			as.Success("s1")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("sub2%v", args)
			as.Success("r1", 2)
		})
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "parent[in],sub1[],sub2[s1],next[r1 2]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#arguments-between-levels: the result of a step whose sub-steps
// nest several levels deep
// is the result of the innermost last sub-step.
func TestNestedSubStepResultBubblesUp(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Success("deep", 3)
			})
		})
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "next[deep 3]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#arguments-between-levels and spec 1.6: a step that adds no
// sub-step, sets no timeout or
// cancel handler and does not wait succeeds implicitly, with no args, even
// when it received some.
func TestImplicitSuccessPassesNoArgs(t *testing.T) {
	cases := []struct {
		name  string
		want  string
		setup func(r *asyncsteps.Root, tr *tracer)
	}{
		{"plain return", "implicit[x],next[]", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("x") })
			r.Add(tr.stepArgs("implicit"))
		}},
		{"last sub-step implicit", "implicit[x],sub[y],next[]", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Success("x")
			})
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.addf("implicit%v", args)
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("y") })
				as.Add(tr.stepArgs("sub"))
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			c.setup(r, &tr)
			r.Add(tr.stepArgs("next"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.want)
			wantSuccess(t, res)
		})
	}
}

// Result.Args are the success args of the last completed step.
func TestResultCarriesArgsOfLastStep(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("first") })
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("last", 7) })
	})

	wantSuccess(t, run(t, r, tt), "last", 7)
}

// A root without any step succeeds with no args.
func TestEmptyFlowSucceedsWithNoArgs(t *testing.T) {
	r, tt := newFlow()
	wantSuccess(t, run(t, r, tt))
}

// Spec 1.12 and docs/DESIGN.md#arguments-between-levels: SuccessStep(args...)
// adds a step that succeeds
// with args; the next step receives them, and with no step after it they
// become the result.
func TestSuccessStepInjectsResult(t *testing.T) {
	cases := []struct {
		name     string
		args     []any
		follow   bool
		wantTr   string
		wantArgs []any
	}{
		{"followed by a step", []any{123}, true, "sub,next[123]", nil},
		{"two args followed", []any{"a", 2}, true, "sub,next[a 2]", nil},
		{"no args followed", nil, true, "sub,next[]", nil},
		{"last step becomes result", []any{123, "v"}, false, "sub", []any{123, "v"}},
		{"last step without args", nil, false, "sub", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("sub")
					as.Success("from sub")
				})
			})
			r.SuccessStep(c.args...)
			if c.follow {
				r.Add(tr.stepArgs("next"))
			}

			res := run(t, r, tt)

			wantTrace(t, &tr, c.wantTr)
			wantSuccess(t, res, c.wantArgs...)
		})
	}
}

// Spec 1.12: SuccessStep used as the last sub-step sets the parent's result.
func TestSuccessStepAsLastSubStepSetsParentResult(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Add(tr.step("sub"))
		as.SuccessStep("value", 123)
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "sub,next[value 123]")
	wantSuccess(t, res)
}

// SuccessStep returns the level, so it chains like Add.
func TestSuccessStepChains(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.SuccessStep(1).Add(tr.stepArgs("a")).SuccessStep(2)

	res := run(t, r, tt)

	wantTrace(t, &tr, "a[1]")
	wantSuccess(t, res, 2)
}

// The sequence test of the JS reference suite: nested levels, handlers that
// recover with Success, result passing between levels, two-level nesting,
// and handlers of steps added by an error handler.
func TestReferenceSuiteNestedStepsAndHandlers(t *testing.T) {
	var tr tracer
	r, tt := newFlow()

	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1_1")
			as.Error("MyError1_1")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("1_1e")
			if code != "MyError1_1" {
				t.Errorf("1_1e code = %q, want MyError1_1", code)
			}
			as.Success("1_1")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1_2")
			wantArgs(t, "args of 1_2", args, "1_1")
			as.Error("MyError1_2")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("1_2e")
			if code != "MyError1_2" {
				t.Errorf("1_2e code = %q, want MyError1_2", code)
			}
			as.Success("1_2e")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1_3")
			wantArgs(t, "args of 1_3", args, "1_2e")
			as.Success(true, "1_3")
		})
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("2")
		wantArgs(t, "args of 2", args, true, "1_3")
		as.Success()
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("3")
		wantArgs(t, "args of 3", args)
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("4")
		wantArgs(t, "args of 4", args)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("4_1")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("4_2")
			})
		})
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("5")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("5_1")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("5_2")
				as.Error("MyError5_2")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("5_2e")
				if code != "MyError5_2" {
					t.Errorf("5_2e code = %q, want MyError5_2", code)
				}
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("5_3")
					as.Error("MyError5_3")
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.add("5_3e")
					if code != "MyError5_3" {
						t.Errorf("5_3e code = %q, want MyError5_3", code)
					}
				})
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("5_1e")
			if code != "MyError5_3" {
				t.Errorf("5_1e code = %q, want MyError5_3", code)
			}
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("5e")
		if code != "MyError5_3" {
			t.Errorf("5e code = %q, want MyError5_3", code)
		}
		as.Success()
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "1,1_1,1_1e,1_2,1_2e,1_3,2,3,4,4_1,4_2,5,5_1,5_2,5_2e,5_3,5_3e,5_1e,5e")
	wantSuccess(t, res)
}
