package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// pullTraced returns the pairs (i, d) for each d of ds as a sequence that
// traces each pair as it is pulled ("pull i") and its deferred cleanup
// ("cleanup"), at the virtual time of tt.
func pullTraced(tr *tracer, tt *asyncsteps.TestTool, ds ...time.Duration) iter.Seq2[int, time.Duration] {
	return func(yield func(int, time.Duration) bool) {
		defer traceAt(tr, tt, "cleanup")
		for i, d := range ds {
			traceAt(tr, tt, fmt.Sprint("pull ", i))
			if !yield(i, d) {
				return
			}
		}
	}
}

// itemAfter returns a ForEachLimit function whose item i traces its start,
// waits d on the flow's tool in a step of its own (a cancel stops the
// timer and traces "cancel i"), then, in a next step, calls end, or traces
// "end i" when end is nil.
func itemAfter(tr *tracer, tt *asyncsteps.TestTool, end func(as steps, i int)) func(as steps, i int, d time.Duration) {
	return func(as steps, i int, d time.Duration) {
		traceAt(tr, tt, fmt.Sprint("start ", i))
		as.Add(func(as steps, _ ...any) {
			h := as.Tool().Deferred(d, func() { as.Success() })
			as.SetCancel(func(steps) {
				h.Cancel()
				traceAt(tr, tt, fmt.Sprint("cancel ", i))
			})
		})
		as.Add(func(as steps, _ ...any) {
			if end != nil {
				end(as, i)
				return
			}
			traceAt(tr, tt, fmt.Sprint("end ", i))
		})
	}
}

const msec = time.Millisecond

// At most limit items run at once; each pair is pulled, in the
// sequence's order, only once an item has ended to make room for it, and
// the step after the ForEachLimit runs once the sequence has run out and
// the last item has ended. The step gives no args.
func TestForEachLimitRunsAtMostLimitItemsInOrder(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		as.Success("before")
	}).Add(func(as steps, _ ...any) {
		asyncsteps.ForEachLimit(as, pullTraced(&tr, tt, 30*msec, 10*msec, 20*msec, 5*msec, 5*msec), 2, itemAfter(&tr, tt, nil))
	}).Add(func(as steps, args ...any) {
		traceAt(&tr, tt, fmt.Sprint("after ", args))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "pull 0@0s,pull 1@0s,start 0@0s,start 1@0s,"+
		"end 1@10ms,pull 2@10ms,start 2@10ms,"+
		"end 0@30ms,pull 3@30ms,start 3@30ms,end 2@30ms,pull 4@30ms,start 4@30ms,"+
		"end 3@35ms,cleanup@35ms,end 4@35ms,after []@35ms")
}

// An empty sequence succeeds at once, and a limit above the number of
// pairs starts them all.
func TestForEachLimitEmptyAndShortSequences(t *testing.T) {
	for _, c := range []struct {
		name  string
		ds    []time.Duration
		trace string
	}{
		{"empty", nil, "cleanup@0s,after@0s"},
		{"shorter than the limit", []time.Duration{20 * msec, 10 * msec},
			"pull 0@0s,pull 1@0s,cleanup@0s,start 0@0s,start 1@0s,end 1@10ms,end 0@20ms,after@20ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, c.ds...), 5, itemAfter(&tr, tt, nil))
			r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
			wantSuccess(t, run(t, r, tt))
			wantTrace(t, &tr, c.trace)
		})
	}
}

// The first error of an item that its own steps do not recover from is
// the step's, as a Parallel branch's: the items running are cancelled,
// the sequence is stopped and no further pair is pulled, then the step's
// own handler and the outer ones see the error with its info.
func TestForEachLimitItemErrorCancelsTheOthers(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		asyncsteps.ForEachLimit(as, pullTraced(&tr, tt, 30*msec, 10*msec, 20*msec, 5*msec), 3,
			itemAfter(&tr, tt, func(as steps, i int) {
				if i == 2 {
					as.Error(asyncsteps.CommError, "upstream failed")
				}
				traceAt(&tr, tt, fmt.Sprint("end ", i))
				as.Success()
			}), func(as steps, code string) {
				traceAt(&tr, tt, "onerror "+code+": "+as.State().ErrorInfo)
			})
		as.Add(tr.step("not after a failure"))
	}, func(as steps, code string) {
		traceAt(&tr, tt, "outer "+code)
		as.Success("recovered")
	})
	wantSuccess(t, run(t, r, tt), "recovered")
	wantTrace(t, &tr, "pull 0@0s,pull 1@0s,pull 2@0s,start 0@0s,start 1@0s,start 2@0s,"+
		"end 1@10ms,pull 3@10ms,start 3@10ms,end 3@15ms,cleanup@15ms,"+
		"cancel 0@20ms,onerror CommError: upstream failed@20ms,outer CommError@20ms")
}

// The sequence is stopped by the error of an item while pairs are left:
// no further pair is pulled, and its cleanup runs as the step's cancel
// handler, after the items' own.
func TestForEachLimitItemErrorStopsTheSequence(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, 30*msec, 10*msec, 20*msec), 2,
		itemAfter(&tr, tt, func(as steps, i int) { as.Error("Failed") }))
	wantError(t, run(t, r, tt).Err, "Failed", "")
	wantTrace(t, &tr, "pull 0@0s,pull 1@0s,start 0@0s,start 1@0s,cancel 0@10ms,cleanup@10ms")
}

// An item whose own error handler recovers has ended as one that
// succeeded: the other items go on, and the next pair is taken.
func TestForEachLimitItemHandlerRecovers(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	outcomes := make([]string, 3)
	asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, 30*msec, 10*msec, 5*msec), 2, func(as steps, i int, d time.Duration) {
		as.Add(func(as steps, _ ...any) {
			itemAfter(&tr, tt, func(as steps, i int) {
				if i == 1 {
					as.Error(asyncsteps.CommError, "down")
				}
				as.Success("ok")
			})(as, i, d)
		}, func(as steps, code string) {
			traceAt(&tr, tt, fmt.Sprint("onerror ", i, " ", code))
			as.Success(code)
		})
		asyncsteps.Then(as, func(as steps, outcome string) { outcomes[i] = outcome })
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "pull 0@0s,pull 1@0s,start 0@0s,start 1@0s,onerror 1 CommError@10ms,"+
		"pull 2@10ms,start 2@10ms,cleanup@15ms")
	if got := strings.Join(outcomes, ","); got != "ok,CommError,ok" {
		t.Errorf("outcomes = %s, want ok,CommError,ok", got)
	}
}

