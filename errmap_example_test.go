package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/asyncsteps/asyncsteps"
)

// rateLimited is a client library's error that knows its FutoIn code.
type rateLimited struct{ retryAfter string }

func (e *rateLimited) Error() string      { return "rate limited, retry after " + e.retryAfter }
func (e *rateLimited) FutoInCode() string { return asyncsteps.DefenseRejected }

// An error handler tells a failed upstream from a bug by its code: a Go
// error that implements FutoInCoder raises its own code, and the original
// error stays reachable with errors.As.
func ExampleFutoInCoder() {
	r := asyncsteps.New(asyncsteps.WithTool(asyncsteps.NewTestTool()))
	r.Await(func(ctx context.Context) (any, error) {
		return nil, fmt.Errorf("fetch prices: %w", &rateLimited{retryAfter: "2s"})
	}, func(as asyncsteps.AsyncSteps, code string) {
		var rl *rateLimited
		errors.As(as.State().LastException, &rl)
		fmt.Println(code, "|", as.State().ErrorInfo, "|", rl.retryAfter)
		as.Success("cached prices")
	})
	args, err := r.Run(context.Background()) // Run drives the TestTool
	fmt.Println(args, err)
	// Output:
	// DefenseRejected | fetch prices: rate limited, retry after 2s | 2s
	// [cached prices] <nil>
}

// ErrorFrom is the mapping a flow applies to a Go error.
func ExampleErrorFrom() {
	for _, err := range []error{
		context.DeadlineExceeded,
		&asyncsteps.Error{Code: asyncsteps.Unauthorized, Info: "bad token"},
		errors.New("disk full"),
	} {
		e := asyncsteps.ErrorFrom(err)
		fmt.Printf("%s %q\n", e.Code, e.Info)
	}
	// Output:
	// Timeout "context deadline exceeded"
	// Unauthorized "bad token"
	// InternalError "disk full"
}
