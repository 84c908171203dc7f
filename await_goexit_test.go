package asyncsteps_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// An Await function that calls runtime.Goexit while one of its deferred
// calls panics: the engine recovers that panic, but the Goexit goes on and
// ends the goroutine all the same. The step must fail with the Goexit's
// InternalError, not be left waiting.
func TestAwaitGoexitWithAPanickingDeferStillFailsTheStep(t *testing.T) {
	for _, tool := range hostileTools {
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tl, release := tool.open(t)
				defer release()
				r := asyncsteps.New(asyncsteps.WithTool(tl))
				var got string
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Await(func(context.Context) (any, error) {
						defer func() { panic("deferred") }()
						runtime.Goexit()
						return nil, nil
					})
				}, func(as asyncsteps.AsyncSteps, code string) {
					got = code + ": " + as.State().ErrorInfo
					as.Success("caught")
				})
				wantSuccess(t, finish(t, tl, r.Promise()), "caught")
				if want := "InternalError: " + goexitInfo; got != want {
					t.Errorf("the handler saw %q, want %q", got, want)
				}
				wantServing(t, tl)
			})
		})
	}
}
