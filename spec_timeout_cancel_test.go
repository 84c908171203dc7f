package asyncsteps_test

// This file is long on purpose: one test per rule of timeouts and
// cancellation (spec 1.3), in the order docs/DESIGN.md states them.

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Spec 1.3 and docs/DESIGN.md#timeouts: a step that set a timeout and was not completed in
// time fails with Timeout and an empty ErrorInfo (even when an earlier error
// left an info behind), after its own cancel handler ran.
func TestTimeoutRaisesTimeoutWithEmptyInfo(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	clock := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Error("Earlier", "earlier info")
	}, func(as asyncsteps.AsyncSteps, code string) {
		as.Success()
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("read")
		as.SetCancel(tr.cancel("cancel read"))
		as.SetTimeout(30 * time.Second)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("onerror:%s:%q@%v", code, as.State().ErrorInfo, clock())
	})
	r.Add(tr.step("not reached"))

	res := run(t, r, tt)

	wantTrace(t, &tr, `read,cancel read,onerror:Timeout:""@30s`)
	wantError(t, res.Err, asyncsteps.Timeout, "")
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the flow ended", n)
	}
}

// docs/DESIGN.md#timeouts: an error handler may recover from a timeout with Success.
func TestTimeoutCanBeRecoveredByHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(time.Second)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e:%s", code)
		as.Success("fallback")
	})
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "e:Timeout,next[fallback]")
	wantSuccess(t, res)
}

// docs/DESIGN.md#timeouts: the timeout of a step covers its sub-steps; on expiry the
// running sub-steps are cancelled innermost first (their error handlers do
// not run), then the step's own cancel handler, then its error handler and
// the outer ones see Timeout with empty info.
func TestTimeoutCoversSubStepsAndCancelsThemInnermostFirst(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	clock := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("outer")
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("timed")
			as.SetTimeout(time.Second)
			as.SetCancel(tr.cancel("c timed"))
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("sub")
				as.SetCancel(tr.cancel("c sub"))
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("subsub")
					as.SetCancel(tr.cancel("c subsub"))
				}, tr.handler("e subsub"))
			}, tr.handler("e sub"))
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("e timed:%s:%q@%v", code, as.State().ErrorInfo, clock())
		})
		as.Add(tr.step("not reached"))
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e outer:%s:%q", code, as.State().ErrorInfo)
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, `outer,timed,sub,subsub,c subsub,c sub,c timed,e timed:Timeout:""@1s,e outer:Timeout:""`)
	wantError(t, res.Err, asyncsteps.Timeout, "")
}

// docs/DESIGN.md#timeouts: calling SetTimeout again re-arms the timer; only the last
// duration counts and the first timer is no longer an event.
func TestSetTimeoutAgainReArms(t *testing.T) {
	cases := []struct {
		name        string
		first, last time.Duration
	}{
		{"longer", time.Second, 3 * time.Second},
		{"shorter", 5 * time.Second, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			clock := stopwatch(tt)
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.SetTimeout(c.first)
				as.SetTimeout(c.last)
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("e:%s@%v", code, clock())
			})

			ch := r.Promise()
			tt.Advance(0)
			if n := tt.Pending(); n != 1 {
				t.Errorf("Pending() = %d while waiting, want 1 (one armed timer)", n)
			}
			drive(t, tt)
			res := result(t, ch)

			wantTrace(t, &tr, "e:Timeout@"+c.last.String())
			wantError(t, res.Err, asyncsteps.Timeout, "")
		})
	}
}

// docs/DESIGN.md#timeouts: completing the step disarms its timer, which then no longer
// counts as an event of the tool (so Run does not move the clock to it).
func TestCompletionDisarmsTimeout(t *testing.T) {
	cases := []struct {
		name     string
		complete func(as asyncsteps.AsyncSteps)
		trace    string
		code     string
	}{
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success("ok") }, "step,next[ok]", ""},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Ext", "ext info") }, "step,c step,e:Ext:ext info", "Ext"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			clock := stopwatch(tt)
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("step")
				as.SetTimeout(time.Second)
				as.SetCancel(tr.cancel("c step"))
				as.Tool().Deferred(500*time.Millisecond, func() { c.complete(as) })
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("e:%s:%s", code, as.State().ErrorInfo)
			})
			r.Add(tr.stepArgs("next"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			if c.code == "" {
				wantSuccess(t, res)
			} else {
				wantError(t, res.Err, c.code, "ext info")
			}
			if d := clock(); d != 500*time.Millisecond {
				t.Errorf("clock moved by %v, want 500ms: the disarmed timer still ran", d)
			}
			if tt.HasEvents() {
				t.Errorf("HasEvents() = true (Pending %d) after the flow ended", tt.Pending())
			}
		})
	}
}

