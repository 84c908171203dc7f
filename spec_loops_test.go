package asyncsteps_test

// This file is long on purpose: one test per rule of Loop, Repeat, ForEach,
// Break and Continue (spec 1.8 to 1.10).

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Spec 1.8: Loop runs its body until Break;
// docs/DESIGN.md#loop-and-branch-arguments: the step after the
// loop gets no args.
func TestLoopRunsUntilBreak(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	i := 0
	r.Loop(func(as asyncsteps.AsyncSteps) {
		tr.addf("%d", i)
		i++
		if i == 4 {
			as.Break()
			tr.add("not aborted")
		}
	})
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "0,1,2,3,after[]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#arguments-between-levels and #loop-and-branch-arguments: the
// sub-steps of a loop body run within their
// iteration; the body gets no incoming args, nor does the step after the
// loop, whatever the body's last sub-step succeeded with.
func TestLoopBodySubStepsRunWithinIteration(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("in") })
	r.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("body%d", i)
		as.Add(tr.stepArgs("sub"))
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("out") })
	})
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "body0,sub[],body1,sub[],after[]")
	wantSuccess(t, res)
}

// Spec 1.8 and 2.2.4: Repeat calls its body count times with i from 0;
// docs/DESIGN.md#break-and-continue: a count of 0 or less runs no iteration.
func TestRepeatRunsCountIterations(t *testing.T) {
	cases := []struct {
		count int
		trace string
	}{
		{3, "0,1,2,after[]"},
		{1, "0,after[]"},
		{0, "after[]"},
		{-1, "after[]"},
		{-100, "after[]"},
	}
	for _, c := range cases {
		t.Run("count "+strconv.Itoa(c.count), func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("in") })
			r.Repeat(c.count, func(as asyncsteps.AsyncSteps, i int) { tr.addf("%d", i) })
			r.Add(tr.stepArgs("after"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantSuccess(t, res)
		})
	}
}

// A long loop runs every iteration (no recursion limit, no lost iteration).
func TestRepeatManyIterations(t *testing.T) {
	const n = 10000
	r, tt := newFlow()
	count, last := 0, -1
	r.Repeat(n, func(as asyncsteps.AsyncSteps, i int) {
		count++
		last = i
	})

	wantSuccess(t, run(t, r, tt))
	if count != n || last != n-1 {
		t.Errorf("ran %d iterations, last i = %d; want %d and %d", count, last, n, n-1)
	}
}

type color string

func seq2(pairs ...any) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for i := 0; i < len(pairs); i += 2 {
			if !yield(pairs[i].(string), pairs[i+1].(int)) {
				return
			}
		}
	}
}

