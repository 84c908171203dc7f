//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"math"
	"runtime"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// The functions of our FutoInAsyncSteps table (bridge.c forwards to them).
// Each one looks the pointer up, ignores it when stale, and catches the
// engine's aborts (guard) so that no Go panic unwinds C frames.

func label(l *C.char) []string {
	if l == nil {
		return nil // NULL and "" both mean no label
	}
	return []string{C.GoString(l)}
}

// branchRoot returns the rootId for a step added on n: a branch of a
// parallel has its own.
func (n *node) branchRoot() int64 {
	if n.kind == kindParallel {
		return newRootID()
	}
	return n.rootID
}

func (n *node) adds() {
	if n.kind == kindStep {
		n.added = true
	}
}

// outsideCallback reports whether n is a step's pointer used outside the
// step's C callback, where the calls that only that callback may make
// (add, parallel, loop, repeat, addSync, setTimeout, setCancel,
// waitExternal, breakLoop, continueLoop) go to the engine, which refuses
// them as it refuses Go's (see elsewhere). The caller makes the closure
// for elsewhere only then: the calls of a callback take no allocation
// for it.
func (n *node) outsideCallback() bool { return n.kind == kindStep && !n.inCallback() }

// elsewhere makes engine's call (the engine's own, whose misuse info names
// it) on n's step from outside the step's callback, where only that
// callback may make it (spec section 1):
//   - on the loop, on a step whose sub-steps run, it is made at once: from
//     the callback of one of them, or of a step under them, the engine
//     raises InternalError there, and guard keeps that abort for the C
//     callback that runs (see aborted); from elsewhere it has no effect;
//     so it is on a step whose cancel handler runs (Go's, set through
//     Wrap, which C may call the table from), and the engine logs it as
//     the handler's misuse (see refusesOutside);
//   - otherwise it is posted to the loop, as a completion from outside is
//     (a claim of its kind first, see claimOutside): a step that still
//     waits for a completion from outside fails then, as the engine fails
//     it; a step that has completed, or whose sub-steps run, ignores it.
//
// succeed and handleError take the first way for success and
// handle_error; cStep.outside makes Go's calls through Wrap.
func (n *node) elsewhere(engine func()) {
	if n.refusesOutside() {
		defer guard(n)
		engine()
		return
	}
	mayApply := n.claimOutside(outsideCall)
	apply := func() {
		if !mayApply || n.over() {
			return
		}
		n.failing()
		engine()
	}
	n.post(apply, func() { n.failureDropped(apply) })
}

// failureDropped is the fallback of apply, the task of a call from
// outside the step's callback that fails a waiting step (handle_error,
// or a call only the callback may make, see elsewhere), which the loop
// did not run. A tool that runs on (see reportsDrops) gets the failure
// when it runs next, as a TestTool keeps Go's Error from another
// goroutine: released, the step would wait on, its cancel handler never
// run. A stopped loop leaves the step: its cancel handler runs, once, as
// the failure would have run it (also if the call lost its claim to
// another that failed the step, not to a success, after which the step
// has ended), then the step is released (see leave). The free's fallback
// does the same, so whichever comes first runs the handler. A step whose
// sub-steps run ignores the call on a running loop; a stopped one leaves
// a step that may have some (a newer step of the flow is left, see
// newerLeft) to the fallback of the free or of the flow's end, which
// leaves the flow's steps innermost first: its cancel handler and stack
// cleanup must not come before its sub-steps' cancel handlers, which may
// read its memory.
func (n *node) failureDropped(apply func()) {
	if reportsDrops(n.tool) {
		n.applyDropped(apply)
		return
	}
	if n.newerLeft() {
		return
	}
	n.leave()
}

// newerLeft reports whether a step of n's flow newer than n's step is
// not released: maybe a sub-step of n's, at any depth (the engine, its
// flow ended by the stop, no longer tells). Once the loop has stopped;
// n is a step's node.
func (n *node) newerLeft() bool {
	found := false
	registry.eachStep(n.st, func(o *node) bool {
		found = o.id > n.id && !o.released.Load()
		return !found
	})
	return found
}

