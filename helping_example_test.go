package asyncsteps_test

import (
	"context"
	"fmt"

	"github.com/asyncsteps/asyncsteps"
)

// A goroutine that would only wait for a flow runs its blocking calls
// itself: here the Await function runs on the goroutine of main, no other.
func ExampleRoot_RunHelping() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Await(func(ctx context.Context) (any, error) {
		return "fetched", nil // a blocking call, made by RunHelping's caller
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Success(fmt.Sprint(args[0], " and used on the loop"))
	})
	args, err := r.RunHelping(context.Background())
	fmt.Println(args, err)
	// Output: [fetched and used on the loop] <nil>
}
