package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// busyError is a failure that carries the wait it asks for before the
// next attempt, as an HTTP answer's Retry-After does.
type busyError struct{ wait time.Duration }

func (e *busyError) Error() string      { return fmt.Sprint("busy, retry after ", e.wait) }
func (e *busyError) FutoInCode() string { return asyncsteps.CommError }

// retryAfterOr returns a RetryOptions.Delay that waits what a *busyError
// asks for, and backoff otherwise; each call is traced.
func retryAfterOr(tr *tracer, backoff time.Duration) func(n int, err error) time.Duration {
	return func(n int, err error) time.Duration {
		tr.addf("delay%d(%v)", n, err)
		var busy *busyError
		if errors.As(err, &busy) {
			return busy.wait
		}
		return backoff
	}
}

// failWith returns an attempt that fails at once with errs[i]: a Go error
// raised with Fail, or as.Error's code for an *asyncsteps.Error; nil
// succeeds with "ok".
func failWith(tr *tracer, since func() time.Duration, errs ...error) asyncsteps.RepeatFunc {
	return func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("a%d@%v", i, since())
		var e *asyncsteps.Error
		switch err := errs[i]; {
		case err == nil:
			as.Success("ok")
		case errors.As(err, &e):
			as.Error(e.Code, e.Info)
		default:
			asyncsteps.Fail(as, err)
		}
	}
}

// Delay is given the failure that asks for the retry, LastException (the
// Go error of Fail, the *Error of as.Error), and its wait replaces
// Backoff's, which is not called; a wait of 0 or less retries at once.
func TestRetryDelayIsGivenTheFailure(t *testing.T) {
	r, tt := newFlow()
	since := stopwatch(tt)
	tr := &tracer{}
	asyncsteps.Retry(r, asyncsteps.RetryOptions{
		Attempts: 4,
		Backoff:  func(n int) time.Duration { tr.addf("backoff%d", n); return time.Hour },
		Delay:    retryAfterOr(tr, -time.Second),
	}, failWith(tr, since, &busyError{2 * time.Second}, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"},
		&busyError{0}, nil))
	res := run(t, r, tt)
	wantSuccess(t, res, "ok")
	wantTrace(t, tr, "a0@0s,delay1(busy, retry after 2s),a1@2s,delay2(CommError: down),a2@2s,"+
		"delay3(busy, retry after 0s),a3@2s")
}

// A wait of Delay that would not end before a timeout around the Retry is
// not waited: the attempt's failure unwinds out of the Retry at once,
// with its own code and info, not a Timeout once the budget has run out.
// A wait that ends before it is waited; one that ends at it is not, as
// the next attempt could not begin. The attempt's own Timeout is no such
// deadline. No timer is left armed.
func TestRetryDelayBeyondATimeoutAroundFailsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name  string
		wait  time.Duration
		trace string
		code  string
		at    time.Duration
	}{
		{name: "within", wait: 9 * time.Second, trace: "a0@0s,delay1(busy, retry after 9s),a1@9s", at: 9 * time.Second},
		{name: "at the deadline", wait: 10 * time.Second, trace: "a0@0s,delay1(busy, retry after 10s),job:CommError",
			code: asyncsteps.CommError},
		{name: "beyond", wait: time.Minute, trace: "a0@0s,delay1(busy, retry after 1m0s),job:CommError",
			code: asyncsteps.CommError},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			since := stopwatch(tt)
			tr := &tracer{}
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Second) // the job's budget
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					asyncsteps.Retry(as, asyncsteps.RetryOptions{
						Attempts: 2,
						Timeout:  time.Second, // each attempt: no deadline for the wait
						Delay:    retryAfterOr(tr, 0),
					}, failWith(tr, since, &busyError{c.wait}, nil))
				})
			}, tr.handler("job"))
			res, left := runToEnd(t, r, tt)
			wantTrace(t, tr, c.trace)
			if c.code == "" {
				wantSuccess(t, res, "ok")
			} else {
				wantError(t, res.Err, c.code, "busy, retry after "+c.wait.String())
				if !errors.As(res.Err, new(*busyError)) {
					t.Errorf("error %v does not hold the attempt's *busyError", res.Err)
				}
			}
			if since() != c.at || left {
				t.Errorf("ended at %v with events left %v, want at %v with none", since(), left, c.at)
			}
		})
	}
}

// Backoff's wait is not checked against the deadline: one that outlasts a
// timeout around the Retry is waited until that timeout ends the flow
// with Timeout, as before Delay was added.
func TestRetryBackoffBeyondATimeoutAroundWaitsForTheTimeout(t *testing.T) {
	r, tt := newFlow()
	since := stopwatch(tt)
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Second)
		asyncsteps.Retry(as, asyncsteps.RetryOptions{
			Attempts: 2,
			Backoff:  func(int) time.Duration { return time.Minute },
		}, failWith(tr, since, &busyError{time.Minute}, nil))
	}, tr.handler("job"))
	res := run(t, r, tt)
	wantError(t, res.Err, asyncsteps.Timeout, "")
	wantTrace(t, tr, "a0@0s,job:Timeout")
	if since() != 10*time.Second {
		t.Errorf("ended at %v, want 10s", since())
	}
}

