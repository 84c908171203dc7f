package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A retry with a timeout per attempt and a backoff between attempts,
// tested on virtual time. The attempt stands for an upstream call: in a
// service it would be asynchttp.Client.Get (package asynchttp's doc tests
// that on virtual time, in a testing/synctest bubble); here a scripted
// fake answers on the TestTool's clock, since a TestTool does not wait for
// real goroutines (an Await) before it moves its clock to the next timeout.
// The first attempt is too slow, the second fails, the third answers:
// 200ms, 10ms of backoff, 50ms, 20ms of backoff, 30ms; no sleep.
func Example_retry() {
	tt := asyncsteps.NewTestTool()
	since := func() time.Duration { return tt.Now().Sub(asyncsteps.TestToolEpoch) }
	script := []struct {
		after time.Duration
		code  string // or "" to answer "42"
	}{{time.Second, ""}, {50 * time.Millisecond, asyncsteps.CommError}, {30 * time.Millisecond, ""}}

	fetch := func(as asyncsteps.AsyncSteps, attempt int) {
		answer := script[attempt]
		fmt.Println("attempt", attempt, "at", since())
		asyncsteps.Sleep(as, answer.after) // the attempt's timeout stops it
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if answer.code != "" {
				as.Error(answer.code, "upstream failed")
				return
			}
			as.Success("42")
		})
	}

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.Retry(r, asyncsteps.RetryOptions{
		Attempts: 3,
		Timeout:  200 * time.Millisecond,
		Backoff:  func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond },
	}, fetch)
	body, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Println("body", body, "error", err, "at", since())
	// Output:
	// attempt 0 at 0s
	// attempt 1 at 210ms
	// attempt 2 at 280ms
	// body 42 error <nil> at 310ms
}

// throttled is an upstream's "too many requests": a CommError, retried,
// that carries the wait the upstream asked for (an HTTP answer's
// Retry-After, say).
type throttled struct{ wait time.Duration }

func (e *throttled) Error() string      { return fmt.Sprint("throttled for ", e.wait) }
func (e *throttled) FutoInCode() string { return asyncsteps.CommError }

// A Delay takes the wait before a retry from the failure: here the wait a
// throttled upstream asks for, and the backoff otherwise. A wait that
// would not end before the job's budget runs out is not waited: the
// failure is the job's at once, not a Timeout 10 seconds later. Over
// HTTP, asynchttp.RetryAfter reads the wait from an answer's Retry-After
// (package asynchttp's ExampleClient_syncJob).
func Example_retryAfter() {
	tt := asyncsteps.NewTestTool()
	since := func() time.Duration { return tt.Now().Sub(asyncsteps.TestToolEpoch) }
	answers := []error{ // what each attempt's call fails with
		&throttled{2 * time.Second},
		&asyncsteps.Error{Code: asyncsteps.CommError, Info: "connection reset"},
		&throttled{time.Minute},
	}

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Second) // the job's budget
		asyncsteps.Retry(as, asyncsteps.RetryOptions{
			Attempts: 5,
			Delay: func(n int, err error) time.Duration {
				if t := (*throttled)(nil); errors.As(err, &t) {
					return t.wait
				}
				return time.Duration(n) * 100 * time.Millisecond
			},
		}, func(as asyncsteps.AsyncSteps, attempt int) {
			fmt.Println("attempt", attempt, "at", since())
			asyncsteps.Fail(as, answers[attempt]) // stands for a call that failed
		})
	})
	_, err := r.Run(context.Background())
	fmt.Println(err, "at", since())
	// Output:
	// attempt 0 at 0s
	// attempt 1 at 2s
	// attempt 2 at 2.2s
	// CommError: throttled for 1m0s at 2.2s
}
