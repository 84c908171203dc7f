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

// StateVariableCalls returns how many times the library called the
// stateVariable of a fake root (FakeRoot, TableRoot) or of its steps.
func StateVariableCalls() int { return int(C.ct_state_variable_calls()) }

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

// Args adds a step that logs whether it got no args ("args1 in=1"),
// succeeds with an INT32, a STRING, an array of INT32 and a STRING16, then
// overwrites its own copies and logs whether success reset its slots and
// how many cleanups ran ("args1 reset=1 cleanups=N").
func Args(root unsafe.Pointer) { C.ct_args(bsi(root)) }

// GoValue adds a step that logs the type flags and values of its four args
// (an INT32, a STRING, an array of two strings, a Go value: "args2 ..."),
// then succeeds with the Go value passed on as it came, a UINT8 200, a
// DOUBLE 1.5 and a BOOL true.
func GoValue(root unsafe.Pointer) { C.ct_go_value(bsi(root)) }

// EmptySlot adds a step that succeeds with its first slot empty and a
// UINT8 5 in the second.
func EmptySlot(root unsafe.Pointer) { C.ct_empty_slot(bsi(root)) }

// Held adds a step that waits for an external completion ("held"): from
// FailHeld, which fails it with Boom from the calling thread, or from
// SucceedHeld, which succeeds it.
func Held(root unsafe.Pointer) { C.ct_held(bsi(root)) }

// FailHeld fails the step of Held with Boom, from the calling thread.
func FailHeld() { C.ct_fail_held() }

// HeldStep returns the pointer of the step of Held.
func HeldStep() unsafe.Pointer { return unsafe.Pointer(C.ct_held_step()) }

// LateCallHeld makes call (an OC* of OwnCall) on the step of Held from the
// calling thread, once the step's callback has returned.
func LateCallHeld(call int) { C.ct_late_call_held(C.int(call)) }

// HeldWithCancel adds a step as Held does, with a cancel handler that logs
// "held cancel".
func HeldWithCancel(root unsafe.Pointer) { C.ct_held_with_cancel(bsi(root)) }

// Guard takes stack memory, whose cleanup logs "guard cleanup", and sets
// a cancel handler that logs "guard cancel" on step, a Go step's pointer
// given by Binary: call it in the step's callback.
func Guard(step unsafe.Pointer) { C.ct_guard(bsi(step)) }

// StackHeld calls stack on the step of Held from the calling thread, and
// reports whether it gave memory.
func StackHeld() bool { return C.ct_stack_held() != 0 }

// StateHeld is StackHeld's twin for stateVariable.
func StateHeld() bool { return C.ct_state_held() != 0 }

// SucceedHeld succeeds the step of Held (or of StateKept), with no args,
// from the calling thread.
func SucceedHeld() { C.ct_succeed_held() }

// Running adds a step that logs isValid of root and of its own step
// ("running root valid=0 step valid=1" in root's own flow, while root
// runs; a copy's flow leaves root idle) and marks done.
func Running(root unsafe.Pointer) { C.ct_running(bsi(root)) }

// SameRoot adds a step that logs whether its rootId is root's ("same
// rootId as the root=1"), and one that fails with Boom, whose error
// handler logs the same ("Boom handler: same rootId as the root=1") and
// recovers.
func SameRoot(root unsafe.Pointer) { C.ct_same_root(bsi(root)) }

// AwaitLike adds what the C++ reference implementation's await does: a
// repeat of 5 whose body logs "await body I" and, in iteration 1, calls
// success with a UINT8 5 and then breakLoop; the step after it logs what
// it got ("after await typed 5") and marks done.
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
// "anon N locked" or "anon N lock: CODE".
func AnonLock(sync unsafe.Pointer, n int) { C.ct_anon_lock((*C.FutoInSync)(sync), C.int(n)) }

