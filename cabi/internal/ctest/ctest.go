// Package ctest holds the C side of the tests of package cabi: C steps
// driven through the FutoInAsyncSteps table, and a fake foreign table.
// cgo cannot be used in _test.go files, hence this package.
package ctest

/*
#cgo CFLAGS: -std=gnu11 -I${SRCDIR}/../..
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "ctest.h"
*/
import "C"

import (
	"strings"
	"sync"
	"time"
	"unsafe"
)

// cstrings keeps one C copy of each string given to C as data for the
// life of the process: a flow may read it until it ends, and the tests
// give the same few strings again and again (LeakSanitizer sees them
// referenced from here).
var cstrings sync.Map // string -> *C.char

func cstr(s string) *C.char {
	if p, ok := cstrings.Load(s); ok {
		return p.(*C.char)
	}
	p := C.CString(s)
	if q, loaded := cstrings.LoadOrStore(s, p); loaded {
		C.free(unsafe.Pointer(p))
		return q.(*C.char)
	}
	return p
}

func bsi(p unsafe.Pointer) *C.FutoInAsyncSteps { return (*C.FutoInAsyncSteps)(p) }

// Reset clears the trace and the counters.
func Reset() { C.ct_reset() }

// Trace returns the lines logged by the C side.
func Trace() string {
	t := C.ct_trace()
	defer C.free(unsafe.Pointer(t))
	return C.GoString(t)
}

// Lines returns the trace as lines.
func Lines() []string { return strings.Split(strings.TrimSuffix(Trace(), "\n"), "\n") }

// Cleanups returns how many value cleanups of the C side ran.
func Cleanups() int { return int(C.ct_cleanups()) }

// SetStrict makes the C steps added from now on, and their calls, follow
// the C++ reference implementation's conventions as a caller (on), or only
// what the library documents (off); see ctest.c.
func SetStrict(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.ct_set_strict(C.int(v))
}

// StrictAlive returns how many placeholders given to success and stack
// canaries of the strict mode are not yet cleaned up (negative: some twice).
func StrictAlive() int { return int(C.ct_strict_alive()) }

