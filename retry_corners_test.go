package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Corners of Retry found by review: nesting, the backoff under an outer
// timeout and a failed sibling, AsyncStack, and a model's clones on two
// loops at once.

// An unlabelled Continue is the innermost Retry's; a failure that
// leaves the inner Retry is the outer attempt's, and retried by it;
// labels reach the outer Retry from a handler of the inner one's steps.
func TestRetryNested(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("o%d", i)
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, j int) {
				tr.addf("i%d.%d", i, j)
				if i == 0 {
					as.Error(asyncsteps.CommError, "inner")
				}
				as.Continue() // the inner Retry's: its last attempt ends it
			})
			as.Add(tr.stepArgs("after inner"))
		})
		as.Add(tr.stepArgs("next"))
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Label: "o"}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("O%d", i)
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Label: "i"}, func(as asyncsteps.AsyncSteps, j int) {
				tr.addf("I%d.%d", i, j)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Error("X")
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("h:%s", code)
					if i == 0 {
						as.Continue("o")
					}
					as.Break("o")
				})
			})
			as.Add(tr.step("not reached"))
		})
		as.Add(tr.stepArgs("last"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "o0,i0.0,i0.1,o1,i1.0,i1.1,after inner[],next[],O0,I0.0,h:X,O1,I1.0,h:X,last[]")
}

// An outer step's timeout during the backoff stops its timer: the flow
// ends at the timeout, with nothing left on the clock, and no attempt is
// made after it.
func TestRetryOuterTimeoutDuringTheBackoff(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	since := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(50 * time.Millisecond)
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3, Backoff: func(int) time.Duration { return time.Hour }},
			func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("a%d@%v", i, since())
				as.Error(asyncsteps.CommError, "down")
			})
	}, tr.handler("outer"))
	ch := r.Promise()
	drive(t, tt)
	wantError(t, result(t, ch).Err, asyncsteps.Timeout, "")
	wantTrace(t, tr, "a0@0s,outer:Timeout")
	if got := since(); got != 50*time.Millisecond {
		t.Errorf("virtual time %v, want 50ms: the backoff's timer was not cancelled", got)
	}
}

// A failed sibling branch cancels a Retry in its backoff: the Parallel
// fails with the sibling's error at once.
func TestRetryInABranchCancelledDuringTheBackoff(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	since := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		asyncsteps.Retry(p, asyncsteps.RetryOptions{Attempts: 3, Backoff: func(int) time.Duration { return time.Hour }},
			func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("a%d@%v", i, since())
				as.Error(asyncsteps.CommError, "down")
			})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			h := as.Tool().Deferred(10*time.Millisecond, func() { as.Error("Sibling", "failed") })
			as.SetCancel(func(asyncsteps.AsyncSteps) { h.Cancel() })
		})
	}, tr.handler("outer"))
	wantError(t, run(t, r, tt).Err, "Sibling", "failed")
	wantTrace(t, tr, "a0@0s,outer:Sibling")
	if got := since(); got != 10*time.Millisecond {
		t.Errorf("virtual time %v, want 10ms: the backoff's timer was not cancelled", got)
	}
}

// The deadline of Run's context that falls in the backoff's wait times
// the flow out in the innermost step, the wait's: AsyncStack names the
// user's functions down to the Retry, not that engine's step, which it
// named ("asyncsteps.backoffStep.func1").
func TestRetryAsyncStackLeavesOutTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		var stack string
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2,
				Backoff: func(int) time.Duration { return time.Hour }}, retryCornerFail)
		}, func(as asyncsteps.AsyncSteps, code string) {
			stack = code + ": " + strings.Join(as.State().AsyncStack, " > ")
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r.Run(ctx)
		want := "Timeout: github.com/asyncsteps/asyncsteps_test.TestRetryAsyncStackLeavesOutTheBackoff.func1.1" +
			" > github.com/asyncsteps/asyncsteps_test.retryCornerFail"
		if stack != want {
			t.Errorf("AsyncStack\n got: %s\nwant: %s", stack, want)
		}
	})
}

// retryCornerFail is an attempt that fails with CommError.
func retryCornerFail(as asyncsteps.AsyncSteps, _ int) { as.Error(asyncsteps.CommError, "down") }