// API: ForEach over a slice or array (int keys), a map (sorted keys), an
// iter.Seq2 (its own order) and a *State (user variables sorted by name).
func TestForEachCollections(t *testing.T) {
	stateOf := func(tt *asyncsteps.TestTool) *asyncsteps.State {
		st := asyncsteps.New(asyncsteps.WithTool(tt)).State()
		st.Set("b", 2)
		st.Set("a", "one")
		st.Set("c", nil)
		st.ErrorInfo = "not a user variable"
		return st
	}
	cases := []struct {
		name       string
		collection func(tt *asyncsteps.TestTool) any
		trace      string
	}{
		{"slice", func(*asyncsteps.TestTool) any { return []string{"apple", "banana"} }, "0(int)=apple,1(int)=banana,after[]"},
		{"empty slice", func(*asyncsteps.TestTool) any { return []string{} }, "after[]"},
		{"nil slice", func(*asyncsteps.TestTool) any { return []int(nil) }, "after[]"},
		{"array", func(*asyncsteps.TestTool) any { return [3]int{7, 8, 9} }, "0(int)=7,1(int)=8,2(int)=9,after[]"},
		{"map with string keys", func(*asyncsteps.TestTool) any {
			return map[string]int{"b": 2, "c": 3, "a": 1}
		}, "a(string)=1,b(string)=2,c(string)=3,after[]"},
		{"map with int keys sorted numerically", func(*asyncsteps.TestTool) any {
			return map[int]string{10: "ten", 2: "two", 33: "thirty-three", -1: "minus one"}
		}, "-1(int)=minus one,2(int)=two,10(int)=ten,33(int)=thirty-three,after[]"},
		{"map with float keys sorted", func(*asyncsteps.TestTool) any {
			return map[float64]string{2.5: "x", -1: "y", 10: "z"}
		}, "-1(float64)=y,2.5(float64)=x,10(float64)=z,after[]"},
		{"map with named string keys", func(*asyncsteps.TestTool) any {
			return map[color]int{"red": 1, "blue": 2, "green": 3}
		}, "blue(asyncsteps_test.color)=2,green(asyncsteps_test.color)=3,red(asyncsteps_test.color)=1,after[]"},
		{"empty map", func(*asyncsteps.TestTool) any { return map[string]int{} }, "after[]"},
		{"iter.Seq2", func(*asyncsteps.TestTool) any { return seq2("z", 1, "a", 2, "m", 3) }, "z(string)=1,a(string)=2,m(string)=3,after[]"},
		{"*State", func(tt *asyncsteps.TestTool) any { return stateOf(tt) }, "a(string)=one,b(string)=2,c(string)=<nil>,after[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success("in") })
			r.ForEach(c.collection(tt), func(as asyncsteps.AsyncSteps, k, v any) {
				tr.addf("%v(%T)=%v", k, k, v)
			})
			r.Add(tr.stepArgs("after"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantSuccess(t, res)
		})
	}
}

// API: ForEach over anything but a slice, array, map, iter.Seq2 or *State
// is an InternalError step error; the body never runs.
func TestForEachUnsupportedCollectionRaisesInternalError(t *testing.T) {
	cases := []struct {
		name       string
		collection any
	}{
		{"int", 42},
		{"struct", struct{ A int }{1}},
		{"func", func() {}},
		{"iter.Seq", iter.Seq[int](func(yield func(int) bool) { yield(1) })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("step")
				as.ForEach(c.collection, func(as asyncsteps.AsyncSteps, k, v any) { tr.add("body") })
			}, tr.handler("e"))
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "step,e:InternalError")
			wantCode(t, res.Err, asyncsteps.InternalError)
		})
	}
}

// Spec 1.8 and 2.2.4: Break and Continue, with and without a label, from the
// inner loop's body or from a sub-step nested in it: no label or the inner
// label acts on the inner loop, the outer label unwinds the inner loop and
// acts on the outer one.
func TestBreakAndContinueAcrossNestedLoops(t *testing.T) {
	actions := []struct {
		name  string
		act   func(as asyncsteps.AsyncSteps)
		trace string
	}{
		{"Break()", func(as asyncsteps.AsyncSteps) { as.Break() },
			"o0,0.0,0.0+,0.1,o0 end,o1,1.0,1.0+,1.1,o1 end,after"},
		{"Break(INNER)", func(as asyncsteps.AsyncSteps) { as.Break("INNER") },
			"o0,0.0,0.0+,0.1,o0 end,o1,1.0,1.0+,1.1,o1 end,after"},
		{"Break(OUTER)", func(as asyncsteps.AsyncSteps) { as.Break("OUTER") },
			"o0,0.0,0.0+,0.1,after"},
		{"Continue()", func(as asyncsteps.AsyncSteps) { as.Continue() },
			"o0,0.0,0.0+,0.1,0.2,0.2+,o0 end,o1,1.0,1.0+,1.1,1.2,1.2+,o1 end,after"},
		{"Continue(INNER)", func(as asyncsteps.AsyncSteps) { as.Continue("INNER") },
			"o0,0.0,0.0+,0.1,0.2,0.2+,o0 end,o1,1.0,1.0+,1.1,1.2,1.2+,o1 end,after"},
		{"Continue(OUTER)", func(as asyncsteps.AsyncSteps) { as.Continue("OUTER") },
			"o0,0.0,0.0+,0.1,o1,1.0,1.0+,1.1,after"},
	}
	depths := []struct {
		name string
		wrap func(as asyncsteps.AsyncSteps, f func(as asyncsteps.AsyncSteps))
	}{
		{"in body", func(as asyncsteps.AsyncSteps, f func(as asyncsteps.AsyncSteps)) { f(as) }},
		{"in nested sub-step", func(as asyncsteps.AsyncSteps, f func(as asyncsteps.AsyncSteps)) {
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) { f(as) })
			})
		}},
	}
	for _, a := range actions {
		for _, d := range depths {
			t.Run(a.name+" "+d.name, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				r.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
					tr.addf("o%d", i)
					as.Repeat(3, func(as asyncsteps.AsyncSteps, j int) {
						tr.addf("%d.%d", i, j)
						d.wrap(as, func(as asyncsteps.AsyncSteps) {
							if j == 1 {
								a.act(as)
							}
							tr.addf("%d.%d+", i, j)
						})
					}, "INNER")
					as.Add(func(as asyncsteps.AsyncSteps, args ...any) { tr.addf("o%d end", i) })
				}, "OUTER")
				r.Add(tr.step("after"))

				res := run(t, r, tt)

				wantTrace(t, &tr, a.trace)
				wantSuccess(t, res)
			})
		}
	}
}