// docs/DESIGN.md#timeouts: a timeout set and then completed in the same callback, or
// covering sub-steps that finish in time, leaves no timer behind.
func TestTimeoutDisarmedWhenStepFinishesInTime(t *testing.T) {
	cases := []struct {
		name string
		step asyncsteps.StepFunc
		took time.Duration
	}{
		{"same callback", func(as asyncsteps.AsyncSteps, args ...any) {
			as.SetTimeout(time.Hour)
			as.Success("done")
		}, 0},
		{"sub-steps in time", func(as asyncsteps.AsyncSteps, args ...any) {
			as.SetTimeout(time.Hour)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.WaitExternal()
				as.Tool().Deferred(time.Minute, func() { as.Success("done") })
			})
		}, time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			clock := stopwatch(tt)
			r.Add(c.step)

			res := run(t, r, tt)

			wantSuccess(t, res, "done")
			if d := clock(); d != c.took {
				t.Errorf("clock moved by %v, want %v", d, c.took)
			}
			if tt.HasEvents() {
				t.Errorf("HasEvents() = true (Pending %d) after the flow ended", tt.Pending())
			}
		})
	}
}

// docs/DESIGN.md#cancel-handlers: while an error unwinds, each level's cancel handler runs before
// that level's error handler, innermost first, the failing step's own too; a
// level where a handler recovers stops it, and cancel handlers of steps that
// completed normally never run.
func TestCancelHandlersRunInnermostFirstDuringUnwinding(t *testing.T) {
	cases := []struct {
		name    string
		recover bool
		trace   string
		code    string
	}{
		{"unhandled", false, "s0,s1,s2,c2,e2:E,c1,e1:E,c0,e0:E", "E"},
		{"recovered at level 1", true, "s0,s1,s2,c2,e2:E,c1,e1:E,after s1,after s0", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("s0")
				as.SetCancel(tr.cancel("c0"))
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("s1")
					as.SetCancel(tr.cancel("c1"))
					as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
						tr.add("s2")
						as.SetCancel(tr.cancel("c2"))
						as.Error("E")
					}, tr.handler("e2"))
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("e1:%s", code)
					if c.recover {
						as.Success()
					}
				})
				as.Add(tr.step("after s1"))
			}, tr.handler("e0"))
			r.Add(tr.step("after s0"))

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			if c.code == "" {
				wantSuccess(t, res)
			} else {
				wantError(t, res.Err, c.code, "")
			}
		})
	}
}

// docs/DESIGN.md#cancel-handlers, #timeouts and #unhandled-errors: Root.Cancel
// runs the cancel handlers of the running
// steps, innermost first, and no error handler; the Result error matches
// context.Canceled, the unhandled-error function is not called and the
// cancelled timer is no longer an event.
func TestRootCancelRunsCancelHandlersOnly(t *testing.T) {
	for _, viaPromise := range []bool{true, false} {
		name := "Execute"
		if viaPromise {
			name = "Promise"
		}
		t.Run(name, func(t *testing.T) {
			var tr tracer
			unhandled := 0
			r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				unhandled++
				tr.addf("unhandled:%s", err.Code)
			}))
			clock := stopwatch(tt)
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("s0")
				as.SetCancel(tr.cancel("c0"))
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("s1")
					as.SetCancel(tr.cancel("c1"))
					as.SetTimeout(time.Hour)
				}, tr.handler("e1"))
			}, tr.handler("e0"))
			r.Add(tr.step("not reached"))

			var ch <-chan asyncsteps.Result
			if viaPromise {
				ch = r.Promise()
			} else {
				r.Execute()
			}
			tt.Advance(time.Second)
			wantTrace(t, &tr, "s0,s1")
			r.Cancel()
			drive(t, tt)

			wantTrace(t, &tr, "s0,s1,c1,c0")
			if unhandled != 0 {
				t.Errorf("unhandled-error function called %d times after Cancel", unhandled)
			}
			if tt.HasEvents() {
				t.Errorf("HasEvents() = true (Pending %d) after Cancel", tt.Pending())
			}
			if d := clock(); d != time.Second {
				t.Errorf("clock moved by %v, want 1s: the cancelled timer ran", d)
			}
			if viaPromise {
				res := result(t, ch)
				if !errors.Is(res.Err, context.Canceled) {
					t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
				}
			}
		})
	}
}