// WaitDone waits until n flows have ended (their end step or unhandled
// error ran), and reports whether they did within d.
func WaitDone(n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for int(C.ct_done()) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// WaitFor waits until the trace contains s.
func WaitFor(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(Trace(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func Args(root unsafe.Pointer)      { C.ct_args(bsi(root)) }
func GoValue(root unsafe.Pointer)   { C.ct_go_value(bsi(root)) }
func EmptySlot(root unsafe.Pointer) { C.ct_empty_slot(bsi(root)) }
func Held(root unsafe.Pointer)      { C.ct_held(bsi(root)) }
func FailHeld()                     { C.ct_fail_held() }

// HeldWithCancel adds a step as Held does, with a cancel handler that logs
// "held cancel".
func HeldWithCancel(root unsafe.Pointer) { C.ct_held_with_cancel(bsi(root)) }

// StackHeld and StateHeld call stack and stateVariable on the step of
// Held from the calling thread, and report whether they gave memory.
func StackHeld() bool             { return C.ct_stack_held() != 0 }
func StateHeld() bool             { return C.ct_state_held() != 0 }
func SucceedHeld()                { C.ct_succeed_held() }
func Running(root unsafe.Pointer) { C.ct_running(bsi(root)) }

// SameRoot adds a step that logs whether its rootId is root's ("same
// rootId as the root=1"), and one that fails with Boom, whose error
// handler logs the same ("Boom handler: same rootId as the root=1") and
// recovers.
func SameRoot(root unsafe.Pointer)  { C.ct_same_root(bsi(root)) }
func AwaitLike(root unsafe.Pointer) { C.ct_await_like(bsi(root)) }

// CopyCarry adds a loop whose body succeeds with 1 in the model's flow and
// 2 in a copy's (told apart by the loop thread: the first to run one is
// the model's), then breaks; in the model it then logs "model broke" and
// blocks until ReleaseModel. The step after the loop logs what it got:
// "model after the loop: typed 1".
func CopyCarry(root unsafe.Pointer) { C.ct_copy_carry(bsi(root)) }

// CopySync adds to root a parallel whose branch locks sync through its
// lock function ("model locks"; an error: "copy lock: CODE"), then logs
// "model inside", waiting there in the model until ReleaseModel, then
// unlocks it through its unlock function ("model left").
func CopySync(root, sync unsafe.Pointer) { C.ct_copy_sync(bsi(root), (*C.FutoInSync)(sync)) }

// CopyLink adds a step that takes stack memory, whose cleanup logs "stack
// of model cleaned up" (or copy), and fails; its error handler logs "copy
// eh" in a copy, and in the model "model eh waits", waits until
// ReleaseModel, then logs "model eh: stack of model" read from the step's
// stack memory. Both handlers recover.
func CopyLink(root unsafe.Pointer) { C.ct_copy_link(bsi(root)) }

// ReleaseModel lets the model of CopyCarry, CopySync or CopyLink go on.
func ReleaseModel() { C.ct_release_model() }

// OtherLock calls the lock function of sync ("other table locks") for a
// step of another implementation of the table, whose rootId is that of
// the model's branch in CopySync; the step logs "other table waits",
// "other table locked", or "other table lock: CODE".
func OtherLock(sync unsafe.Pointer) { C.ct_other_lock((*C.FutoInSync)(sync)) }

// BranchLock adds to step, a Go step of parallel branch i (0 "A", 1 "B")
// given to C, C steps that lock sync through its lock function ("A locks,
// same rootId as its Go step=1"; an error: "A lock: CODE"), log "A inside"
// and, for the first branch in, wait there until the other one is in (or
// a cancel: "A cancelled", which unlocks), then unlock it ("A left").
func BranchLock(step, sync unsafe.Pointer, i int) {
	C.ct_branch_lock(bsi(step), (*C.FutoInSync)(sync), C.int(i))
}

// RootID returns the rootId of p.
func RootID(p unsafe.Pointer) int64 { return int64(C.ct_root_id(bsi(p))) }

// AnonLock calls the lock function of sync ("anon N locks") for step n (1
// to 3) of another implementation of the table that has no rootId
// function, each step of a flow of its own; the step logs "anon N waits",
// "anon N locked" or "anon N lock: CODE". AnonUnlock calls the unlock
// function ("anon N unlocks").
func AnonLock(sync unsafe.Pointer, n int)   { C.ct_anon_lock((*C.FutoInSync)(sync), C.int(n)) }
func AnonUnlock(sync unsafe.Pointer, n int) { C.ct_anon_unlock((*C.FutoInSync)(sync), C.int(n)) }

// inCBranch is what the C branch of CBranchGo calls.
var inCBranch func(step unsafe.Pointer)

//export ctGoInBranch
func ctGoInBranch(step *C.FutoInAsyncSteps) { inCBranch(unsafe.Pointer(step)) }

// CBranchGo adds to root a parallel with one C branch, whose step calls
// fn with its pointer, in its callback, on the loop.
func CBranchGo(root unsafe.Pointer, fn func(step unsafe.Pointer)) {
	inCBranch = fn
	C.ct_c_branch_go(bsi(root))
}

// CBranchID returns the rootId of the step of CBranchGo's branch.
func CBranchID() int64 { return int64(C.ct_c_branch_id()) }

func Reserved(root unsafe.Pointer) { C.ct_reserved(bsi(root)) }

// TakeOver adds three C steps: the first succeeds with a custom object, the
// second takes it over (resets its slot) and, with wait, completes only
// when SucceedHeld is called; the third logs the cleanups and marks done.
func TakeOver(root unsafe.Pointer, wait bool) {
	w := 0
	if wait {
		w = 1
	}
	C.ct_take_over(bsi(root), C.int(w))
}

// ExecuteOnly executes root with data and the unhandled_error that logs
// "unhandled" (which 1) or "unhandled_other".
func ExecuteOnly(root unsafe.Pointer, data string, which int) {
	C.ct_execute_only(bsi(root), cstr(data), C.int(which))
}
func EmptySlotBack(root unsafe.Pointer)   { C.ct_empty_slot_back(bsi(root)) }
func Custom(root unsafe.Pointer)          { C.ct_custom(bsi(root)) }
func Errors(root unsafe.Pointer)          { C.ct_errors(bsi(root)) }
func Misuse(root unsafe.Pointer)          { C.ct_misuse(bsi(root)) }
func State(root unsafe.Pointer)           { C.ct_state(bsi(root)) }
func Stack(root unsafe.Pointer, mode int) { C.ct_stack(bsi(root), C.int(mode)) }
func Timeout(root unsafe.Pointer)         { C.ct_timeout(bsi(root)) }
func Wait(root unsafe.Pointer)            { C.ct_wait(bsi(root)) }
func Loops(root unsafe.Pointer)           { C.ct_loops(bsi(root)) }
func Parallel(root unsafe.Pointer)        { C.ct_parallel(bsi(root)) }
func Sched(root unsafe.Pointer)           { C.ct_sched(bsi(root)) }
func Stale(root unsafe.Pointer)           { C.ct_stale(bsi(root)) }
func StaleCall()                          { C.ct_stale_call() }
func Cancel(root unsafe.Pointer)          { C.ct_cancel(bsi(root)) }
func IsValid(root unsafe.Pointer) int     { return int(C.ct_is_valid(bsi(root))) }
func Free(root unsafe.Pointer)            { C.ct_free(bsi(root)) }
func FakeSync() unsafe.Pointer            { return unsafe.Pointer(C.ct_fake_sync()) }

// SharedSync returns a foreign FutoInSync, unlocked, that lock enters
// at once if it is free ("shared lock") and fails with DefenseRejected if
// it is held ("shared lock busy"); with wait, lock makes the step wait
// instead ("shared lock wait") until SharedGrant. unlock logs "shared
// unlock held=H same_thread=S" (H: 1 if it was held, S: is_same_thread of
// its bsi).
func SharedSync(wait bool) unsafe.Pointer {
	w := 0
	if wait {
		w = 1
	}
	return unsafe.Pointer(C.ct_shared_sync(C.int(w)))
}

// SharedGrant gives the lock of SharedSync to the step that waits for it,
// by success from the calling thread ("shared grant").
func SharedGrant() { C.ct_shared_grant() }

// SyncHeld adds to root a step that enters sync and, inside it, a step
// that waits as HeldWithCancel's does.
func SyncHeld(root, sync unsafe.Pointer) { C.ct_sync_held(bsi(root), (*C.FutoInSync)(sync)) }

// BrokenSync returns a foreign FutoInSync without a table (0), without
// lock (1) or without unlock (2).
func BrokenSync(which int) unsafe.Pointer { return unsafe.Pointer(C.ct_broken_sync(C.int(which))) }
func FakeRoot() unsafe.Pointer            { return unsafe.Pointer(C.ct_fake_root()) }
func FakeRun(root unsafe.Pointer)         { C.ct_fake_run(bsi(root)) }
func FakeFree(root unsafe.Pointer)        { C.ct_fake_free(bsi(root)) }

// TakeString adds a C step that moves its string argument out of its slot
// and waits; FinishTaken logs the string from the calling thread, resets
// the step's copy and completes the step.
func TakeString(root unsafe.Pointer) { C.ct_take_string(bsi(root)) }

// FinishTaken: see TakeString.
func FinishTaken() { C.ct_finish_taken() }

// FakeRunSched runs the fake table's pending sched_immediate callback on
// the calling thread; false when none is pending.
func FakeRunSched() bool { return C.ct_fake_run_sched() != 0 }

// FakePlaceholders returns how many placeholder objects of the fake table
// are alive (not yet cleaned up).
func FakePlaceholders() int { return int(C.ct_fake_placeholders()) }

// Execute adds an end step to root and executes it with an unhandled-error
// function that logs the code and data.
func Execute(root unsafe.Pointer, data string) {
	C.ct_execute(bsi(root), cstr(data))
}

// Sync adds to root a step that enters sync: the critical section logs
// "name enter", waits 5 ms, logs "name leave" and succeeds, or fails with
// "Fail"; its error handler logs and recovers.
func Sync(root, sync unsafe.Pointer, name string, fail bool) {
	f := 0
	if fail {
		f = 1
	}
	C.ct_sync(bsi(root), (*C.FutoInSync)(sync), cstr(name), C.int(f))
}

// StateKept adds two C steps: the first allocates the state variable
// "counter", adds 1, keeps the pointer, logs "held" and waits until
// SucceedHeld, then logs "kept counter=N"; the second logs "kept later
// counter=N" through the pointer kept.
func StateKept(root unsafe.Pointer) { C.ct_state_kept(bsi(root)) }

// StateIdle allocates the state variable "counter" (5) through the idle
// root itself, before any execute.
func StateIdle(root unsafe.Pointer) { C.ct_state_idle(bsi(root)) }

// ErrorTwice adds a step that calls handle_error after handle_error
// (mode 0), after success (mode 1) or after success in each of the two
// runs of a repeat's body (mode 2), then a step that logs error_info.
func ErrorTwice(root unsafe.Pointer, mode int) { C.ct_error_twice(bsi(root), C.int(mode)) }

// ParallelIdle makes a parallel on the idle root from the calling thread,
// logs whether its stack and stateVariable gave memory, sets the state
// variable "counter" to 7 through it, and adds a branch that logs the
// counter.
func ParallelIdle(root unsafe.Pointer) { C.ct_parallel_idle(bsi(root)) }

// StackIdlePar and StateIdlePar call stack and stateVariable on the
// parallel of ParallelIdle from the calling thread, and report whether
// they gave memory.
func StackIdlePar() bool { return C.ct_stack_idle_par() != 0 }
func StateIdlePar() bool { return C.ct_state_idle_par() != 0 }

// StateNull adds two steps that ask for the state variable "none", whose
// allocate returns NULL, and log what they get.
func StateNull(root unsafe.Pointer) { C.ct_state_null(bsi(root)) }

// HandleError calls handle_error with code and info on the step bsi, as
// a C library given a Go step by cabi.Binary does.
func HandleError(step unsafe.Pointer, code, info string) {
	C.ct_handle_error(bsi(step), cstr(code), cstr(info))
}