//export cabiAdd
func cabiAdd(bsi *C.FutoInAsyncSteps, data C.uintptr_t, f, eh unsafe.Pointer) {
	n := nodeOf(bsi)
	switch {
	case n == nil:
		return
	case n.outsideCallback():
		n.elsewhere(func() { n.as.Add(nil) })
		return
	case !n.mayAdd("add"):
		return
	}
	defer guard(n)
	if f == nil {
		n.as.Add(nil) // reported by the engine as InternalError
		return
	}
	rid, link := n.branchRoot(), newLink(eh)
	n.adds()
	n.as.Add(n.flow.stepFn(rid, C.FutoInAsyncSteps_execute_callback(f), data, link),
		n.flow.errFn(rid, C.FutoInAsyncSteps_error_callback(eh), data, link))
}

//export cabiParallel
func cabiParallel(bsi *C.FutoInAsyncSteps, data C.uintptr_t, eh unsafe.Pointer) *C.FutoInAsyncSteps {
	n := nodeOf(bsi)
	switch {
	case n == nil:
		return nil
	case n.outsideCallback():
		n.elsewhere(func() { n.as.Parallel() })
		return nil
	case !n.mayAdd("parallel"):
		return nil
	}
	defer guard(n)
	if n.kind == kindParallel {
		n.as.Parallel() // reported by the engine as InternalError
		return nil
	}
	n.adds()
	pb := n.as.Parallel(n.flow.errFn(n.rootID, C.FutoInAsyncSteps_error_callback(eh), data, nil))
	p := newNode(kindParallel, pb, n.flow, n.rootID)
	p.owner = n.root
	// Owned by the library: released with the step (or root) that made it.
	n.children = append(n.children, p)
	return p.bsi
}

//export cabiStateVariable
func cabiStateVariable(bsi *C.FutoInAsyncSteps, data C.uintptr_t, name *C.char, allocate, cleanup unsafe.Pointer) unsafe.Pointer {
	n := nodeOf(bsi)
	if n == nil || name == nil || !n.onFlow() {
		return nil
	}
	defer guard(n)
	st := n.as.State()
	res := n.flow.res
	gname := C.GoString(name)
	if allocate != nil {
		// With allocate every name is an ordinary variable: a table such
		// as the C++ reference implementation implements its whole state
		// this way and uses the result as its own object.
		return n.variable(gname, st, data, allocate, cleanup)
	}
	switch gname {
	case "error_info":
		res.mu.Lock()
		defer res.mu.Unlock()
		if e := res.ending; e != nil {
			return unsafe.Pointer(res.errInfo.get(e.Info))
		}
		return unsafe.Pointer(res.errInfo.get(st.ErrorInfo))
	case "last_exception":
		res.mu.Lock()
		defer res.mu.Unlock()
		if e := res.ending; e != nil {
			return unsafe.Pointer(res.lastExc.get(e.Code))
		}
		if st.LastException == nil {
			return nil
		}
		return unsafe.Pointer(res.lastExc.get(errorCode(st.LastException)))
	default:
		return n.variable(gname, st, 0, nil, nil)
	}
}

// variable returns the state variable name, allocated on first use when
// allocate is not nil; nil when it does not exist and allocate is nil.
func (n *node) variable(name string, st *asyncsteps.State, data C.uintptr_t, allocate, cleanup unsafe.Pointer) unsafe.Pointer {
	if v, ok := st.Get(name).(*cVar); ok && v.owner == n.flow.res && !v.done {
		return v.ptr
	}
	// Missing, cleaned up, or copied from the State of another Root (Clone,
	// CopyFrom): C has no way to copy a variable, and the other flow's loop
	// and free own that one.
	if allocate == nil {
		return nil
	}
	v := &cVar{varCleanup: varCleanup{cleanup: C.cabi_var_cleanup_fn(cleanup), data: data}, owner: n.flow.res}
	v.ptr = C.cabi_call_alloc(C.cabi_alloc_fn(allocate), data)
	v.gc = runtime.AddCleanup(v, varCleanup.run, v.varCleanup)
	st.Set(name, v)
	if n.flow.owned {
		// Kept for the root's free. A Go root's variable is held by its
		// State alone, so that replacing or removing it there ends it too.
		n.flow.vars = append(n.flow.vars, v)
	}
	n.flow.cleanups.Store(true)
	return v.ptr
}