// Spec 1.6 and 2.2.2: WaitExternal prevents the implicit success; the step
// waits, with no event left on the tool, until Success is called, here from
// the test goroutine while the loop is idle.
func TestWaitExternalPreventsImplicitSuccess(t *testing.T) {
	var tr tracer
	var waiting asyncsteps.AsyncSteps
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("wait")
		waiting = as
		as.WaitExternal()
	})
	r.Add(tr.stepArgs("next"))

	ch := r.Promise()
	drive(t, tt)
	wantTrace(t, &tr, "wait")
	noResult(t, ch)
	if tt.HasEvents() {
		t.Errorf("HasEvents() = true (Pending %d) while only waiting externally", tt.Pending())
	}
	if !waiting.IsValid() {
		t.Error("IsValid() = false on a waiting step")
	}

	waiting.Success("x")
	drive(t, tt)

	wantTrace(t, &tr, "wait,next[x]")
	wantSuccess(t, result(t, ch))
}

// API: Success and Error may be called from another goroutine while the step
// waits for an external event (after WaitExternal, SetCancel or SetTimeout);
// the flow goes on on its own loop.
func TestExternalCompletionFromAnotherGoroutine(t *testing.T) {
	waits := []struct {
		name   string
		wait   func(as asyncsteps.AsyncSteps, tr *tracer)
		cancel bool // the wait installs cancel handler "c"
	}{
		{"WaitExternal", func(as asyncsteps.AsyncSteps, tr *tracer) { as.WaitExternal() }, false},
		{"SetCancel", func(as asyncsteps.AsyncSteps, tr *tracer) { as.SetCancel(tr.cancel("c")) }, true},
		{"SetTimeout", func(as asyncsteps.AsyncSteps, tr *tracer) { as.SetTimeout(time.Hour) }, false},
	}
	completions := []struct {
		name     string
		complete func(as asyncsteps.AsyncSteps)
		fail     bool
	}{
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success("ext") }, false},
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Ext", "ext info") }, true},
	}
	for _, w := range waits {
		for _, c := range completions {
			t.Run(c.name+" after "+w.name, func(t *testing.T) {
				var tr tracer
				start, done := make(chan struct{}), make(chan struct{})
				r, tt := newFlow()
				clock := stopwatch(tt)
				r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					tr.add("step")
					w.wait(as, &tr)
					go func() {
						defer close(done)
						<-start
						c.complete(as)
					}()
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("e:%s:%s", code, as.State().ErrorInfo)
				})
				r.Add(tr.stepArgs("next"))

				ch := r.Promise()
				tt.Advance(time.Second)
				noResult(t, ch)
				close(start)
				waitFor(t, done)
				drive(t, tt)
				res := result(t, ch)

				switch {
				case !c.fail:
					wantTrace(t, &tr, "step,next[ext]")
					wantSuccess(t, res)
				case w.cancel:
					wantTrace(t, &tr, "step,c,e:Ext:ext info")
					wantError(t, res.Err, "Ext", "ext info")
				default:
					wantTrace(t, &tr, "step,e:Ext:ext info")
					wantError(t, res.Err, "Ext", "ext info")
				}
				if d := clock(); d != time.Second {
					t.Errorf("clock moved by %v, want 1s", d)
				}
			})
		}
	}
}

// docs/DESIGN.md#stale-steps: Success or Error called from another goroutine on a step that
// already completed has no effect on the flow, which may be waiting in a
// later step, and does not panic.
func TestLateExternalCallsHaveNoEffect(t *testing.T) {
	var tr tracer
	var as1, as2 asyncsteps.AsyncSteps
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("1")
		as1 = as
		as.WaitExternal()
	}, tr.handler("e1"))
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.addf("2%v", args)
		as2 = as
		as.WaitExternal()
	}, tr.handler("e2"))
	r.Add(tr.stepArgs("3"))

	inGoroutine := func(f func()) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		waitFor(t, done)
	}

	ch := r.Promise()
	drive(t, tt)
	inGoroutine(func() { as1.Success("a") })
	drive(t, tt)
	wantTrace(t, &tr, "1,2[a]")

	valid := true
	inGoroutine(func() {
		as1.Error("Late", "late info")
		as1.Success("late")
		valid = as1.IsValid()
	})
	drive(t, tt)
	wantTrace(t, &tr, "1,2[a]")
	noResult(t, ch)
	if valid {
		t.Error("IsValid() = true on a completed step")
	}

	inGoroutine(func() { as2.Success("b") })
	drive(t, tt)

	wantTrace(t, &tr, "1,2[a],3[b]")
	wantSuccess(t, result(t, ch))
}

