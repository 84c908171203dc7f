//go:build cgo

package cabi

import (
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
	t.Run("success after the callback", func(t *testing.T) { timeoutAfterClaim(t, false) })
	t.Run("success during the callback", func(t *testing.T) { timeoutAfterClaim(t, true) })
}

func timeoutAfterClaim(t *testing.T, inCallback bool) {
	timeout := 10 * time.Millisecond
	if inCallback {
		timeout = 0
	}
	tt := asyncsteps.NewTestTool()
	before := ctest.FlowCounters()
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFGo}})
	// The success's thread stops in the seam, its claim made, until post
	// is closed; done once it has posted.
	claimed, post, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	succeed := func(p unsafe.Pointer) {
		go func() {
			defer close(done)
			ctest.FlowComplete(p, 0)
		}()
		<-claimed
	}
	var step unsafe.Pointer
	ctest.FlowHook = func(p unsafe.Pointer, _ int) {
		step = p
		ctest.FlowGuard(p, 0) // waits, with a C cancel handler
		Wrap(p).SetTimeout(timeout)
		if inCallback {
			succeed(p)
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
	ended := ""
	r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = "ok" })
	r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code })
	tt.Advance(0) // the step's callback: it waits
	if step == nil {
		t.Fatal("the step's callback did not run")
	}
	if !inCallback {
		succeed(step)
	}
	tt.Advance(timeout) // the timer falls due before the success's task is posted
	close(post)
	<-done
	tt.Run()
	if ended != "ok" {
		t.Errorf("the flow ended with %q, want %q", ended, "ok")
	}
	if n := ctest.FlowCounters().Cancels - before.Cancels; n != 0 {
		t.Errorf("the step's C cancel handler ran %d times, want 0", n)
	}
	ctest.FlowFree(ptr)
	tt.Run()
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	if n := ctest.FlowCounters().Violations - before.Violations; n != 0 {
		t.Errorf("%d violations of the C side", n)
	}
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
