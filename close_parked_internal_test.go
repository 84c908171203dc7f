package asyncsteps

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// A step's timeout that fires while a completion from another goroutine
// is on its way (claimed, not handed to the loop yet) lets the completion
// win, and disarms: the timer no longer holds the flow. A loop closed
// before the completion reaches it drops the completion, and ends the
// flow. The test claims the step as such a Success does, and stops there.
func TestCloseEndsAFlowWhoseTimeoutLostToACompletionOnItsWay(t *testing.T) {
	loop := NewLoop()
	var ended []string // on the loop, before Close returns
	claimed := make(chan *stepAPI, 1)
	r := New(WithTool(loop), WithUnhandledError(func(err *Error) {
		ended = append(ended, err.Code+": "+err.Info)
	}))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.SetTimeout(time.Nanosecond)
		h := as.(*stepAPI)
		if !h.claim(0) {
			t.Error("the waiting step could not be claimed")
		}
		claimed <- h
	})
	r.Execute()
	h := <-claimed
	for fired := false; !fired; { // until the timeout has run, and lost
		ch := make(chan bool)
		loop.Immediate(func() { ch <- h.f.timer() == nil })
		fired = <-ch
	}
	loop.Close()
	if want := []string{InternalError + ": " + loopClosedInfo}; !slices.Equal(ended, want) {
		t.Errorf("the flow ended with %q, want %q", ended, want)
	}
	runtime.KeepAlive(h)
}