// docs/DESIGN.md#stale-steps: when a goroutine completes a waiting step twice in a row, the
// first completion wins and the second has no effect.
func TestFirstExternalCompletionWins(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	done := make(chan struct{})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.WaitExternal()
		go func() {
			defer close(done)
			as.Success("first")
			as.Error("Late", "late info")
			as.Success("second")
		}()
	}, tr.handler("e"))
	r.Add(tr.stepArgs("next"))

	ch := r.Promise()
	drive(t, tt)
	waitFor(t, done)
	drive(t, tt)

	wantTrace(t, &tr, "next[first]")
	wantSuccess(t, result(t, ch))
}

// docs/DESIGN.md#cancel-handlers: cancel handlers run once, even when Root.Cancel is called twice;
// the flow gives exactly one Result.
func TestRootCancelTwiceRunsCancelHandlersOnce(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("wait")
		as.SetCancel(tr.cancel("cancel"))
	}, tr.handler("e"))

	ch := r.Promise()
	drive(t, tt)
	r.Cancel()
	r.Cancel()
	drive(t, tt)

	wantTrace(t, &tr, "wait,cancel")
	if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
}

// Spec 1.9: a repeated SetCancel overrides the earlier one in the scope of
// the step.
func TestSetCancelAgainReplacesHandler(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetCancel(tr.cancel("first"))
		as.SetCancel(tr.cancel("second"))
		as.SetTimeout(time.Second)
	}, tr.handler("e"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "second,e:Timeout")
	wantError(t, res.Err, asyncsteps.Timeout, "")
}

// docs/DESIGN.md#timeouts: nested timeouts each cover their own step: the inner one
// expires first, its handler recovers, and the outer timer is disarmed when
// the outer step completes.
func TestNestedTimeoutsEachCoverTheirStep(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	clock := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(5 * time.Second)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.SetTimeout(time.Second)
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("inner:%s@%v", code, clock())
			as.Success("recovered")
		})
	}, tr.handler("outer"))
	r.Add(tr.stepArgs("next"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "inner:Timeout@1s,next[recovered]")
	wantSuccess(t, res)
	if d := clock(); d != time.Second {
		t.Errorf("clock moved by %v, want 1s: the outer timer was not disarmed", d)
	}
}

// docs/DESIGN.md#timeouts and #stale-steps: once a step timed out, a late Success from the
// goroutine it was waiting for has no effect.
func TestLateSuccessAfterTimeoutHasNoEffect(t *testing.T) {
	var tr tracer
	var waiting asyncsteps.AsyncSteps
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		waiting = as
		as.SetTimeout(time.Second)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e:%s", code)
		as.Success("fallback")
	})
	r.Add(tr.stepArgs("next"))

	ch := r.Promise()
	drive(t, tt)
	done := make(chan struct{})
	go func() {
		defer close(done)
		waiting.Success("late")
	}()
	waitFor(t, done)
	drive(t, tt)

	wantTrace(t, &tr, "e:Timeout,next[fallback]")
	wantSuccess(t, result(t, ch))
}

// docs/DESIGN.md#timeouts: a timeout on a step covers the parallel it added: every branch
// is cancelled, then the step's handler sees Timeout.
func TestTimeoutCancelsParallelBranches(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(time.Second)
		p := as.Parallel(tr.handler("parallel"))
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("1")
			as.SetCancel(tr.cancel("c1"))
		}, tr.handler("e1"))
		p.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add("2")
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				tr.add("2.1")
				as.SetCancel(tr.cancel("c2.1"))
			}, tr.handler("e2.1"))
		}, tr.handler("e2"))
	}, tr.handler("step"))

	res := run(t, r, tt)

	got := tr.String()
	if got != "1,2,2.1,c1,c2.1,step:Timeout" && got != "1,2,2.1,c2.1,c1,step:Timeout" {
		t.Errorf("trace = %s, want 1,2,2.1, then c1 and c2.1 in any order, then step:Timeout", got)
	}
	wantError(t, res.Err, asyncsteps.Timeout, "")
}

// docs/DESIGN.md#timeouts: an error from a sub-step disarms the timer of the step that
// covers it, even when the step's handler recovers.
func TestErrorInSubStepDisarmsParentTimeout(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	clock := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(time.Hour)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Error("E") })
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("e:%s", code)
		as.Success("done")
	})

	res := run(t, r, tt)

	wantTrace(t, &tr, "e:E")
	wantSuccess(t, res, "done")
	if d := clock(); d != 0 || tt.HasEvents() {
		t.Errorf("clock moved by %v, HasEvents() = %v: the timer was not disarmed", d, tt.HasEvents())
	}
}

