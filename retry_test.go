package asyncsteps_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// scripted returns a Retry attempt that records "aN@time" and then, after
// the attempt's entry of after, fails with its code or, for "", succeeds
// with "okN". A step that waits for a Deferred answer stands for an
// upstream call, on the TestTool's clock.
func scripted(tr *tracer, tt *asyncsteps.TestTool, after []time.Duration, codes []string) asyncsteps.RepeatFunc {
	since := stopwatch(tt)
	return func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("a%d@%v", i, since())
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			h := as.Tool().Deferred(after[i], func() {
				if codes[i] != "" {
					as.Error(codes[i], "try "+string(rune('0'+i)))
					return
				}
				as.Success("ok" + string(rune('0'+i)))
			})
			as.SetCancel(func(asyncsteps.AsyncSteps) { tr.addf("c%d", i); h.Cancel() })
		})
	}
}

func TestRetrySucceedsWithTheArgsOfTheFirstAttemptThatSucceeds(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	ms := time.Millisecond
	attempt := scripted(tr, tt, []time.Duration{300 * ms, 50 * ms, 30 * ms}, []string{"", asyncsteps.CommError, ""})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Timeout: 200 * ms}, attempt)
		as.Add(tr.stepArgs("next"))
	})
	res := run(t, r, tt)
	wantSuccess(t, res)
	// The first attempt times out, the second fails (the cancel handler of
	// a failing step runs as the error unwinds, docs/DESIGN.md#cancel-handlers),
	// the third answers; the step after Retry gets its args.
	wantTrace(t, tr, "a0@0s,c0,a1@200ms,c1,a2@250ms,next[ok2]")
	if got := tt.Now().Sub(asyncsteps.TestToolEpoch); got != 280*ms {
		t.Errorf("virtual time %v, want 280ms", got)
	}
	// The failures retried are recorded like any error an error handler
	// swallowed: the last one is the second attempt's.
	if st := r.State(); st.ErrorInfo != "try 1" {
		t.Errorf("ErrorInfo %q, want %q", st.ErrorInfo, "try 1")
	}
}

func TestRetryThatSucceedsAtOnceRecordsNoError(t *testing.T) {
	r, tt := newFlow()
	var got []any
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Label: "up"}, func(as asyncsteps.AsyncSteps, i int) {
			as.Success(i, "first")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { got = args })
	})
	wantSuccess(t, run(t, r, tt))
	wantArgs(t, "args after Retry", got, 0, "first")
	// No LoopBreak was raised to leave the loop of attempts.
	st := r.State()
	if st.ErrorInfo != "" || st.LastException != nil || st.AsyncStack != nil {
		t.Errorf("ErrorInfo %q, LastException %v, AsyncStack %v; want all empty", st.ErrorInfo, st.LastException, st.AsyncStack)
	}
}

func TestRetryFailsWithTheLastAttemptsError(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	ms := time.Millisecond
	attempt := scripted(tr, tt, []time.Duration{10 * ms, 10 * ms, 10 * ms}, []string{asyncsteps.Timeout, asyncsteps.ConnectError, asyncsteps.CommError})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3}, attempt)
		as.Add(tr.step("not reached"))
	}, tr.handler("outer"))
	res := run(t, r, tt)
	wantError(t, res.Err, asyncsteps.CommError, "try 2")
	wantTrace(t, tr, "a0@0s,c0,a1@10ms,c1,a2@20ms,c2,outer:CommError")
}

func TestRetryStopsAtAnErrorNotRetryable(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	attempt := scripted(tr, tt, []time.Duration{0, 0}, []string{asyncsteps.InvalidRequest, ""})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, attempt)
	}, tr.handler("outer"))
	wantError(t, run(t, r, tt).Err, asyncsteps.InvalidRequest, "try 0")
	wantTrace(t, tr, "a0@0s,c0,outer:InvalidRequest")
}

func TestRetryWaitsTheBackoffOnTheToolsClock(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	ms := time.Millisecond
	attempt := scripted(tr, tt, []time.Duration{5 * ms, 5 * ms, 5 * ms, 5 * ms},
		[]string{asyncsteps.CommError, asyncsteps.CommError, asyncsteps.CommError, ""})
	var asked []int
	o := asyncsteps.RetryOptions{Attempts: 4, Backoff: func(n int) time.Duration {
		asked = append(asked, n)
		if n == 2 {
			return 0 // at once
		}
		return time.Duration(n) * 100 * ms
	}}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Retry(as, o, attempt) })
	wantSuccess(t, run(t, r, tt), "ok3")
	// 5ms, then 100ms of backoff; 5ms, none; 5ms, then 300ms.
	wantTrace(t, tr, "a0@0s,c0,a1@105ms,c1,a2@110ms,c2,a3@415ms")
	wantArgs(t, "Backoff calls", []any{asked}, []int{1, 2, 3})
}