// errorCode is the FutoIn code of a LastException: that of an *Error,
// or, for a Go error the flow keeps whole (an Await function's, Fail's,
// a panic's *PanicError), the code the engine raised for it, which
// ErrorFrom gives. An *Error found down such an error's chain may name
// another code (a net error's CommError is no *Error; a panic of a
// CommError raised InternalError). An *Error without a code is one an
// Await function returned: it raised InternalError, as ErrorFrom says.
func errorCode(err error) string {
	if e, ok := err.(*asyncsteps.Error); ok && e != nil && e.Code != "" {
		return e.Code
	}
	return asyncsteps.ErrorFrom(err).Code
}

//export cabiStack
func cabiStack(bsi *C.FutoInAsyncSteps, size C.size_t, cleanup unsafe.Pointer) unsafe.Pointer {
	n := nodeOf(bsi)
	if n == nil || !n.onFlow() {
		return nil
	}
	// calloc: zeroed, and aligned for any fundamental type like max_align_t.
	p := C.calloc(1, max(size, 1))
	if p == nil {
		return nil
	}
	n.stacks = append(n.stacks, stackMem{p: p, cleanup: C.cabi_stack_cleanup_fn(cleanup)})
	if !n.flow.cleanups.Load() {
		// Taken on an idle root or a parallel made on it: the free of a
		// root never executed must wait for this cleanup too.
		n.flow.cleanups.Store(true)
	}
	return p
}

// onFlow reports whether the flow's state and memory lists may be touched
// now: on the loop, or through an idle root or a parallel made on it,
// beside which nothing runs (a C++ wrapper such as the reference
// implementation's builds a root's parallel branches with stack and
// stateVariable). From another thread, they would race with the loop.
func (n *node) onFlow() bool {
	if n.onLoop() {
		return true
	}
	ro := n.root
	if ro == nil {
		ro = n.owner
	}
	return ro != nil && !ro.isFreed() && !ro.root.Running()
}

//export cabiSuccess
func cabiSuccess(bsi *C.FutoInAsyncSteps, args *C.FutoInArgs) {
	n := nodeOf(bsi)
	vals, tooLong := takeArgs(args, n)
	if n == nil {
		dropArgs(vals, nil)
		return
	}
	if n.misusedOnRoot("success", "step to complete") {
		dropArgs(vals, n)
		return
	}
	if tooLong != "" {
		dropArgs(vals, n)
		n.handleError(asyncsteps.InternalError, "success: "+tooLong, guard)
		return
	}
	defer guard(n)
	if n.kind != kindStep {
		n.as.Success(vals...) // a step's parallel: the engine's misuse
		dropArgs(vals, n)
		return
	}
	n.succeed(vals, true)
}