// AnonUnlock calls the unlock function of sync for step n of AnonLock
// ("anon N unlocks").
func AnonUnlock(sync unsafe.Pointer, n int) { C.ct_anon_unlock((*C.FutoInSync)(sync), C.int(n)) }

// BareLock calls the lock function of sync ("bare locks", then "bare
// lock returned") for the step of a table that has only rootId (always 1),
// waitExternal ("bare waits"), setCancel ("bare setCancel"), success
// ("bare locked") and handle_error ("bare lock: CODE: INFO"), but for the
// functions of the indexes in missing (FnSuccess...), which are NULL.
func BareLock(sync unsafe.Pointer, missing ...int) {
	C.ct_bare_lock((*C.FutoInSync)(sync), mask(missing))
}

// The orders that BareOrder forces between the success of the step of
// BareLock, which the hidden flow's loop calls, and the return of the
// lock call on BareLock's thread: nothing else orders them.
const (
	BareAnyOrder      = C.CT_BARE_ANY_ORDER      // as they come (Reset sets it)
	BareLockedFirst   = C.CT_BARE_LOCKED_FIRST   // "bare locked" before "bare lock returned"
	BareReturnedFirst = C.CT_BARE_RETURNED_FIRST // "bare lock returned" before "bare locked"
)

// BareOrder makes the next BareLock calls trace their success and their
// return in order: the one to come second waits (5 s at most) for the
// other.
func BareOrder(order int) { C.ct_bare_order(C.int(order)) }

// BareCancel runs the cancel handler that the step of BareLock was given,
// if any ("bare cancelled"), as a cancel of its flow would.
func BareCancel() { C.ct_bare_cancel() }

// BareUnlock calls the unlock function of sync for the step of BareLock
// ("bare unlocks").
func BareUnlock(sync unsafe.Pointer) { C.ct_bare_unlock((*C.FutoInSync)(sync)) }

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

// SyncGo adds to root a step that enters sync and, inside, calls fn with
// its pointer, in its callback, on the loop, then returns.
func SyncGo(root, sync unsafe.Pointer, fn func(step unsafe.Pointer)) {
	inCBranch = fn
	C.ct_sync_go(bsi(root), (*C.FutoInSync)(sync))
}

// CBranchID returns the rootId of the step of CBranchGo's branch.
func CBranchID() int64 { return int64(C.ct_c_branch_id()) }

// Reserved adds a step that makes ordinary state variables named
// "error_info" and "last_exception" through an allocate (each 40, then
// incremented: "reserved error_info=41 last_exception=42 same=1") and
// fails with Reserved, "the info"; its error handler logs the info and the
// code that the two names give without an allocate, and recovers.
func Reserved(root unsafe.Pointer) { C.ct_reserved(bsi(root)) }

// PassAsync adds to step three C steps: the first succeeds with a custom
// object; the second hands it, still in its slot, to a thread that
// passes it on in success while the callback returns; the third leaves
// it to the library (logging "pass_end got no custom object" if it got
// none). Its cleanup logs "custom cleanup 7".
func PassAsync(step unsafe.Pointer) { C.ct_pass_async(bsi(step)) }

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

// EmptySlotBack adds a step that logs whether its first slot is empty and
// the type flags and value of its second, a UINT8 ("empty2 arg0=NULL
// arg1=10:6").
func EmptySlotBack(root unsafe.Pointer) { C.ct_empty_slot_back(bsi(root)) }

// Custom adds five steps around a custom object (an int 5): the first
// makes it and succeeds with it, the second passes it on, the third
// receives it, the fourth gets nothing, each logging the cleanups run so
// far ("custom1 reset=1 cleanups=N" ... "custom4 cleanups=N"); the fifth
// makes another one that no step receives, which the Go side drops.
func Custom(root unsafe.Pointer) { C.ct_custom(bsi(root)) }

// Errors adds a step that logs last_exception, fails with MyError, "my
// info" (from buffers it overwrites at once) and logs "err1 returns"; its
// error handler logs the code, error_info, last_exception and the NULL an
// unknown name gives.
func Errors(root unsafe.Pointer) { C.ct_errors(bsi(root)) }