// docs/DESIGN.md#timeouts: when an outer and an inner timeout fall due at the same
// instant, the one armed first (the outer) fires: it cancels the inner step,
// whose timer is disarmed and whose error handler does not run.
func TestSimultaneousTimeoutsOuterArmedFirstWins(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.SetTimeout(time.Second)
		as.SetCancel(tr.cancel("c outer"))
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.SetTimeout(time.Second)
			as.SetCancel(tr.cancel("c inner"))
		}, tr.handler("e inner"))
	}, tr.handler("e outer"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "c inner,c outer,e outer:Timeout")
	wantError(t, res.Err, asyncsteps.Timeout, "")
	if tt.HasEvents() {
		t.Errorf("HasEvents() = true (Pending %d): the inner timer is left", tt.Pending())
	}
}

// API: Root.Cancel is asynchronous: called from inside a step it runs no
// cancel handler before the step's callback returns.
func TestRootCancelIsAsynchronous(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add("step")
		as.SetCancel(tr.cancel("cancel"))
		r.Cancel()
		tr.add("Cancel returned")
	}, tr.handler("e"))
	r.Add(tr.step("not reached"))

	res := run(t, r, tt)

	wantTrace(t, &tr, "step,Cancel returned,cancel")
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
}

// docs/DESIGN.md#cancel-handlers: a cancel requested before an error is
// raised wins, also when a callback of the flow itself requests it and an
// error follows in that callback, in a handler or in a cancel handler on
// the way: the unwinding stops where the flow sees the cancel, the cancel
// handlers of the steps still running run, innermost first, no error
// handler runs after it, the unhandled-error function is not called, and
// the Result matches context.Canceled.
func TestCancelRequestedBeforeAnErrorWins(t *testing.T) {
	cases := []struct {
		name  string
		add   func(r *asyncsteps.Root, tr *tracer)
		trace string
	}{
		{"Error after Cancel in a step", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("outer:cancel"))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("step:cancel"))
					r.Cancel()
					as.Error("Failed", "after the cancel")
				}, tr.handler("step:onerror"))
			}, tr.handler("outer:onerror"))
		}, "step:cancel,outer:cancel"},
		{"handler returns after Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("outer:cancel"))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Error("Failed", "before the cancel")
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("step:onerror:%s", code)
					r.Cancel()
				})
			}, tr.handler("outer:onerror"))
		}, "step:onerror:Failed,outer:cancel"},
		// The error goes no further than the handler: the step around
		// it is cancelled with the others, in the order of the branches,
		// not first as the next level the error would have reached.
		{"handler in a branch returns after Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel(tr.handler("parallel:onerror"))
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(tr.cancel("first:cancel")) })
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("second:cancel"))
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.Error("Failed", "before the cancel")
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("step:onerror:%s", code)
						r.Cancel()
					})
				}, tr.handler("second:onerror"))
			})
		}, "step:onerror:Failed,first:cancel,second:cancel"},
		{"handler raises after Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Error("Failed", "before the cancel")
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("step:onerror:%s", code)
					r.Cancel()
					as.Error("Replaced")
				})
			}, tr.handler("outer:onerror"))
		}, "step:onerror:Failed"},
		{"branch fails after Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := as.Parallel(tr.handler("parallel:onerror"))
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(tr.cancel("sibling:cancel")) })
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					r.Cancel()
					as.Error("Failed")
				}, tr.handler("branch:onerror"))
			})
		}, "sibling:cancel"},
		{"cancel handler on the way calls Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("outer:cancel"))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("step:cancel")
						r.Cancel()
					})
					as.Error("Failed", "before the cancel")
				}, tr.handler("step:onerror"))
			}, tr.handler("outer:onerror"))
		}, "step:cancel,outer:cancel"},
		{"timeout whose cancel handler calls Cancel", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("inner:cancel")
						r.Cancel()
					})
				}, tr.handler("inner:onerror"))
			}, tr.handler("outer:onerror"))
		}, "inner:cancel"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				tr.addf("unhandled:%s", err.Code)
			}))
			c.add(r, &tr)
			r.Add(tr.step("not reached"))
			r.Execute()
			drive(t, tt)
			wantTrace(t, &tr, c.trace)
			if r.Running() {
				t.Error("Execute: the flow still runs")
			}

			tr = tracer{}
			c.add(r, &tr)
			res := run(t, r, tt)
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
			}
			wantTrace(t, &tr, c.trace)
			syncWantIdle(t, tt)
		})
	}
}

