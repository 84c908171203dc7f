package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// An error that an error handler raises itself (Error, or a misuse of its
// AsyncSteps), from its callback or later from outside it, has as Cause
// the Go error or panic under the error it handles, so that errors.Is and
// errors.As, and a log, still find it; LastException is the handler's own
// *Error, as for any Error call. The handled *Error itself is not chained:
// errors.Is with a code's template tests the code the handler raised, not
// the one it replaced. A handled error without a Go cause (a timeout, an
// Error) gives none, and so does the error of a step the handler adds,
// which is raised by that step, not by the handler.
func TestHandlerErrorKeepsTheHandledCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	goErr := fmt.Errorf("fetch: %w", refused)
	const goInfo = "fetch: dial tcp: connection refused"
	failWith := func(err error) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			ch := make(chan asyncsteps.Result, 1)
			ch <- asyncsteps.Result{Err: err}
			asyncsteps.AwaitResult(as, ch)
		}
	}
	reraise := func(code string) asyncsteps.ErrorFunc {
		return func(as asyncsteps.AsyncSteps, _ string) { as.Error(code, as.State().ErrorInfo) }
	}
	cases := []struct {
		name      string
		step      asyncsteps.StepFunc
		onerror   asyncsteps.ErrorFunc
		code      string
		info      string
		cause     error // nil: none
		wantPanic bool  // the cause is a *PanicError
	}{
		{"Go error raised again", failWith(goErr), reraise(asyncsteps.ConnectError),
			asyncsteps.ConnectError, goInfo, goErr, false},
		{"Go error under a flow's error, another code", failWith(&asyncsteps.Error{Code: asyncsteps.ConnectError, Info: goInfo, Cause: goErr}),
			reraise(asyncsteps.CommError), asyncsteps.CommError, goInfo, goErr, false},
		{"Go error, raised from outside the handler's callback", failWith(goErr), func(as asyncsteps.AsyncSteps, _ string) {
			as.SetTimeout(time.Second)
			as.Tool().Deferred(time.Millisecond, func() { as.Error(asyncsteps.CommError, "upstream down") })
		}, asyncsteps.CommError, "upstream down", goErr, false},
		{"Go error, misuse", failWith(goErr), func(as asyncsteps.AsyncSteps, _ string) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) {})
			as.Error(asyncsteps.CommError)
		}, asyncsteps.InternalError, "Error(CommError) called after Add in the same callback", goErr, false},
		{"panic", func(asyncsteps.AsyncSteps, ...any) { panic("boom") }, reraise(asyncsteps.CommError),
			asyncsteps.CommError, "boom", nil, true},
		{"timeout", func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Millisecond) }, reraise(asyncsteps.CommError),
			asyncsteps.CommError, "", nil, false},
		{"Error", func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.NotImplemented, "no") }, reraise(asyncsteps.CommError),
			asyncsteps.CommError, "no", nil, false},
		{"a step the handler adds", failWith(goErr), func(as asyncsteps.AsyncSteps, _ string) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "fallback down") })
		}, asyncsteps.CommError, "fallback down", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, tt := newFlow()
			var lastException error
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(tc.step, tc.onerror)
			}, func(as asyncsteps.AsyncSteps, _ string) { lastException = as.State().LastException })
			err := run(t, r, tt).Err
			wantError(t, err, tc.code, tc.info)
			e := asError(t, err)
			if e == nil {
				return
			}
			if lastException != err {
				t.Errorf("LastException = %#v, want the flow's error %#v", lastException, err)
			}
			var p *asyncsteps.PanicError
			switch {
			case tc.wantPanic:
				if !errors.As(e.Cause, &p) || p.Value != "boom" {
					t.Errorf("Cause = %#v, want the *PanicError of boom", e.Cause)
				}
			case e.Cause != tc.cause:
				t.Errorf("Cause = %#v, want %#v", e.Cause, tc.cause)
			}
			if got, want := errors.Is(err, refused), tc.cause != nil; got != want {
				t.Errorf("errors.Is(err, the dial's error) = %v, want %v", got, want)
			}
			for _, replaced := range []string{asyncsteps.ConnectError, asyncsteps.Timeout, asyncsteps.NotImplemented} {
				if replaced != tc.code && errors.Is(err, &asyncsteps.Error{Code: replaced}) {
					t.Errorf("errors.Is(err, %s) is true for an error of code %s", replaced, tc.code)
				}
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) is true for an error of code %s", tc.code)
			}
		})
	}
}
