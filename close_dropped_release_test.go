package asyncsteps_test

import (
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps"
)

// A Mutex slot whose hand-over is a task that a closing Loop had accepted
// and then drops is not lost: the closing loop gives back the slots of
// every section its flows are in, whatever was queued for them, before it
// drops its tasks. Two hand-overs are dropped here, each on a loop blocked
// in a callback while the task is accepted and Close is called: the
// completion that would end the holder's section, and the admission of the
// next waiter, which the Mutex counts as a holder from the moment it is
// let in. A flow on a live loop, queued behind, enters either way.
func TestClosedLoopDroppingAHandOverLosesNoSlot(t *testing.T) {
	for _, dropped := range []string{"holder's completion", "waiter's admission"} {
		t.Run(dropped, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := asyncsteps.NewMutex(1)
				holderLoop, waiterLoop, liveLoop := asyncsteps.NewLoop(), asyncsteps.NewLoop(), asyncsteps.NewLoop()
				defer liveLoop.Close()
				var tr tracer

				var held asyncsteps.AsyncSteps
				holder := asyncsteps.New(asyncsteps.WithTool(holderLoop))
				holder.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					held = as
				})
				holderDone := holder.Promise()
				synctest.Wait()
				waiter := asyncsteps.New(asyncsteps.WithTool(waiterLoop))
				waiter.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("waiter entered") })
				waiterDone := waiter.Promise()
				synctest.Wait()
				live := asyncsteps.New(asyncsteps.WithTool(liveLoop))
				live.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("live entered") })
				liveDone := live.Promise()
				synctest.Wait() // all three in the Mutex: one holder, two queued

				closing := holderLoop
				if dropped == "waiter's admission" {
					closing = waiterLoop
				}
				gate := make(chan struct{})
				closing.Immediate(func() { <-gate }) // the loop is busy
				synctest.Wait()
				held.Success() // the holder's completion, or the waiter's admission, is queued on the busy loop
				synctest.Wait()
				go closing.Close()
				synctest.Wait() // closing: the task accepted will not run
				close(gate)
				synctest.Wait()

				if res := <-liveDone; res.Err != nil {
					t.Errorf("the live flow: %v, want success", res.Err)
				}
				closedErr := "InternalError: the flow's loop is closed"
				if dropped == "holder's completion" {
					wantErrText(t, "holder", (<-holderDone).Err, closedErr)
					if res := <-waiterDone; res.Err != nil {
						t.Errorf("the waiter: %v, want success", res.Err)
					}
					wantTrace(t, &tr, "waiter entered,live entered")
				} else {
					if res := <-holderDone; res.Err != nil {
						t.Errorf("the holder: %v, want success", res.Err)
					}
					wantErrText(t, "waiter", (<-waiterDone).Err, closedErr)
					wantTrace(t, &tr, "live entered")
				}
				holderLoop.Close()
				waiterLoop.Close()
			})
		})
	}
}

// wantErrText fails the test unless err prints as want.
func wantErrText(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Errorf("%s: %v, want %s", what, err, want)
	}
}