// A panic in a cancel handler never crashes the process. While an error
// unwinds, it replaces the error with InternalError (the handlers further
// out see that); during Root.Cancel there is no error to replace: the flow
// still ends as cancelled, with the panic recorded in LastException and
// logged. Under a step that times out it replaces nothing either: the
// handlers see the Timeout, and only the log tells of the panic. Nor does
// it when a cancel requested before the error wins over it: no handler
// runs, and the panic, or a runtime.Goexit, is logged once.
func TestPanicInCancelHandler(t *testing.T) {
	t.Run("while an error unwinds", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		var tr tracer
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { panic("in cancel") })
				as.Error("E1")
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("outer:%s:%s", code, as.State().ErrorInfo)
		})

		res := run(t, r, tt)

		wantTrace(t, &tr, "outer:InternalError:in cancel")
		wantError(t, res.Err, asyncsteps.InternalError, "in cancel")
		if out := log.String(); out != "" {
			t.Errorf("logged %q: the handlers saw the panic", out)
		}
	})
	t.Run("during Root.Cancel", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { panic("in cancel") })
		})
		ch := r.Promise()
		tt.Run()
		r.Cancel()
		tt.Run()

		res := <-ch
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Result.Err = %v, want context.Canceled", res.Err)
		}
		var p *asyncsteps.PanicError
		if !errors.As(r.State().LastException, &p) || p.Value != "in cancel" {
			t.Fatalf("LastException = %v, want the cancel handler's panic", r.State().LastException)
		}
		wantCancelPanicLogged(t, log.String(), "in cancel")
	})
	t.Run("under a timeout", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		var tr tracer
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { panic("in cancel") })
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("outer:%s:%s", code, as.State().ErrorInfo)
			as.Success()
		})

		if res := run(t, r, tt); res.Err != nil {
			t.Fatalf("Result.Err = %v, want nil: the handler recovered", res.Err)
		}
		wantTrace(t, &tr, "outer:Timeout:")
		wantCancelPanicLogged(t, log.String(), "in cancel")
	})
	t.Run("Goexit during Root.Cancel", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		l := asyncsteps.NewLoop() // a Loop goes on with a new goroutine
		defer l.Close()
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { runtime.Goexit() })
			r.Cancel()
		})
		if _, err := r.Run(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
		want := "asyncsteps: runtime.Goexit in cancel handler"
		if out := log.String(); !strings.Contains(out, want) || !strings.Contains(out, "t.FailNow") {
			t.Errorf("log lacks %q and its info:\n%s", want, out)
		}
	})
}

// The cancel of a step that requests a cancel of its flow, then raises an
// error, panics or calls runtime.Goexit. The cancel wins over the error
// (TestCancelRequestedBeforeAnErrorWins): the flow ends cancelled and no
// error handler sees the fault, which is logged once, as under the cancel
// itself. Before, the fault replaced the error being unwound, then the
// cancel won, and nothing told of it but LastException.
func TestCancelHandlerFaultUnderAWinningCancelIsLogged(t *testing.T) {
	for _, c := range []struct {
		name, want string
		fault      func()
	}{
		{"panic", `msg="asyncsteps: panic in cancel handler" panic="in cancel"`, func() { panic("in cancel") }},
		{"Goexit", `msg="asyncsteps: runtime.Goexit in cancel handler"`, runtime.Goexit},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			l := asyncsteps.NewLoop() // a Loop goes on with a new goroutine
			defer l.Close()
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("cancel")
						c.fault()
					})
					r.Cancel()
					as.Error("E")
				})
			}, tr.handler("outer"))
			if _, err := r.Run(context.Background()); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v, want context.Canceled", err)
			}
			wantTrace(t, &tr, "cancel")
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", log, c.want)
			}
		})
	}
}