// Misuse adds a step that adds a sub-step and then calls success (a
// misuse: the sub-step must not run), and an error handler that logs the
// code and info it gets ("misuse_eh InternalError: ...") and recovers.
func Misuse(root unsafe.Pointer) { C.ct_misuse(bsi(root)) }

// State adds two steps that increment the state variable "counter"; the
// first logs the NULL of a missing name, the second the counter and
// whether a second access gave the same pointer ("state2 counter=2
// same=1"). The variable's cleanup logs "cleanup counter=N".
func State(root unsafe.Pointer) { C.ct_state(bsi(root)) }

// Stack adds a step that takes two blocks of stack memory (logging
// whether they are zeroed and aligned), writes mode into the first, and
// then, by mode: 0 succeeds, 1 adds a sub-step, 2 fails with Fail (its
// error handler logs the memory and recovers), 3 waits with a cancel
// handler; then a step that logs "stack2". The first block's cleanup logs
// "stack cleanup MODE".
func Stack(root unsafe.Pointer, mode int) { C.ct_stack(bsi(root), C.int(mode)) }

// StackData takes stack memory of the step of as, writes 7 into it, and
// adds a sub-step that logs it through its data pointer ("stack data sub
// mem=7"); the memory's cleanup logs "stack cleanup 7".
func StackData(as unsafe.Pointer) { C.ct_stack_data(bsi(as)) }

// Timeout adds a step with stack memory (8), a cancel handler and a 20 ms
// timeout; its error handler logs the code and the memory ("timeout eh
// Timeout mem=8") and recovers, and the next step logs "after timeout".
func Timeout(root unsafe.Pointer) { C.ct_timeout(bsi(root)) }

// Wait adds a step that waits and has a thread of its own succeed it with
// an INT32 7, then again with 8 and fail it (both ignored), all while its
// callback still runs; the next step logs what it got ("wait2 7 ...").
func Wait(root unsafe.Pointer) { C.ct_wait(bsi(root)) }

// Loops adds a loop labelled "outer" whose body repeats an inner body 3
// times: the inner body continues the innermost loop at j 0, the outer one
// at outer 1 and j 1, and breaks the outer one at outer 2 and j 1, each
// iteration logged ("outer I", "inner I.J"); the next step logs whether it
// got args ("after loops args=0").
func Loops(root unsafe.Pointer) { C.ct_loops(bsi(root)) }

// Parallel adds a step that runs three parallel branches, each logging
// that it got no args and adding a sub-step that logs whether its rootId
// is its branch's ("nested I same=1"); the next step logs whether the
// rootIds of the flow, of the step and of the branches are as they should
// be ("par2 flow same=1 step same=1 branches distinct=1").
func Parallel(root unsafe.Pointer) { C.ct_parallel(bsi(root)) }

// Sched adds a step that schedules an immediate callback, a deferred one
// (10 ms) and one it cancels, logging sched_is_valid on the way, then
// waits; the deferred callback has a thread of its own schedule the
// callback that succeeds the step ("sched from thread").
func Sched(root unsafe.Pointer) { C.ct_sched(bsi(root)) }

// Stale adds a step that keeps its pointer and a step that calls
// StaleCall, then logs the cleanups run ("stale2 cleanups=N").
func Stale(root unsafe.Pointer) { C.ct_stale(bsi(root)) }

// StaleCall calls success (with an INT32), handle_error, add, setTimeout
// and waitExternal on the pointer Stale kept, once its step has completed,
// and logs isValid and whether success still reset its args ("stale
// valid=0 reset=1"); a step added there must never run.
func StaleCall() { C.ct_stale_call() }

// Cancel calls the table's cancel on root.
func Cancel(root unsafe.Pointer) { C.ct_cancel(bsi(root)) }

