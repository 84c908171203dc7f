package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// errNoStock is a Go error a step's own code returns.
var errNoStock = errors.New("no stock")

// coded is a Go error that knows its FutoIn code.
type coded struct{}

func (coded) Error() string      { return "over quota" }
func (coded) FutoInCode() string { return asyncsteps.DefenseRejected }

// Fail raises a Go error with the code and info ErrorFrom gives it and the
// error itself as Cause, from the step's callback (which it ends) or from
// outside it on a step that waits; misuse is reported as Error's is, named
// Fail. The trace shows the callback ends at Fail and what the flow's error
// handler sees.
func TestFailKeepsTheGoError(t *testing.T) {
	wrapped := fmt.Errorf("reserve SKU-1: %w", errNoStock)
	userErr := &asyncsteps.Error{Code: asyncsteps.Unauthorized, Info: "bad token"}
	cases := []struct {
		name  string
		step  asyncsteps.StepFunc
		code  string
		info  string
		cause error // nil: the flow's error has no cause
	}{
		{"plain Go error", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, wrapped) },
			asyncsteps.InternalError, "reserve SKU-1: no stock", wrapped},
		{"deadline", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, context.DeadlineExceeded) },
			asyncsteps.Timeout, "context deadline exceeded", context.DeadlineExceeded},
		{"FutoInCoder", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, coded{}) },
			asyncsteps.DefenseRejected, "over quota", coded{}},
		{"*Error", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, userErr) },
			asyncsteps.Unauthorized, "bad token", userErr},
		{"nil error", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, nil) },
			asyncsteps.InternalError, "Fail: the error is nil", nil},
		{"from outside the callback", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Tool().Deferred(time.Millisecond, func() { asyncsteps.Fail(as, wrapped) })
		}, asyncsteps.InternalError, "reserve SKU-1: no stock", wrapped},
		{"after Add in the same callback", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) {})
			asyncsteps.Fail(as, fs.ErrNotExist)
		}, asyncsteps.InternalError, "Fail(InternalError) called after Add in the same callback", nil},
		{"behind a decorator that unwraps", func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.Fail(decoratedSteps{as}, wrapped)
		}, asyncsteps.InternalError, "reserve SKU-1: no stock", wrapped},
		{"behind a decorator that does not unwrap", func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.Fail(struct{ asyncsteps.AsyncSteps }{as}, wrapped)
		}, asyncsteps.InternalError, "reserve SKU-1: no stock", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, tt := newFlow()
			var trace []string
			var lastException error
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				trace = append(trace, "step")
				tc.step(as)
				trace = append(trace, "step returned")
			}, func(as asyncsteps.AsyncSteps, code string) {
				trace = append(trace, "handler "+code)
				lastException = as.State().LastException
			})
			err := run(t, r, tt).Err
			wantError(t, err, tc.code, tc.info)
			want := "[step handler " + tc.code + "]"
			if tc.name == "from outside the callback" {
				want = "[step step returned handler " + tc.code + "]"
			}
			if got := fmt.Sprint(trace); got != want {
				t.Errorf("trace = %s, want %s", got, want)
			}
			e := asError(t, err)
			if e == nil {
				return
			}
			if e.Cause != tc.cause {
				t.Errorf("Cause = %#v, want %#v", e.Cause, tc.cause)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("errors.Is(err, %v) = false", tc.cause)
			}
			if tc.cause == wrapped && !errors.Is(lastException, errNoStock) {
				t.Errorf("errors.Is(LastException, errNoStock) = false; LastException = %#v", lastException)
			}
		})
	}
}

// An error handler that fails with a Go error of its own replaces the
// handled error, and its Cause is that Go error, not the handled one's.
func TestFailInAnErrorHandler(t *testing.T) {
	r, tt := newFlow()
	first := errors.New("first")
	second := fmt.Errorf("fallback: %w", errNoStock)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, first) },
			func(as asyncsteps.AsyncSteps, _ string) { asyncsteps.Fail(as, second) })
	})
	err := run(t, r, tt).Err
	wantError(t, err, asyncsteps.InternalError, "fallback: no stock")
	if !errors.Is(err, errNoStock) || errors.Is(err, first) {
		t.Errorf("errors.Is(err, errNoStock) = %v, errors.Is(err, first) = %v; want true, false",
			errors.Is(err, errNoStock), errors.Is(err, first))
	}
}

// Fail from another goroutine on a step that does not wait is the misuse
// Error is, named Fail.
func TestFailFromAnotherGoroutineWithoutWait(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		done := make(chan struct{})
		go func() { defer close(done); asyncsteps.Fail(as, errNoStock) }()
		<-done
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError,
		"Fail(InternalError) called from another goroutine on a step that does not wait:"+
			" call WaitExternal, SetTimeout or SetCancel first")
}