// A cancel handler's panic in a level an error unwinds through, with no
// error handler there, and a cancel that wins over it at a level further
// out, before any handler has seen it: requested by the cancel handler of
// the step around (a rule of Cancel handlers), after the error has left
// the level of the panic, through a Parallel branch too. No handler sees
// the panic, which replaced the error, so it is logged once, as when the
// cancel wins at its own level. Before, only that level's look at the
// request decided the log, and the panic went unreported but for
// LastException.
func TestCancelHandlerFaultUnderACancelFurtherOutIsLogged(t *testing.T) {
	for _, c := range []struct {
		name  string
		trace string
		add   func(as asyncsteps.AsyncSteps, tr *tracer, step asyncsteps.StepFunc)
	}{
		{"a step", "inner cancel,outer cancel", func(as asyncsteps.AsyncSteps, _ *tracer, step asyncsteps.StepFunc) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Add(step) })
		}},
		{"a Parallel branch", "inner cancel,sibling cancel,outer cancel", func(as asyncsteps.AsyncSteps, tr *tracer, step asyncsteps.StepFunc) {
			p := as.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("sibling cancel") })
			})
			p.Add(step)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) {
					tr.add("outer cancel")
					r.Cancel()
				})
				c.add(as, &tr, func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("inner cancel")
						panic("in cancel")
					})
					as.Error("E")
				})
			}, tr.handler("outer"))
			res := run(t, r, tt)

			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
			}
			wantTrace(t, &tr, c.trace)
			out := log.String()
			wantCancelPanicLogged(t, out, "in cancel")
			if n := strings.Count(out, "asyncsteps:"); n != 1 {
				t.Errorf("the engine logged %d lines, want 1:\n%s", n, out)
			}
		})
	}
}

// A cancel handler's fault in a level an error unwinds through once a
// cancel has been requested, where what ends the goroutine also closes
// the loop: the handler itself (Close, then runtime.Goexit), or the
// StepError hook told of its panic. The loop runs nothing more, so the
// unwinding never goes on to the look at the request, and the flow ends
// with "the flow's loop is closed": no handler sees the fault, which is
// logged once, as the handler ends. Before, the log waited for that look
// on the next goroutine, which never came.
func TestCancelHandlerFaultUnderACancelIsLoggedAsItsLoopCloses(t *testing.T) {
	for _, c := range []struct {
		name, want string
		fault      func(l *asyncsteps.Loop)
		hook       func(l *asyncsteps.Loop) *asyncsteps.Hooks
	}{
		{
			name: "Goexit of the handler",
			want: `msg="asyncsteps: runtime.Goexit in cancel handler"`,
			fault: func(l *asyncsteps.Loop) {
				l.Close()
				runtime.Goexit()
			},
		},
		{
			name:  "Goexit of the StepError hook",
			want:  `msg="asyncsteps: panic in cancel handler" panic="in cancel"`,
			fault: func(*asyncsteps.Loop) { panic("in cancel") },
			hook: func(l *asyncsteps.Loop) *asyncsteps.Hooks {
				return &asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
					if err.Info == "in cancel" {
						l.Close()
						runtime.Goexit()
					}
				}}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			l := asyncsteps.NewLoop()
			if c.hook != nil {
				l.SetHooks(c.hook(l))
			}
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("cancel")
						c.fault(l)
					})
					r.Cancel()
					as.Error("E")
				})
			}, tr.handler("outer"))
			res := <-r.Promise()
			<-l.Done()

			wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
			wantTrace(t, &tr, "cancel")
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("the engine logged:\n%s\nwant %s, once", log, c.want)
			}
		})
	}
}

