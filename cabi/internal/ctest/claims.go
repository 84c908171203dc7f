package ctest

/*
#include <stdlib.h>
#include "claims.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// ClaimsReset clears the trace of the claims' steps.
func ClaimsReset() { C.cl_reset() }

// ClaimsTrace returns the trace of the claims' steps, as lines.
func ClaimsTrace() []string {
	t := C.cl_trace()
	defer C.free(unsafe.Pointer(t))
	s := C.GoString(t)
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// StaleTable adds to root a step that keeps its pointer and a step that,
// once the first has completed, calls every function of the table on
// that stale pointer and logs their answers; it then completes itself
// from an immediate of its own pointer ("own immediate ran").
func StaleTable(root unsafe.Pointer) { C.cl_stale_table(bsi(root)) }

// NullArgs adds to root a step per function given a NULL argument (add,
// loop and repeat a NULL f, addSync a NULL sync or f, handle_error a NULL
// code, sched_* a NULL cb or handle, stateVariable a NULL name), each
// with an error handler that logs the code and info and recovers. sync
// is a FutoInSync for addSync's NULL f.
func NullArgs(root, sync unsafe.Pointer) { C.cl_null_args(bsi(root), (*C.FutoInSync)(sync)) }

// TimeoutTwice adds to root a step that calls setTimeout(first) and then
// setTimeout(second), with an error handler that logs "timed: <code>" and
// recovers.
func TimeoutTwice(root unsafe.Pointer, first, second uint32) {
	C.cl_timeout_twice(bsi(root), C.uint32_t(first), C.uint32_t(second))
}

// FailUnhandled adds to root a step that fails with "Unhandled", info
// "nobody handles it", and executes root with a NULL unhandled_error.
func FailUnhandled(root unsafe.Pointer) { C.cl_fail_unhandled(bsi(root)) }

// BranchKinds adds to root a step that makes a parallel whose branches
// are a loop of two iterations, a repeat of two, and an addSync of sync,
// each added on the parallel's pointer; each body logs whether it has its
// branch's rootId, and the step after the parallel logs whether the
// three branches' ids differ from each other and from the flow's.
func BranchKinds(root, sync unsafe.Pointer) { C.cl_branch_kinds(bsi(root), (*C.FutoInSync)(sync)) }

// NewInstance adds to root a step that makes a root with newInstance on
// its own pointer, adds to it a step that logs whether it runs on the
// same thread as the first and completes the first, executes it and
// waits; then a step that logs the new root's isValid.
func NewInstance(root unsafe.Pointer) { C.cl_new_instance(bsi(root)) }

// InstanceRoot returns the root NewInstance made, for the test to free.
func InstanceRoot() unsafe.Pointer { return unsafe.Pointer(C.cl_instance_root()) }

// CancelNested adds to root an outer step with a cancel handler and a
// sub-step that sets one and waits ("inner waits"), then a step that must
// not run, each with an error handler that must not run, and executes
// root with an unhandled_error that must not run either. Each cancel
// handler logs what isValid, rootId (not 0), stack, stateVariable with
// allocate and is_same_thread answer through its step's pointer, then
// calls handle_error, success and add on it.
func CancelNested(root unsafe.Pointer) { C.cl_cancel_nested(bsi(root)) }

// CancelledLate calls success (with an INT32 whose cleanup logs) and
// handle_error on the waiting sub-step of CancelNested, and logs its
// isValid and whether success reset the slot.
func CancelledLate() { C.cl_cancelled_late() }

// FailWaiting adds to root a step that sets the cancel handler of
// CancelNested and waits, with an error handler that logs the code and
// recovers, then a step that logs "end", and executes root. FailIt fails
// the waiting step with handle_error("Outside") through its pointer.
func FailWaiting(root unsafe.Pointer) { C.cl_fail_waiting(bsi(root)) }

// FailIt fails the step FailWaiting left waiting.
func FailIt() { C.cl_fail_it() }

// Where CancelCalling's step runs: a step of root, the body of a loop
// on root, or of a repeat.
const (
	CallInStep = iota
	CallInLoop
	CallInRepeat
)

// CancelCalling adds to root, where in says (CallInStep: with an error
// handler that must not run), a step that sets a cancel handler and
// waits, and executes root with an unhandled_error that must not run.
// Once the step is cancelled, its handler makes the call named call
// (add, parallel, loop, repeat, addSync on sync, setTimeout, setCancel,
// waitExternal, success, "success value" with a custom object whose
// cleanup logs "value cleaned up", handle_error with "InCancel",
// breakLoop or continueLoop) on the step's pointer, then logs "call
// cancel went on".
func CancelCalling(root unsafe.Pointer, call string, sync unsafe.Pointer, in int) {
	c := C.CString(call)
	defer C.free(unsafe.Pointer(c))
	C.cl_cancel_calling(bsi(root), c, (*C.FutoInSync)(sync), C.int(in))
}
