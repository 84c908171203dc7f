//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// scheds maps the id in a FutoInHandle (data3) to the loop's handle. An
// entry goes when its callback runs or is cancelled, so an unknown id is a
// handle that is no longer valid.
var scheds struct {
	mu   sync.Mutex
	next int64
	m    map[int64]*schedEntry
}

type schedEntry struct {
	h         asyncsteps.Handle
	done      bool // the entry has left the map
	cancelled bool // by sched_cancel: the callback must not run
}

func schedAdd() (int64, *schedEntry) {
	scheds.mu.Lock()
	defer scheds.mu.Unlock()
	if scheds.m == nil {
		scheds.m = make(map[int64]*schedEntry)
	}
	scheds.next++
	e := &schedEntry{}
	scheds.m[scheds.next] = e
	return scheds.next, e
}

// schedRun takes the entry e of id for its callback, which the loop is
// about to run, and reports whether the callback may run: unless it was
// cancelled. The entry may have left the map already: cabiSched removes
// it when its handle is no longer valid, which is also the case of a
// callback the loop has taken to run, from another thread, before
// cabiSched looked.
func schedRun(id int64, e *schedEntry) bool {
	scheds.mu.Lock()
	defer scheds.mu.Unlock()
	delete(scheds.m, id)
	e.done = true
	return !e.cancelled
}

//export cabiSched
func cabiSched(bsi *C.FutoInAsyncSteps, deferred C.int, ms C.uint32_t, data C.uintptr_t, cb unsafe.Pointer) C.int64_t {
	n := nodeOf(bsi)
	if n == nil || cb == nil {
		return 0
	}
	fn := C.cabi_sched_fn(cb)
	id, e := schedAdd()
	run := func() {
		if schedRun(id, e) {
			n.flow.repin()
			C.cabi_call_sched(fn, data)
		}
	}
	var h asyncsteps.Handle
	if deferred != 0 {
		h = n.tool.Deferred(time.Duration(ms)*time.Millisecond, run)
	} else {
		h = n.tool.Immediate(run)
	}
	scheds.mu.Lock()
	e.h = h
	if !e.done && !h.IsValid() {
		// A closed loop, which never runs it, or the loop already running
		// it (scheduled from another thread), which schedRun allows.
		delete(scheds.m, id)
		e.done = true
	}
	scheds.mu.Unlock()
	return C.int64_t(id)
}

//export cabiSchedCancel
func cabiSchedCancel(_ *C.FutoInAsyncSteps, id C.int64_t) {
	if id == 0 {
		return
	}
	scheds.mu.Lock()
	e := scheds.m[int64(id)]
	var h asyncsteps.Handle
	if e != nil {
		h = e.h
		if h != nil {
			delete(scheds.m, int64(id))
			e.done, e.cancelled = true, true
		}
	}
	scheds.mu.Unlock()
	if h != nil {
		h.Cancel()
	}
}

//export cabiSchedIsValid
func cabiSchedIsValid(_ *C.FutoInAsyncSteps, id C.int64_t) C.int {
	scheds.mu.Lock()
	e := scheds.m[int64(id)]
	scheds.mu.Unlock()
	if e == nil {
		return 0
	}
	return boolInt(e.h == nil || e.h.IsValid())
}