// AsyncStack names the user's attempt, not the engine's step that runs
// it, as a Repeat's names its body; a panic in the attempt is an
// InternalError, not retried by default.
func TestRetryAsyncStackNamesTheAttempt(t *testing.T) {
	r, tt := newFlow()
	cornerAttempts = 0
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3}, retryCornerAttempt)
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, "no")
	if cornerAttempts != 1 {
		t.Errorf("%d attempts, want 1", cornerAttempts)
	}
	got := strings.Join(r.State().AsyncStack, " > ")
	want := "github.com/asyncsteps/asyncsteps_test.TestRetryAsyncStackNamesTheAttempt.func1" +
		" > github.com/asyncsteps/asyncsteps_test.retryCornerAttempt" +
		" > github.com/asyncsteps/asyncsteps_test.retryCornerPanic"
	if got != want {
		t.Errorf("AsyncStack\n got: %s\nwant: %s", got, want)
	}
}

var cornerAttempts int // attempts of retryCornerAttempt, on the TestTool's goroutine

func retryCornerAttempt(as asyncsteps.AsyncSteps, _ int) {
	cornerAttempts++
	as.Add(retryCornerPanic)
}

func retryCornerPanic(asyncsteps.AsyncSteps, ...any) { panic("no") }

// The clones of a model holding a Retry run on two loops at once, each
// with attempts and a backoff of its own (run under -race).
func TestRetryClonesOnTwoLoopsAtOnce(t *testing.T) {
	model := asyncsteps.New()
	asyncsteps.Retry(model, asyncsteps.RetryOptions{Attempts: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Microsecond }},
		func(as asyncsteps.AsyncSteps, i int) {
			if i < 2 {
				as.Error(asyncsteps.CommError, "down")
			}
			as.Success(i)
		})
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	const flows = 50
	done := make(chan string, flows)
	for k := range flows {
		go func() {
			r := asyncsteps.New(asyncsteps.WithTool(g.Loops()[k%2]))
			r.CopyFrom(model)
			v, err := asyncsteps.Run[int](context.Background(), r)
			done <- fmt.Sprint(v, " ", err)
		}()
	}
	for range flows {
		if got := <-done; got != "2 <nil>" {
			t.Errorf("a clone ended with %s, want 2 <nil>", got)
		}
	}
}

// However an attempt was reached, by a retry or by Continue, the first
// one that succeeds ends the Retry with its args, and Continue on the
// last one ends it with none.
func TestRetryEndsAtTheFirstSuccessAfterContinueOrRetry(t *testing.T) {
	r, tt := newFlow()
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 4}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("a%d", i)
			if i == 0 {
				as.Continue()
			}
			as.Success("a", i)
		})
		as.Add(tr.stepArgs("after continue"))
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 4}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("b%d", i)
			if i == 0 {
				as.Error(asyncsteps.CommError, "down")
			}
			as.Success("b", i)
		})
		as.Add(tr.stepArgs("after retry"))
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("c%d", i)
			if i == 0 {
				as.Error(asyncsteps.CommError, "down")
			}
			as.Continue()
		})
		as.Add(tr.stepArgs("after last"))
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, tr, "a0,a1,after continue[a 1],b0,b1,after retry[b 1],c0,c1,after last[]")
}

// The deadline of Run's context is a timeout of the whole flow, outer to
// every Retry: it fails the attempt in progress with Timeout, and no
// attempt is made after it, with or without a backoff. (Without one, the
// attempts left used to run at the deadline, each failing at once as its
// step waited; with one, the backoff's wait failed at once instead.)
func TestRetryMakesNoAttemptAfterRunsDeadline(t *testing.T) {
	for _, backoff := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprint("backoff ", backoff), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				start := time.Now()
				var log []string
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				retryable := 0
				opts := asyncsteps.RetryOptions{
					Attempts:  4,
					Backoff:   func(int) time.Duration { return backoff },
					Retryable: func(string) bool { retryable++; return true },
				}
				asyncsteps.Retry(r, opts, func(as asyncsteps.AsyncSteps, i int) {
					log = append(log, fmt.Sprintf("attempt %d at %v", i, time.Since(start)))
					as.Await(func(ctx context.Context) (any, error) {
						<-ctx.Done()
						return nil, ctx.Err()
					})
				})
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := r.Run(ctx)
				wantError(t, err, asyncsteps.Timeout, deadlineInfo)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v does not match context.DeadlineExceeded", err)
				}
				if got, want := strings.Join(log, ", "), "attempt 0 at 0s"; got != want {
					t.Errorf("attempts: %s; want %s", got, want)
				}
				if retryable != 0 {
					t.Errorf("Retryable asked %d times after the deadline, want 0", retryable)
				}
			})
		})
	}
}