// succeed completes n's step with vals, as success does, for C and for Go
// through Wrap. taken: vals were taken over from C, and their custom
// objects are cleaned up if no step receives them (Go's values stay
// Go's).
func (n *node) succeed(vals []any, taken bool) {
	drop := func() {
		if taken {
			dropArgs(vals, nil)
		}
	}
	if n.inCallback() {
		if n.inCancel {
			// Over (see runCancel): the engine reports the call and
			// takes nothing. A loop body's hold would keep the call from
			// it, unreported, for a return of the step's callback that
			// never comes. No step receives vals: cleaned up now.
			n.as.Success(vals...)
			drop()
			return
		}
		n.completed = true
		if n.body != nil {
			n.hold(vals)
			return
		}
		n.as.Success(vals...)
		return
	}
	if n.refusesOutside() {
		// Not the step's to complete (see elsewhere): the engine raises
		// the misuse in a sub-step's callback, if one runs, or logs the
		// cancel handler's, and receives nothing. The caller's guard
		// keeps the abort.
		drop()
		n.as.Success(vals...)
		return
	}
	// From outside the callback: on the loop.
	mayApply := n.claimOutside(outsideSuccess)
	apply := func() {
		if !mayApply {
			drop()
			return
		}
		if c := n.claimed.Load(); c != nil {
			n.deliver(*c, vals, drop)
			return
		}
		if n.over() {
			drop()
			return
		}
		if n.onSuccess != nil {
			n.onSuccess()
		}
		n.release()
		n.as.Success(vals...)
	}
	n.post(apply, func() {
		if reportsDrops(n.tool) {
			// The tool runs on, never beside this fallback: the success
			// applies, as a TestTool keeps Go's Success from another
			// goroutine. Dropped, it would leave the step claimed, which
			// no timeout of the step ends.
			n.applyDropped(apply)
			return
		}
		if n.newerLeft() {
			// Maybe sub-steps of the step, whose cancel handlers may read
			// its stack memory: the free, or the flow's end, leaves it
			// after them (see failureDropped), granting a lock as below.
			drop()
			return
		}
		if mayApply && n.onSuccess != nil && !n.released.Load() {
			// A foreign sync granted the lock: its section is held, and
			// the free of the root unlocks it (see releaseLeft).
			n.onSuccess()
		}
		n.release()
		drop()
	})
}

// applyDropped runs apply, the task of a completion from outside that a
// tool which runs on (see reportsDrops) dropped, from the task's
// fallback. A reset made in a callback of the tool runs the fallback
// inside that callback, maybe the step's own (a Go step's given by
// Binary), where the completion would count as the callback's own: a
// success made the engine skip the sub-steps the callback adds next, an
// error aborted the callback from inside the reset. There the task is
// posted again, to run after the callback as it would have.
func (n *node) applyDropped(apply func()) {
	if n.onLoop() {
		n.post(apply, func() { n.applyDropped(apply) })
		return
	}
	apply()
}

// deliver completes n's step with vals, a success from outside whose
// claim of the engine's step is c (see pin), as succeed's task does
// with the engine's Success: unless the step ended since the claim (a
// cancel, which ran no cancel handler of the step's, or the flow's end),
// whose node goes then, and vals are dropped. The node may be released
// already: the claim makes the step look over, and the loop's adoption
// of a pointer Binary gave off the loop releases one whose step is (see
// adoptExternal); the step still takes the success. Loop only.
func (n *node) deliver(c toolinfo.Claimed, vals []any, drop func()) {
	if c.Void() {
		n.release()
		drop()
		return
	}
	if n.onSuccess != nil && !n.released.Load() {
		n.onSuccess()
	}
	n.release()
	c.Deliver(vals)
}

// dropArgs cleans up the custom objects among vals that no step received:
// on the loop of n's flow, or at once with no n.
func dropArgs(vals []any, n *node) {
	for _, v := range vals {
		if c, ok := v.(*Custom); ok {
			if n == nil {
				c.v.release()
			} else {
				n.post(c.v.release, c.v.release)
			}
		}
	}
}

//export cabiHandleError
func cabiHandleError(bsi *C.FutoInAsyncSteps, code, info *C.char) {
	n := nodeOf(bsi)
	if n == nil || n.misusedOnRoot("handle_error", "step to fail") {
		return
	}
	gcode, ginfo := asyncsteps.InternalError, "handle_error: NULL code"
	if code != nil {
		gcode, ginfo = C.GoString(code), ""
		if info != nil {
			ginfo = C.GoString(info)
		}
	}
	n.handleError(gcode, ginfo, guard)
}

