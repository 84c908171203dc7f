// Command steps is the trial service written with asyncsteps: its handler
// fans out to two upstreams with Await, under a per-request timeout, with
// a Mutex shared by all requests around the stock upstream and an error
// handler that falls back when the price upstream fails. Command plain is
// the same service in plain Go.
//
// Each request's flow runs on the next loop of a LoopGroup, one loop per
// core, as a production handler's should: asyncsteps.New() would put every
// request on the one process-wide default loop, whose single goroutine
// would then run the steps of all of them.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/examples/trial/internal/demo"
)

type service struct {
	up         *demo.Upstreams
	loops      *asyncsteps.LoopGroup
	stockLimit *asyncsteps.Mutex
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	item := r.URL.Query().Get("item")
	get := func(path string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) { return s.up.Get(ctx, path, item) }
	}
	root := s.loops.New()
	root.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(demo.Timeout())
		asyncsteps.Gather(as, func(as asyncsteps.AsyncSteps, v []string) {
			as.Success(demo.Reply(item, v[0], v[1]))
		}, func(as asyncsteps.AsyncSteps) {
			asyncsteps.AwaitThen(as, get("/price"), nil, func(as asyncsteps.AsyncSteps, _ string) {
				as.Success("price unknown")
			})
		}, func(as asyncsteps.AsyncSteps) {
			as.Sync(s.stockLimit, func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.AwaitThen(as, get("/stock"), nil)
			})
		})
	})
	body, err := asyncsteps.Run[string](r.Context(), root)
	demo.Write(w, body, err)
}

func run(out io.Writer) error {
	up := demo.StartUpstreams()
	defer up.Close()
	loops := asyncsteps.NewLoopGroup(0) // one loop per core
	defer loops.Close()                 // once Drive's server has stopped, with no flow left
	return demo.Drive(out, up, &service{up: up, loops: loops, stockLimit: asyncsteps.NewMutex(demo.StockLimit)})
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
