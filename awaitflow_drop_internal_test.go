package asyncsteps

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// endsObserver is an observer of AwaitFlow steps that sends each end it
// is told of, with its error and its context's Err.
type endsObserver struct{ ends chan [2]error }

func (o endsObserver) AwaitFlowStart(ctx context.Context) context.Context { return ctx }

func (o endsObserver) AwaitFlowEnd(ctx context.Context, err error) {
	o.ends <- [2]error{err, ctx.Err()}
}

// wrappingSteps is a decorator that gives the steps added through it
// itself, and unwraps.
type wrappingSteps struct{ AsyncSteps }

func (w wrappingSteps) Add(fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	w.AsyncSteps.Add(func(as AsyncSteps, args ...any) { fn(wrappingSteps{as}, args...) }, onerror...)
	return w
}

func (w wrappingSteps) Unwrap() AsyncSteps { return w.AsyncSteps }

// An AwaitFlow step given through a decorator gets its Result in a task
// on its loop. A loop that closes before it runs that task drops it, and
// ends the flow: the step's end is told all the same, as for a step that
// the closing of its loop ends. Before, nothing told it (otelsteps' span
// of the step never ended).
func TestAwaitFlowObserverToldOfAStepWhoseDeliveryTheClosingLoopDrops(t *testing.T) {
	loop, other := NewLoop(), NewLoop()
	defer other.Close()
	release := make(chan struct{})
	awaited := New(WithTool(other))
	awaited.Add(func(as AsyncSteps, _ ...any) { AwaitChan(as, release) })
	started := make(chan struct{})
	r := New(WithTool(loop))
	r.Add(func(as AsyncSteps, _ ...any) {
		AwaitFlow(wrappingSteps{as}, awaited)
		close(started)
	})
	obs := endsObserver{ends: make(chan [2]error, 2)}
	res := r.PromiseContext(context.WithValue(context.Background(), toolinfo.AwaitFlowKey{}, toolinfo.AwaitFlowObserver(obs)))
	<-started
	gate, entered := make(chan struct{}), make(chan struct{})
	loop.Immediate(func() { close(entered); <-gate }) // the loop runs no task meanwhile
	<-entered
	injected := make(chan struct{})
	testHookDeliveryInjected = func() { close(injected) }
	defer func() { testHookDeliveryInjected = nil }()
	close(release)
	<-injected
	closed := make(chan struct{})
	go func() { loop.Close(); close(closed) }()
	for !loop.Closed() {
		runtime.Gosched()
	}
	close(gate)
	if got := (<-res).Err; !isLoopClosed(got) {
		t.Fatalf("the flow ended with %v, want the loop-closed InternalError", got)
	}
	<-closed
	select {
	case end := <-obs.ends:
		if end[0] != nil || end[1] != context.Canceled {
			t.Errorf("the end was told with %v, ctx.Err %v; want nil, context.Canceled", end[0], end[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the step's end was never told")
	}
	select {
	case end := <-obs.ends:
		t.Errorf("a second end was told: %v", end)
	default:
	}
}

// isLoopClosed reports whether err is the InternalError of a flow that
// its closed loop ended.
func isLoopClosed(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == InternalError && e.Info == loopClosedInfo
}
