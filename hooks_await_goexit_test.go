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
// function panics is a Goexit too (the goroutine ends all the same): the
// hook must see it, once, with the Goexit's InternalError, as the step.
func TestAwaitEndSeesAGoexitWithAPanickingDefer(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var mu sync.Mutex
		var ends []string
		l.SetHooks(&asyncsteps.Hooks{AwaitEnd: func(_ context.Context, err *asyncsteps.Error) {
			mu.Lock()
			defer mu.Unlock()
			ends = append(ends, fmt.Sprint(err))
		}})
		r := asyncsteps.New(asyncsteps.WithTool(l))
		var got string
		r.Await(func(context.Context) (any, error) {
			defer func() { panic("deferred") }()
			runtime.Goexit()
			return nil, nil
		}, func(as asyncsteps.AsyncSteps, code string) {
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
		if fmt.Sprint(ends) != "["+want+"]" {
			t.Errorf("AwaitEnd saw %q, want [%s]", ends, want)
		}
	})
}