// Continue in an item ends it as a success would: its later steps do not
// run and the next pair is taken. Break ends it and stops the sequence
// at once (its cleanup runs then): no further pair is taken, the items
// running go on to their end, and the step then succeeds.
func TestForEachLimitContinueAndBreak(t *testing.T) {
	for _, c := range []struct {
		name  string
		trace string
	}{
		{"Continue", "pull 0@0s,pull 1@0s,start 0@0s,start 1@0s,Continue 1@10ms,pull 2@10ms,start 2@10ms," +
			"pull 3@10ms,start 3@10ms,cleanup@10ms,end 0@30ms,after@30ms"},
		{"Break", "pull 0@0s,pull 1@0s,start 0@0s,start 1@0s,Break 1@10ms,cleanup@10ms,end 0@30ms,after@30ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, 30*msec, 10*msec, 0, 0), 2, func(as steps, i int, d time.Duration) {
				if d == 0 {
					traceAt(&tr, tt, fmt.Sprint("start ", i))
					return
				}
				as.Add(func(as steps, _ ...any) {
					itemAfter(&tr, tt, func(as steps, i int) {
						if i == 1 {
							traceAt(&tr, tt, fmt.Sprint(c.name, " ", i))
							if c.name == "Break" {
								as.Break()
							}
							as.Continue()
						}
						traceAt(&tr, tt, fmt.Sprint("end ", i))
						as.Success()
					})(as, i, d)
				})
				as.Add(func(as steps, _ ...any) {
					if i == 1 {
						tr.add("not after " + c.name)
					}
				})
			})
			r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
			wantSuccess(t, run(t, r, tt))
			wantTrace(t, &tr, c.trace)
		})
	}
}

// A Break after the sequence has run out, or a second one, only ends its
// item; one that comes once another item failed the step is dropped with
// it.
func TestForEachLimitBreakOnceTheSequenceIsOut(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, 10*msec, 20*msec, 30*msec), 4,
		itemAfter(&tr, tt, func(as steps, i int) {
			traceAt(&tr, tt, fmt.Sprint("Break ", i))
			as.Break()
		}))
	r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "pull 0@0s,pull 1@0s,pull 2@0s,cleanup@0s,start 0@0s,start 1@0s,start 2@0s,"+
		"Break 0@10ms,Break 1@20ms,Break 2@30ms,after@30ms")
}

// A Break or Continue labelled for a loop around the step leaves it as
// one from a Parallel branch: the items running are cancelled, the
// sequence stopped, the step's handler sees it, and the loop takes it.
func TestForEachLimitLabelledBreakAndContinueGoToTheirLoop(t *testing.T) {
	for _, c := range []struct {
		name  string
		trace string
	}{
		{"Break", "iteration 0,start 0@0s,start 1@0s,cancel 0@10ms,cleanup@10ms,onerror LoopBreak: outer@10ms,after@10ms"},
		{"Continue", "iteration 0,start 0@0s,start 1@0s,cancel 0@10ms,cleanup@10ms,onerror LoopCont: outer@10ms," +
			"iteration 1,start 0@10ms,start 1@10ms,cancel 0@20ms,cleanup@20ms,onerror LoopCont: outer@20ms,after@20ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Repeat(2, func(as steps, n int) {
				tr.addf("iteration %d", n)
				seq := func(yield func(int, time.Duration) bool) {
					defer traceAt(&tr, tt, "cleanup")
					_ = yield(0, 30*msec) && yield(1, 10*msec) && yield(2, 10*msec)
				}
				asyncsteps.ForEachLimit(as, seq, 2, itemAfter(&tr, tt, func(as steps, i int) {
					if c.name == "Break" {
						as.Break("outer")
					}
					as.Continue("outer")
				}), func(as steps, code string) {
					traceAt(&tr, tt, "onerror "+code+": "+as.State().ErrorInfo)
				})
			}, "outer")
			r.Add(func(steps, ...any) { traceAt(&tr, tt, "after") })
			wantSuccess(t, run(t, r, tt))
			wantTrace(t, &tr, c.trace)
		})
	}
}

// A loop inside an item takes its own Break and Continue.
func TestForEachLimitLoopInsideAnItemTakesItsBreak(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	asyncsteps.ForEachLimit(r, countTo(2), 2, func(as steps, i, _ int) {
		as.Repeat(3, func(as steps, n int) {
			tr.addf("%d.%d", i, n)
			if n == 1 {
				as.Break()
			}
		})
		as.Add(func(steps, ...any) { tr.addf("%d after", i) })
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "0.0,1.0,0.1,1.1,0 after,1 after")
}

// A nil sequence or function, or a limit below 1, is a misuse named for
// ForEachLimit, and so is more than one error handler: in a step, the
// step fails with it; on a Root, its next execution does.
func TestForEachLimitMisuse(t *testing.T) {
	body := func(steps, int, int) {}
	checkLimitMisuses(t, []limitMisuseCase{
		{"nil sequence", func(as steps) { asyncsteps.ForEachLimit(as, nil, 1, body) }, "ForEachLimit: nil sequence"},
		{"nil function", func(as steps) { asyncsteps.ForEachLimit[int, int](as, countTo(1), 1, nil) }, "ForEachLimit: nil function"},
		{"limit 0", func(as steps) { asyncsteps.ForEachLimit(as, countTo(1), 0, body) }, "ForEachLimit: limit must be at least 1 (0 given)"},
		{"negative limit", func(as steps) { asyncsteps.ForEachLimit(as, countTo(1), -3, body) }, "ForEachLimit: limit must be at least 1 (-3 given)"},
		{"two handlers", func(as steps) {
			asyncsteps.ForEachLimit(as, countTo(1), 1, body, func(steps, string) {}, func(steps, string) {})
		}, "ForEachLimit: more than one error handler (2 given)"},
		{"another AsyncSteps", func(as steps) { asyncsteps.ForEachLimit(decorated{as}, countTo(1), 1, body) },
			"ForEachLimit: asyncsteps_test.decorated is not an AsyncSteps of this package"},
	})
}

// limitMisuseCase is a misuse of ForEachLimit or ForEachChan: add makes it on
// as, info is the InternalError's info.
type limitMisuseCase struct {
	name string
	add  func(as steps)
	info string
}

// checkLimitMisuses makes each misuse in a step, whose flow fails with
// it, and on a Root, whose next execution does; but for "another
// AsyncSteps", whose decorator of a Root calls its Error, a misuse of its
// own.
func checkLimitMisuses(t *testing.T, cases []limitMisuseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name+"/in a step", func(t *testing.T) {
			r, tt := newFlow()
			r.Add(func(as steps, _ ...any) { c.add(as) })
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
		})
		if c.name == "another AsyncSteps" {
			continue // a decorator of a Root calls its Error, a misuse of its own
		}
		t.Run(c.name+"/on a Root", func(t *testing.T) {
			r, tt := newFlow()
			c.add(r)
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
		})
	}
}