func TestRetryCancelledDuringTheBackoffStopsItsTimer(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	attempt := scripted(tr, tt, []time.Duration{0, 0}, []string{asyncsteps.CommError, ""})
	o := asyncsteps.RetryOptions{Attempts: 2, Backoff: func(int) time.Duration { return time.Hour }}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Retry(as, o, attempt) })
	ch := r.Promise()
	tt.NextEvent() // the flow starts
	tt.NextEvent() // the first attempt fails: the backoff's timer is armed
	noResult(t, ch)
	if tt.Pending() != 1 {
		t.Fatalf("%d events pending during the backoff, want 1 (its timer)", tt.Pending())
	}
	r.Cancel()
	drive(t, tt)
	res := result(t, ch)
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	wantTrace(t, tr, "a0@0s,c0")
	if got := tt.Now().Sub(asyncsteps.TestToolEpoch); got != 0 {
		t.Errorf("virtual time %v after the cancel, want 0: the backoff's timer was not cancelled", got)
	}
}

func TestRetryIsNotRetriedOnAnOuterTimeout(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	ms := time.Millisecond
	attempt := scripted(tr, tt, []time.Duration{time.Hour}, []string{""})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(50 * ms)
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 5, Timeout: time.Second}, attempt)
	}, tr.handler("outer"))
	wantError(t, run(t, r, tt).Err, asyncsteps.Timeout, "")
	wantTrace(t, tr, "a0@0s,c0,outer:Timeout")
}

func TestRetryCustomRetryableSeesTheFailure(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	attempt := scripted(tr, tt, []time.Duration{0, 0, 0}, []string{"Busy", asyncsteps.CommError, ""})
	var seen []string
	var o asyncsteps.RetryOptions
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		o = asyncsteps.RetryOptions{Attempts: 3, Retryable: func(code string) bool {
			seen = append(seen, code+"/"+as.State().ErrorInfo)
			return code == "Busy"
		}}
		asyncsteps.Retry(as, o, attempt)
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.CommError, "try 1")
	wantTrace(t, tr, "a0@0s,c0,a1@0s,c1")
	wantArgs(t, "Retryable calls", []any{seen}, []string{"Busy/try 0", "CommError/try 1"})
}

func TestRetryBreakAndContinueWithItsLabel(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 4, Label: "up"}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("a%d", i)
			if i == 0 {
				as.Continue("up")
			}
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Break("up") })
		})
		as.Add(tr.stepArgs("next"))
		// Continue on the last attempt ends the Retry like Break.
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 1, Label: "one"}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("b%d", i)
			as.Continue("one")
		})
		as.Add(tr.stepArgs("last"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "a0,a1,next[],b0,last[]")
}

// decorated is an AsyncSteps of another package, as a decorator would be.
type decorated struct{ asyncsteps.AsyncSteps }

func TestRetryMisuse(t *testing.T) {
	cases := []struct {
		name  string
		retry func(as asyncsteps.AsyncSteps)
		info  string
	}{
		{"nil attempt", func(as asyncsteps.AsyncSteps) { asyncsteps.Retry(as, asyncsteps.RetryOptions{}, nil) }, "Retry: nil body function"},
		{"panicking Retryable", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2, Retryable: func(string) bool { panic("no") }},
				func(as asyncsteps.AsyncSteps, _ int) { as.Error(asyncsteps.CommError, "down") })
		}, "no"},
		{"another AsyncSteps", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(decorated{as}, asyncsteps.RetryOptions{}, func(asyncsteps.AsyncSteps, int) {})
		}, "Retry: asyncsteps_test.decorated is not an AsyncSteps of this package"},
		{"panicking Backoff", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2, Backoff: func(int) time.Duration { panic("later") }},
				func(as asyncsteps.AsyncSteps, _ int) { as.Error(asyncsteps.CommError, "down") })
		}, "later"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.retry(as) })
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, c.info)
		})
	}
}

