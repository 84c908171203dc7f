package asyncsteps

// This file tells the callback's own Error, Break or Continue from the same
// call made by another goroutine while a step that has not declared that it
// waits is running (docs/DESIGN.md#step-api-states).

import (
	"runtime"
	"runtime/debug"
)

// invokerReturns are the return addresses, in (*flow).invoke and
// (*flow).invokeHandler, of their calls of the user's callback: every step
// and error handler with a live step API runs under one of them (loop
// bodies, Sync's function, parallel branches and cabi's callbacks are
// steps too). A goroutine whose stack holds one of them is running a
// callback; any other goroutine is not. invokerEntries are the entry
// addresses of the two functions.
var invokerReturns, invokerEntries = probeInvokers()

// probeInvokers runs a callback under each invoker once, on a flow of its
// own that touches no tool, and records where each returns to.
func probeInvokers() (returns, entries [2]uintptr) {
	fl := new(flow)
	fl.call(new(frame), func(AsyncSteps, ...any) { returns[0] = invokerReturn() }, nil)
	fl.callHandler(new(frame), func(AsyncSteps, string) { returns[1] = invokerReturn() }, "")
	for i, pc := range returns {
		entries[i] = runtime.FuncForPC(pc - 1).Entry()
	}
	return returns, entries
}

// invokerReturn returns the return address of the frame that called the
// callback that calls it.
//
//go:noinline
func invokerReturn() uintptr {
	var pc [1]uintptr
	// 0: runtime.Callers, 1: invokerReturn, 2: the callback, 3: the invoker.
	runtime.Callers(3, pc[:])
	return pc[0]
}

// The return addresses invokerOnStack reads at first, and then at a time
// when its caller is deeper than that: a callback that calls Break itself
// is found in the first read (onCallbackGoroutine, raise, Break, the
// callback, the invoker), one that calls it through helpers in the next
// ones.
const (
	nearFrames = 8
	farFrames  = 128
	maxFrames  = 16 * farFrames // deeper than this: taken as the callback's own
)

// onCallbackGoroutine reports whether its caller may be the running
// callback of a step: it is on a goroutine that runs callbacks. A Loop's
// goroutine says so itself (markLoopGoroutine), which costs a Break on a
// Loop about 20 instructions; on any other goroutine (a TestTool's driver, a Tool of
// the user's, or a goroutine of the user's) the stack is searched for an
// engine invoker (invokerOnStack), which costs thousands of instructions.
//
// A goroutine that runs a callback of another flow also passes: it is
// taken as the callback's own, as it was before this check. So does any
// Loop's goroutine, also in a function given to Immediate or Deferred: the
// mark says "a Loop", not "this flow's Loop".
func onCallbackGoroutine() bool {
	return loopMarked() || invokerOnStack()
}

// loopMarked reports whether the calling goroutine carries the mark of a
// Loop's goroutine (markLoopGoroutine), leaving the mark as it was.
func loopMarked() bool {
	if debug.SetPanicOnFault(true) {
		return true
	}
	debug.SetPanicOnFault(false)
	return false
}

// markLoopGoroutine marks the calling goroutine, one that runs a Loop, as
// a goroutine that runs callbacks. The mark is the goroutine's own
// panic-on-fault setting, the only goroutine-local state a program can set
// and read back cheaply; a goroutine starts without it and does not pass
// it on. Its effect, a panic rather than a crash at a fault on an
// unexpected address (unsafe code, memory-mapped files), is what the loop
// wants anyway: the engine turns a panic in a callback into an
// InternalError, and the process goes on. A goroutine of the user's that
// sets it calls Error, Break and Continue as before this check.
func markLoopGoroutine() { debug.SetPanicOnFault(true) }

