package asyncsteps_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// retryFetch adds the steps of a retry loop: at most attempts calls of
// fetch, each under its own timeout, retried on Timeout and CommError.
// The loop passes no args to the step after it, so the body that ended
// it is kept in a variable and given on by a last step.
func retryFetch(as asyncsteps.AsyncSteps, attempts int, perTry time.Duration,
	fetch func(as asyncsteps.AsyncSteps)) {
	var body string
	as.Repeat(attempts, func(as asyncsteps.AsyncSteps, i int) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(perTry) // this attempt only, its sub-steps included
			fetch(as)
		}, func(as asyncsteps.AsyncSteps, code string) {
			if (code == asyncsteps.Timeout || code == asyncsteps.CommError) && i+1 < attempts {
				as.Continue("retry") // the next attempt
			}
			// otherwise return: the error goes on unwinding
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			body, _ = asyncsteps.Arg[string](args, 0)
			as.Break("retry") // not after a Success: that would drop it
		})
	}, "retry")
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(body) })
}

// A retry with a timeout per attempt, tested on virtual time. fetch stands
// for an upstream call: in a service it would be asynchttp.Client.Get;
// here a scripted fake answers on the TestTool's clock, since a TestTool
// does not wait for real goroutines (an Await) before it moves its clock
// to the next timeout. The first attempt is too slow, the second fails,
// the third answers: 280ms of virtual time, no sleep.
func Example_retry() {
	tt := asyncsteps.NewTestTool()
	since := func() time.Duration { return tt.Now().Sub(asyncsteps.TestToolEpoch) }
	script := []struct {
		after time.Duration
		code  string // or "" to answer "42"
	}{{time.Second, ""}, {50 * time.Millisecond, asyncsteps.CommError}, {30 * time.Millisecond, ""}}

	fetch := func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			answer := script[0]
			script = script[1:]
			fmt.Println("attempt at", since())
			h := as.Tool().Deferred(answer.after, func() {
				if answer.code != "" {
					as.Error(answer.code, "upstream failed")
				} else {
					as.Success("42")
				}
			})
			as.SetCancel(func(asyncsteps.AsyncSteps) { h.Cancel() }) // the attempt's timeout
		})
	}

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		retryFetch(as, 3, 200*time.Millisecond, fetch)
	})
	body, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Println("body", body, "error", err, "at", since())
	// Output:
	// attempt at 0s
	// attempt at 200ms
	// attempt at 250ms
	// body 42 error <nil> at 280ms
}