// IsValid returns the table's isValid of root.
func IsValid(root unsafe.Pointer) int { return int(C.ct_is_valid(bsi(root))) }

// Free calls the table's free on root.
func Free(root unsafe.Pointer) { C.ct_free(bsi(root)) }

// FakeSync returns a foreign FutoInSync whose lock logs "lock" and makes
// its step wait for a scheduled callback, which logs "locked" and succeeds
// it; its unlock logs "unlock".
func FakeSync() unsafe.Pointer { return unsafe.Pointer(C.ct_fake_sync()) }

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

// SharedLocked reports whether the sync of SharedSync counts itself
// locked: granted or taken, and not unlocked since.
func SharedLocked() bool { return C.ct_shared_locked() != 0 }

// SyncHeld adds to root a step that enters sync and, inside it, a step
// that waits as HeldWithCancel's does.
func SyncHeld(root, sync unsafe.Pointer) { C.ct_sync_held(bsi(root), (*C.FutoInSync)(sync)) }

// BrokenSync returns a foreign FutoInSync without a table (0), without
// lock (1) or without unlock (2).
func BrokenSync(which int) unsafe.Pointer { return unsafe.Pointer(C.ct_broken_sync(C.int(which))) }

// FakeRoot returns a root of the strict foreign table of ctest.c: a small
// synchronous implementation that behaves as the C++ reference
// implementation does where the spec is silent (it takes over the values
// given to success, fills unused slots with placeholders of its own, keeps
// loop labels by pointer, has state variables only through allocate).
func FakeRoot() unsafe.Pointer { return unsafe.Pointer(C.ct_fake_root()) }

// FakeRun runs the flow of a FakeRoot to its end, its first step given the
// STRING "from the fake", and logs how it ended ("fake: end failed=0 ...").
func FakeRun(root unsafe.Pointer) { C.ct_fake_run(bsi(root)) }

// FakeFree cleans up the state variables of a FakeRoot and frees it.
func FakeFree(root unsafe.Pointer) { C.ct_fake_free(bsi(root)) }

// TakeString adds a C step that moves its string argument out of its slot
// and waits; FinishTaken logs the string from the calling thread, resets
// the step's copy and completes the step.
func TakeString(root unsafe.Pointer) { C.ct_take_string(bsi(root)) }

// FinishTaken: see TakeString.
func FinishTaken() { C.ct_finish_taken() }

// FakeRunSched runs the fake table's pending sched_immediate callback on
// the calling thread; false when none is pending.
func FakeRunSched() bool { return C.ct_fake_run_sched() != 0 }

// The functions of a FutoInAsyncSteps table, by their index in it, for
// TableRoot; Funcs names them.
const (
	FnAdd = iota
	FnParallel
	FnStateVariable
	FnStack
	FnSuccess
	FnHandleError
	FnSetTimeout
	FnSetCancel
	FnWaitExternal
	FnLoop
	FnRepeat
	FnBreakLoop
	FnContinueLoop
	FnExecute
	FnCancel
	FnAddSync
	FnRootID
	FnIsValid
	FnNewInstance
	FnFree
	FnSchedImmediate
	FnSchedDeferred
	FnSchedCancel
	FnSchedIsValid
	FnIsSameThread
)

// Funcs names the functions of a FutoInAsyncSteps table, by index.
var Funcs = [...]string{"add", "parallel", "stateVariable", "stack", "success",
	"handle_error", "setTimeout", "setCancel", "waitExternal", "loop", "repeat",
	"breakLoop", "continueLoop", "execute", "cancel", "addSync", "rootId", "isValid",
	"newInstance", "free", "sched_immediate", "sched_deferred", "sched_cancel",
	"sched_is_valid", "is_same_thread"}

func mask(missing []int) C.uint32_t {
	var m C.uint32_t
	for _, i := range missing {
		m |= 1 << i
	}
	return m
}

