package asynchttp

import (
	"context"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Every error answer asks abortedBy whether the flow was aborted: for
// any error but an InternalError, the 503 of a Limiter's rejection under
// an overload above all, that costs no allocation. Looking for the panic
// in the error's chain did cost one per answer.
func TestAbortedByAllocatesNothingForAnErrorAnswer(t *testing.T) {
	for _, err := range []error{
		&asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: "Mutex queue limit"},
		&asyncsteps.Error{Code: asyncsteps.CommError, Cause: context.Canceled},
		&asyncsteps.Error{Code: asyncsteps.Timeout, Cause: context.DeadlineExceeded},
	} {
		if allocs := testing.AllocsPerRun(100, func() { abortedBy(err) }); allocs != 0 {
			t.Errorf("abortedBy(%v): %v allocations, want 0", err, allocs)
		}
	}
}
