package ctest

/*
#include <stdlib.h>
#include "review.h"
*/
import "C"

import (
	"strings"
	"time"
	"unsafe"
)

// ReviewReset clears the trace of the review's programs.
func ReviewReset() { C.rv_reset() }

// ReviewTrace returns the trace of the review's programs, as lines.
func ReviewTrace() []string {
	t := C.rv_trace()
	defer C.free(unsafe.Pointer(t))
	s := C.GoString(t)
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// LockAndAddSync adds to root the table's lock of sync, an addSync of it
// and the table's unlock (lockFirst), or an addSync whose section calls
// the table's lock and unlock; then a step that logs "b0 after".
func LockAndAddSync(root, sync unsafe.Pointer, lockFirst bool) {
	C.rv_lock_and_add_sync(bsi(root), (*C.FutoInSync)(sync), cbool(lockFirst))
}

// BranchesLock adds a parallel of n branches, each of which locks sync
// through the table, adds an addSync of it and unlocks; then "b0 after".
func BranchesLock(root, sync unsafe.Pointer, n int) {
	C.rv_branches_lock(bsi(root), (*C.FutoInSync)(sync), C.int(n))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// IdleStack takes stack memory with a cleanup on root, idle, or on a
// parallel made on it (onParallel); it reports whether it got memory.
func IdleStack(root unsafe.Pointer, onParallel bool) bool {
	return C.rv_idle_stack(bsi(root), cbool(onParallel)) != 0
}

// StackCleanups is how many cleanups of IdleStack's memory have run.
func StackCleanups() int { return int(C.rv_stack_cleanups()) }

// ValidFromThread adds a step that a C thread completes by success and
// then polls with isValid until it reads 0; JoinWorker waits for it.
func ValidFromThread(root unsafe.Pointer) { C.rv_valid_from_thread(bsi(root)) }

// JoinWorker waits for the thread of ValidFromThread.
func JoinWorker() { C.rv_join_worker() }

// Bools adds a step that succeeds with the C BOOL array {2, 1, 0}.
func Bools(root unsafe.Pointer) { C.rv_bools(bsi(root)) }

// NullArray adds a step that succeeds with an array of the base type base
// (a FTN_TYPE_* of a string or a number, BOOL included) whose p is NULL
// and whose length is 3.
func NullArray(root unsafe.Pointer, base int) { C.rv_null_array(bsi(root), C.int(base)) }

// NullItem adds a step that succeeds with the array of strings of the
// base type base (FTN_TYPE_STRING, STRING16 or STRING32) {"ab", NULL, ""}.
func NullItem(root unsafe.Pointer, base int) { C.rv_null_item(bsi(root), C.int(base)) }

// LongItem adds a step that succeeds with the array of strings of the
// base type base (FTN_TYPE_STRING, STRING16 or STRING32) {"abcdef"}: one
// item of 6 code units.
func LongItem(root unsafe.Pointer, base int) { C.rv_long_item(bsi(root), C.int(base)) }

// ExecuteWaiting adds a step that waits for ever and executes root with
// an unhandled_error that logs its code, "error_info" and
// "last_exception".
func ExecuteWaiting(root unsafe.Pointer) { C.rv_execute_waiting(bsi(root)) }

// WaitReview waits until the review's trace has n lines, for at most d;
// it reports whether it has.
func WaitReview(n int, d time.Duration) bool {
	end := time.Now().Add(d)
	for len(ReviewTrace()) < n {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// RootCallOnStep adds a step that calls free (which 0), execute (1) or
// cancel (2) on its own pointer, with an error handler that logs code and
// "error_info" and recovers; then a step that logs "b-1 after".
func RootCallOnStep(root unsafe.Pointer, which int) { C.rv_root_call_on_step(bsi(root), C.int(which)) }

// CancelThenFail adds a step whose sub-step cancels root and then calls
// handle_error, both steps with a cancel handler and an error handler
// that log ("cancel step", "eh step <code>", and "outer" likewise) and
// recover; then a step that logs "b-1 after".
func CancelThenFail(root unsafe.Pointer) { C.rv_cancel_then_fail(bsi(root)) }

// ValidAfterError adds a step that calls handle_error and then logs
// isValid, with a handler that recovers, and a loop whose body calls
// breakLoop and then logs isValid; then "b-1 after".
func ValidAfterError(root unsafe.Pointer) { C.rv_valid_after_error(bsi(root)) }

// LockFail adds to root the table's lock of sync and, before its unlock,
// what fails: how 0, an error in the lock's own step; 1, an error in the
// next step; 2, the next step's timeout; 3, a next step that waits for ever
// ("b0 wait"), for a cancel; 4, a parallel whose branch 1 locks and then
// fails its sibling, branch 2, which cancels branch 1 before its unlock.
func LockFail(root, sync unsafe.Pointer, how int) {
	C.rv_lock_fail(bsi(root), (*C.FutoInSync)(sync), C.int(how))
}

// LockUnlock adds to root the table's lock of sync and its unlock, as
// branch 9.
func LockUnlock(root, sync unsafe.Pointer) {
	C.rv_lock_unlock(bsi(root), (*C.FutoInSync)(sync))
}

// FreeOnParent adds to step a sub-step that calls free on step's pointer
// and logs "sub: free on the parent returned", with an error handler that
// logs "sub eh" with the code and "error_info".
func FreeOnParent(step unsafe.Pointer) { C.rv_free_on_parent(bsi(step)) }

// CParentFree adds to root a C step that does FreeOnParent on its own
// pointer.
func CParentFree(root unsafe.Pointer) { C.rv_c_parent_free(bsi(root)) }

// ParallelFromThread adds a step that makes a parallel with branch 1 and,
// before it returns, has another thread add branch 2 on the parallel's
// pointer (which 0: add, 1: loop, 2: repeat of one), then logs "joined";
// then a step that logs "after". A branch logs "branch N".
func ParallelFromThread(root unsafe.Pointer, which int) {
	C.rv_parallel_from_thread(bsi(root), C.int(which))
}

// ParallelCompleteFromThread adds a step that makes a parallel, then a
// step that logs "after". Another thread calls success (handleError
// false) or handle_error(FromThread, "on the parallel") on the parallel's
// pointer, then logs "thread called": while the step's callback runs,
// which joins it before it returns ("step returns"; the parallel has a
// branch that logs "branch 1"), or, late, from the parallel's only
// branch, once the step's callback has returned: the branch logs "branch
// waits", waits and joins the thread, which completes it after its call.
// The step's error handler logs "step error code: error_info".
func ParallelCompleteFromThread(root unsafe.Pointer, handleError, late bool) {
	C.rv_parallel_complete_from_thread(bsi(root), cbool(handleError), cbool(late))
}

// ParentCancelFromSub adds to step, from its own callback, a sub-step
// that calls setCancel on step's pointer, with a cancel handler that
// logs "cancel parent", and logs "sub: setCancel returned"; its error
// handler logs "sub eh" and the code, and recovers. Then a sub-step that
// waits for ever and logs "wait".
func ParentCancelFromSub(step unsafe.Pointer) { C.rv_parent_cancel_from_sub(bsi(step)) }

// RootStackLog takes stack memory on root, idle, whose cleanup logs "root
// stack cleanup": the free of the root runs it after the steps it releases.
func RootStackLog(root unsafe.Pointer) { C.rv_root_stack_log(bsi(root)) }

// TwoParentCalls adds to step, from its own callback, a sub-step that
// calls success on step's pointer and logs "first returns", then one that
// calls handle_error (Lost) on it and logs "second returns"; each has an
// error handler that logs "eh", the code and "error_info", and recovers.
func TwoParentCalls(step unsafe.Pointer) { C.rv_two_parent_calls(bsi(step)) }

// OutsideSuccessThenFail adds to root a step that sets a cancel handler
// that logs "cancel", has another thread call success on its pointer
// before it returns and logs "joined", and fails with Boom: by a sub-step
// it adds first, or (own) by its own handle_error after the join; its
// error handler logs "eh" and the code, and recovers.
func OutsideSuccessThenFail(root unsafe.Pointer, own bool) {
	C.rv_outside_success_then_fail(bsi(root), cbool(own))
}
