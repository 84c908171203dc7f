//go:build cgo

package cabi

/*
#include <stdint.h>

// pinned_loop is, on the OS thread of a pinned loop, the id of its pin; 0
// on every other thread. Being thread-local, it dies with its thread: a
// thread made later starts at 0, even where it gets the same pthread_t.
static __thread uintptr_t pinned_loop;

static uintptr_t cabi_thread_pin(void) { return pinned_loop; }
static void cabi_set_thread_pin(uintptr_t id) { pinned_loop = id; }
*/
import "C"

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// pinned is a loop locked to its OS thread: the goroutine of an
// [asyncsteps.Loop] calls runtime.LockOSThread from one of its callbacks and
// never unlocks, so every later callback, and every C function it calls,
// runs on thread.
//
// A Go callback that calls runtime.Goexit ends the loop's goroutine (and
// with it the locked thread), and the loop goes on with a new goroutine on
// another thread: onThread finds it there, locks it and pins its thread.
// The pinned thread is told by a thread-local mark, not by its pthread_t:
// a thread made after the locked one ended may get the same pthread_t,
// and taking it for the pinned one would leave the loop's new goroutine
// unlocked, free to move between OS threads from one C callback to the
// next.
type pinned struct {
	loop *asyncsteps.Loop
	id   uintptr // the thread-local mark of the pinned thread; never 0
}

// pinIDs numbers the pins.
var pinIDs atomic.Uintptr

func newPinned(l *asyncsteps.Loop) *pinned {
	p := &pinned{loop: l, id: pinIDs.Add(1)}
	p.lock()
	return p
}

// lock locks the calling goroutine, the loop's, to its OS thread for good
// and marks the thread as the loop's.
func (p *pinned) lock() {
	runtime.LockOSThread()
	C.cabi_set_thread_pin(C.uintptr_t(p.id))
}

// onThread reports whether the caller runs on the pinned thread, or is the
// loop's goroutine on a thread of its own after a Goexit (pinned now).
func (p *pinned) onThread() bool {
	if uintptr(C.cabi_thread_pin()) == p.id {
		return true
	}
	if !p.loop.IsSameThread() {
		return false
	}
	p.lock()
	return true
}

// onLoopGoroutine reports whether the caller runs on the goroutine of a
// Loop, any Loop, also one that cabi has never seen: in a callback of its,
// or in C called from one that calls back into cabi (on the same
// goroutine). A Loop's goroutine runs with debug.SetPanicOnFault set, as
// package asyncsteps documents, and no other goroutine inherits it. A
// goroutine of the user's that sets it counts as a loop's: FreeWait then
// does not wait, which cannot deadlock.
func onLoopGoroutine() bool {
	marked := debug.SetPanicOnFault(true)
	debug.SetPanicOnFault(marked)
	return marked
}

// pinLoop locks the goroutine of the loop to its OS thread, once per
// loop, and returns the pin; nil for a loop that stopped unpinned. On the
// loop it pins at once. Off the loop it waits until the loop has run a
// pinning callback, holding no lock meanwhile: a callback of the loop that
// comes here at the same time (a Go step given to C by Binary while
// another goroutine makes the loop's first C root) must not wait for the
// waiter, which waits for the loop.
func (lp *loopCtx) pinLoop() *pinned {
	// A pinned loop stays pinned: its pin is the answer on the loop and
	// off it, and IsSameThread, which reads the caller's stack, is left
	// to the first root of each loop.
	if p := lp.pinned(); p != nil {
		return p
	}
	l := lp.loop
	if l.IsSameThread() {
		return lp.pinHere()
	}
	select {
	case <-l.Done():
		return nil // stopped: nothing to pin, and no callback to wait for
	default:
	}
	done := make(chan *pinned, 1)
	h := l.Immediate(func() { done <- lp.pinHere() })
	for {
		select {
		case p := <-done:
			return p
		case <-time.After(10 * time.Millisecond):
			if h.IsValid() {
				continue // still queued
			}
			// Running now, or dropped by a closed loop.
			select {
			case p := <-done:
				return p
			case <-l.Done():
			case <-time.After(time.Second):
			}
			return lp.pinned()
		}
	}
}

// pinned returns the loop's pin, nil if it has none yet.
func (lp *loopCtx) pinned() *pinned {
	lp.pinMu.Lock()
	defer lp.pinMu.Unlock()
	return lp.pin
}

// pinHere pins the loop, on its goroutine, unless it is pinned already,
// and returns the pin.
func (lp *loopCtx) pinHere() *pinned {
	lp.pinMu.Lock()
	defer lp.pinMu.Unlock()
	if lp.pin == nil {
		lp.pin = newPinned(lp.loop)
	}
	return lp.pin
}
