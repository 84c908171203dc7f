//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go step gives itself to C by Binary, and a C thread completes the
// pointer (success, or handle_error with E7 and "from a thread") while
// the step's callback still runs, before it waits: only then does the
// callback set a Go cancel handler and a timeout of 1ms, and return. The
// timeout falls due before the task the completion posts reaches the
// loop (the seam holds the post). The completion wins, as it does when
// made once the step waits: the success goes on to the next step, and
// the cancel handler does not run; the error ends the flow with its code
// and info, the cancel handler running once as the error unwinds through
// the step. Before, the flow ended with Timeout either way, the cancel
// handler running once for the timeout.
func TestBinaryCompletedBeforeTheStepWaits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    int
		ended   string
		cancels int
	}{
		{"success", 0, "ok", 0},
		{"handle_error", 7, "E7 (from a thread)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ended, cancels := binaryEarlyCompletion(t, tc.code)
			if ended != tc.ended {
				t.Errorf("the flow ended with %q, want %q", ended, tc.ended)
			}
			if cancels != tc.cancels {
				t.Errorf("the step's Go cancel handler ran %d times, want %d", cancels, tc.cancels)
			}
		})
	}
}

// binaryEarlyCompletion runs the flow of TestBinaryCompletedBeforeTheStepWaits
// with the completion of code (0: success, else handle_error E<code>)
// and reports how the flow ended ("ok", or the code and info of its
// error) and how many times the step's Go cancel handler ran. It checks
// that the flow leaves no node.
func binaryEarlyCompletion(t *testing.T, code int) (ended string, cancels int) {
	t.Helper()
	const timeout = time.Millisecond
	tt := asyncsteps.NewTestTool()
	claimed, post, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { testHookClaimed = nil })
	testHookClaimed = func(*node, uint32, bool) {
		close(claimed)
		<-post // the completion's task is posted only once the timer has run
	}
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := Binary(as)
		go func(p unsafe.Pointer) {
			defer close(done)
			ctest.FlowComplete(p, code)
		}(p)
		<-claimed
		as.SetCancel(func(asyncsteps.AsyncSteps) { cancels++ })
		as.SetTimeout(timeout)
	})
	r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = "ok" })
	r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code + " (" + err.Info + ")" })
	tt.Advance(0) // the step's callback: completed from C, then it waits
	tt.Advance(timeout)
	close(post)
	<-done
	tt.Run()
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	return ended, cancels
}