// unwrapping is a decorator that unwraps to the AsyncSteps it wraps.
type unwrapping struct{ asyncsteps.AsyncSteps }

func (u unwrapping) Unwrap() asyncsteps.AsyncSteps { return u.AsyncSteps }

// On a decorator, the step is added to the AsyncSteps it wraps, after the
// steps added through the decorator, and the items get this package's
// AsyncSteps.
func TestForEachLimitOnADecorator(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as steps, _ ...any) {
		d := unwrapping{as}
		d.Add(tr.step("first"))
		asyncsteps.ForEachLimit(d, countTo(2), 1, func(as steps, i, _ int) {
			_, decorated := as.(unwrapping)
			tr.addf("item %d decorated %v", i, decorated)
		}).Add(tr.step("last"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "first,item 0 decorated false,item 1 decorated false,last")
}

// A panic in the sequence, as it is pulled for a next item, fails the
// step with InternalError, as an item's error: the items running are
// cancelled, and the handlers see the panic in LastException.
func TestForEachLimitSequencePanicFailsTheStep(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	seq := func(yield func(int, time.Duration) bool) {
		_ = yield(0, 30*msec) && yield(1, 10*msec)
		traceAt(&tr, tt, "pull 2")
		panic("iterator boom")
	}
	r.Add(func(as steps, _ ...any) {
		asyncsteps.ForEachLimit(as, seq, 2, itemAfter(&tr, tt, nil))
	}, func(as steps, code string) {
		traceAt(&tr, tt, "onerror "+code+": "+as.State().ErrorInfo)
		var p *asyncsteps.PanicError
		if !errors.As(as.State().LastException, &p) || p.Value != "iterator boom" {
			t.Errorf("LastException = %#v, want the *PanicError of the sequence", as.State().LastException)
		}
		as.Success("recovered")
	})
	wantSuccess(t, run(t, r, tt), "recovered")
	wantTrace(t, &tr, "start 0@0s,start 1@0s,end 1@10ms,pull 2@10ms,cancel 0@10ms,onerror InternalError: iterator boom@10ms")
}

// The StepError hook sees the panic of the sequence, pulled for a next
// item or stopped at a Break, before the cancel handlers of the items it
// cancels run, as it sees an item's error before the other items are
// cancelled: an error is told to it before the handlers it reaches.
func TestForEachLimitSequencePanicIsToldBeforeTheItemsAreCancelled(t *testing.T) {
	for _, c := range []struct{ name, trace string }{
		{"pulled", "start 0@0s,start 1@0s,end 1@10ms,pull 2@10ms," +
			"StepError InternalError: iterator boom@10ms,cancel 0@10ms,onerror InternalError@10ms"},
		{"Break", "start 0@0s,start 1@0s,end 1@10ms,cleanup@10ms," +
			"StepError InternalError: close failed@10ms,cancel 0@10ms,onerror InternalError@10ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
				traceAt(&tr, tt, "StepError "+err.Code+": "+err.Info)
			}})
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			seq := func(yield func(int, time.Duration) bool) {
				if c.name == "Break" {
					defer func() {
						traceAt(&tr, tt, "cleanup")
						panic("close failed")
					}()
				}
				if !yield(0, 30*msec) || !yield(1, 10*msec) {
					return
				}
				traceAt(&tr, tt, "pull 2")
				panic("iterator boom")
			}
			asyncsteps.ForEachLimit(r, seq, 2, itemAfter(&tr, tt, func(as steps, i int) {
				traceAt(&tr, tt, fmt.Sprint("end ", i))
				if c.name == "Break" {
					as.Break()
				}
			}), func(as steps, code string) {
				traceAt(&tr, tt, "onerror "+code)
				as.Success()
			})
			wantSuccess(t, run(t, r, tt))
			wantTrace(t, &tr, c.trace)
		})
	}
}

