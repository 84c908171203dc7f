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
	h    asyncsteps.Handle
	done bool
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

func schedTake(id int64) *schedEntry {
	scheds.mu.Lock()
	defer scheds.mu.Unlock()
	e := scheds.m[id]
	delete(scheds.m, id)
	if e != nil {
		e.done = true
	}
	return e
}

//export cabiSched
func cabiSched(bsi *C.FutoInAsyncSteps, deferred C.int, ms C.uint32_t, data, cb unsafe.Pointer) C.int64_t {
	n := nodeOf(bsi)
	if n == nil || cb == nil {
		return 0
	}
	fn := C.cabi_sched_fn(cb)
	id, e := schedAdd()
	run := func() {
		if schedTake(id) != nil {
			C.cabi_call_sched(fn, data)
		}
	}
	var h asyncsteps.Handle
	if deferred != 0 {
		h = n.flow.tool.Deferred(time.Duration(ms)*time.Millisecond, run)
	} else {
		h = n.flow.tool.Immediate(run)
	}
	scheds.mu.Lock()
	e.h = h
	if !e.done && !h.IsValid() {
		delete(scheds.m, id) // a closed loop: never runs
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
			e.done = true
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
