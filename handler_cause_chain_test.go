package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// handledAndRaised runs a step that fails with the Result error cause
// under an error handler that raises CommError "again", and returns the
// flow's error.
func handledAndRaised(t *testing.T, cause error) error {
	t.Helper()
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ch := make(chan asyncsteps.Result, 1)
		ch <- asyncsteps.Result{Err: cause}
		asyncsteps.AwaitResult(as, ch)
	}, func(as asyncsteps.AsyncSteps, _ string) { as.Error(asyncsteps.CommError, "again") })
	return run(t, r, tt).Err
}

// The Go cause that an error handler's own error keeps is found under a
// bounded number of *Error copies: a chain of *Error causes that a user
// made into a loop gives none, and the loop goes on.
func TestHandlerErrorCauseOfACyclicChain(t *testing.T) {
	cyclic := &asyncsteps.Error{Code: asyncsteps.Timeout, Info: "cyclic"}
	cyclic.Cause = cyclic
	err := handledAndRaised(t, cyclic)
	wantError(t, err, asyncsteps.CommError, "again")
	if e := asError(t, err); e != nil && e.Cause != nil {
		t.Errorf("Cause = %#v, want none for a cyclic chain", e.Cause)
	}
}

// A Go cause that wraps a flow's *Error itself (an Await function's
// fmt.Errorf("...: %w", err) of another flow's error) is kept whole: as
// errors.Is finds whatever a Go error wraps, it finds that *Error's code
// too, beside the code the handler raised, and a Timeout's
// context.DeadlineExceeded. Given the *Error itself, the cause is the Go
// error under it, and the replaced code is not found.
func TestHandlerErrorCauseThatWrapsAFlowError(t *testing.T) {
	sub := &asyncsteps.Error{Code: asyncsteps.Timeout, Cause: context.DeadlineExceeded}
	timeout := &asyncsteps.Error{Code: asyncsteps.Timeout}
	for _, tc := range []struct {
		name        string
		cause       error
		wantTimeout bool
	}{
		{"wrapped", fmt.Errorf("sub: %w", sub), true},
		{"itself", sub, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handledAndRaised(t, tc.cause)
			wantError(t, err, asyncsteps.CommError, "again")
			if got := errors.Is(err, timeout); got != tc.wantTimeout {
				t.Errorf("errors.Is(err, Timeout) = %v, want %v", got, tc.wantTimeout)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Error("errors.Is(err, context.DeadlineExceeded) = false, want true: the Go cause")
			}
		})
	}
}