// wantCancelPanicLogged checks that out, a captured log, tells of the
// panic of a cancel handler, with its value and stack.
func wantCancelPanicLogged(t *testing.T, out, value string) {
	t.Helper()
	for _, want := range []string{"asyncsteps: panic in cancel handler", "panic=\"" + value + "\"", "stack="} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// A misuse in a cancel handler is reported as a panic there is: a cancel
// handler that drives its TestTool into its own flow (here it reaches the
// step's own timeout, which waits until the handler returns), or one cut
// short by the abort of its call on the AsyncSteps of another flow's
// running step. While an error unwinds, the InternalError replaces that
// error, for the handlers further out to see; under a cancel it replaces
// nothing and is logged, "asyncsteps: misuse in cancel handler" with its
// info. Before, the reentry was only noted in the State (the error
// handler saw the code of the error it replaced next to the reentry's
// ErrorInfo), and the abort left no trace at all.
func TestMisuseInCancelHandler(t *testing.T) {
	t.Run("reentry while an error unwinds", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		var tr tracer
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.SetCancel(func(asyncsteps.AsyncSteps) { tt.Advance(2 * time.Second) })
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1") })
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("outer:%s:%s", code, as.State().ErrorInfo)
		})

		res := run(t, r, tt)

		wantTrace(t, &tr, "outer:InternalError:"+reentryInfo)
		wantError(t, res.Err, asyncsteps.InternalError, reentryInfo)
		if out := log.String(); out != "" {
			t.Errorf("logged %q: the handlers saw the misuse", out)
		}
	})
	t.Run("reentry during Root.Cancel", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.SetCancel(func(asyncsteps.AsyncSteps) { tt.Advance(2 * time.Second) })
		})
		ch := r.Promise()
		tt.NextEvent()
		r.Cancel()
		drive(t, tt)

		if res := result(t, ch); !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Result.Err = %v, want context.Canceled", res.Err)
		}
		wantError(t, r.State().LastException, asyncsteps.InternalError, reentryInfo)
		wantCancelMisuseLogged(t, log.String(), reentryInfo)
	})
	t.Run("abort meant for another flow during Root.Cancel", func(t *testing.T) {
		log := asyncsteps.CaptureLog(t)
		var tr tracer
		tt := asyncsteps.NewTestTool()
		a := asyncsteps.New(asyncsteps.WithTool(tt))
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		var running asyncsteps.AsyncSteps
		b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				tr.add("B cancel")
				running.Error("FromB")
				tr.add("B cancel after")
			})
			b.Cancel()
		})
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			running = as
			chB := b.Promise()
			for len(chB) == 0 && tt.NextEvent() { // B's events, inside this callback
			}
			res := <-chB
			tr.addf("A: B ended %v", res.Err)
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("A handler %s", code)
		})

		run(t, a, tt)

		wantTrace(t, &tr, "B cancel,A: B ended context canceled,A handler FromB")
		wantError(t, b.State().LastException, asyncsteps.InternalError, wantAbortedInfo)
		wantCancelMisuseLogged(t, log.String(), wantAbortedInfo)
	})
}

// wantCancelMisuseLogged checks that out, a captured log, tells once of
// the misuse of a cancel handler, with its info.
func wantCancelMisuseLogged(t *testing.T, out, info string) {
	t.Helper()
	want := `msg="asyncsteps: misuse in cancel handler" info="` + info + `"`
	if strings.Count(out, "asyncsteps:") != 1 || !strings.Contains(out, want) {
		t.Errorf("the engine logged:\n%s\nwant %s, once", out, want)
	}
}

// A cancel handler cut short by the abort of its call on another flow's
// running step, made from a deferred call as the handler calls
// runtime.Goexit: the engine recovers the abort, a misuse as in
// TestMisuseInCancelHandler, but the Goexit goes on and ends the
// goroutine all the same, as after a panicking defer
// (TestHostileGoexitWithAPanickingDefer). The flow must go on from the
// next goroutine: under Root.Cancel it ends cancelled with the misuse
// logged; while an error unwinds, the misuse replaces the error, for the
// handler further out. Before, the abort was taken for the handler's end:
// nothing was queued to go on after the Goexit, and the flow never ended.
// Flow A's step drives the tool, on a goroutine the Goexit ends, to run
// flow B, whose cancel handler calls A's AsyncSteps.
func TestMisuseInCancelHandlerDuringItsGoexit(t *testing.T) {
	for _, c := range []struct {
		name, trace, logged string
		fail                bool // B's step fails, else B is cancelled
	}{
		{name: "during Root.Cancel", trace: "B cancel", logged: wantAbortedInfo},
		{name: "while an error unwinds", trace: "B cancel,B handler InternalError:" + wantAbortedInfo, fail: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := asyncsteps.CaptureLog(t)
			var tr tracer
			tt := asyncsteps.NewTestTool()
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			var running asyncsteps.AsyncSteps
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("B cancel")
						defer running.Error("FromB")
						runtime.Goexit()
					})
					if c.fail {
						as.Error("E")
					}
					b.Cancel()
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("B handler %s:%s", code, as.State().ErrorInfo)
			})
			var chB <-chan asyncsteps.Result
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				running = as
				chB = b.Promise()
				for len(chB) == 0 && tt.NextEvent() { // B's events, inside this callback
				}
			})
			chA := a.Promise()
			driveDying(t, tt)

			wantError(t, result(t, chA).Err, asyncsteps.InternalError, goexitInfo)
			resB := result(t, chB)
			if c.fail {
				wantError(t, resB.Err, asyncsteps.InternalError, wantAbortedInfo)
			} else if !errors.Is(resB.Err, context.Canceled) {
				t.Errorf("B: Result.Err = %v, want context.Canceled", resB.Err)
			}
			wantTrace(t, &tr, c.trace)
			if c.logged == "" {
				if out := log.String(); out != "" {
					t.Errorf("logged %q: the handler saw the misuse", out)
				}
				return
			}
			wantCancelMisuseLogged(t, log.String(), c.logged)
		})
	}
}
