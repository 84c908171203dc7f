package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// The caller of a flow tells its errors apart by their FutoIn code: errors.Is
// with a template *Error, or errors.As for the code and the info. A Timeout
// also matches context.DeadlineExceeded; a cancelled flow ends with no
// *Error, but with an error that matches context.Canceled.
func ExampleError() {
	tt := asyncsteps.NewTestTool()
	refused := asyncsteps.New(asyncsteps.WithTool(tt))
	refused.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.Unauthorized, "bad token") })
	timedOut := asyncsteps.New(asyncsteps.WithTool(tt))
	timedOut.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Second) }) // nothing completes it
	cancelled := asyncsteps.New(asyncsteps.WithTool(tt))
	cancelled.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.Tool().Immediate(cancelled.Cancel) // as any goroutine may
	})

	for _, r := range []*asyncsteps.Root{refused, timedOut, cancelled} {
		_, err := r.Run(context.Background())
		var e *asyncsteps.Error
		if errors.As(err, &e) {
			fmt.Printf("%q: code %s, info %q\n", err, e.Code, e.Info)
		} else {
			fmt.Printf("%q: no *Error\n", err)
		}
		fmt.Println("  Unauthorized:", errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Unauthorized}),
			"Timeout:", errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout}),
			"DeadlineExceeded:", errors.Is(err, context.DeadlineExceeded),
			"Canceled:", errors.Is(err, context.Canceled))
	}
	// Output:
	// "Unauthorized: bad token": code Unauthorized, info "bad token"
	//   Unauthorized: true Timeout: false DeadlineExceeded: false Canceled: false
	// "Timeout": code Timeout, info ""
	//   Unauthorized: false Timeout: true DeadlineExceeded: true Canceled: false
	// "context canceled": no *Error
	//   Unauthorized: false Timeout: false DeadlineExceeded: false Canceled: true
}

// A step's own code fails with a Go error as errgroup's function would
// return it: the flow's error has the code ErrorFrom gives it and keeps it
// for errors.Is.
func ExampleFail() {
	errNoStock := errors.New("no stock")
	reserve := func(sku string) error { return fmt.Errorf("reserve %s: %w", sku, errNoStock) }
	r := asyncsteps.New(asyncsteps.WithTool(asyncsteps.NewTestTool()))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if err := reserve("SKU-1"); err != nil {
			asyncsteps.Fail(as, err) // does not return
		}
		as.Success("reserved")
	})
	_, err := r.Run(context.Background())
	fmt.Println(err)
	fmt.Println(errors.Is(err, errNoStock))
	// Output:
	// InternalError: reserve SKU-1: no stock
	// true
}