// invokerOnStack reports whether its caller runs under an engine invoker
// of a callback. It compares return addresses only (no symbol lookup). A
// stack too deep to read to its end counts as a callback's: a false "no"
// would break a legitimate deep callback, a false "yes" only keeps the
// crash this check exists to prevent. For the same reason a "no" is
// confirmed by function, which costs a symbol lookup per frame: a build
// with profile-guided optimization may call a hot callback from a second
// place in an invoker, whose return address the probe did not see.
//
//go:noinline
func invokerOnStack() bool {
	return searchStack(isInvokerReturn, nearFrames) || searchStack(isInvokerCode, farFrames)
}

// searchStack reports whether match holds for a return address of the
// stack of its caller's caller, read first frames at first, then
// farFrames at a time (see invokerOnStack for a stack too deep to read).
//
//go:noinline
func searchStack(match func(pc uintptr) bool, first int) bool {
	var pcs [farFrames]uintptr
	skip := 3 // runtime.Callers, searchStack and its caller
	for read := first; skip < maxFrames; read = farFrames {
		n := runtime.Callers(skip, pcs[:read])
		if holdsInvoker(pcs[:n], match) {
			return true
		}
		if n < read {
			return false
		}
		skip += n
	}
	return true
}

func holdsInvoker(pcs []uintptr, match func(pc uintptr) bool) bool {
	for _, pc := range pcs {
		if match(pc) {
			return true
		}
	}
	return false
}

// isInvokerReturn reports whether pc is where an invoker's call of a
// callback returns to.
func isInvokerReturn(pc uintptr) bool { return pc == invokerReturns[0] || pc == invokerReturns[1] }

// isInvokerCode reports whether the return address pc is in an invoker's
// code, also where a callback was inlined into it.
func isInvokerCode(pc uintptr) bool {
	f := runtime.FuncForPC(pc - 1)
	if f == nil {
		return false
	}
	entry := f.Entry() // the outermost function's, under inlining
	return entry == invokerEntries[0] || entry == invokerEntries[1]
}

// failFromElsewhere fails, with an InternalError, the running step that
// has not declared that it waits, on which another goroutine called
// Error (code), Break or Continue (docs/DESIGN.md#step-api-states).
// Nothing is written to the frame here: the callback may be writing it.
// The claim, an error's (stFailed), keeps the callback's own later
// completions out, and the loop writes the error once the callback has
// returned. If the state word has changed meanwhile (the callback
// returned, or began to wait), it decides as for any call from outside.
func (h *stepAPI) failFromElsewhere(code, info string, call errorCall) (abort bool) {
	if !h.st.CompareAndSwap(0, stClaim|stFailed) {
		return h.raise(code, info, errorCall{cause: call.cause})
	}
	msg := foreignCallName(code, info, call) + " called from another goroutine on a step that does not wait:" +
		" call WaitExternal, SetTimeout or SetCancel first"
	h.fl.sched.inject(&foreignFailure{h: h, err: &Error{Code: InternalError, Info: msg}})
	return false
}

// foreignCallName names the call that raised code: Error as call names
// it, Break or Continue with their label (info), or a misuse by what its
// info says (Add: nil step function), since the user did not call Error.
func foreignCallName(code, info string, call errorCall) string {
	if call.isError {
		return call.name()
	}
	var name string
	switch code {
	case LoopBreak:
		name = "Break"
	case LoopCont:
		name = "Continue"
	default:
		return info // the engine's misuse: code is InternalError
	}
	if info != "" {
		name += "(" + info + ")"
	}
	return name
}

// foreignFailure delivers, on the loop, the error of failFromElsewhere: as
// the completion of a waiting step, once the callback has returned.
type foreignFailure struct {
	h   *stepAPI
	err *Error
}

func (t *foreignFailure) run() {
	h := t.h
	f, fl := h.f, h.fl
	if f.h != h || f.over || fl.done || h.st.Load()&stDone != 0 {
		return // the step ended otherwise (see settle)
	}
	if fl.inCall {
		fl.deferTask(t)
		return
	}
	f.args = []any{t.err}
	h.publish(true)
}