// Labels work on every kind of loop: Break("OUTER") from a ForEach inside a
// Loop inside a Repeat ends the outer Repeat.
func TestLabelsOnEveryLoopKind(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("repeat%d", i)
		n := 0
		as.Loop(func(as asyncsteps.AsyncSteps) {
			tr.addf("loop%d", n)
			n++
			if n == 2 {
				as.Break("MIDDLE")
			}
			as.ForEach([]string{"a", "b"}, func(as asyncsteps.AsyncSteps, k, v any) {
				tr.addf("%v", v)
				if i == 1 && v == "b" {
					as.Break("OUTER")
				}
				if v == "a" {
					as.Continue("INNER")
				}
			}, "INNER")
		}, "MIDDLE")
	}, "OUTER")
	r.Add(tr.step("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "repeat0,loop0,a,b,loop1,repeat1,loop0,a,b,after")
	wantSuccess(t, res)
}

// Spec 1.8 "inner loops and identifiers": an inner loop continues the outer
// loop by its label; Break by label ends it.
func TestInnerLoopContinuesOuterByLabelSpec18(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	results := []int{1, 2, 0, 3, 0, -1}
	next := 0
	callSomeLibrary := func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			v := results[next]
			next++
			as.Success(v)
		})
	}
	r.Loop(func(as asyncsteps.AsyncSteps) {
		tr.add("outer")
		as.Loop(func(as asyncsteps.AsyncSteps) {
			callSomeLibrary(as)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				result := args[0].(int)
				switch {
				case result < 0:
					as.Break("OUTER")
				case result == 0:
					as.Continue("OUTER")
				}
				tr.addf("got %d", result)
				as.Success(result)
			})
		})
		as.Add(tr.step("not reached"))
	}, "OUTER")
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "outer,got 1,got 2,outer,got 3,outer,after[]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#break-and-continue: error handlers between Break/Continue and its loop see
// LoopBreak/LoopCont with the label (if any) in ErrorInfo; handlers outside
// the loop see nothing.
func TestHandlersBetweenBreakAndLoopSeeLoopCodes(t *testing.T) {
	cases := []struct {
		name  string
		act   func(as asyncsteps.AsyncSteps)
		trace string
	}{
		{"Break()", func(as asyncsteps.AsyncSteps) { as.Break() },
			`s0,e:LoopBreak:"",after`},
		{"Break(L)", func(as asyncsteps.AsyncSteps) { as.Break("L") },
			`s0,e:LoopBreak:"L",after`},
		{"Continue()", func(as asyncsteps.AsyncSteps) { as.Continue() },
			`s0,e:LoopCont:"",s1,e:LoopCont:"",after`},
		{"Continue(L)", func(as asyncsteps.AsyncSteps) { as.Continue("L") },
			`s0,e:LoopCont:"L",s1,e:LoopCont:"L",after`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
					as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
						tr.addf("s%d", i)
						c.act(as)
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("e:%s:%q", code, as.State().ErrorInfo)
					})
					as.Add(tr.step("body end"))
				}, "L")
			}, tr.handler("outside loop"))
			r.Add(tr.step("after"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantSuccess(t, res)
		})
	}
}

// docs/DESIGN.md#break-and-continue: a handler that calls Success swallows Break/Continue: the
// loop body goes on after the handler's step.
func TestHandlerSuccessSwallowsBreakAndContinue(t *testing.T) {
	cases := []struct {
		name string
		act  func(as asyncsteps.AsyncSteps)
		code string
	}{
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }, asyncsteps.LoopBreak},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }, asyncsteps.LoopCont},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.addf("b%d", i)
					c.act(as)
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("h%d:%s", i, code)
					as.Success("swallowed")
				})
				as.Add(tr.stepArgs("a"))
			})
			r.Add(tr.step("after"))

			res := run(t, r, tt)

			code := c.code
			wantTrace(t, &tr, "b0,h0:"+code+",a[swallowed],b1,h1:"+code+",a[swallowed],after")
			wantSuccess(t, res)
		})
	}
}