// On a Loop, the deadline of Run's context bounds Delay's wait as a
// timeout around the Retry does: beyond it, the failure is the flow's at
// once, with the attempt's code and info.
func TestRetryDelayBeyondRunsDeadlineFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		start := time.Now()
		since := func() time.Duration { return time.Since(start) }
		for _, wait := range []time.Duration{9 * time.Second, 10 * time.Second} {
			tr := &tracer{}
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Delay: retryAfterOr(tr, 0)},
				failWith(tr, func() time.Duration { return since().Truncate(time.Second) }, &busyError{wait}, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			begun := since()
			_, err := r.Run(ctx)
			cancel()
			took := since() - begun
			switch wait {
			case 9 * time.Second:
				if err != nil || took != wait {
					t.Errorf("wait %v: %v after %v, want success after %v", wait, err, took, wait)
				}
			default:
				wantError(t, err, asyncsteps.CommError, "busy, retry after 10s")
				if took != 0 {
					t.Errorf("wait %v: failed after %v, want at once", wait, took)
				}
			}
		}
	})
}

// The timeout around the Retry is found through the branches between
// them: a Parallel's, a ForEachLimit item's, a Sync's critical section.
func TestRetryDelayFindsTheTimeoutThroughBranches(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(as asyncsteps.AsyncSteps, retry func(as asyncsteps.AsyncSteps))
	}{
		{name: "Parallel", wrap: func(as asyncsteps.AsyncSteps, retry func(as asyncsteps.AsyncSteps)) {
			p := as.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { retry(as) })
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		}},
		{name: "ForEachLimit", wrap: func(as asyncsteps.AsyncSteps, retry func(as asyncsteps.AsyncSteps)) {
			asyncsteps.ForEachLimit(as, maps.All(map[int]int{0: 0}), 2, func(as asyncsteps.AsyncSteps, _, _ int) { retry(as) })
		}},
		{name: "Sync", wrap: func(as asyncsteps.AsyncSteps, retry func(as asyncsteps.AsyncSteps)) {
			as.Sync(asyncsteps.NewMutex(1, 0), func(as asyncsteps.AsyncSteps, _ ...any) { retry(as) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			since := stopwatch(tt)
			tr := &tracer{}
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Second)
				c.wrap(as, func(as asyncsteps.AsyncSteps) {
					asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2, Delay: retryAfterOr(tr, 0)},
						failWith(tr, since, &busyError{time.Minute}, nil))
				})
			}, tr.handler("job"))
			res := run(t, r, tt)
			wantError(t, res.Err, asyncsteps.CommError, "busy, retry after 1m0s")
			wantTrace(t, tr, "a0@0s,delay1(busy, retry after 1m0s),job:CommError")
			if since() != 0 {
				t.Errorf("ended at %v, want at once", since())
			}
		})
	}
}

// On a Tool of the user's, whose timers the engine cannot read, no
// deadline around the Retry is known: Delay's wait is waited as Backoff's
// is, until the timeout around ends the flow with Timeout.
func TestRetryDelayOnAForeignToolIsNotChecked(t *testing.T) {
	tool := &manualTool{}
	since := func() time.Duration { return tool.now }
	tr := &tracer{}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Second)
		asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2, Delay: retryAfterOr(tr, 0)},
			failWith(tr, since, &busyError{time.Minute}, nil))
	}, tr.handler("job"))
	ch := r.Promise()
	tool.run()
	res := <-ch
	wantError(t, res.Err, asyncsteps.Timeout, "")
	wantTrace(t, tr, "a0@0s,delay1(busy, retry after 1m0s),job:Timeout")
	if since() != 10*time.Second {
		t.Errorf("ended at %v, want 10s", since())
	}
}

// The timeout of a step that awaits a flow with AwaitFlow does not reach
// that flow: a Delay there beyond it is waited, until the awaiting step
// times out and cancels the flow.
func TestRetryDelayInAnAwaitedFlowSeesNoDeadlineOfTheAwaitingStep(t *testing.T) {
	r, tt := newFlow()
	since := stopwatch(tt)
	tr := &tracer{}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Second)
		sub := as.NewInstance()
		asyncsteps.Retry(sub, asyncsteps.RetryOptions{Attempts: 2, Delay: retryAfterOr(tr, 0)},
			failWith(tr, since, &busyError{time.Minute}, nil))
		asyncsteps.AwaitFlow(as, sub)
	}, tr.handler("job"))
	res := run(t, r, tt)
	wantError(t, res.Err, asyncsteps.Timeout, "")
	wantTrace(t, tr, "a0@0s,delay1(busy, retry after 1m0s),job:Timeout")
	if since() != 10*time.Second {
		t.Errorf("ended at %v, want 10s", since())
	}
}