// A panic in the cleanup of the sequence is not lost: at a Break it fails
// the step with InternalError (the items running are cancelled); when an
// error, a timeout or a cancel stops the sequence, it acts as a panic in
// the step's cancel handler, as for ForEach: it replaces the error that
// unwinds through the step, and a cancelled flow ends cancelled with it
// in LastException. The item that raises a Break or an error runs its own
// cancel handler first, as any step the error unwinds through.
func TestForEachLimitSequenceCleanupPanicIsNotLost(t *testing.T) {
	cases := []struct {
		name, trace string
		cancelled   bool
	}{
		{"Break", "start 0,start 1,Break 1,cancel 1,cleanup,cancel 0,handler InternalError: close failed", false},
		{"Error", "start 0,start 1,Error 1,cancel 1,cancel 0,cleanup,handler InternalError: close failed", false},
		// The step is a sub-step of the one timed out: the panic
		// replaces no error there, and the Timeout, made after it, is
		// the LastException its handler sees.
		{"Timeout", "start 0,start 1,cancel 0,cancel 1,cleanup,handler Timeout: ", false},
		{"Cancel", "start 0,start 1,cancel 0,cancel 1,cleanup", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			var tr tracer
			seq := func(yield func(int, int) bool) {
				defer func() {
					tr.add("cleanup")
					panic("close failed")
				}()
				for i := 0; yield(i, i); i++ {
				}
			}
			r.Add(func(as steps, _ ...any) {
				asyncsteps.ForEachLimit(as, seq, 2, func(as steps, i, _ int) {
					tr.addf("start %d", i)
					as.SetCancel(tr.cancel(fmt.Sprint("cancel ", i)))
					if i != 1 {
						return
					}
					switch c.name {
					case "Break":
						tr.add("Break 1")
						as.Break()
					case "Error":
						tr.add("Error 1")
						as.Error("Failed")
					}
				})
				if c.name == "Timeout" {
					as.SetTimeout(10 * msec)
				}
				as.Add(tr.step("after"))
			}, func(as steps, code string) {
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
			if c.name == "Timeout" {
				return
			}
			var p *asyncsteps.PanicError
			if ex := r.State().LastException; !errors.As(ex, &p) || p.Value != "close failed" {
				t.Errorf("LastException = %#v, want the *PanicError of the cleanup", ex)
			}
		})
	}
}

// The sequence is stopped once, its cleanup run, however the step ends:
// the sequence runs out, an item fails, a timeout around the step, a
// cancel of the flow, a Break; the items running are cancelled, or go on
// to their end after a Break.
func TestForEachLimitStopsTheSequenceOnce(t *testing.T) {
	cases := []struct {
		name  string
		end   func(r *asyncsteps.Root, as steps, i int)
		err   string
		trace string
	}{
		{"run out", nil, "", "start 0@0s,start 1@0s,end 1@10ms,start 2@10ms,end 2@20ms,cleanup@20ms,end 0@30ms"},
		{"error", func(_ *asyncsteps.Root, as steps, _ int) { as.Error("Failed") }, "Failed",
			"start 0@0s,start 1@0s,cancel 0@10ms,cleanup@10ms"},
		{"timeout", nil, "Timeout", "start 0@0s,start 1@0s,end 1@10ms,start 2@10ms,cancel 0@15ms,cancel 2@15ms,cleanup@15ms"},
		{"cancel", func(r *asyncsteps.Root, _ steps, _ int) { r.Cancel() }, "cancel",
			"start 0@0s,start 1@0s,cancel 0@10ms,cleanup@10ms"},
		{"Break", func(_ *asyncsteps.Root, as steps, _ int) { as.Break() }, "",
			"start 0@0s,start 1@0s,cleanup@10ms,end 0@30ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			seq := func(yield func(int, time.Duration) bool) {
				defer traceAt(&tr, tt, "cleanup")
				_ = yield(0, 30*msec) && yield(1, 10*msec) && yield(2, 10*msec)
			}
			r.Add(func(as steps, _ ...any) {
				asyncsteps.ForEachLimit(as, seq, 2, itemAfter(&tr, tt, func(as steps, i int) {
					if i == 1 && c.end != nil {
						c.end(r, as, i)
						return
					}
					traceAt(&tr, tt, fmt.Sprint("end ", i))
					as.Success()
				}))
				if c.name == "timeout" {
					as.SetTimeout(15 * msec)
				}
			})
			res := run(t, r, tt)
			switch c.err {
			case "":
				wantSuccess(t, res)
			case "cancel":
				if !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result.Err = %v, want a cancel", res.Err)
				}
			default:
				wantCode(t, res.Err, c.err)
			}
			wantTrace(t, &tr, c.trace)
		})
	}
}

// A sequence that goes on yielding after its yield returned false (at a
// Break) panics there, which ends it, as for ForEach; the Break goes on
// as usual.
func TestForEachLimitSequenceIgnoringBreak(t *testing.T) {
	inChildFor(t, 20*time.Second, func(t *testing.T) {
		var tr tracer
		falses := 0
		r, tt := newFlow()
		asyncsteps.ForEachLimit(r, stubbornSeq(&falses), 1, func(as steps, i, _ int) {
			tr.addf("k%d", i)
			if i == 2 {
				as.Break()
			}
		})
		r.Add(tr.step("after"))
		wantSuccess(t, run(t, r, tt))
		wantTrace(t, &tr, "k0,k1,k2,after")
		if falses != 1 {
			t.Errorf("yield returned false %d times, want 1", falses)
		}
	})
}

// Items are branches of a Parallel: each is a holder of its own for a
// Mutex, so that two items do not enter one Mutex of one slot together,
// and an item does not inherit the Mutex the flow holds around the step
// (waiting for it is the deadlock a Parallel branch meets). The State is
// the flow's, shared by all.
func TestForEachLimitItemsAreBranches(t *testing.T) {
	t.Run("holders", func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		m := asyncsteps.NewMutex(1)
		asyncsteps.ForEachLimit(r, pullTraced(&tr, tt, 10*msec, 10*msec, 10*msec), 3, func(as steps, i int, d time.Duration) {
			as.Sync(m, func(as steps, _ ...any) { itemAfter(&tr, tt, nil)(as, i, d) })
			as.Add(func(as steps, _ ...any) { as.State().Set(fmt.Sprint("item ", i), i) })
		})
		wantSuccess(t, run(t, r, tt))
		wantTrace(t, &tr, "pull 0@0s,pull 1@0s,pull 2@0s,start 0@0s,end 0@10ms,start 1@10ms,cleanup@10ms,end 1@20ms,start 2@20ms,end 2@30ms")
		for i := range 3 {
			if v := r.State().Get(fmt.Sprint("item ", i)); v != i {
				t.Errorf("State item %d = %v, want %d", i, v, i)
			}
		}
	})
	t.Run("no inherited lock", func(t *testing.T) {
		r, tt := newFlow()
		m := asyncsteps.NewMutex(1)
		r.Sync(m, func(as steps, _ ...any) {
			asyncsteps.ForEachLimit(as, countTo(2), 2, func(as steps, _, _ int) {
				as.Sync(m, func(steps, ...any) { t.Error("an item entered the Mutex its flow holds") })
			})
		})
		wantCode(t, run(t, r, tt).Err, asyncsteps.InternalError)
		if info := r.State().ErrorInfo; !strings.HasPrefix(info, "Mutex deadlock") {
			t.Errorf("ErrorInfo = %q, want a Mutex deadlock", info)
		}
	})
}

