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

// maxInt is the largest count goInt takes: a Go int's. A variable so that
// a test can lower it: only where an int has 32 bits is it below a
// uint32_t's.
var maxInt uint64 = math.MaxInt

// goInt converts a count from C to a Go int; ok is false where an int
// cannot hold it (an int of 32 bits and a count past INT32_MAX), which
// int(n) would turn negative: NewMutex and NewThrottle panic on one, and
// the panic would end the C program, and NewLimiter's Burst would take it
// for no limit.
func goInt(n C.uint32_t) (int, bool) {
	if uint64(n) > maxInt {
		return 0, false
	}
	return int(n), true
}

//export futoin_mutex_new
func futoin_mutex_new(limit C.uint32_t, maxQueue C.int32_t) *C.FutoInSync {
	n, ok := goInt(limit)
	if !ok || n < 1 {
		return nil
	}
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewMutex(n, queue(maxQueue)...)))
}

//export futoin_throttle_new
func futoin_throttle_new(limit, periodMS C.uint32_t, maxQueue C.int32_t) *C.FutoInSync {
	n, ok := goInt(limit)
	if !ok || n < 1 || periodMS < 1 {
		return nil
	}
	period := time.Duration(periodMS) * time.Millisecond
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewThrottle(n, period, queue(maxQueue)...)))
}

//export futoin_limiter_new
func futoin_limiter_new(concurrent C.uint32_t, maxQueue C.int32_t, rate, periodMS, burst C.uint32_t) *C.FutoInSync {
	limit := int(maxQueue)
	if maxQueue < 0 {
		limit = math.MaxInt32 // no limit, as for futoin_mutex_new
	}
	c, okC := goInt(concurrent)
	r, okR := goInt(rate)
	b, okB := goInt(burst)
	if !okC || !okR || !okB {
		return nil
	}
	return (*C.FutoInSync)(cabi.Sync(asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: c,
		MaxQueue:   limit,
		Rate:       r,
		Period:     time.Duration(periodMS) * time.Millisecond,
		Burst:      b,
	})))
}

//export futoin_sync_free
func futoin_sync_free(s *C.FutoInSync) {
	cabi.FreeSync(unsafe.Pointer(s))
}