// handleError fails n's step with code and info, as handle_error does; g
// catches an abort of the engine (guard for C's call, goGuard for Go's).
func (n *node) handleError(code, info string, g func(*node)) {
	defer g(n)
	if n.kind == kindStep && n.inCallback() && n.completed && n.ownCallbackRuns() {
		// The step already failed or succeeded in this callback: as a Go
		// step's Error after its Error or Success, no effect, and the
		// first error keeps its code and info (error_info). A Go step's
		// pointer is marked so also by a call from a sub-step's callback,
		// which the engine refused: the engine answers this one too.
		return
	}
	if n.kind != kindStep || n.inCallback() {
		n.completed = n.kind == kindStep
		n.overrule(false)
		n.as.Error(code, info)
		return
	}
	if n.refusesOutside() {
		n.as.Error(code, info) // not the step's to fail (see succeed)
		return
	}
	mayApply := n.claimOutside(outsideError)
	apply := func() {
		if !mayApply {
			return
		}
		if c := n.claimedErr.Load(); c != nil {
			n.deliverError(*c, code, info)
			return
		}
		if n.over() {
			return
		}
		n.failing()
		n.as.Error(code, info)
	}
	n.post(apply, func() { n.failureDropped(apply) })
}

// failInCallback fails n's step in its C callback by fail, the engine's
// raise of a Go error, as handleError does with the engine's Error.
func (n *node) failInCallback(fail func()) {
	defer goGuard(n)
	if n.completed && n.ownCallbackRuns() {
		return // as handleError: the first completion of the callback stands
	}
	n.completed = true
	n.overrule(false)
	fail()
}

// deliverError fails n's step with code and info, an error from outside
// whose claim of the engine's step is c (see pin), as handleError's task
// does with the engine's Error: unless the step ended since the claim (a
// cancel, which ran the step's cancel handler and released n, or the
// flow's end), whose node goes then. Loop only.
func (n *node) deliverError(c toolinfo.ClaimedError, code, info string) {
	if c.Void() {
		n.release()
		return
	}
	n.failing()
	c.Deliver(code, info)
}

// misusedOnRoot reports whether n is a root, or a parallel made on one,
// for call, one that only a step's callback makes on the step (lacks says
// what it needs there: "step to time", "loop to break"). There it has
// nothing to act on: the call is recorded in the root as a misuse (see
// rootObj.misused), for the next execute to report and a free that comes
// first to log, whichever thread makes it and whether the flow runs or
// not. Ignored, it would leave the C caller that used the wrong pointer
// no sign of the mistake; recorded as a misuse of the engine's Root, it
// would race with the loop from another thread while the flow runs, and a
// free would not log it.
func (n *node) misusedOnRoot(call, lacks string) bool {
	switch {
	case n.root != nil:
		n.root.misused(call + " called on a root: it has no " + lacks)
	case n.owner != nil:
		n.owner.misused(call + " called on a parallel made on a root: it has no " + lacks)
	default:
		return false
	}
	return true
}

// notOnStep makes engine, a call that only a step's callback makes, on
// n, the pointer of a parallel made in a step: the engine's misuse,
// which fails the step as success there does.
func (n *node) notOnStep(engine func()) {
	defer guard(n)
	engine()
}

//export cabiSetTimeout
func cabiSetTimeout(bsi *C.FutoInAsyncSteps, ms C.uint32_t) {
	n, d := nodeOf(bsi), time.Duration(ms)*time.Millisecond
	switch {
	case n == nil || n.misusedOnRoot("setTimeout", "step to time"):
		return
	case n.kind != kindStep:
		n.notOnStep(func() { n.as.SetTimeout(d) })
		return
	}
	if !n.inCallback() {
		n.elsewhere(func() { n.as.SetTimeout(d) })
		return
	}
	defer guard(n)
	n.setTimeout(d)
}