// In a critical section, under a timeout of the step around it, the
// items run and the section is released once they have ended; the
// timeout cancels those still running.
func TestForEachLimitInACriticalSectionUnderATimeout(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited})
	for n := range 2 {
		r.Add(func(as steps, _ ...any) {
			as.Sync(lim, func(as steps, _ ...any) {
				traceAt(&tr, tt, fmt.Sprint("enter ", n))
				asyncsteps.ForEachLimit(as, slices.All([]time.Duration{10 * msec, 20 * msec, 30 * msec}), 2, itemAfter(&tr, tt, nil))
				as.SetTimeout(25 * msec)
			}, func(as steps, code string) {
				traceAt(&tr, tt, fmt.Sprint("onerror ", n, " ", code))
				as.Success()
			})
		})
	}
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "enter 0@0s,start 0@0s,start 1@0s,end 0@10ms,start 2@10ms,end 1@20ms,"+
		"cancel 2@25ms,onerror 0 Timeout@25ms,"+
		"enter 1@25ms,start 0@25ms,start 1@25ms,end 0@35ms,start 2@35ms,end 1@45ms,"+
		"cancel 2@50ms,onerror 1 Timeout@50ms")
}

// The deadline of Run's context times the whole step out, as a Parallel:
// the items running are cancelled and the sequence is stopped.
func TestForEachLimitUnderRunDeadline(t *testing.T) {
	for _, tool := range runTools {
		t.Run(tool.name, func(t *testing.T) {
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			seq := func(yield func(int, int) bool) {
				defer tr.add("cleanup")
				for i := 0; yield(i, i); i++ {
				}
			}
			asyncsteps.ForEachLimit(r, seq, 2, func(as steps, i, _ int) {
				tr.addf("start %d", i)
				as.SetCancel(tr.cancel(fmt.Sprint("cancel ", i)))
			}, tr.handler("onerror"))
			_, _, err := runDeadline(r, 10*msec)
			wantError(t, err, asyncsteps.Timeout, deadlineInfo)
			wantTrace(t, &tr, "start 0,start 1,cancel 0,cancel 1,cleanup,onerror:Timeout")
		})
	}
}

// Once Run's deadline has passed and a handler recovered from it, every
// step that waits fails at once; an item whose handler recovers from that
// Timeout ends, and the next item fails with Timeout as it starts: the
// step fails with it, rather than go on through an endless sequence.
func TestForEachLimitPastRunDeadlineEndsAnEndlessSequence(t *testing.T) {
	inChildFor(t, 30*time.Second, func(t *testing.T) { // the engine without it spins
		for _, tool := range runTools {
			t.Run(tool.name, func(t *testing.T) { pastRunDeadline(t, tool) })
		}
	})
}

func pastRunDeadline(t *testing.T, tool toolCase) {
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
	r.Add(func(as steps, _ ...any) {
		as.WaitExternal()
	}, func(as steps, code string) {
		tr.add("past the deadline: " + code)
		as.Success()
	})
	asyncsteps.ForEachLimit(r, countTo(1<<30), 1, func(as steps, i, _ int) {
		tr.addf("start %d", i)
		as.Add(func(as steps, _ ...any) { as.WaitExternal() }, func(as steps, code string) {
			tr.addf("item %d: %s", i, code)
			as.Success()
		})
	}, tr.handler("onerror"))
	_, _, err := runDeadline(r, 10*msec)
	wantError(t, err, asyncsteps.Timeout, deadlineInfo)
	wantTrace(t, &tr, "past the deadline: Timeout,start 0,item 0: Timeout,onerror:Timeout")
}

// AsyncStack names the item's function given to ForEachLimit, not the
// engine's step that runs it.
func TestForEachLimitAsyncStackNamesTheItemFunction(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.ForEachLimit(r, countTo(3), 2, forEachLimitFailsAt2)
	wantError(t, run(t, r, tt).Err, "Failed", "")
	stack := r.State().AsyncStack
	if len(stack) != 1 || !strings.HasSuffix(stack[0], ".forEachLimitFailsAt2") {
		t.Errorf("AsyncStack = %q, want the item's function alone", stack)
	}
}

func forEachLimitFailsAt2(as steps, i, _ int) {
	if i == 2 {
		as.Error("Failed")
	}
}

// On a Loop, the items' Await functions run at most limit at once, each
// pair's result is kept, and the sequence is a callback of the loop: Run
// called from it returns an InternalError at once rather than block the
// loop. On the fake clock of a synctest bubble, the count is exact.
func TestForEachLimitOnALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var running, most atomic.Int32
		var runErr error
		seq := func(yield func(int, string) bool) {
			inner := asyncsteps.New(asyncsteps.WithTool(loop))
			_, runErr = inner.Run(context.Background())
			for i, s := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				if !yield(i, s) {
					return
				}
			}
		}
		results := make([]string, 7)
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.ForEachLimit(r, seq, 3, func(as steps, i int, s string) {
			asyncsteps.AwaitThen(as, func(ctx context.Context) (string, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Duration(len(results)-i) * time.Millisecond)
				return strings.ToUpper(s), nil
			}, func(as steps, v string) { results[i] = v })
		})
		start := time.Now()
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantError(t, runErr, asyncsteps.InternalError,
			"Run called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow")
		if got := strings.Join(results, ""); got != "ABCDEFG" {
			t.Errorf("results %q, want ABCDEFG", got)
		}
		if n := most.Load(); n != 3 {
			t.Errorf("%d Await functions ran at once, want 3", n)
		}
		// a, b, c take 7, 6, 5 ms from 0; d, e, f start as c, b, a
		// end, at 5, 6, 7, and end at 9; g then takes 1.
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("the flow took %v, want 10ms", d)
		}
	})
}

