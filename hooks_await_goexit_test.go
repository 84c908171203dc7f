package asyncsteps_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// AwaitEnd is called once the function has returned, panicked or called
// runtime.Goexit, with the error its step fails with: a tracer ends there
// what AwaitStart began. A Goexit during which a deferred call of the
// function panics is a Goexit too (the goroutine ends all the same), and
// so is one in a method of the error the function returns, which the
// hooks' wrapper maps for AwaitEnd: the hook must see each, once, with the
// Goexit's InternalError, as the step.
func TestAwaitEndSeesAGoexit(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   asyncsteps.AwaitFunc
	}{
		{"with a panicking defer", func(context.Context) (any, error) {
			defer func() { panic("deferred") }()
			runtime.Goexit()
			return nil, nil
		}},
		{"in the error's method", func(context.Context) (any, error) { return nil, goexitError{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				l := asyncsteps.NewLoop()
				defer l.Close()
				var mu sync.Mutex
				var starts int
				var ends []string
				l.SetHooks(&asyncsteps.Hooks{
					AwaitStart: func(ctx context.Context) context.Context {
						mu.Lock()
						defer mu.Unlock()
						starts++
						return ctx
					},
					AwaitEnd: func(_ context.Context, err *asyncsteps.Error) {
						mu.Lock()
						defer mu.Unlock()
						ends = append(ends, fmt.Sprint(err))
					},
				})
				r := asyncsteps.New(asyncsteps.WithTool(l))
				var got string
				r.Await(tc.fn, func(as asyncsteps.AsyncSteps, code string) {
					got = code + ": " + as.State().ErrorInfo
					as.Success()
				})
				if _, err := r.Run(context.Background()); err != nil {
					t.Fatalf("Run: %v", err)
				}
				want := "InternalError: " + goexitInfo
				if got != want {
					t.Errorf("the handler saw %q, want %q", got, want)
				}
				mu.Lock()
				defer mu.Unlock()
				if starts != 1 || fmt.Sprint(ends) != "["+want+"]" {
					t.Errorf("AwaitStart ran %d times, AwaitEnd saw %q; want 1 and [%s]", starts, ends, want)
				}
			})
		})
	}
}