// State().LastException is the Go error itself, not an *Error wrapping
// it, wherever Fail raises it, as it is for an Await function's error
// (the first case of each pair): in the callback, from outside it, behind
// a decorator, in an error handler, and for an *Error of a Break, which
// the loop catches.
func TestFailLastExceptionIsTheGoErrorAsAwaits(t *testing.T) {
	wrapped := fmt.Errorf("reserve SKU-1: %w", errNoStock)
	brk := &asyncsteps.Error{Code: asyncsteps.LoopBreak}
	awaiting := func(err error) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, err })
		}
	}
	cases := []struct {
		name string
		step asyncsteps.StepFunc
		want error
	}{
		{"Await", awaiting(wrapped), wrapped},
		{"Fail in the callback", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, wrapped) }, wrapped},
		{"Fail from outside the callback", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Tool().Deferred(time.Millisecond, func() { asyncsteps.Fail(as, wrapped) })
		}, wrapped},
		{"Fail behind a decorator", func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.Fail(decoratedSteps{as}, wrapped)
		}, wrapped},
		{"Fail in an error handler", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.NotImplemented) },
				func(as asyncsteps.AsyncSteps, _ string) { asyncsteps.Fail(as, wrapped) })
		}, wrapped},
		{"Await of a Break", awaiting(brk), brk},
		{"Fail of a Break", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, brk) }, brk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newFlow()
			var seen []string
			r.Loop(func(as asyncsteps.AsyncSteps) {
				as.Add(tc.step, func(as asyncsteps.AsyncSteps, code string) {
					exc := as.State().LastException
					seen = append(seen, code)
					if exc != tc.want {
						t.Errorf("LastException = %#v, want the Go error %#v", exc, tc.want)
					}
				})
			})
			_, err := r.Run(context.Background()) // drives the tool, and waits for Await
			if tc.want == brk {
				if err != nil || fmt.Sprint(seen) != "[LoopBreak]" {
					t.Errorf("Err = %v, handler saw %v; want nil, [LoopBreak]", err, seen)
				}
				return
			}
			wantError(t, err, asyncsteps.InternalError, "reserve SKU-1: no stock")
			if e := asError(t, err); e != nil && e.Cause != wrapped {
				t.Errorf("Cause = %#v, want %#v", e.Cause, wrapped)
			}
			if fmt.Sprint(seen) != "[InternalError]" {
				t.Errorf("handler saw %v, want [InternalError]", seen)
			}
		})
	}
}

// errorLogger is a decorator that unwraps and records the calls of its
// Error: Fail must not call it, as it calls no decorator's Error.
type errorLogger struct {
	asyncsteps.AsyncSteps
	errors *[]string
}

func (d errorLogger) Unwrap() asyncsteps.AsyncSteps { return d.AsyncSteps }

func (d errorLogger) Error(code string, info ...string) {
	*d.errors = append(*d.errors, code)
	d.AsyncSteps.Error(code, info...)
}

// A misuse of Fail is named Fail, as Fail is what the caller called: on
// a Root, on the value Parallel returns (also behind a decorator that
// unwraps to them), and for a nil error after Add in the same callback.
// No decorator's Error is called: the call is not Error's.
func TestFailMisuseIsNamedFail(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *asyncsteps.Root, logged *[]string)
		info  string
	}{
		{"on a Root", func(r *asyncsteps.Root, _ *[]string) { asyncsteps.Fail(r, errNoStock) },
			"Fail(InternalError) called on a Root: it is valid only inside a step"},
		{"on a decorator of a Root", func(r *asyncsteps.Root, logged *[]string) {
			asyncsteps.Fail(errorLogger{r, logged}, errNoStock)
		}, "Fail(InternalError) called on a Root: it is valid only inside a step"},
		{"on the value Parallel returns", func(r *asyncsteps.Root, logged *[]string) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.Fail(errorLogger{as.Parallel(), logged}, errNoStock)
			})
		}, "Fail called on the value returned by Parallel"},
		{"nil error after Add", func(r *asyncsteps.Root, logged *[]string) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(asyncsteps.AsyncSteps, ...any) {})
				asyncsteps.Fail(errorLogger{as, logged}, nil)
			})
		}, "Fail(InternalError) called after Add in the same callback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, tt := newFlow()
			var logged []string
			tc.setup(r, &logged)
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, tc.info)
			if logged != nil {
				t.Errorf("the decorator's Error was called with %v", logged)
			}
		})
	}
	t.Run("on a nil Root", func(t *testing.T) {
		const want = "asyncsteps: Fail called on a nil *Root"
		defer func() {
			if got := recover(); got != want {
				t.Errorf("panic %v, want %q", got, want)
			}
		}()
		asyncsteps.Fail((*asyncsteps.Root)(nil), errNoStock)
	})
}

// stepFailing is a user's decorator that unwraps and has a FailStep
// method of its own, with a meaning of its own: Fail must not take it for
// the hook through which package cabi fails a C step.
type stepFailing struct {
	asyncsteps.AsyncSteps
	failed *[]error
}

func (s stepFailing) Unwrap() asyncsteps.AsyncSteps { return s.AsyncSteps }

func (s stepFailing) FailStep(err error) { *s.failed = append(*s.failed, err) }

// Fail through a user's decorator with a FailStep(error) method raises
// the Go error on the engine's step it unwraps to, as through any other
// decorator that unwraps, and calls none of the decorator's methods.
func TestFailIgnoresAUsersFailStepMethod(t *testing.T) {
	wrapped := fmt.Errorf("reserve SKU-1: %w", errNoStock)
	var called []error
	var seen []string
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Fail(stepFailing{as, &called}, wrapped)
		seen = append(seen, "Fail returned")
	}, func(as asyncsteps.AsyncSteps, code string) {
		seen = append(seen, "handler "+code)
		if exc := as.State().LastException; exc != wrapped {
			t.Errorf("LastException = %#v, want the Go error", exc)
		}
	})
	res := r.Promise()
	drive(t, tt)
	err := (<-res).Err
	wantError(t, err, asyncsteps.InternalError, "reserve SKU-1: no stock")
	if e := asError(t, err); e != nil && e.Cause != wrapped {
		t.Errorf("Cause = %#v, want %#v", e.Cause, wrapped)
	}
	if fmt.Sprint(seen) != "[handler InternalError]" || called != nil {
		t.Errorf("trace %v, FailStep called with %v; want [handler InternalError], none", seen, called)
	}
}