// The close of the flow's Loop ends the flow and stops the sequence,
// once, and leaves no goroutine behind: neither iter.Pull2's nor the
// loop's.
func TestForEachLimitLoopCloseStopsTheSequence(t *testing.T) {
	before := runtime.NumGoroutine()
	loop := asyncsteps.NewLoop()
	var cleanups atomic.Int32
	waiting := make(chan struct{}, 2)
	seq := func(yield func(int, int) bool) {
		defer cleanups.Add(1)
		for i := 0; yield(i, i); i++ {
		}
	}
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.ForEachLimit(r, seq, 2, func(as steps, _, _ int) {
		as.WaitExternal()
		waiting <- struct{}{}
	})
	ch := r.Promise()
	<-waiting
	<-waiting
	loop.Close()
	wantError(t, (<-ch).Err, asyncsteps.InternalError, "the flow's loop is closed")
	<-loop.Done()
	waitGoroutines(t, before)
	if n := cleanups.Load(); n != 1 {
		t.Errorf("the sequence's cleanup ran %d times, want 1", n)
	}
}

// Close called from the sequence, on the flow's own Loop, does not wait
// for the loop, which waits for the sequence: the flow ends as a flow of
// a closed loop.
func TestForEachLimitSequenceClosesItsOwnLoop(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.ForEachLimit(r, seqOnce(loop.Close), 1, func(steps, int, int) {})
	select {
	case res := <-r.Promise():
		wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
	case <-time.After(10 * time.Second):
		t.Fatal("Close from the sequence waits for its own loop: the loop is stuck")
	}
	<-loop.Done()
}

// On the value Parallel returns, ForEachLimit adds one branch, which runs
// beside the others (a plain step's branch starts a turn before the
// ForEachLimit's items); the clones of a Root that holds a ForEachLimit
// each run it, from the start of its sequence.
func TestForEachLimitAsABranchAndInClones(t *testing.T) {
	var tr tracer
	model, tt := newFlow()
	p := model.Parallel()
	asyncsteps.ForEachLimit(p, slices.All([]string{"a", "b", "c"}), 2, func(as steps, _ int, s string) {
		tr.add(s)
		as.Add(func(steps, ...any) { tr.add(s + " done") })
	})
	p.Add(tr.step("other"))
	for range 2 {
		wantSuccess(t, run(t, model.Clone(), tt))
		tr.add("|")
	}
	wantTrace(t, &tr, "other,a,b,a done,b done,c,c done,|,other,a,b,a done,b done,c,c done,|")
}

// An error of the sequence itself (a panic or a Goexit as it is pulled, as
// the step begins or as an item ends, or in its cleanup at a Break)
// is raised at the step, not in an item: AsyncStack names the functions
// down to the step, not those of an error recorded earlier (here one that
// a handler recovered from) nor the item's function of the Break.
func TestForEachLimitSequenceErrorRecordsTheStepsStack(t *testing.T) {
	breakAt1 := func(as steps, i, _ int) {
		if i == 1 {
			as.Break()
		}
	}
	cases := []struct {
		name string
		seq  iter.Seq2[int, int]
		body func(as steps, i, _ int)
	}{
		{"panic as the step begins", func(func(int, int) bool) { panic("boom") }, nil},
		{"panic as an item ends", func(yield func(int, int) bool) {
			_ = yield(0, 0)
			panic("boom")
		}, nil},
		{"cleanup panic at a Break", func(yield func(int, int) bool) {
			defer func() { panic("boom") }()
			for i := 0; yield(i, i); i++ {
			}
		}, breakAt1},
		{"Goexit as an item ends", func(yield func(int, int) bool) {
			_ = yield(0, 0)
			runtime.Goexit()
		}, nil},
		{"cleanup Goexit at a Break", func(yield func(int, int) bool) {
			defer runtime.Goexit()
			for i := 0; yield(i, i); i++ {
			}
		}, breakAt1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			r.Add(recoversFromAnError)
			step := forEachLimitStep(c.seq, c.body)
			r.Add(step)
			ch := r.Promise()
			driveAway(tt) // a Goexit ends the goroutine that drives
			driveAway(tt)
			wantCode(t, result(t, ch).Err, asyncsteps.InternalError)
			stack := r.State().AsyncStack
			if want := runtime.FuncForPC(reflect.ValueOf(step).Pointer()).Name(); !slices.Equal(stack, []string{want}) {
				t.Errorf("AsyncStack = %q, want the step's function alone, %q", stack, want)
			}
		})
	}
}

// recoversFromAnError is a step whose sub-step fails and whose handler
// recovers.
func recoversFromAnError(as steps, _ ...any) {
	as.Add(func(as steps, _ ...any) { as.Error("Failed") }, func(as steps, _ string) { as.Success() })
}

// forEachLimitStep returns a step that adds a ForEachLimit over seq whose
// items run body (nothing when nil), two at a time.
func forEachLimitStep(seq iter.Seq2[int, int], body func(as steps, i, _ int)) asyncsteps.StepFunc {
	if body == nil {
		body = func(steps, int, int) {}
	}
	return func(as steps, _ ...any) { asyncsteps.ForEachLimit(as, seq, 2, body) }
}

