package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// An Await function that returns a panic it recovered on a goroutine of
// its own, wrapped with some context, fails its step with InternalError
// as one that returns the *PanicError itself does: a CommError's panic
// inside a Retry is not retried, a LoopBreak's does not break the Repeat
// around it. The info is the returned error's text, and LastException the
// returned error.
func TestAwaitWrappedPanicIsAnInternalError(t *testing.T) {
	commErr := &asyncsteps.Error{Code: asyncsteps.CommError, Info: "reset"}
	breakErr := &asyncsteps.Error{Code: asyncsteps.LoopBreak, Info: "L"}
	cases := []struct {
		name  string
		value error
		info  string
	}{
		{"CommError in a Retry", commErr, "worker: panic: CommError: reset"},
		{"LoopBreak in its Repeat", breakErr, "worker: panic: LoopBreak: L"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			returned := fmt.Errorf("worker: %w", &asyncsteps.PanicError{Value: tc.value})
			err, tr, exception := awaitFailing(t, tc.value == commErr,
				func(context.Context) (any, error) { return nil, returned })
			wantError(t, err, asyncsteps.InternalError, tc.info)
			wantTrace(t, tr, "a0,h:InternalError")
			if exception != returned || !errors.Is(err, tc.value) {
				t.Errorf("LastException %#v, want the returned error, whose panic's value errors.Is finds", exception)
			}
		})
	}
}