// docs/DESIGN.md#break-and-continue: with no enclosing loop of that label, the handlers on the way
// (inside and outside the loops passed) see LoopBreak/LoopCont, then the flow
// ends with InternalError.
func TestBreakWithUnknownLabelEndsFlowWithInternalError(t *testing.T) {
	cases := []struct {
		name string
		act  func(as asyncsteps.AsyncSteps)
		code string
	}{
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break("NOPE") }, asyncsteps.LoopBreak},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue("NOPE") }, asyncsteps.LoopCont},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
					as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
						tr.addf("s%d", i)
						c.act(as)
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("inner:%s:%s", code, as.State().ErrorInfo)
					})
				}, "L")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("outer:%s:%s", code, as.State().ErrorInfo)
			})
			r.Add(tr.step("not reached"))

			res := run(t, r, tt)

			wantTrace(t, &tr, "s0,inner:"+c.code+":NOPE,outer:"+c.code+":NOPE")
			wantCode(t, res.Err, asyncsteps.InternalError)
		})
	}
}

// Spec 1.8.1: an error in a loop body, a timeout included, ends the loop
// abnormally and unwinds like any error.
func TestErrorInLoopBodyEndsLoop(t *testing.T) {
	cases := []struct {
		name  string
		fail  func(as asyncsteps.AsyncSteps)
		trace string
		code  string
	}{
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("E", "body failed") }, "0,1,2,e:E", "E"},
		{"Timeout", func(as asyncsteps.AsyncSteps) { as.SetTimeout(time.Second) }, "0,1,2,e:Timeout", asyncsteps.Timeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Repeat(5, func(as asyncsteps.AsyncSteps, i int) {
					tr.addf("%d", i)
					if i == 2 {
						c.fail(as)
					}
				})
				as.Add(tr.step("not reached"))
			}, tr.handler("e"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantCode(t, res.Err, c.code)
		})
	}
}

// Spec 1.8: Break in a ForEach over a map stops at the sorted key reached.
func TestForEachBreakStopsIteration(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.ForEach(map[string]int{"c": 3, "a": 1, "b": 2}, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v", k)
		if k == "b" {
			as.Break()
		}
	})
	r.Add(tr.step("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "a,b,after")
	wantSuccess(t, res)
}

// docs/DESIGN.md#cancel-handlers: Root.Cancel stops a loop whose body waits; nothing after it
// runs.
func TestRootCancelStopsLoop(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Loop(func(as asyncsteps.AsyncSteps) {
		tr.add("body")
		as.SetCancel(tr.cancel("cancel"))
	})
	r.Add(tr.step("not reached"))

	ch := r.Promise()
	drive(t, tt)
	r.Cancel()
	drive(t, tt)

	wantTrace(t, &tr, "body,cancel")
	if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
}

// docs/DESIGN.md#break-and-continue: Break called in an error handler inside a loop body replaces
// the error with LoopBreak and ends the loop normally.
func TestBreakInErrorHandlerEndsLoop(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("s%d", i)
			as.Error("E")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("h%d:%s", i, code)
			as.Break()
		})
	})
	r.Add(tr.stepArgs("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "s0,h0:E,after[]")
	wantSuccess(t, res)
}

// API: a map whose key type is not ordered is still visited entirely, each
// key once.
func TestForEachMapWithUnorderedKeysVisitsAll(t *testing.T) {
	type point struct{ X, Y int }
	r, tt := newFlow()
	seen := map[point]int{}
	r.ForEach(map[point]int{{1, 2}: 1, {0, 0}: 2, {5, 5}: 3}, func(as asyncsteps.AsyncSteps, k, v any) {
		seen[k.(point)] += v.(int)
	})

	wantSuccess(t, run(t, r, tt))
	if len(seen) != 3 || seen[point{1, 2}] != 1 || seen[point{0, 0}] != 2 || seen[point{5, 5}] != 3 {
		t.Errorf("visited %v", seen)
	}
}

// docs/DESIGN.md#break-and-continue with docs/DESIGN.md#parallel-branches:
// Break in a parallel branch unwinds through the
// parallel (cancelling the sibling) and ends the enclosing loop.
func TestBreakFromParallelBranchEndsLoop(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		p := as.Parallel(tr.handler("parallel"))
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("a%d", i)
			if i == 1 {
				as.SetCancel(tr.cancel("ca"))
			}
		})
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("b%d", i)
			if i == 1 {
				as.Break()
			}
		})
	})
	r.Add(tr.step("after"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "a0,b0,a1,b1,ca,parallel:LoopBreak,after")
	wantSuccess(t, res)
}

