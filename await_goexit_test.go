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

// goexitError is an error whose Error method calls runtime.Goexit: user
// code that the engine runs, on the goroutine that brings the error into
// the flow, when it maps the error to a code.
type goexitError struct{}

func (goexitError) Error() string {
	runtime.Goexit()
	return "unreachable"
}

// An error whose Error method calls runtime.Goexit ends the goroutine that
// maps it, as a Goexit of the Await function itself would: the step must
// fail with the Goexit's InternalError, not be left waiting. Likewise for
// AwaitResult, whose goroutine maps a Result's error that comes once the
// step waits.
func TestAwaitErrorWhoseMethodCallsGoexitFailsTheStep(t *testing.T) {
	adders := []struct {
		name string
		add  func(as asyncsteps.AsyncSteps)
	}{
		{"Await", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) { return nil, goexitError{} })
		}},
		{"AwaitResult", func(as asyncsteps.AsyncSteps) {
			ch := make(chan asyncsteps.Result, 1)
			p := as.Parallel()
			asyncsteps.AwaitResult(p, ch) // the first branch waits on ch
			p.Add(func(asyncsteps.AsyncSteps, ...any) { ch <- asyncsteps.Result{Err: goexitError{}} })
		}},
	}
	for _, tool := range hostileTools {
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tl, release := tool.open(t)
				defer release()
				for _, a := range adders {
					r := asyncsteps.New(asyncsteps.WithTool(tl))
					var got string
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { a.add(as) }, func(as asyncsteps.AsyncSteps, code string) {
						got = code + ": " + as.State().ErrorInfo
						as.Success("caught")
					})
					wantSuccess(t, finish(t, tl, r.Promise()), "caught")
					if want := "InternalError: " + goexitInfo; got != want {
						t.Errorf("%s: the handler saw %q, want %q", a.name, got, want)
					}
				}
				wantServing(t, tl)
			})
		})
	}
}
