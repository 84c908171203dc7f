package ctest

/*
#include <stdlib.h>
#include "adopter.h"
*/
import "C"

import "unsafe"

// Verify is an adopting team's C checksum over payload, given a Go step
// through cabi.Binary: it completes the step with the sum (a uint32) when
// it is want, or fails it with ChecksumError, "sum 0x... != 0x...";
// at once, or, with onThread, from a pthread after 5 ms (the step waits
// with waitExternal). JoinVerify joins that pthread.
func Verify(step unsafe.Pointer, payload string, want uint32, onThread bool) {
	p := C.CString(payload)
	defer C.free(unsafe.Pointer(p))
	C.ad_verify(bsi(step), p, C.uint32_t(want), cbool(onThread))
}

// JoinVerify joins the pthread of the last Verify made with onThread.
func JoinVerify() { C.ad_join() }

// FreeInStep adds to root a step that ends the request by releasing root
// (how 0: its free, 1: its cancel; 2: nothing) after logging which
// ("free", "cancel", "first"), and a step that logs "next step ran".
func FreeInStep(root unsafe.Pointer, how int) { C.ad_free_in_step(bsi(root), C.int(how)) }

// Hold adds to root a step that waits; WaitHeld waits, on a C condition
// the race detector does not see, until it runs, and ReleaseHeld completes
// it with success from the caller's thread.
func Hold(root unsafe.Pointer) { C.ad_hold(bsi(root)) }

// WaitHeld waits until the step of Hold runs.
func WaitHeld() { C.ad_wait_held() }

// ReleaseHeld completes the step of Hold.
func ReleaseHeld() { C.ad_release_held() }

// AddOnRunning calls, on root from the caller's thread, add (which 0),
// loop (1), repeat (2) or parallel and add on it (3); what it adds logs
// "late step ran".
func AddOnRunning(root unsafe.Pointer, which int) { C.ad_add_on_running(bsi(root), C.int(which)) }

// AddSyncOnRunning calls addSync of sync on root from the caller's
// thread; what it adds logs "late step ran".
func AddSyncOnRunning(root, sync unsafe.Pointer) {
	C.ad_add_sync_on_running(bsi(root), (*C.FutoInSync)(sync))
}

// ParallelOfIdle makes a parallel on root, which must be idle;
// AddOnIdleParallel adds to it, from the caller's thread, a branch that
// logs "late step ran".
func ParallelOfIdle(root unsafe.Pointer) { C.ad_parallel_idle(bsi(root)) }

// AddOnIdleParallel: see ParallelOfIdle.
func AddOnIdleParallel() { C.ad_add_on_idle_parallel() }

// SchedOutlives schedules two deferred callbacks (10 ms) on root, frees
// root, logs their validity through the stale pointer, cancels the second
// through it and logs again; the first logs "kept ran" when it runs.
func SchedOutlives(root unsafe.Pointer) { C.ad_sched_outlives(bsi(root)) }

// CancelTwice adds to root a step that sets the cancel handler "cancel
// one", then "cancel two" (or, with nullLast, a NULL one), each logging
// its name, and a timeout of 5 ms; its error handler logs the code.
func CancelTwice(root unsafe.Pointer, nullLast bool) { C.ad_cancel_twice(bsi(root), cbool(nullLast)) }

// DropOnThread makes, from a new pthread that it joins, the call of
// AddOnRunning (which 0 to 3) or AddSyncOnRunning of sync (which 4) on
// root, or AddOnIdleParallel (which 5).
func DropOnThread(root, sync unsafe.Pointer, which int) {
	C.ad_drop_on_thread(bsi(root), (*C.FutoInSync)(sync), C.int(which))
}

// ExecuteReporting adds to root a step that logs "next step ran" and
// executes root with an unhandled_error that logs "unhandled CODE: INFO".
func ExecuteReporting(root unsafe.Pointer) { C.ad_execute_reporting(bsi(root)) }

// The calls of IdleCall.
const (
	IdleSetTimeout   = C.AD_SET_TIMEOUT   // setTimeout(1000)
	IdleSetCancel    = C.AD_SET_CANCEL    // a handler that logs "idle cancel handler ran"
	IdleWaitExternal = C.AD_WAIT_EXTERNAL // waitExternal
	IdleSuccess      = C.AD_SUCCESS       // success with no args
	IdleHandleError  = C.AD_HANDLE_ERROR  // handle_error("Idle", "on an idle root")
	IdleBreakLoop    = C.AD_BREAK_LOOP    // breakLoop with no label
	IdleContinueLoop = C.AD_CONTINUE_LOOP // continueLoop with no label
)

// IdleCall makes call (an Idle* constant) on p, from the caller's thread:
// a step's call, made on a root or on a parallel made on one.
func IdleCall(p unsafe.Pointer, call int) { C.ad_idle_call(bsi(p), C.int(call)) }

// IdleParallel returns the parallel that ParallelOfIdle made.
func IdleParallel() unsafe.Pointer { return unsafe.Pointer(C.ad_idle_parallel()) }

// StepCall adds to root a step that makes call (an Idle* constant) on its
// own pointer (with onParallel, on that of a parallel it makes) and logs
// "step called"; its error handler logs "step error CODE: INFO" (and does
// not recover).
func StepCall(root unsafe.Pointer, call int, onParallel bool) {
	C.ad_step_call(bsi(root), C.int(call), cbool(onParallel))
}

// CalledStep returns the pointer of the step of the last StepCall.
func CalledStep() unsafe.Pointer { return unsafe.Pointer(C.ad_called_step()) }