func TestRetryZeroAttemptsMakesOne(t *testing.T) {
	r, tt := newFlow()
	n := 0
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{}, func(as asyncsteps.AsyncSteps, _ int) {
			n++
			as.Error(asyncsteps.CommError, "down")
		})
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.CommError, "down")
	if n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestRetryAsParallelBranches(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		for _, name := range []string{"x", "y"} {
			asyncsteps.Retry(p, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("%s%d", name, i)
				if i == 0 {
					as.Error(asyncsteps.Timeout, "")
				}
			})
		}
		as.Add(tr.step("joined"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "x0,y0,x1,y1,joined")
}

// A model Root with a Retry runs in its clones, each with attempts of its
// own.
func TestRetryInClonedModels(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	model := asyncsteps.New(asyncsteps.WithTool(tt))
	tr := &tracer{}
	asyncsteps.Retry(model, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("a%d", i)
		if i == 0 {
			as.Error(asyncsteps.CommError, "down")
		}
		as.Success(i)
	})
	for range 2 {
		wantSuccess(t, run(t, model.Clone(), tt), 1)
	}
	wantTrace(t, tr, "a0,a1,a0,a1")
}

// A Retryable that retries every code is not asked about Break and
// Continue: they are no failure of the attempt, and go on to their loop,
// the Retry's own or an outer one, as in a Repeat.
func TestRetryBreakAndContinueAreNeverRetried(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	var asked []string
	everything := func(code string) bool { asked = append(asked, code); return true }
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Repeat(2, func(as asyncsteps.AsyncSteps, j int) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Retryable: everything}, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("a%d.%d", j, i)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					if j == 0 {
						as.Continue("outer")
					}
					as.Break("outer")
				})
			})
			as.Add(tr.step("not reached"))
		}, "outer")
		as.Add(tr.stepArgs("after outer"))
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Retryable: everything}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("b%d", i)
			if i == 0 {
				as.Error(asyncsteps.InvalidRequest, "retried")
			}
			as.Break()
		})
		as.Add(tr.stepArgs("after break"))
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Retryable: everything}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("c%d", i)
			if i == 0 {
				as.Continue()
			}
			as.Success(i)
		})
		as.Add(tr.stepArgs("after continue"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "a0.0,a1.0,after outer[],b0,b1,after break[],c0,c1,after continue[1]")
	wantArgs(t, "Retryable calls", []any{asked}, []string{asyncsteps.InvalidRequest})
}

// A Tool may return a nil Handle for Deferred: the backoff's timer then
// cannot be cancelled, and a cancel during the backoff must not make the
// engine's own cancel handler panic, which would leave that panic in
// ErrorInfo and LastException in place of the attempt's failure.
func TestRetryCancelledDuringTheBackoffOnANilHandleTool(t *testing.T) {
	tool := &manualTool{}
	r := asyncsteps.New(asyncsteps.WithTool(nilHandleTool{tool}))
	n := 0
	asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Backoff: func(int) time.Duration { return time.Hour }}, func(as asyncsteps.AsyncSteps, _ int) {
		n++
		as.Error(asyncsteps.CommError, "down")
	})
	ch := r.Promise()
	for len(tool.queue) > 0 { // the first attempt fails: the backoff waits
		c := tool.queue[0]
		tool.queue = tool.queue[1:]
		c.fire()
	}
	r.Cancel()
	tool.run() // the backoff's timer, which could not be cancelled, fires
	res := result(t, ch)
	if !errors.Is(res.Err, context.Canceled) || n != 1 {
		t.Errorf("Result.Err = %v after %d attempts, want one matching context.Canceled after 1", res.Err, n)
	}
	st := r.State()
	var e *asyncsteps.Error
	if !errors.As(st.LastException, &e) || e.Code != asyncsteps.CommError || e.Info != "down" || st.ErrorInfo != "down" {
		t.Errorf("ErrorInfo %q, LastException %v; want the attempt's failure, CommError %q", st.ErrorInfo, st.LastException, "down")
	}
}

// Continue starts the next attempt at once: the backoff is between a
// failed attempt and the next, and Continue is no failure.
func TestRetryContinueSkipsTheBackoff(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	since := stopwatch(tt)
	o := asyncsteps.RetryOptions{Attempts: 3, Backoff: func(int) time.Duration { return time.Minute }}
	asyncsteps.Retry(r, o, func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("a%d@%v", i, since())
		switch i {
		case 0:
			as.Continue()
		case 1:
			as.Error(asyncsteps.CommError, "down")
		}
		as.Success(i)
	})
	wantSuccess(t, run(t, r, tt), 2)
	wantTrace(t, tr, "a0@0s,a1@0s,a2@1m0s")
}
