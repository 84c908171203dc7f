package asyncsteps_test

import (
	"context"
	"errors"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// An Await function that panics fails its step with InternalError, as a
// panic in any callback does, also when the panic's value is an error
// that would map to another code were it returned: a panic is a bug, not
// an outcome. A CommError's panic inside a Retry is not retried, a
// LoopBreak's does not break the Repeat around it, a deadline's is no
// Timeout. The info is "panic: " and the value, as for any panic of an
// Await function, and LastException the *PanicError, whose Unwrap still
// gives the value to errors.Is.
func TestAwaitPanicOfAnErrorIsAnInternalError(t *testing.T) {
	commErr := &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}
	breakErr := &asyncsteps.Error{Code: asyncsteps.LoopBreak, Info: "L"}
	cases := []struct {
		name  string
		value error
		info  string
		trace string
	}{
		{"CommError in a Retry", commErr, "panic: CommError: reset", "a0,h:InternalError"},
		{"LoopBreak in its Repeat", breakErr, "panic: LoopBreak: L", "a0,h:InternalError"},
		{"deadline", context.DeadlineExceeded, "panic: context deadline exceeded", "a0,h:InternalError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, tr, exception := awaitFailing(t, tc.value == commErr,
				func(context.Context) (any, error) { panic(tc.value) })
			wantError(t, err, asyncsteps.InternalError, tc.info)
			wantTrace(t, tr, tc.trace)
			var p *asyncsteps.PanicError
			if !errors.As(exception, &p) || p.Value != tc.value || !errors.Is(err, tc.value) {
				t.Errorf("LastException %#v, want a *PanicError of %v that errors.Is finds", exception, tc.value)
			}
		})
	}
}

// awaitFailing runs fn as the Await of each attempt of a Retry of 3
// attempts (retry) or of a Repeat of 3 labelled "L", and returns the
// flow's error, the trace of the attempts and of the error handler
// around them, and the LastException that handler saw.
func awaitFailing(t *testing.T, retry bool, fn func(context.Context) (any, error)) (error, *tracer, error) {
	t.Helper()
	r, _ := newFlow()
	tr := &tracer{}
	var exception error
	attempt := func(as asyncsteps.AsyncSteps, i int) {
		tr.addf("a%d", i)
		as.Await(fn)
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if retry {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3}, attempt)
			return
		}
		as.Repeat(3, attempt, "L")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("h:%s", code)
		exception = as.State().LastException
	})
	_, err := r.Run(context.Background()) // drives the TestTool, waiting for the Await
	return err, tr, exception
}
