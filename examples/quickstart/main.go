// Command quickstart runs a small flow on a real event loop: sequential
// steps, an error handler, a parallel step with a timeout, and a loop.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

func main() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("step 1: look up the user")
		as.Success("alice")
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("step 2: load the profile of", args[0])
		as.Error(asyncsteps.NotImplemented, "profile store is offline")
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Printf("  handled %s (%s): using a default profile\n", code, as.State().ErrorInfo)
		as.Success("default profile")
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("step 3: got", args[0], "- fetching two things at once")
		p := as.Parallel()
		for _, name := range []string{"orders", "messages"} {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Await(func(ctx context.Context) (any, error) {
					return fetch(ctx, name) // a blocking Go call, on its own goroutine
				})
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					as.State().Set(name, args[0])
				})
			})
		}
		as.SetTimeout(time.Second) // covers the whole parallel
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("  fetched:", as.State().Get("orders"), "and", as.State().Get("messages"))
	}).Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		fmt.Println("step 4: iteration", i)
	})

	if _, err := r.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "flow failed:", err)
		os.Exit(1)
	}
	fmt.Println("done")
}

// fetch stands for a blocking call such as a database query.
func fetch(ctx context.Context, what string) (string, error) {
	select {
	case <-time.After(10 * time.Millisecond):
		return "3 " + what, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
