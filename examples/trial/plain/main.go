// Command plain is the trial service in plain Go: the handler of command
// steps written with errgroup, a context timeout and a semaphore.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/asyncsteps/asyncsteps/examples/trial/internal/demo"
)

type service struct {
	up         *demo.Upstreams
	stockLimit *semaphore.Weighted
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	item := r.URL.Query().Get("item")
	ctx, cancel := context.WithTimeout(r.Context(), demo.Timeout())
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	var price, stock string
	g.Go(func() error {
		var err error
		if price, err = s.up.Get(ctx, "/price", item); err != nil {
			price = "price unknown"
		}
		return nil
	})
	g.Go(func() error {
		if err := s.stockLimit.Acquire(ctx, 1); err != nil {
			return err
		}
		defer s.stockLimit.Release(1)
		var err error
		stock, err = s.up.Get(ctx, "/stock", item)
		return err
	})
	err := g.Wait()
	demo.Write(w, demo.Reply(item, price, stock), err)
}

func run(out io.Writer) error {
	up := demo.StartUpstreams()
	defer up.Close()
	return demo.Drive(out, up, &service{up: up, stockLimit: semaphore.NewWeighted(demo.StockLimit)})
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