//export cabiSetCancel
func cabiSetCancel(bsi *C.FutoInAsyncSteps, data C.uintptr_t, ch unsafe.Pointer) {
	n := nodeOf(bsi)
	switch {
	case n == nil || n.misusedOnRoot("setCancel", "step to cancel"):
		return
	case n.kind != kindStep:
		n.notOnStep(func() { n.as.SetCancel(nil) })
		return
	}
	if !n.inCallback() {
		n.elsewhere(func() { n.as.SetCancel(nil) })
		return
	}
	defer guard(n)
	if !n.ownCallbackRuns() {
		// The pointer of a Go step given by Binary, from another
		// callback (a sub-step's): the engine refuses the call, so the
		// handler is not the step's, and no free or stop may call it.
		n.as.SetCancel(nil)
		return
	}
	n.setCancel(C.FutoInAsyncSteps_cancel_callback(ch), data, nil)
}

//export cabiWaitExternal
func cabiWaitExternal(bsi *C.FutoInAsyncSteps) {
	n := nodeOf(bsi)
	switch {
	case n == nil || n.misusedOnRoot("waitExternal", "step to make wait"):
		return
	case n.kind != kindStep:
		n.notOnStep(n.as.WaitExternal)
		return
	}
	if !n.inCallback() {
		n.elsewhere(n.as.WaitExternal)
		return
	}
	defer guard(n)
	n.waitExternal()
}

//export cabiLoop
func cabiLoop(bsi *C.FutoInAsyncSteps, data C.uintptr_t, f unsafe.Pointer, lbl *C.char) {
	n := nodeOf(bsi)
	switch {
	case n == nil:
		return
	case n.outsideCallback():
		n.elsewhere(func() { n.as.Loop(nil) })
		return
	case n.inCancel:
		n.as.Loop(nil) // over: the engine reports the call, named, and adds nothing
		return
	case !n.mayAdd("loop"):
		return
	}
	defer guard(n)
	if f == nil {
		n.as.Loop(nil, label(lbl)...)
		return
	}
	fc, rid, fn := n.flow, n.branchRoot(), C.cabi_loop_fn(f)
	lbls := label(lbl) // now: the caller may free it when this returns
	n.adds()
	hostLoop(n.as, func(as asyncsteps.AsyncSteps, carry *loopCarry) {
		as.Loop(func(as asyncsteps.AsyncSteps) {
			fc.runC(as, rid, nil, carry.setup, func(bsi *C.FutoInAsyncSteps, _ *C.FutoInArgs) {
				C.cabi_call_loop(fn, bsi, data)
			})
		}, lbls...)
	})
}

func (c *loopCarry) setup(n *node) { n.body = c }

// hostLoop adds a step that runs the loop added by add, then succeeds with
// the args a body's success carried past its breakLoop (none otherwise).
// Each run of the step has a carry of its own: a step added on a root runs
// again in its copies (Clone, CopyFrom), maybe on another loop at once.
func hostLoop(as asyncsteps.AsyncSteps, add func(as asyncsteps.AsyncSteps, carry *loopCarry)) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		carry := &loopCarry{}
		add(as, carry)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(carry.args...) })
	})
}

//export cabiRepeat
func cabiRepeat(bsi *C.FutoInAsyncSteps, data C.uintptr_t, count C.size_t, f unsafe.Pointer, lbl *C.char) {
	n := nodeOf(bsi)
	switch {
	case n == nil:
		return
	case n.outsideCallback():
		n.elsewhere(func() { n.as.Repeat(0, nil) })
		return
	case n.inCancel:
		n.as.Repeat(0, nil) // over: the engine reports the call, named, and adds nothing
		return
	case !n.mayAdd("repeat"):
		return
	}
	defer guard(n)
	if f == nil {
		n.as.Repeat(0, nil, label(lbl)...)
		return
	}
	fc, rid, fn := n.flow, n.branchRoot(), C.cabi_repeat_fn(f)
	lbls := label(lbl) // now: the caller may free it when this returns
	cnt := int(min(uint64(count), math.MaxInt))
	n.adds()
	hostLoop(n.as, func(as asyncsteps.AsyncSteps, carry *loopCarry) {
		as.Repeat(cnt, func(as asyncsteps.AsyncSteps, i int) {
			fc.runC(as, rid, nil, carry.setup, func(bsi *C.FutoInAsyncSteps, _ *C.FutoInArgs) {
				C.cabi_call_repeat(fn, bsi, data, C.size_t(i))
			})
		}, lbls...)
	})
}

