package asyncsteps

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Handles of Immediate come in blocks, so a kept handle keeps its block
// alive: no handle may keep its callback once the loop is done with it,
// whether the callback ran, was cancelled and skipped, or was dropped by
// Close. Every callback here holds an object whose cleanup must run while
// all the handles are still kept.
func TestLoopImmediateHandlesKeepNoCallback(t *testing.T) {
	l := NewLoop()
	const n = 3 * immediateBlock
	var released atomic.Int32
	var ran atomic.Int32
	hold := func() func() {
		p := new([64]byte)
		runtime.AddCleanup(p, func(*atomic.Int32) { released.Add(1) }, &released)
		return func() { ran.Add(1); p[0]++ }
	}
	release := make(chan struct{})
	l.Immediate(func() { <-release }) // the callbacks below queue behind it
	handles := make([]Handle, 0, 2*n)
	for i := range n {
		h := l.Immediate(hold())
		if i%2 == 0 {
			h.Cancel()
		}
		handles = append(handles, h)
	}
	close(release)
	drain(t, l)
	closeNow := make(chan struct{})
	l.Immediate(func() { <-closeNow; l.Close() }) // drops the callbacks below
	for range n {
		handles = append(handles, l.Immediate(hold()))
	}
	close(closeNow)
	l.Close()

	if got := ran.Load(); got != n/2 {
		t.Errorf("%d callbacks ran, want %d", got, n/2)
	}
	for _, h := range handles {
		if h.IsValid() {
			t.Fatal("a handle is still valid after its callback ran, was cancelled or dropped")
		}
	}
	deadline := time.Now().Add(guard)
	for released.Load() < 2*n && time.Now().Before(deadline) {
		runtime.GC()
		runtime.Gosched()
	}
	if got := released.Load(); got != 2*n {
		t.Errorf("%d of %d callbacks released while their handles are kept", got, 2*n)
	}
	runtime.KeepAlive(handles)
}
