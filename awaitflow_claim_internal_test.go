package asyncsteps

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// claimObserver is an observer of AwaitFlow steps that says when a step
// starts, and sends each end it is told of, with its error and its
// context's Err; with hold set, it says it has entered the end (on
// entered), and waits until hold closes before it reads them, as an
// observer that takes its time does.
type claimObserver struct {
	started       chan struct{}
	ends          chan [2]error
	entered, hold chan struct{}
}

// newClaimObserver returns a claimObserver, one that holds if hold.
func newClaimObserver(hold bool) claimObserver {
	o := claimObserver{started: make(chan struct{}), ends: make(chan [2]error, 2)}
	if hold {
		o.entered, o.hold = make(chan struct{}, 2), make(chan struct{})
	}
	return o
}

func (o claimObserver) AwaitFlowStart(ctx context.Context) context.Context {
	close(o.started)
	return ctx
}

func (o claimObserver) AwaitFlowEnd(ctx context.Context, err error) {
	if o.hold != nil {
		o.entered <- struct{}{}
		<-o.hold
	}
	o.ends <- [2]error{err, ctx.Err()}
}

// runClaimRace runs, in a synctest bubble, an AwaitFlow step whose
// awaited flow, on another loop, runs last (its last step) once the
// step's callback has returned, so that the goroutine that waits for it
// delivers its Result; once between returns (as the goroutine reaches
// the claim of the step's completion, or is held in the observer's end),
// it cancels the step's flow, and once that flow has ended, lets the
// goroutine go on (goOn). It returns the end told, and fails t if
// another is told once every goroutine of the bubble has stopped.
func runClaimRace(t *testing.T, obs claimObserver, last StepFunc, between func(), goOn func()) [2]error {
	loop, other := NewLoop(), NewLoop()
	defer loop.Close()
	defer other.Close()
	gate := make(chan struct{})
	awaited := New(WithTool(other))
	awaited.Add(func(as AsyncSteps, _ ...any) { AwaitChan(as, gate) })
	awaited.Add(last)
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
	told := <-obs.ends
	// The goroutine that delivered the Result has ended, and the loops
	// have run what it posted: a second end would have been told.
	synctest.Wait()
	select {
	case more := <-obs.ends:
		t.Errorf("a second end was told: %v", more)
	default:
	}
	return told
}

// succeedLast is the last step of an awaited flow that succeeds.
func succeedLast(as AsyncSteps, _ ...any) { as.Success(1) }

// The end of an AwaitFlow step is told as the step sees it. A cancel
// that ends the step after the goroutine that waited for the awaited
// flow has its Result, before it claims the step's completion, cancels
// the step, whose cancel handler runs, and which takes no success: the
// end told is a cancel. Before, the goroutine told the success, and
// claimed the completion after: otelsteps' span of the step said it
// succeeded, for a step that was cancelled.
func TestAwaitFlowEndIsACancelThatCameBeforeTheClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reached, release := make(chan struct{}), make(chan struct{})
		testHookAwaitFlowClaim = func() { close(reached); <-release }
		defer func() { testHookAwaitFlowClaim = nil }()
		end := runClaimRace(t, newClaimObserver(false), succeedLast,
			func() { <-reached }, func() { close(release) })
		if end[0] != nil || end[1] != context.Canceled {
			t.Errorf("the end was told with %v, ctx.Err %v; want <nil>, context canceled", end[0], end[1])
		}
	})
}

// The other order: a success claimed before the cancel has completed the
// step, whose cancel handler then does not run (the flow is cancelled all
// the same): the end told is that success, told once the completion is
// claimed, where the observer holds the goroutine until the flow has
// ended.
func TestAwaitFlowEndIsTheSuccessClaimedBeforeACancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := newClaimObserver(true)
		got := runClaimRace(t, obs, succeedLast, func() { <-obs.entered }, func() { close(obs.hold) })
		if got[0] != nil || got[1] != nil {
			t.Errorf("the end was told with %v, ctx.Err %v; want <nil>, <nil>", got[0], got[1])
		}
	})
}

// A failure claimed before a cancel is the end told, with the step's
// context as it was: the cancel that comes then runs the step's cancel
// handler, as applying the failure would (the step has failed; the flow
// ends cancelled), and the end has been told already. Before, that
// handler cancelled the context under the observer still reading it:
// the end read as a failure and a cancel at once, and otelsteps' span of
// the step, which looks at the context first, said cancelled or failed
// as the goroutines went.
func TestAwaitFlowEndIsTheFailureClaimedBeforeACancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := newClaimObserver(true)
		fail := func(as AsyncSteps, _ ...any) { as.Error(InvalidRequest, "bad") }
		got := runClaimRace(t, obs, fail, func() { <-obs.entered }, func() { close(obs.hold) })
		if e, _ := got[0].(*Error); e == nil || e.Code != InvalidRequest || e.Info != "bad" || got[1] != nil {
			t.Errorf("the end was told with %v, ctx.Err %v; want InvalidRequest: bad, <nil>", got[0], got[1])
		}
	})
}