// TableRoot returns a fake root (as FakeRoot's, run by FakeRun) whose
// table has all 25 functions but those of the indexes in missing (FnAdd,
// ...), which are NULL. Its parallel is not supported (it gives NULL),
// its setTimeout and setCancel make the step wait as its waitExternal does
// (a waiting step is given up, its setCancel handler run), and its event
// loop, run by SchedRun, has is_same_thread 1 in the callbacks SchedRun
// runs only; a call of a function the library does not call on a foreign
// table (stack, execute, cancel, addSync, newInstance, free) is a
// VIOLATION in the trace. Free it with FakeFree.
func TableRoot(missing ...int) unsafe.Pointer {
	return unsafe.Pointer(C.ct_table_root(mask(missing), 0))
}

// StepsTableRoot is TableRoot whose own table has every function: only
// the table it gives its steps lacks those in missing.
func StepsTableRoot(missing ...int) unsafe.Pointer {
	return unsafe.Pointer(C.ct_table_root(mask(missing), 1))
}

// CancelOnError makes a root of TableRoot or StepsTableRoot run the
// cancel handler of a step that fails (the step's own error, or one of
// its sub-steps'), once its callback has returned and before its error
// handler, as the C++ reference implementation does; it logs "fake:
// cancel handler returned".
func CancelOnError(root unsafe.Pointer) { C.ct_cancel_on_error(bsi(root)) }

// TimeOutWaiting makes a root of TableRoot or StepsTableRoot time out a
// step that waits once its callback has returned, as if its timeout
// passed at once: its cancel handler runs, then its error handler, with
// Timeout; it logs "fake: the waiting step times out".
func TimeOutWaiting(root unsafe.Pointer) { C.ct_time_out_waiting(bsi(root)) }

var inFakeCStep func(step unsafe.Pointer)

//export ctFakeCGo
func ctFakeCGo(step *C.FutoInAsyncSteps) { inFakeCStep(unsafe.Pointer(step)) }

// FakeCGo adds to a fake root a C step that calls fn with its pointer, in
// its callback, and has an error handler that logs "fake: C error handler
// CODE". The step completes only as fn makes it.
func FakeCGo(root unsafe.Pointer, fn func(step unsafe.Pointer)) {
	inFakeCStep = fn
	C.ct_fake_c_go(bsi(root))
}

// Log adds s as a line to the trace.
func Log(s string) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	C.ct_log(cs)
}

// SchedRun runs, on the calling thread, what the tables of TableRoot
// queued, in order, what the callbacks queue included; it returns how
// many callbacks ran.
func SchedRun() int { return int(C.ct_sched_run()) }

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

// StackIdlePar calls stack on the parallel of ParallelIdle from the
// calling thread, and reports whether it gave memory.
func StackIdlePar() bool { return C.ct_stack_idle_par() != 0 }

// StateIdlePar is StackIdlePar's twin for stateVariable.
func StateIdlePar() bool { return C.ct_state_idle_par() != 0 }

// StateNull adds two steps that ask for the state variable "none", whose
// allocate returns NULL, and log what they get.
func StateNull(root unsafe.Pointer) { C.ct_state_null(bsi(root)) }

// HandleError calls handle_error with code and info on the step bsi, as
// a C library given a Go step by cabi.Binary does.
func HandleError(step unsafe.Pointer, code, info string) {
	C.ct_handle_error(bsi(step), cstr(code), cstr(info))
}

// FreeOwn adds to root a step that frees root ("free own root").
func FreeOwn(root unsafe.Pointer) { C.ct_free_own(bsi(root)) }

// CancelLock calls the lock function of sync for a step of another table
// (rootId 77) that logs "cancelled step waits", then "cancelled step
// locked" on success or "cancelled step lock: CODE" on handle_error; or,
// once CancelLocker has cancelled it, "cancelled step: success after its
// cancel handler" or "cancelled step: CODE after its cancel handler": a
// use after free in a real implementation.
func CancelLock(sync unsafe.Pointer) { C.ct_cancel_lock((*C.FutoInSync)(sync)) }

