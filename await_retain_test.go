package asyncsteps

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// An Await step's call is not kept by the queue of the step that added
// it once the step has run: a finished flow's frames, kept by the loop
// for reuse, keep neither the call nor the result it held.
func TestAwaitCallNotKeptAfterItsStep(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	collected := make(chan struct{})
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.Await(func(context.Context) (any, error) {
			v := new([64]byte)
			runtime.AddCleanup(v, func(struct{}) { close(collected) }, struct{}{})
			return v, nil
		})
		as.Add(func(as AsyncSteps, _ ...any) {})
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 100 { // the cleanup runs on a goroutine of its own, soon after a collection
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the Await function's result is still reachable after the flow ended")
}