// The limit counts the Await functions running, as a Mutex's slots do: an
// item whose Await step timed out, and whose handler recovered, has ended,
// but keeps its slot until the function, which ignores its context, has
// returned; the next item starts then. The step itself is not delayed: it
// succeeds once the sequence has run out and no item runs, while the last
// two functions still run. A Mutex of limit slots around the Await gives
// the same. On the fake clock of a synctest bubble, the counts and times
// are exact.
func TestForEachLimitCountsAwaitFunctionsAsAMutexDoes(t *testing.T) {
	for _, mutex := range []bool{false, true} {
		t.Run(fmt.Sprint("mutex=", mutex), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				var running, most atomic.Int32
				start := time.Now()
				var starts []string // written on the loop only
				call := func(as steps, _ ...any) {
					as.SetTimeout(time.Millisecond)
					as.Await(func(context.Context) (any, error) {
						n := running.Add(1)
						defer running.Add(-1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(10 * time.Millisecond) // ignores its context
						return nil, nil
					})
				}
				m := asyncsteps.NewMutex(2)
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				asyncsteps.ForEachLimit(r, countTo(6), 2, func(as steps, i, _ int) {
					starts = append(starts, fmt.Sprint(i, "@", time.Since(start)))
					as.Add(func(as steps, _ ...any) {
						if mutex {
							as.Sync(m, call)
							return
						}
						call(as)
					}, func(as steps, _ string) { as.Success() })
				})
				if _, err := r.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				took, left := time.Since(start), running.Load()
				time.Sleep(10 * time.Millisecond) // the functions left running return
				if n := most.Load(); n != 2 || took != 21*msec || left != 2 {
					t.Errorf("%d Await functions ran at once, the flow took %v and left %d running; want 2, 21ms, 2", n, took, left)
				}
				want := []string{"0@0s", "1@0s", "2@10ms", "3@10ms", "4@20ms", "5@20ms"}
				if !mutex && !slices.Equal(starts, want) {
					t.Errorf("items started %q, want %q", starts, want)
				}
			})
		})
	}
}

// blockedItem returns a ForEachLimit function whose item i traces its
// start, then calls an Await function that returns only once release is
// closed, under a timeout of a millisecond; the item's handler traces the
// error and recovers, so that the item ends while the function runs.
func blockedItem(tr *tracer, now func() time.Duration, release <-chan struct{}) func(as steps, i, _ int) {
	return func(as steps, i, _ int) {
		tr.addf("start %d@%v", i, now())
		as.Add(func(as steps, _ ...any) {
			as.SetTimeout(msec)
			as.Await(func(context.Context) (any, error) {
				<-release // ignores its context
				return nil, nil
			})
		}, func(as steps, code string) {
			tr.addf("item %d: %s@%v", i, code, now())
			as.Success()
		})
	}
}

// A slot that the Await function of an ended item holds matters only
// while the step runs. Once the step has ended, with the function still
// running, the function's return queues nothing on the tool and starts no
// item: the step succeeded as the sequence ran out (one item), or a cancel
// ended it while it waited for the slot, the next pair pulled (two).
func TestForEachLimitEndedStepTakesNoSlotBack(t *testing.T) {
	for _, items := range []int{1, 2} {
		t.Run(fmt.Sprint(items), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, tt := newFlow()
				var tr tracer
				release := make(chan struct{})
				asyncsteps.ForEachLimit(r, countTo(items), 1, blockedItem(&tr, func() time.Duration { return elapsed(tt) }, release))
				ch := r.Promise()
				tt.Advance(msec)
				if items == 2 {
					r.Cancel()
					tt.Run()
				}
				res := result(t, ch)
				if items == 1 && res.Err != nil || items == 2 && !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result.Err = %v, want %s", res.Err, []string{"", "nil", "one matching context.Canceled"}[items])
				}
				close(release)
				synctest.Wait() // the function has returned
				if n := tt.Pending(); n != 0 {
					t.Errorf("Pending() = %d once the function returned, want 0", n)
				}
				tt.Run()
				wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms")
			})
		})
	}
}

// The close of the Loop ends a flow whose ForEachLimit waits for a slot
// that the Await function of an ended item holds, with no item running:
// the call in flight holds the flow for Close, as for an Await step that
// waits. The sequence, pulled one pair ahead, is stopped once, and the
// function, once it returns, finds the loop closed: no goroutine is left.
func TestForEachLimitLoopCloseWhileAFunctionHoldsASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var tr tracer
		var cleanups atomic.Int32
		seq := func(yield func(int, int) bool) {
			defer cleanups.Add(1)
			for i := 0; yield(i, i); i++ {
			}
		}
		release := make(chan struct{})
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.ForEachLimit(r, seq, 1, blockedItem(&tr, func() time.Duration { return time.Since(start) }, release))
		ch := r.Promise()
		time.Sleep(2 * msec)
		synctest.Wait()
		loop.Close()
		wantError(t, (<-ch).Err, asyncsteps.InternalError, "the flow's loop is closed")
		close(release)
		<-loop.Done()
		synctest.Wait()
		wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms")
		if n := cleanups.Load(); n != 1 {
			t.Errorf("the sequence's cleanup ran %d times, want 1", n)
		}
	})
}

// ResetEvents keeps a slot given back to a TestTool by the last Await
// function of an ended item: it is the flow's own work, which nothing
// would queue again, and the next item starts when the tool runs next.
func TestForEachLimitResetEventsKeepsASlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, tt := newFlow()
		var tr tracer
		release := make(chan struct{})
		asyncsteps.ForEachLimit(r, countTo(2), 1, blockedItem(&tr, func() time.Duration { return elapsed(tt) }, release))
		ch := r.Promise()
		tt.Advance(msec)
		close(release)
		synctest.Wait() // the function has returned: its slot is queued
		if n := tt.Pending(); n != 1 {
			t.Errorf("Pending() = %d once the function returned, want 1", n)
		}
		tt.ResetEvents()
		tt.Advance(0)   // item 1 starts; its function returns at once
		synctest.Wait() // its result is queued
		tt.Run()
		if res := result(t, ch); res.Err != nil {
			t.Errorf("Result.Err = %v, want nil", res.Err)
		}
		wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms,start 1@1ms")
	})
}

