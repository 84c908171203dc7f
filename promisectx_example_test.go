package asyncsteps_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

type traceID struct{}

// A worker starts one flow per job under the job's context, and no
// goroutine waits for it: the Await function sees the job's values, and
// the job's deadline times the flow out (its error handler sees Timeout).
func ExampleRoot_PromiseContext() {
	loops := asyncsteps.NewLoopGroup(2)
	defer loops.Close()
	service := context.Background() // a worker's: cancelled at shutdown

	jobs := []time.Duration{time.Millisecond, time.Minute}
	results := make([]<-chan asyncsteps.Result, len(jobs))
	for i, work := range jobs {
		ctx := context.WithValue(service, traceID{}, fmt.Sprint("job-", i))
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r := loops.New()
		r.Await(func(ctx context.Context) (any, error) {
			select {
			case <-time.After(work):
				return ctx.Value(traceID{}).(string) + " done", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}, func(as asyncsteps.AsyncSteps, code string) {
			as.Success(code) // recover, to show what the handler saw
		})
		results[i] = r.PromiseContext(ctx)
	}
	for _, ch := range results {
		res := <-ch
		fmt.Println(res.Args, res.Err)
	}
	// Output:
	// [job-0 done] <nil>
	// [Timeout] <nil>
}