//export cabiBreak
func cabiBreak(bsi *C.FutoInAsyncSteps, lbl *C.char) {
	n := nodeOf(bsi)
	switch {
	case n == nil || n.misusedOnRoot("breakLoop", "loop to break"):
	case n.kind != kindStep:
		lbls := label(lbl)
		n.notOnStep(func() { n.as.Break(lbls...) })
	case n.inCallback():
		n.breakLoop(label(lbl))
	default:
		lbls := label(lbl) // now: the caller may free it when this returns
		n.elsewhere(func() { n.as.Break(lbls...) })
	}
}

// breakLoop ends the loop around n's step, labelled label if any, as
// breakLoop through the pointer does. In the step's C callback only.
func (n *node) breakLoop(label []string) {
	defer guard(n)
	n.completed = true
	n.overrule(true)
	n.as.Break(label...)
}

//export cabiContinue
func cabiContinue(bsi *C.FutoInAsyncSteps, lbl *C.char) {
	n := nodeOf(bsi)
	switch {
	case n == nil || n.misusedOnRoot("continueLoop", "loop to continue"):
	case n.kind != kindStep:
		lbls := label(lbl)
		n.notOnStep(func() { n.as.Continue(lbls...) })
	case n.inCallback():
		n.continueLoop(label(lbl))
	default:
		lbls := label(lbl) // now: the caller may free it when this returns
		n.elsewhere(func() { n.as.Continue(lbls...) })
	}
}

// continueLoop goes to the next iteration of the loop around n's step,
// as continueLoop through the pointer does. In the step's C callback
// only.
func (n *node) continueLoop(label []string) {
	defer guard(n)
	n.completed = true
	n.overrule(false)
	n.as.Continue(label...)
}

//export cabiExecute
func cabiExecute(bsi *C.FutoInAsyncSteps, data C.uintptr_t, eh unsafe.Pointer) {
	if n := nodeOf(bsi); n != nil && n.root != nil {
		n.root.execute(data, C.FutoInAsyncSteps_error_callback(eh))
	} else if n != nil {
		n.rootOnly("execute")
	}
}

//export cabiCancel
func cabiCancel(bsi *C.FutoInAsyncSteps) {
	if n := nodeOf(bsi); n != nil && n.root != nil {
		n.root.root.Cancel()
	} else if n != nil {
		n.rootOnly("cancel")
	}
}

// rootOnly reports call, a function of roots (execute, cancel, free),
// made on n, which is not a root: it fails the step with InternalError,
// naming the misuse, when the call comes from the step's own callback.
// Anywhere else (another thread, a parallel's pointer) the call is
// ignored: no callback of the step runs that the error could fail.
func (n *node) rootOnly(call string) {
	if n.kind == kindStep && n.inCallback() && n.ownCallbackRuns() {
		n.handleError(asyncsteps.InternalError, call+" called on a step's pointer: it is for a root's", guard)
	}
}

// namesNilStep is the Syncer given to the engine with addSync's NULL f,
// so that its InternalError names the step function, not the Syncer. The
// engine refuses the call before it uses the Syncer.
var namesNilStep asyncsteps.Syncer = asyncsteps.NewMutex(1)

