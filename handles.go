package asyncsteps

// This file holds the Handle implementations of the immediates of Loop and
// TestTool, and the dead handle of a closed Loop; a deferred callback's
// Handle is its timerEntry (timerheap.go).

import "sync/atomic"

// States of a scheduled callback. A handle is valid only while scheduled;
// the loop moves it to ran before calling it, so a callback that cancels its
// own handle is harmless.
const (
	handleScheduled uint32 = iota
	handleRan
	handleCancelled
)

// loopImmediate is a callback queued by Loop.Immediate, its own handle,
// taken from a block of them (Loop.newImmediate). It is never removed from
// the queue: Cancel only flips its state, and the loop skips it.
type loopImmediate struct {
	f     func()
	state atomic.Uint32
}

func (e *loopImmediate) run() {
	f := e.f
	e.f = nil // a kept handle must not keep the closure alive
	if e.state.CompareAndSwap(handleScheduled, handleRan) {
		f()
	}
}

// drop lets the callback go as its closed loop drops it: its handle
// becomes invalid.
func (e *loopImmediate) drop() {
	e.f = nil
	e.state.CompareAndSwap(handleScheduled, handleCancelled)
}

func (e *loopImmediate) Cancel() { e.state.CompareAndSwap(handleScheduled, handleCancelled) }

func (e *loopImmediate) IsValid() bool { return e.state.Load() == handleScheduled }

// deadHandle is returned by a closed Loop: nothing is scheduled. It also
// stands in for the nil Handle a foreign Tool may return (see
// foreignTool.deferTask).
type deadHandle struct{}

func (deadHandle) Cancel() {}

func (deadHandle) IsValid() bool { return false }

// testImmediate is a callback queued by TestTool.Immediate, its own handle.
type testImmediate struct {
	f     func()
	tool  *TestTool
	state atomic.Uint32 // written under tool.mu; read without it by IsValid
}

func (e *testImmediate) run() {
	f := e.f
	e.f = nil
	f()
}

// Cancel uncounts the callback at once, so HasEvents sees it gone, and
// lets it go, as a kept handle must not keep it alive; the queue entry
// itself is skipped when reached.
func (e *testImmediate) Cancel() {
	e.tool.mu.Lock()
	if e.state.CompareAndSwap(handleScheduled, handleCancelled) {
		e.tool.live--
		e.f = nil
	}
	e.tool.mu.Unlock()
}

// drop cancels the callback as ResetEvents drops it. Called with
// tool.mu held.
func (e *testImmediate) drop() {
	e.state.Store(handleCancelled)
	e.f = nil
}

func (e *testImmediate) IsValid() bool { return e.state.Load() == handleScheduled }
