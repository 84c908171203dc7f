package asyncsteps

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// claimObserver is an observer of AwaitFlow steps that says when a step
// starts, and sends each end it is told of, with its error and its
// context's Err; with hold set, it waits in that end until hold closes.
type claimObserver struct {
	started chan struct{}
	ends    chan [2]error
	hold    chan struct{}
}

func (o claimObserver) AwaitFlowStart(ctx context.Context) context.Context {
	close(o.started)
	return ctx
}

func (o claimObserver) AwaitFlowEnd(ctx context.Context, err error) {
	o.ends <- [2]error{err, ctx.Err()}
	if o.hold != nil {
		<-o.hold
	}
}

// runClaimRace runs an AwaitFlow step whose awaited flow, on another
// loop, succeeds once the step's callback has returned, so that the
// goroutine that waits for it delivers its Result; once between returns
// (as the goroutine reaches the claim of the step's completion, or is
// held in the observer's end), it cancels the step's flow, and once that
// flow has ended, lets the goroutine go on (goOn). It returns the end
// told, given by end, and fails t if another is told.
func runClaimRace(t *testing.T, obs claimObserver, between func(), goOn func(), end func() [2]error) [2]error {
	loop, other := NewLoop(), NewLoop()
	defer loop.Close()
	defer other.Close()
	gate := make(chan struct{})
	awaited := New(WithTool(other))
	awaited.Add(func(as AsyncSteps, _ ...any) { AwaitChan(as, gate) })
	r := New(WithTool(loop))
	AwaitFlow(r, awaited)
	res := r.PromiseContext(context.WithValue(context.Background(), toolinfo.AwaitFlowKey{}, toolinfo.AwaitFlowObserver(obs)))
	<-obs.started
	returned := make(chan struct{})
	loop.Immediate(func() { close(returned) }) // after the step's callback
	<-returned
	close(gate)
	between()
	r.Cancel()
	if got := (<-res).Err; !errors.Is(got, context.Canceled) {
		t.Errorf("the flow ended with %v, want cancelled", got)
	}
	goOn()
	told := end()
	// Whatever the goroutine posted to the loop has run after this.
	done := make(chan struct{})
	loop.Immediate(func() { close(done) })
	<-done
	select {
	case more := <-obs.ends:
		t.Errorf("a second end was told: %v", more)
	case <-time.After(10 * time.Millisecond):
	}
	return told
}

// The end of an AwaitFlow step is told as the step sees it. A cancel
// that ends the step after the goroutine that waited for the awaited
// flow has its Result, before it claims the step's completion, cancels
// the step, whose cancel handler runs, and which takes no success: the
// end told is a cancel. Before, the goroutine told the success, and
// claimed the completion after: otelsteps' span of the step said it
// succeeded, for a step that was cancelled.
func TestAwaitFlowEndIsACancelThatCameBeforeTheClaim(t *testing.T) {
	obs := claimObserver{started: make(chan struct{}), ends: make(chan [2]error, 2)}
	reached, release := make(chan struct{}), make(chan struct{})
	testHookAwaitFlowClaim = func() { close(reached); <-release }
	defer func() { testHookAwaitFlowClaim = nil }()
	end := runClaimRace(t, obs, func() { <-reached }, func() { close(release) },
		func() [2]error { return <-obs.ends })
	if end[0] != nil || end[1] != context.Canceled {
		t.Errorf("the end was told with %v, ctx.Err %v; want <nil>, context canceled", end[0], end[1])
	}
}

// The other order: a success claimed before the cancel has completed the
// step, whose cancel handler then does not run (the flow is cancelled all
// the same): the end told is that success, told once the completion is
// claimed, where the observer holds the goroutine until the flow has
// ended.
func TestAwaitFlowEndIsTheSuccessClaimedBeforeACancel(t *testing.T) {
	hold := make(chan struct{})
	obs := claimObserver{started: make(chan struct{}), ends: make(chan [2]error, 2), hold: hold}
	var end [2]error
	got := runClaimRace(t, obs, func() { end = <-obs.ends }, func() { close(hold) },
		func() [2]error { return end })
	if got[0] != nil || got[1] != nil {
		t.Errorf("the end was told with %v, ctx.Err %v; want <nil>, <nil>", got[0], got[1])
	}
}