// CancelLocker cancels the step of CancelLock, as its flow would: it logs
// "cancelled step cancelled" and calls the cancel handler the step was
// given; when that returns, the step is gone.
func CancelLocker() { C.ct_cancel_locker() }

// CancelStepUnwinds sets whether the step of CancelLock, given
// handle_error, unwinds as an implementation of FTN12 does: it calls its
// cancel handler, as CancelLocker, before handle_error returns.
func CancelStepUnwinds(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.ct_cancel_step_unwinds(v)
}

// CancelStepRaces sets whether the step of CancelLock, given success, has
// another thread call its cancel handler meanwhile, as a cancel of its
// flow that comes while the success runs; the success waits up to 200 ms
// for that cancel handler, and logs "cancelled step: its cancel handler
// returned during its success" if it returned meanwhile. CancelRaceWait
// waits for that thread.
func CancelStepRaces(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.ct_cancel_step_races(v)
}

// CancelRaceWait waits until the cancel handler called by CancelStepRaces
// has returned.
func CancelRaceWait() { C.ct_cancel_race_wait() }

// IntData adds steps whose data is a small integer: one logs it ("int data
// step 3"), one takes a cancel handler whose data is 5 and a 1 ms timeout
// ("int data wait 4", "int data cancel 5", "int data eh Timeout 4"). Each grows the goroutine's stack by calling Go from C, which
// makes the runtime check the Go frames below it for bad pointers.
func IntData(root unsafe.Pointer) { C.ct_int_data(bsi(root)) }

//export ctGrowStack
func ctGrowStack() { growStack(256) }

// growStack recurses n frames of about 1 KiB each, so that the goroutine's
// stack is copied to a larger one.
//
//go:noinline
func growStack(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return growStack(n-1) + buf[(n*7)%len(buf)]
}

// The calls of OwnCall, as OC_* in ctest.c.
const (
	OCAdd = iota
	OCParallel
	OCLoop
	OCRepeat
	OCSync
	OCTimeout
	OCCancel
	OCWait
	OCSuccess
	OCError
	OCBreak
	OCContinue // with the label "outer"
)

// Where OwnCall makes its call on the loop's body.
const (
	FromSubStep = iota // a C sub-step of the body
	FromBranch         // a C sub-step of a step of a parallel branch under the body
	FromTool           // a callback of the tool, once the body waits with a cancel handler, then a completion
	FromThread         // a C thread, once the body waits, then a completion
	FromSibling        // a parallel branch's C step, on its sibling's step that waits with a cancel handler, then a completion
)

// OwnCall adds a repeat(3, "outer") whose body (logging "iteration i")
// gets call, one that only a step's own callback may make, on its pointer
// from where; the call's sub-steps log "added", its cancel handler
// "cancel handler", the caller "sub returns" or "late returns" after it;
// the body's own cancel handler, set from the tool only, logs "body
// cancel handler".
// From the tool or a thread, a completion of the body follows the call: a
// success, or after OCBreak and OCContinue a handle_error "Late".
// FromSibling makes the call, and the completion, on the waiting step of
// the first branch of a parallel in the body, from the second branch.
// A step after the loop logs "after the loop".
func OwnCall(root unsafe.Pointer, call, where int) {
	C.ct_own_call(bsi(root), C.int(call), C.int(where))
}

// OwnCallSub adds to parent, in its callback, a C sub-step with an error
// handler that makes call (an OC* of OwnCall) on parent's pointer, then
// logs "sub returns"; the handler logs "sub handler code: error_info".
func OwnCallSub(parent unsafe.Pointer, call int) { C.ct_own_call_sub(bsi(parent), C.int(call)) }

// SucceedStep calls success with no args on step from the calling thread.
func SucceedStep(step unsafe.Pointer) { C.ct_succeed_step(bsi(step)) }