// A slot given back, by the last Await function of an ended item, while
// a callback of the flow drives its TestTool (a misuse) waits until the
// callback returns, as the flow's other events do: it would start the
// next item under the callback's feet. The callback, of a Parallel's
// other branch, fails with the InternalError of the misuse, which its
// handler recovers from; the next item then starts, and the step ends.
func TestForEachLimitSlotBackWaitsForACallbackThatDrivesTheTool(t *testing.T) {
	const reentryInfo = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	synctest.Test(t, func(t *testing.T) {
		r, tt := newFlow()
		var tr tracer
		now := func() time.Duration { return elapsed(tt) }
		release := make(chan struct{})
		p := r.Parallel()
		asyncsteps.ForEachLimit(p, countTo(2), 1, blockedItem(&tr, now, release))
		p.Add(func(as steps, _ ...any) {
			as.Add(func(as steps, _ ...any) { as.SetTimeout(2 * msec) },
				func(as steps, _ string) { as.Success() }) // item 0 has ended by then
			as.Add(func(as steps, _ ...any) {
				close(release)
				synctest.Wait() // the function has returned: its slot is queued
				tr.addf("drive@%v", now())
				for tt.NextEvent() {
				}
				tr.addf("driven@%v", now())
			}, func(as steps, code string) {
				tr.addf("%s: %s", code, as.State().ErrorInfo)
				as.Success()
			})
		})
		ch := r.Promise()
		tt.Advance(2 * msec) // item 1 starts; its function returns at once
		synctest.Wait()      // its result is queued
		tt.Run()
		if res := result(t, ch); res.Err != nil {
			t.Errorf("Result.Err = %v, want nil", res.Err)
		}
		wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms,drive@2ms,driven@2ms,"+
			asyncsteps.InternalError+": "+reentryInfo+",start 1@2ms")
	})
}

// The sequence of a ForEachLimit is a callback of the flow too: a slot
// given back while the sequence drives its TestTool (a misuse) waits
// until the pull returns. It ran inside the pull, took the next pair
// from the sequence's own goroutine (iter.Pull2 panicked), and the step,
// failing, stopped the sequence from inside it: the flow hung. The step
// now fails with the InternalError of the misuse, and the slot, given
// back once the pull has returned, finds the step ended.
func TestForEachLimitSlotBackWaitsForASequenceThatDrivesTheTool(t *testing.T) {
	const reentryInfo = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	inChild(t, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, tt := newFlow()
			var tr tracer
			now := func() time.Duration { return elapsed(tt) }
			release := make(chan struct{})
			seq := func(yield func(int, int) bool) {
				defer tr.add("cleanup")
				if !yield(0, 0) {
					return
				}
				close(release)  // item 0 has ended: its function keeps the slot
				synctest.Wait() // the function has returned: its slot is queued
				tr.addf("drive@%v", now())
				for tt.NextEvent() {
				}
				tr.addf("driven@%v", now())
				yield(1, 1)
			}
			asyncsteps.ForEachLimit(r, seq, 1, blockedItem(&tr, now, release))
			ch := r.Promise()
			tt.Advance(2 * msec)
			tt.Run()
			wantError(t, result(t, ch).Err, asyncsteps.InternalError, reentryInfo)
			if n := tt.Pending(); n != 0 {
				t.Errorf("Pending() = %d once the flow ended, want 0", n)
			}
			wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms,drive@1ms,driven@1ms,cleanup")
		})
	})
}

// A slot given back, by the last Await function of an ended item, to a
// Loop that then closes before running it ends the flow with the closed
// loop's error, as any flow that loop leaves waiting: the function had
// left the loop's calls in flight as it returned, and nothing else held
// the flow, which would never have ended. The function returns while a
// callback holds the loop, and Close begins after.
func TestForEachLimitSlotBackDroppedByAClosingLoopEndsTheFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var mu sync.Mutex
		var ended []string
		record := func(err *asyncsteps.Error) {
			mu.Lock()
			defer mu.Unlock()
			ended = append(ended, err.Error())
		}
		var tr tracer
		release := make(chan struct{})
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(record))
		asyncsteps.ForEachLimit(r, countTo(2), 1, blockedItem(&tr, func() time.Duration { return time.Since(start) }, release))
		r.Execute()
		time.Sleep(2 * msec)
		synctest.Wait() // item 0 has ended, its function runs: the step waits for its slot

		hold := make(chan struct{})
		busy := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
		busy.Add(func(asyncsteps.AsyncSteps, ...any) { <-hold })
		busy.Execute()
		synctest.Wait()
		close(release)
		synctest.Wait() // the function has returned: the slot is queued behind the busy callback
		closed := make(chan struct{})
		go func() {
			loop.Close()
			close(closed)
		}()
		synctest.Wait() // Close waits for the loop
		close(hold)
		<-closed
		synctest.Wait() // the unhandled-error function runs on a goroutine of its own

		mu.Lock()
		got := slices.Clone(ended)
		mu.Unlock()
		if want := []string{asyncsteps.InternalError + ": " + closedInfo}; !slices.Equal(got, want) {
			t.Errorf("the unhandled-error function got %q, want %q", got, want)
		}
		if r.Running() {
			t.Error("the flow still runs after its loop has stopped")
		}
		wantTrace(t, &tr, "start 0@0s,item 0: Timeout@1ms")
	})
}

// Past Run's deadline, a ForEachLimit that would wait for a slot that the
// Await function of an ended item holds, no item running, fails at once
// with Timeout, as a step that waits does: the function, which ignores
// its context, does not keep the flow past the deadline.
func TestForEachLimitPastRunDeadlineWaitsForNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		release := make(chan struct{})
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as steps, _ ...any) { as.WaitExternal() }, func(as steps, code string) {
			tr.add("past the deadline: " + code)
			as.Success()
		})
		asyncsteps.ForEachLimit(r, countTo(3), 1, blockedItem(&tr, func() time.Duration { return time.Since(start) }, release), tr.handler("onerror"))
		time.AfterFunc(20*msec, func() { close(release) })
		ctx, cancel := context.WithTimeout(context.Background(), 5*msec)
		defer cancel()
		_, err := r.Run(ctx)
		took := time.Since(start)
		wantError(t, err, asyncsteps.Timeout, deadlineInfo)
		wantTrace(t, &tr, "past the deadline: Timeout,start 0@5ms,item 0: Timeout@5ms,onerror:Timeout")
		if took != 5*msec {
			t.Errorf("the flow took %v, want 5ms", took)
		}
		time.Sleep(20 * msec) // the function returns
	})
}
