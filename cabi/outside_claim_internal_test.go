//go:build cgo

package cabi

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C step waits with a timeout and a C cancel handler; success from
// another thread claims it, and its timeout falls due before the task
// that success posts reaches the loop: the seam holds the post until the
// timer has run. The success is made once the step's callback has
// returned, or in the callback, on another thread, with a timeout of 0
// that falls due as the callback returns. The claimed success wins, as a
// Success claimed from another goroutine wins over a Go step's timer:
// the flow goes on, and the cancel handler does not run. Before, the
// step failed with Timeout, and its cancel handler did not run either,
// as the claim said success.
func TestTimeoutAfterAClaimedOutsideSuccess(t *testing.T) {
	for _, inCallback := range []bool{false, true} {
		t.Run(whenMade(inCallback), func(t *testing.T) {
			ended, cancels := claimRace{inCallback: inCallback}.run(t)
			if want := "ok"; ended != want {
				t.Errorf("the flow ended with %q, want %q", ended, want)
			}
			if cancels != 0 {
				t.Errorf("the step's C cancel handler ran %d times, want 0", cancels)
			}
		})
	}
}

// As TestTimeoutAfterAClaimedOutsideSuccess, for handle_error from
// another thread, and for Go's Error through Wrap from another
// goroutine: the claimed error wins over the timer, as an Error claimed
// from another goroutine wins over a Go step's, and the flow ends with
// its code and info; the step's C cancel handler runs once, as the error
// unwinds through the step. Before, the flow ended with Timeout (the
// cancel handler running for the timeout).
func TestTimeoutAfterAClaimedOutsideError(t *testing.T) {
	for _, goError := range []bool{false, true} {
		for _, inCallback := range []bool{false, true} {
			name := whenMade(inCallback)
			if goError {
				name = "Go's Error " + name
			}
			t.Run(name, func(t *testing.T) {
				ended, cancels := claimRace{inCallback: inCallback, code: 7, goError: goError}.run(t)
				if want := "E7 (from a thread)"; ended != want {
					t.Errorf("the flow ended with %q, want %q", ended, want)
				}
				if cancels != 1 {
					t.Errorf("the step's C cancel handler ran %d times, want 1", cancels)
				}
			})
		}
	}
}

// A cancel of the flow, where TestTimeoutAfterAClaimedOutsideError has
// the timer fall due, finds the step failed by the claimed error: the
// step's C cancel handler runs once, the error's task then delivers
// nothing, and the flow ends with no outcome, as any cancelled flow.
func TestCancelAfterAClaimedOutsideError(t *testing.T) {
	for _, inCallback := range []bool{false, true} {
		t.Run(whenMade(inCallback), func(t *testing.T) {
			ended, cancels := claimRace{inCallback: inCallback, code: 7, cancel: true}.run(t)
			if ended != "" {
				t.Errorf("the flow ended with %q, want no outcome", ended)
			}
			if cancels != 1 {
				t.Errorf("the step's C cancel handler ran %d times, want 1", cancels)
			}
		})
	}
}

func whenMade(inCallback bool) string {
	if inCallback {
		return "during the callback"
	}
	return "after the callback"
}

// claimRace is a completion of a waiting C step from another thread that
// claims the step, against the step's timer falling due, or a cancel of
// the flow, before the completion's task is posted.
type claimRace struct {
	inCallback bool // made in the step's callback (a timeout of 0), else once it has returned
	code       int  // 0: success; else handle_error with E<code> and "from a thread"
	goError    bool // the error by Go's Error through Wrap, not handle_error
	cancel     bool // the flow is cancelled in between, else the timer falls due
}

// run runs the race and reports how the flow ended ("ok", or the code
// and info of its error, "" if it never ended) and how many times the
// step's C cancel handler ran. It checks that the flow leaves no node
// and the C side saw no violation.
func (rc claimRace) run(t *testing.T) (ended string, cancels int) {
	t.Helper()
	timeout := 10 * time.Millisecond
	switch {
	case rc.cancel:
		timeout = time.Hour // not to fall due
	case rc.inCallback:
		timeout = 0
	}
	tt := asyncsteps.NewTestTool()
	before := ctest.FlowCounters()
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFGo}})
	// The completion's thread stops in the seam, its claim made, until
	// post is closed; done once it has posted.
	claimed, post, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	complete := func(p unsafe.Pointer) {
		go func() {
			defer close(done)
			if rc.goError {
				Wrap(p).Error(fmt.Sprintf("E%d", rc.code), "from a thread")
				return
			}
			ctest.FlowComplete(p, rc.code)
		}()
		<-claimed
	}
	var step unsafe.Pointer
	ctest.FlowHook = func(p unsafe.Pointer, _ int) {
		step = p
		ctest.FlowGuard(p, 0) // waits, with a C cancel handler
		Wrap(p).SetTimeout(timeout)
		if rc.inCallback {
			complete(p)
		}
	}
	t.Cleanup(func() { ctest.FlowHook = nil; testHookClaimed = nil })
	testHookClaimed = func(*node, uint32, bool) {
		close(claimed)
		<-post
	}
	ptr := New(tt)
	r := Wrap(ptr).(*asyncsteps.Root)
	ctest.FlowAdd(ptr, 0)
	r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = "ok" })
	r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code + " (" + err.Info + ")" })
	tt.Advance(0) // the step's callback: it waits
	if step == nil {
		t.Fatal("the step's callback did not run")
	}
	if !rc.inCallback {
		complete(step)
	}
	if rc.cancel {
		r.Cancel()
		tt.Run()
	} else {
		tt.Advance(timeout) // the timer falls due before the task is posted
	}
	close(post)
	<-done
	tt.Run()
	cancels = ctest.FlowCounters().Cancels - before.Cancels
	ctest.FlowFree(ptr)
	tt.Run()
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	if n := ctest.FlowCounters().Violations - before.Violations; n != 0 {
		t.Errorf("%d violations of the C side", n)
	}
	return ended, cancels
}

// Binary gives another goroutine the pointer of a waiting Go step, and a
// C thread completes the step through it, both before the loop's next
// turn: the loop adopts the pointer (see adoptExternal), finding the
// step claimed by the success, then applies the success.
func TestSuccessOnAPointerBinaryGaveOffTheLoop(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	var waiting asyncsteps.AsyncSteps
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting = as
	})
	ended := ""
	r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = "ok" })
	r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code })
	tt.Run()
	fromGoroutine(func() { ctest.FlowComplete(Binary(waiting), 0) })
	tt.Run()
	if ended != "ok" {
		t.Errorf("the flow ended with %q, want %q", ended, "ok")
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
}
