//go:build cgo

package cabi

/*
#include <pthread.h>
*/
import "C"

import (
	"runtime"
	"sync"
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
type pinned struct {
	loop   *asyncsteps.Loop
	thread atomic.Pointer[C.pthread_t]
}

func newPinned(l *asyncsteps.Loop) *pinned {
	runtime.LockOSThread() // for good: the loop's goroutine stays on this thread
	p := &pinned{loop: l}
	t := C.pthread_self()
	p.thread.Store(&t)
	return p
}

// onThread reports whether the caller runs on the pinned thread, or is the
// loop's goroutine on a thread of its own after a Goexit (pinned now).
func (p *pinned) onThread() bool {
	if C.pthread_equal(C.pthread_self(), *p.thread.Load()) != 0 {
		return true
	}
	if !p.loop.IsSameThread() {
		return false
	}
	runtime.LockOSThread()
	t := C.pthread_self()
	p.thread.Store(&t)
	return true
}

type pinEntry struct {
	once sync.Once
	pin  *pinned
}

var pins sync.Map // *asyncsteps.Loop -> *pinEntry

// pinTool locks the goroutine of t to its OS thread, once per loop, and
// returns the thread. It returns nil for a tool that is not an
// [asyncsteps.Loop] (a TestTool runs on whoever drives it) and for a closed
// loop. Off the loop it waits until the loop has run the pinning callback.
func pinTool(t asyncsteps.Tool) *pinned {
	l, ok := t.(*asyncsteps.Loop)
	if !ok {
		return nil
	}
	v, _ := pins.LoadOrStore(l, &pinEntry{})
	e := v.(*pinEntry)
	e.once.Do(func() {
		pin := func() *pinned { return newPinned(l) }
		if l.IsSameThread() {
			e.pin = pin()
			return
		}
		done := make(chan *pinned, 1)
		h := l.Immediate(func() { done <- pin() })
		for {
			select {
			case p := <-done:
				e.pin = p
				return
			case <-time.After(10 * time.Millisecond):
				if h.IsValid() {
					continue // still queued
				}
				// Running now, or dropped by a closed loop.
				select {
				case e.pin = <-done:
				case <-time.After(time.Second):
				}
				return
			}
		}
	})
	return e.pin
}
