//go:build cgo

// Command lib is the C shared library of asyncsteps:
//
//	go build -buildmode=c-shared -o libfutoin_asyncsteps.so ./cabi/lib
//
// A C program includes cabi/futoin_asyncsteps.h, links the library and
// starts with futoin_asyncsteps_new; everything else goes through the
// tables (package cabi documents the semantics).
package main

/*
#include "../futoin_asyncsteps.h"
*/
import "C"

import (
	"math"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

func main() {}

//export futoin_asyncsteps_new
func futoin_asyncsteps_new() *C.FutoInAsyncSteps {
	return (*C.FutoInAsyncSteps)(cabi.New(nil))
}

//export futoin_asyncsteps_free_wait
func futoin_asyncsteps_free_wait(bsi *C.FutoInAsyncSteps) {
	cabi.FreeWait(unsafe.Pointer(bsi))
}

// queue converts a C max_queue: negative means unlimited.
func queue(q C.int32_t) []int {
	if q < 0 {
		return nil
	}
	return []int{int(q)}
}

//export futoin_mutex_new
func futoin_mutex_new(limit C.uint32_t, maxQueue C.int32_t) *C.FutoInSync {
	if limit < 1 {
		return nil
	}
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewMutex(int(limit), queue(maxQueue)...)))
}

//export futoin_throttle_new
func futoin_throttle_new(limit, periodMS C.uint32_t, maxQueue C.int32_t) *C.FutoInSync {
	if limit < 1 || periodMS < 1 {
		return nil
	}
	period := time.Duration(periodMS) * time.Millisecond
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewThrottle(int(limit), period, queue(maxQueue)...)))
}

//export futoin_limiter_new
func futoin_limiter_new(concurrent C.uint32_t, maxQueue C.int32_t, rate, periodMS, burst C.uint32_t) *C.FutoInSync {
	limit := int(maxQueue)
	if maxQueue < 0 {
		limit = math.MaxInt32 // no limit, as for futoin_mutex_new
	}
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: int(concurrent),
		MaxQueue:   limit,
		Rate:       int(rate),
		Period:     time.Duration(periodMS) * time.Millisecond,
		Burst:      int(burst),
	})))
}

//export futoin_sync_free
func futoin_sync_free(s *C.FutoInSync) {
	cabi.FreeSync(unsafe.Pointer(s))
}