// A Continue raised in a branch of a Parallel inside a loop cancels the
// branches still running, the Parallel's error handler sees LoopCont, and
// the loop goes on with its next iteration: the steps after the Parallel
// in the iteration do not run.
func TestContinueFromParallelBranchGoesOnWithNextIteration(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		p := as.Parallel(tr.handler(fmt.Sprintf("parallel%d", i)))
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("a%d", i)
			as.SetCancel(tr.cancel(fmt.Sprintf("ca%d", i)))
			tt.Immediate(func() { as.Success() })
		})
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("b%d", i)
			if i == 1 {
				as.Continue()
			}
		})
		as.Add(tr.step(fmt.Sprintf("after%d", i)))
	})
	r.Add(tr.step("after the loop"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "a0,b0,after0,a1,b1,ca1,parallel1:LoopCont,a2,b2,after2,after the loop")
	wantSuccess(t, res)
}

// A map with NaN keys (which no lookup finds) is visited entirely, NaN keys
// first, in the order cmp.Compare gives.
func TestForEachMapWithNaNKeysVisitsAll(t *testing.T) {
	r, tt := newFlow()
	var tr tracer
	r.ForEach(map[float64]string{math.NaN(): "nan", 2: "two", 1: "one"}, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v=%v", k, v)
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "NaN=nan,1=one,2=two")
}

// A panic in an iter.Seq2 given to ForEach, which is pulled one pair per
// iteration, is an InternalError of the ForEach step like a panic in a
// step, raised where it happened (after the iterations before it): its
// handler sees it, and the flow goes on.
func TestForEachSeqPanicBecomesInternalError(t *testing.T) {
	r, tt := newFlow()
	var tr tracer
	var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
		yield(0, 10)
		panic("iterator boom")
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.ForEach(seq, func(as asyncsteps.AsyncSteps, k, v any) { tr.addf("body %v", k) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("handler %s: %s", code, as.State().ErrorInfo)
		var p *asyncsteps.PanicError
		if !errors.As(as.State().LastException, &p) || p.Value != "iterator boom" {
			t.Errorf("LastException = %#v, want the *PanicError of the iterator", as.State().LastException)
		}
		as.Success("recovered")
	})

	wantSuccess(t, run(t, r, tt), "recovered")
	wantTrace(t, &tr, "body 0,handler InternalError: iterator boom")
}

// A panic in the deferred cleanup of an iter.Seq2 that ForEach stops is
// not lost: at a Break it fails the ForEach step with InternalError, as a
// panic in the sequence does when it runs out; when an error or a cancel
// stops the loop, it acts as a panic in the loop's cancel handler
// (docs/DESIGN.md#cancel-handlers): it replaces the error, and a cancelled
// flow ends cancelled with it in LastException.
func TestForEachSeqCleanupPanicIsNotLost(t *testing.T) {
	cases := []struct {
		name, trace string
		cancelled   bool
	}{
		{"Break", "body 0,body 1,cleanup,handler InternalError: close failed", false},
		{"Error", "body 0,body 1,cleanup,handler InternalError: close failed", false},
		{"Cancel", "body 0,body 1,cleanup", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			var tr tracer
			var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
				defer func() {
					tr.add("cleanup")
					panic("close failed")
				}()
				for i := 0; yield(i, i); i++ {
				}
			}
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.ForEach(seq, func(as asyncsteps.AsyncSteps, k, _ any) {
					tr.addf("body %v", k)
					if k != 1 {
						return
					}
					switch c.name {
					case "Break":
						as.Break()
					case "Error":
						as.Error("Failed")
					case "Cancel":
						as.WaitExternal()
					}
				})
				as.Add(tr.step("after"))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler %s: %s", code, as.State().ErrorInfo)
				as.Success("recovered")
			})
			ch := r.Promise()
			drive(t, tt)
			if c.cancelled {
				r.Cancel()
				drive(t, tt)
			}
			res := result(t, ch)
			wantTrace(t, &tr, c.trace)
			if c.cancelled {
				if !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result.Err = %v, want a cancel", res.Err)
				}
			} else {
				wantSuccess(t, res, "recovered")
			}
			var p *asyncsteps.PanicError
			if ex := r.State().LastException; !errors.As(ex, &p) || p.Value != "close failed" {
				t.Errorf("LastException = %#v, want the *PanicError of the cleanup", ex)
			}
		})
	}
}
