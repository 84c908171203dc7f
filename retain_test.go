package asyncsteps

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// The frames a Loop keeps for its next flows do not keep the steps of a
// flow that ended through the one-step queues they were given: a
// Parallel's branch frames get slices of its definition, a loop's frame
// a slice of its control, which no later step appends to.
func TestPooledFramesKeepNoEndedFlow(t *testing.T) {
	l := newTestLoop(t)
	collected := make(chan struct{})
	func() {
		payload := new([1 << 10]byte)
		runtime.AddCleanup(payload, func(struct{}) { close(collected) }, struct{}{})
		body := func(as AsyncSteps) {
			_ = payload[0]
			as.Break()
		}
		r := New(WithTool(l))
		p := r.Parallel() // in the Root's own queue, which is not pooled
		p.Loop(body)
		p.Loop(body)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Error("the ended flow's Parallel is still reachable after 50 collections")
}
