//go:build cgo

package cabi_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// "last_exception" is the code of the last error also when the flow keeps
// a Go error as LastException: that of an Await function or of Fail, which
// raised the code ErrorFrom gives it, and the *PanicError of a panic,
// which raised InternalError whatever the panic's value, and an *Error
// without a code, which raised InternalError too. A C step that
// follows a Go step whose error a handler recovered from reads it.
func TestLastExceptionIsTheCodeOfAGoError(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	cases := []struct {
		name string
		fail asyncsteps.StepFunc
		code string
	}{
		{"Await's reset connection", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, reset })
		}, asyncsteps.CommError},
		{"Await's deadline", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, context.DeadlineExceeded })
		}, asyncsteps.Timeout},
		{"Fail", func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Fail(as, reset) }, asyncsteps.CommError},
		{"panic of an *Error", func(as asyncsteps.AsyncSteps, _ ...any) {
			panic(&asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"})
		}, asyncsteps.InternalError},
		{"Await's *Error without a code", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, &asyncsteps.Error{Info: "no code"} })
		}, asyncsteps.InternalError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRoot(t)
			r.Add(tc.fail, func(as asyncsteps.AsyncSteps, code string) {
				if code != tc.code {
					t.Errorf("the step failed with %s, want %s", code, tc.code)
				}
				as.Success()
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctest.Errors(cabi.Binary(as))
			}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
			if _, err := run(t, r); err != nil {
				t.Fatal(err)
			}
			checkTrace(t,
				"err1 last_exception="+tc.code,
				"err1 returns",
				"err1_eh MyError info=my info last_exception=MyError unknown=(nil)",
			)
		})
	}
}
