//go:build cgo

package cabi

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// FreeWait waits for the release of the root without waking its loop.
// Here the release waits behind an execute that starts the flow on
// another thread, held there by the test's hook, while the loop sleeps;
// a second of the bubble's clock passes with no pass of the loop. Before,
// FreeWait asked every 10 ms whether the loop was closing by scheduling a
// timer an hour ahead and cancelling it, and each such timer woke the
// sleeping loop: a hundred passes in that second.
func TestFreeWaitDoesNotWakeTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var passes atomic.Int64
		loop.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) { passes.Add(1) }})
		ro := newOwnedRoot(loop)
		hold := make(chan struct{})
		testHookStart = func() { <-hold }
		defer func() { testHookStart = nil }()
		started := make(chan struct{})
		go func() {
			defer close(started)
			ro.execute(0, nil)
		}()
		synctest.Wait() // execute holds its start in the hook
		freed := make(chan struct{})
		go func() {
			defer close(freed)
			ro.free(true)
		}()
		synctest.Wait() // FreeWait waits for the release, which follows the start
		before := passes.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		n := passes.Load() - before
		close(hold)
		<-started
		<-freed
		if n != 0 {
			t.Errorf("%d passes of the sleeping loop in a second of FreeWait's wait, want 0", n)
		}
		if ro.root.Running() {
			t.Error("the freed root's flow still runs")
		}
	})
}

// FreeWait that waits for a release behind a slow callback returns as
// soon as the loop is closed, without waiting for that callback: the
// loop runs the release only once it has stopped, and its last callback
// may wait for the caller of FreeWait. The cleanups still run once the
// loop has stopped.
func TestFreeWaitReturnsWhenTheLoopIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		ro := newOwnedRoot(loop)
		ro.node.flow.cleanups.Store(true) // as after an execute: FreeWait waits
		slow, closing := make(chan struct{}), make(chan struct{})
		loop.Immediate(func() {
			<-slow // the loop is busy: the release waits behind this
		})
		freed := make(chan struct{})
		go func() {
			defer close(freed)
			ro.free(true)
		}()
		synctest.Wait()
		select {
		case <-freed:
			t.Fatal("FreeWait returned before the release")
		default:
		}
		go func() {
			defer close(closing)
			loop.Close() // waits for the slow callback
		}()
		synctest.Wait()
		select {
		case <-freed:
		default:
			t.Error("FreeWait still waits once the loop is closed")
		}
		close(slow)
		<-closing
		<-freed
	})
}
