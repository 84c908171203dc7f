package asyncsteps_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps"
)

// A flow started by Execute whose Await function returns while its loop
// closes, after Close has begun and before the loop has stopped, ends
// with the closed loop's error like any flow the loop leaves waiting:
// its unhandled-error function gets it, and the Root runs no more. The
// loop, closing, drops the function's result, which would have woken the
// flow. (The call had left the loop's calls in flight as the function
// returned, and the flow was held by nothing else: it never ended, and
// Running reported true for ever.)
func TestAnAwaitReturningAsItsLoopClosesEndsItsFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var mu sync.Mutex
		var ended []string
		record := func(err *asyncsteps.Error) {
			mu.Lock()
			defer mu.Unlock()
			ended = append(ended, err.Error())
		}
		release := make(chan struct{})
		r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(record))
		r.Await(func(context.Context) (any, error) {
			<-release
			return "late", nil
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("the step after the Await ran") })
		r.Execute()
		synctest.Wait() // the function waits

		// A callback holds the loop while Close begins, so that the
		// function returns between the two.
		hold := make(chan struct{})
		busy := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
		busy.Add(func(asyncsteps.AsyncSteps, ...any) { <-hold })
		busy.Execute()
		synctest.Wait()
		closed := make(chan struct{})
		go func() {
			loop.Close()
			close(closed)
		}()
		synctest.Wait() // Close waits for the loop
		close(release)
		synctest.Wait() // the function has returned
		close(hold)
		<-closed
		synctest.Wait() // the unhandled-error function runs on a goroutine of its own

		mu.Lock()
		got := slices.Clone(ended)
		mu.Unlock()
		if want := []string{asyncsteps.InternalError + ": " + closedInfo}; !slices.Equal(got, want) {
			t.Errorf("the unhandled-error function got %q, want %q", got, want)
		}
		if r.Running() {
			t.Error("the flow still runs after its loop has stopped")
		}
	})
}