//export cabiAddSync
func cabiAddSync(bsi *C.FutoInAsyncSteps, sync *C.FutoInSync, data C.uintptr_t, f, eh unsafe.Pointer) {
	n := nodeOf(bsi)
	switch {
	case n == nil:
		return
	case n.outsideCallback():
		n.elsewhere(func() { n.as.Sync(nil, nil) })
		return
	case n.inCancel:
		n.as.Sync(nil, nil) // over: the engine reports the call, named, and adds nothing
		return
	case !n.mayAdd("addSync"):
		return
	}
	defer guard(n)
	switch {
	case sync == nil:
		n.as.Sync(nil, nil) // reported by the engine as InternalError
		return
	case f == nil:
		// The engine names the NULL argument only when the Syncer is not
		// nil; a foreign sync has no Syncer to give it.
		n.as.Sync(namesNilStep, nil)
		return
	}
	rid, link := n.branchRoot(), newLink(eh)
	fn := n.flow.stepFn(rid, C.FutoInAsyncSteps_execute_callback(f), data, link)
	onerror := n.flow.errFn(rid, C.FutoInAsyncSteps_error_callback(eh), data, link)
	n.adds()
	if s := syncOf(sync); s != nil {
		n.as.Sync(s.s, fn, onerror)
		return
	}
	if C.cabi_sync_usable(sync) == 0 {
		// Without lock the section would run unguarded; without unlock
		// the lock would never be given back.
		n.as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Error(asyncsteps.InternalError, "addSync: FutoInSync without api, lock or unlock")
		}, onerror)
		return
	}
	n.flow.addForeignSync(n.as, rid, sync, fn, onerror)
}

//export cabiRootID
func cabiRootID(bsi *C.FutoInAsyncSteps) C.int64_t {
	if n := nodeOf(bsi); n != nil {
		return C.int64_t(n.rootID)
	}
	return 0
}

//export cabiIsValid
func cabiIsValid(bsi *C.FutoInAsyncSteps) C.int {
	n := nodeOf(bsi)
	if n == nil {
		return 0
	}
	if n.root != nil {
		// Until free: valid while idle, not while its flow runs, as on the
		// C++ reference implementation.
		return boolInt(!n.root.isFreed() && !n.root.root.Running())
	}
	return boolInt(!n.released.Load() && n.stepValid())
}

//export cabiNewInstance
func cabiNewInstance(bsi *C.FutoInAsyncSteps) *C.FutoInAsyncSteps {
	n := nodeOf(bsi)
	if n == nil {
		return nil
	}
	return newOwnedRoot(n.tool).node.bsi
}

//export cabiFree
func cabiFree(bsi *C.FutoInAsyncSteps) {
	if n := nodeOf(bsi); n != nil && n.root != nil {
		n.root.free(false)
	} else if n != nil {
		n.rootOnly("free")
	}
}

// FreeWait releases root, a root pointer from [New], newInstance or
// [Binary], like its table's free, and returns once the loop has cancelled
// its flow and run the cleanups of its state variables and stack memory,
// so that the caller may then destroy what those cleanups use, or exit the
// process. It is futoin_asyncsteps_free_wait. It returns at once, the
// cleanups to come on the loop, where waiting could deadlock: called on a
// loop's thread (in a callback of any loop), and on a tool that is not an
// [asyncsteps.Loop]; and so it does when the root was never executed and
// has no state variable or stack memory (nothing to wait for). While it
// waits, a step that blocks its loop until the caller does something
// deadlocks. If the loop closes meanwhile, FreeWait returns and the
// cleanups run once the loop has stopped. A step's pointer is not a root's:
// in that step's own callback, FreeWait fails the step with InternalError,
// "futoin_asyncsteps_free_wait called on a step's pointer: it is for a
// root's", as the table's free does; elsewhere, and on a parallel's
// pointer, it does nothing.
func FreeWait(root unsafe.Pointer) {
	if n := nodeOf((*C.FutoInAsyncSteps)(root)); n != nil && n.root != nil {
		n.root.free(true)
	} else if n != nil {
		n.rootOnly("futoin_asyncsteps_free_wait")
	}
}

//export cabiIsSameThread
func cabiIsSameThread(bsi *C.FutoInAsyncSteps) C.int {
	n := nodeOf(bsi)
	if n == nil {
		return 0
	}
	return boolInt(n.onLoop())
}
