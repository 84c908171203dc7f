package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/asyncsteps/asyncsteps"
)

// A server in miniature: each request is a flow on the next loop of a
// LoopGroup, so requests handled by different goroutines, as net/http does,
// run in parallel on every core. The responses are printed in request order.
func ExampleLoopGroup() {
	g := asyncsteps.NewLoopGroup(0) // one loop per core
	defer g.Close()

	// serve handles one request the way an http.Handler would.
	serve := func(ctx context.Context, path string) string {
		r := g.New()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			name, ok := strings.CutPrefix(path, "/hello/")
			if !ok || name == "" {
				as.Error(asyncsteps.InvalidRequest, "no page "+path)
			}
			as.Success(name)
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			name, _ := asyncsteps.Arg[string](args, 0)
			// Blocking work, such as a database query, runs off the loop.
			as.Await(func(ctx context.Context) (any, error) {
				return strings.ToUpper(name[:1]) + name[1:], nil
			})
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Success(fmt.Sprintf("200 Hello, %s!", args[0]))
		})

		args, err := r.Run(ctx)
		switch {
		case errors.Is(err, &asyncsteps.Error{Code: asyncsteps.InvalidRequest}):
			return "400 " + err.Error()
		case err != nil:
			return "500 " + err.Error()
		}
		return args[0].(string)
	}

	requests := []string{"/hello/alice", "/hello/bob", "/bye/carol", "/hello/dave"}
	responses := make([]string, len(requests))
	var wg sync.WaitGroup
	for i, path := range requests {
		wg.Go(func() { responses[i] = serve(context.Background(), path) })
	}
	wg.Wait()
	for i, path := range requests {
		fmt.Println(path, "->", responses[i])
	}
	// Output:
	// /hello/alice -> 200 Hello, Alice!
	// /hello/bob -> 200 Hello, Bob!
	// /bye/carol -> 400 InvalidRequest: no page /bye/carol
	// /hello/dave -> 200 Hello, Dave!
}
