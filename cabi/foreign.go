//go:build cgo

package cabi

// This file is long on purpose: the adapter of a foreign FutoInAsyncStepsAPI
// table implements every method of AsyncSteps; splitting it would scatter
// one type's methods.

/*
#include "bridge.h"
*/
import "C"

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/misuse"
	"github.com/asyncsteps/asyncsteps/internal/printsafe"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// foreign is an AsyncSteps that calls through a foreign FutoInAsyncSteps
// table. It never passes a NULL callback, never calls success after
// adding sub-steps nor add on a step it has completed, and completes a
// Go step that returned without completing, adding steps or waiting with
// an explicit success.
type foreign struct {
	p        *C.FutoInAsyncSteps
	cb       *fcall // the callback this value was given to, if any
	parallel bool
	owner    *foreign // for a parallel: the step that made it
}

// tableFunc is a function of a FutoInAsyncStepsAPI table, by its index.
type tableFunc int

// The functions the adapter asks a table for before it needs them.
const (
	fnParallel      tableFunc = 1
	fnStateVariable tableFunc = 2
	fnSuccess       tableFunc = 4
	fnHandleError   tableFunc = 5
	fnSetTimeout    tableFunc = 6
	fnSetCancel     tableFunc = 7
	fnWaitExternal  tableFunc = 8
	fnLoop          tableFunc = 9
	fnRepeat        tableFunc = 10
	fnBreakLoop     tableFunc = 11
	fnContinueLoop  tableFunc = 12
	fnIsValid       tableFunc = 17
)

var tableFuncNames = [...]string{"add", "parallel", "stateVariable", "stack", "success",
	"handle_error", "setTimeout", "setCancel", "waitExternal", "loop", "repeat",
	"breakLoop", "continueLoop", "execute", "cancel", "addSync", "rootId", "isValid",
	"newInstance", "free", "sched_immediate", "sched_deferred", "sched_cancel",
	"sched_is_valid", "is_same_thread"}

func (f tableFunc) String() string { return tableFuncNames[f] }

// wrapForeign is Wrap of another implementation's pointer. A table
// without handle_error could not fail the step of any Go call on it (a
// misuse, a panic of a Go callback, Error itself: the step would be left
// to hang), so Wrap, where Go first sees the table, refuses it, as a
// pointer with no table at all; by a panic, there being no step yet to
// fail.
func wrapForeign(bsi *C.FutoInAsyncSteps) *foreign {
	if bsi.api == nil {
		panic("cabi: Wrap: the FutoInAsyncSteps has no table (its api is NULL)")
	}
	w := &foreign{p: bsi}
	if !w.has(fnHandleError) {
		panic("cabi: Wrap: the foreign table has no " + fnHandleError.String() + ": no Go call on it could fail its step")
	}
	return w
}

// has reports whether w's table has f.
func (w *foreign) has(f tableFunc) bool { return tableHas(w.p, f) }

// tableHas reports whether the table of bsi has f. It reads the table's
// funcs (the start of the table, 25 pointers) from Go rather than by a
// cgo call: the calls that check a function before calling it (Success,
// State, IsValid, a step's implicit success) cost one cgo call each.
func tableHas(bsi *C.FutoInAsyncSteps, f tableFunc) bool {
	if bsi == nil || bsi.api == nil {
		return false
	}
	funcs := (*[len(tableFuncNames)]unsafe.Pointer)(unsafe.Pointer(bsi.api))
	return funcs[f] != nil
}

// lacks reports whether w's table lacks f, which call needs: if so, the
// call is a misuse of the step, InternalError "call: the foreign table
// has no f", rather than a call that does nothing and leaves the step to
// hang or completes it as its callback returns.
func (w *foreign) lacks(call string, f tableFunc) bool {
	if w.has(f) {
		return false
	}
	w.misuse(call + ": the foreign table has no " + f.String())
	return true
}

// fcall is the state of one Go callback run for a foreign table. It is
// made for every callback the table runs: its flags share one word, which
// keeps it in the 112-byte size class (see TestFcallFitsItsBudget).
type fcall struct {
	thread     C.pthread_t
	flags      callFlags
	trampoline bool // run by us: Error may abort it by panicking
	// Under subMu (beside trampoline, to keep the struct small): see
	// finish and attach.
	finished  bool          // the table is done with the step
	attached  bool          // in parent.kids
	rec       atomic.Uint64 // the record of the step, dropped on success
	cancelRec atomic.Uint64 // the record of SetCancel's function
	subMu     sync.Mutex
	subRecs   []uint64 // the records of what the callback added (see track)
	// The step's place among the flow's callbacks, so that what it keeps
	// goes once the table is done with it (see finish).
	parent *fcall              // the callback that gave the record this one runs from, if any
	kids   map[*fcall]struct{} // under subMu: callbacks run from this one's records that keep records
	// endMu orders the callback's end (callActive turning off) with
	// another goroutine's Success or Error after Add (see afterAdd),
	// which leaves its misuse in pending for endCompleted to raise.
	endMu   sync.Mutex
	pending string
	flow    atomic.Pointer[flowVar] // the flow's state variable, once seen (see foreign.flow)
}

// callFlags are the flags of an fcall, in one word: another goroutine
// (an Await's Success or Error, a Tool's call) reads and sets them while
// the callback runs, so each is read and set atomically, alone.
type callFlags struct{ v atomic.Uint32 }

// A callback's flags.
const (
	callActive    uint32 = 1 << iota // the callback runs
	callAdded                        // it added sub-steps
	callCompleted                    // its step has completed (see fcall.over)
	// callSucceeded marks a step completed by Success: a later Error,
	// Break or Continue has no effect (see Error).
	callSucceeded
	callWaiting // it waits: a cancel handler, WaitExternal, SetTimeout (see settle)
	// callToolTaken is set once the step's Tool (or a NewInstance on
	// it) is taken, so that the step's end is marked also when it
	// completes with sub-steps (see settle); callGone marks an end that
	// callCompleted does not (see over).
	callToolTaken
	callGone
	// callInCancel is set while the step's Go cancel handler runs: the
	// table runs it with the step's pointer, which it frees only after,
	// so the step's Tool still calls the table there (see over), to
	// cancel the timers the step armed.
	callInCancel
)

// has reports whether flag f is set.
func (fl *callFlags) has(f uint32) bool { return fl.v.Load()&f != 0 }

// set sets flag f.
func (fl *callFlags) set(f uint32) { fl.v.Or(f) }

// clear clears flag f.
func (fl *callFlags) clear(f uint32) { fl.v.And(^f) }

// swapSet sets flag f and reports whether it was set already.
func (fl *callFlags) swapSet(f uint32) bool { return fl.v.Or(f)&f != 0 }

// over reports whether the table may have ended the step, and freed its
// pointer, as far as the library can tell: it has completed (a Success,
// an Error, a cancel handler's run, the table done with it) and its
// callback has returned; or, having added sub-steps, they have ended, or
// the callback, an error handler's, returned without completing; or the
// table has cleaned up the flow. A Tool taken from the step is dead then
// (see foreignTool). A step whose Go cancel handler runs is not over yet:
// the table holds it until the handler returns.
func (cb *fcall) over() bool {
	if fv := cb.flow.Load(); fv != nil && fv.released.Load() {
		return true
	}
	f := cb.flags.v.Load() // one snapshot of the flags
	return f&callGone != 0 || f&(callCompleted|callActive|callInCancel) == callCompleted
}

// end marks the callback returned, after any other goroutine's
// completion under way (see afterAdd).
func (cb *fcall) end() {
	cb.endMu.Lock()
	cb.flags.clear(callActive)
	cb.endMu.Unlock()
}

// foreignAbort unwinds a Go callback after Error, Break or Continue.
type foreignAbort struct{}

// Records: the Go functions given to a foreign table, by the id in data.
// A record of a flow's step, error handler, loop or cancel handler
// belongs to the flow (flow, when the table keeps state variables): the
// table may drop such a function unrun (a sibling failed, the flow was
// cancelled) and says nothing of it, so the records the flow still has
// go when the table cleans up the flow's state variable (see flowVar).
type frec struct {
	step    asyncsteps.StepFunc
	onerror asyncsteps.ErrorFunc
	loop    asyncsteps.LoopFunc
	repeat  asyncsteps.RepeatFunc
	cancel  asyncsteps.CancelFunc
	of      *fcall // a cancel handler's: the step's callback, over once it runs
	sched   func()
	flow    *flowVar
	by      *fcall // the callback that gave the table this record, if any
	// run is the callback last run from the record: a step's, which its
	// error handler's start finishes, or a loop's iteration, which the
	// next iteration or the loop's end finishes (see fcall.finish).
	run atomic.Pointer[fcall]
}

var frecs struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*frec
}

// putRec keeps r, and returns its id. A record of a flow that the table
// has cleaned up already (a Go call on another goroutine as the table
// destroys the root) is not kept: the flow runs nothing more, and nothing
// would drop it. Its id is given all the same, and names nothing.
func putRec(r *frec) uint64 {
	frecs.mu.Lock()
	defer frecs.mu.Unlock()
	if frecs.m == nil {
		frecs.m = make(map[uint64]*frec)
	}
	frecs.next++
	if r.flow != nil {
		if r.flow.recs == nil { // released (see flowVar.release)
			return frecs.next
		}
		r.flow.recs[frecs.next] = struct{}{}
	}
	frecs.m[frecs.next] = r
	return frecs.next
}

func getRec(id uint64) *frec {
	frecs.mu.Lock()
	defer frecs.mu.Unlock()
	return frecs.m[id]
}

func dropRec(id uint64) {
	if id == 0 {
		return
	}
	frecs.mu.Lock()
	if r := frecs.m[id]; r != nil && r.flow != nil {
		delete(r.flow.recs, id)
	}
	delete(frecs.m, id)
	frecs.mu.Unlock()
}

// flowVar is the value of the state variable the library keeps in a
// foreign flow: the flow's Go State, and the ids of the records of the
// flow that are still kept. The table cleans the variable up when it is
// done with the flow's state (the C++ reference implementation, when the
// root is destroyed): no step of the flow runs after that, so the records
// still kept go then (release). Until then a record goes as its function
// runs or as the library learns that it never will, as before; recs holds
// only those, so a long flow does not make it grow.
type flowVar struct {
	state    asyncsteps.State
	recs     map[uint64]struct{} // under frecs.mu; nil once released
	released atomic.Bool
}

// release drops the records fv still has, once the table has cleaned up
// the variable.
func (fv *flowVar) release() {
	frecs.mu.Lock()
	defer frecs.mu.Unlock()
	for id := range fv.recs {
		delete(frecs.m, id)
	}
	fv.recs = nil
	fv.released.Store(true)
}

//export cabiReleaseFlowVar
func cabiReleaseFlowVar(id C.uint64_t) {
	v := getGoValue(uint64(id))
	dropGoValue(uint64(id))
	if fv, ok := v.(*flowVar); ok {
		fv.release()
	}
}

// putRec keeps r as a record of w's flow (see frec), given by w's
// callback (a parallel's: its step's).
func (w *foreign) putRec(r *frec) uint64 {
	r.flow = w.flow()
	r.by = w.call()
	if testHookBeforePutRec != nil && r.flow != nil {
		testHookBeforePutRec(r.flow)
	}
	return putRec(r)
}

// testHookBeforePutRec, set by a test, runs in foreign.putRec between the
// look-up of the record's flow and the record's put.
var testHookBeforePutRec func(fv *flowVar)

// call returns the callback w was given to (for a parallel, its step's),
// or nil outside any.
func (w *foreign) call() *fcall {
	if w.parallel {
		return w.owner.call()
	}
	return w.cb
}

// newCall makes the AsyncSteps of a Go callback that the table runs from
// the record from (nil if gone), keeping rec, the step's record, if not 0.
// The callback belongs to the flow of its record (see foreign.flow): what
// it adds or sets, and the State it reads, need no stateVariable call.
func newCall(bsi *C.FutoInAsyncSteps, rec uint64, from *frec) *foreign {
	cb := &fcall{thread: C.pthread_self(), trampoline: true}
	cb.rec.Store(rec)
	cb.flags.set(callActive)
	if from != nil {
		cb.parent = from.by
		if from.flow != nil {
			cb.flow.Store(from.flow)
		}
	}
	return &foreign{p: bsi, cb: cb}
}

// The scopes of a flow's callbacks. A step of a foreign table may keep
// records past its callback: its error handler's, its cancel handler's
// (kept when the step fails, for a table that runs the failing step's,
// as the C++ reference implementation does), those of what it added
// (a sub-step that the table drops unrun after a sibling's failure).
// The table says nothing once it is done with the step, but the flow
// shows it: the step's own error handler starts, or the loop whose
// iteration the step is, or is under, goes on to the next iteration or
// ends. A table that runs the failing step's cancel handler has run it
// by then (the C++ one before the error handler, and before the loop
// goes on). finish then drops what the step keeps, and what the
// callbacks under it keep: without it, a long-lived flow's loop whose
// iterations fail, continue or have their error handled kept a record
// or more per iteration until the table cleaned up the flow's state.
//
// A callback that keeps records as it returns is attached to the
// callback that gave the record it ran from (its parent), which
// finishes it with itself; one that keeps none is attached to nothing,
// at the cost of a lock, and no allocation.

// attach puts cb among its parent's kids if it keeps records; once.
func (cb *fcall) attach() {
	if cb.parent == nil {
		return
	}
	cb.subMu.Lock()
	keeps := cb.rec.Load() != 0 || cb.cancelRec.Load() != 0 || len(cb.subRecs) > 0 || len(cb.kids) > 0
	attach := keeps && !cb.attached && !cb.finished
	cb.attached = cb.attached || attach
	cb.subMu.Unlock()
	if attach {
		cb.parent.adopt(cb)
	}
}

// adopt puts k among cb's kids, or finishes it with cb if cb is finished
// already; cb, which keeps k now, is attached in turn.
func (cb *fcall) adopt(k *fcall) {
	cb.subMu.Lock()
	if cb.finished {
		cb.subMu.Unlock()
		k.finish()
		return
	}
	if cb.kids == nil {
		cb.kids = make(map[*fcall]struct{})
	}
	cb.kids[k] = struct{}{}
	cb.subMu.Unlock()
	cb.attach()
}

// finish ends cb's step for the library once the table is done with it
// (see attach): the step is over (a Success or Error on it from another
// goroutine has no effect), and the records it and the callbacks under
// it keep go. Once.
func (cb *fcall) finish() {
	if cb == nil {
		return
	}
	cb.subMu.Lock()
	if cb.finished {
		cb.subMu.Unlock()
		return
	}
	cb.finished = true
	recs, kids, attached := cb.subRecs, cb.kids, cb.attached
	cb.subRecs, cb.kids = nil, nil
	cb.subMu.Unlock()
	cb.flags.set(callCompleted)
	dropRec(cb.rec.Swap(0))
	dropRec(cb.cancelRec.Swap(0))
	for _, id := range recs {
		dropRec(id)
	}
	for k := range kids {
		k.finish()
	}
	if attached {
		cb.parent.subMu.Lock()
		delete(cb.parent.kids, cb)
		cb.parent.subMu.Unlock()
	}
}

// endLoop drops the record of a loop that is over, and finishes its last
// iteration.
func endLoop(id uint64) {
	if r := getRec(id); r != nil {
		r.run.Load().finish()
	}
	dropRec(id)
}

// run runs a Go callback, turning an abort into a return and a panic into
// an InternalError of the step, recorded for the Go error handlers as on
// the library's own flows: the printed value as ErrorInfo, a *PanicError
// as LastException. The callback counts as over from then on, so the
// panic is recorded here, not left to handleError, which records only
// for a callback that runs.
func (w *foreign) run(f func()) {
	returned := false
	defer func() {
		w.cb.end()
		r := recover()
		if r == nil {
			if !returned {
				logGoexit()
			}
			return
		}
		if _, ok := r.(foreignAbort); ok {
			return
		}
		if !w.cb.flags.swapSet(callCompleted) {
			info := printsafe.Sprint(r)
			w.note(info, &asyncsteps.PanicError{Value: r, Stack: debug.Stack()})
			w.raise(asyncsteps.InternalError, info, false)
		}
	}()
	f()
	returned = true
}

// logGoexit logs, with the stack that names the caller, a runtime.Goexit
// in a Go callback of a foreign table's, which nothing can turn into an
// error of the step: the Goexit goes on through the table's C frames
// (see the package doc), and the process may abort before anything else
// says why.
func logGoexit() {
	slog.Error("cabi: runtime.Goexit in a Go callback of a foreign table: it cannot unwind the table's C frames "+
		"(on a thread of C's the process aborts; on a Go thread the table's flow never ends)",
		"stack", string(debug.Stack()))
}

// settle completes a step that returned without doing anything. A step
// that added sub-steps completes with them, also one that waits (a cancel
// handler, WaitExternal, SetTimeout: a Sync's section sets a cancel
// handler and adds its steps): the records of its error handler and its
// cancel handler go after its sub-steps (see dropRecsStep), unless the
// table runs the handler first, which takes its record. The records are
// taken by swaps: another goroutine's Success may take the step's record
// at the same time.
func (w *foreign) settle() {
	cb := w.cb
	if cb.flags.has(callCompleted) {
		w.endCompleted()
		return
	}
	if cb.flags.has(callAdded) {
		// The cancel handler's stays in cb too, for finish, should a
		// sub-step fail: then dropRecsStep never runs.
		recs := [...]uint64{cb.rec.Swap(0), cb.cancelRec.Load()}
		if recs != [2]uint64{} || cb.flags.has(callToolTaken) {
			w.addRaw(&frec{step: dropRecsStep(cb, recs)}, false)
		}
		return
	}
	if cb.flags.has(callWaiting) {
		return
	}
	if !w.has(fnSuccess) {
		// The step's record stays for its error handler. Right after
		// the callback, on the loop: the Go State takes the info.
		if w.completeOnce() {
			w.raise(asyncsteps.InternalError, "implicit success: the foreign table has no "+fnSuccess.String(), true)
		}
		return
	}
	cb.flags.set(callCompleted)
	dropRec(cb.rec.Swap(0))
	C.cabi_f_success(w.p, nil)
}

// endCompleted ends a callback, a step's or an error handler's, whose
// step has completed otherwise than by what it added: the table never
// runs that, so the records go (dropSubRecs), and another goroutine's
// misuse left in pending (see afterAdd) reaches the table now, on the
// loop, recorded for the Go error handlers as the callback's own is.
func (w *foreign) endCompleted() {
	cb := w.cb
	if cb.flags.has(callAdded) {
		cb.dropSubRecs()
	}
	if cb.pending != "" { // end has ordered its write before this read
		w.raise(asyncsteps.InternalError, cb.pending, true)
	}
}

// track notes id, the record of a function of what w's callback adds (a
// sub-step, a loop, a parallel's error handler), for dropSubRecs; a
// parallel's branches are its step's.
func (w *foreign) track(id uint64) {
	if w.parallel {
		w.owner.track(id)
		return
	}
	if w.cb == nil || id == 0 {
		return
	}
	w.cb.subMu.Lock()
	if w.cb.finished { // another goroutine's add on a step that is over
		w.cb.subMu.Unlock()
		dropRec(id)
		return
	}
	w.cb.subRecs = append(w.cb.subRecs, id)
	w.cb.subMu.Unlock()
}

// dropSubRecs drops the records of what the callback added to a step
// that completed otherwise (an Error, a misuse, a panic after Add): the
// table never runs the sub-steps of a completed step, so nothing else
// would drop them, nor what they hold.
func (cb *fcall) dropSubRecs() {
	cb.subMu.Lock()
	recs := cb.subRecs
	cb.subRecs = nil
	cb.subMu.Unlock()
	for _, id := range recs {
		dropRec(id)
	}
}

// dropRecsStep is the last sub-step of a step that keeps records: it
// drops them and passes on what it receives, the result of the sub-step
// before, which is the step's result, as on the package's own flows. It
// received the values taken over (see cabiForeignExec), and Success hands
// them over to the table: a custom object is passed on as it is, its
// cleanup left to its next receiver, once. With nothing to pass on it
// completes by settle's implicit success, which names what a table
// without success lacks as for any other step.
func dropRecsStep(cb *fcall, recs [2]uint64) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, args ...any) {
		cb.flags.set(callGone) // its sub-steps have ended: see fcall.over
		dropRec(recs[0])
		dropRec(recs[1])
		if len(args) > 0 {
			as.Success(args...)
		}
	}
}

//export cabiForeignExec
func cabiForeignExec(bsi *C.FutoInAsyncSteps, rec C.uint64_t, args *C.FutoInArgs) {
	r := getRec(uint64(rec))
	keep := uint64(0)
	if r != nil && r.onerror != nil {
		keep = uint64(rec) // the error handler may still need it
	} else {
		dropRec(uint64(rec))
	}
	w := newCall(bsi, keep, r)
	if keep != 0 {
		r.run.Store(w.cb) // for its error handler to finish
	}
	// The receiver owns what it is given: every value is taken over (and
	// its slot reset), also when no Go step receives it.
	vals, tooLong := takeArgs(args, nil)
	if vals == nil {
		vals = []any{}
	}
	if r != nil && r.step != nil {
		w.run(func() {
			if tooLong != "" {
				dropArgs(vals, nil)
				w.misuse("args of a Go step: " + tooLong)
				return
			}
			r.step(w, vals...)
		})
	} else {
		dropArgs(vals, nil)
		w.cb.flags.clear(callActive)
	}
	w.settle()
	w.cb.attach()
}

//export cabiForeignError
func cabiForeignError(bsi *C.FutoInAsyncSteps, rec C.uint64_t, code *C.char) {
	r := getRec(uint64(rec))
	if r != nil {
		// The table is done with the failed step: its cancel handler
		// has run, if the table runs it (see fcall.attach).
		r.run.Load().finish()
	}
	dropRec(uint64(rec))
	if r == nil || r.onerror == nil {
		return // a plain return: the error goes on
	}
	w := newCall(bsi, 0, r)
	c := C.GoString(code)
	w.run(func() { r.onerror(w, c) })
	if w.cb.flags.has(callCompleted) {
		w.endCompleted()
	} else {
		w.endHandler()
	}
	w.cb.attach()
}

// endHandler ends the callback of an error handler that has not
// completed: the error goes on as it returns, so the handler is over
// (see fcall.over); one that added sub-steps is over once they end, which
// a last sub-step marks if the handler's Tool was taken.
func (w *foreign) endHandler() {
	cb := w.cb
	if !cb.flags.has(callAdded) {
		cb.flags.set(callGone)
		return
	}
	if cb.flags.has(callToolTaken) {
		w.addRaw(&frec{step: dropRecsStep(cb, [2]uint64{})}, false)
	}
}

//export cabiForeignCancel
func cabiForeignCancel(bsi *C.FutoInAsyncSteps, rec C.uint64_t) {
	r := getRec(uint64(rec))
	dropRec(uint64(rec))
	if r == nil {
		return
	}
	if r.of != nil {
		// The table has ended the step: a Success or Error on it from
		// another goroutine (an Await's, its context cancelled here)
		// has no effect from now on, as after a cancel on the engine's
		// flows, rather than reach a step the table may have freed.
		r.of.flags.set(callCompleted)
	}
	if r.cancel == nil {
		return
	}
	w := newCall(bsi, 0, r)
	w.cb.flags.set(callCompleted) // a cancelled step completes nothing
	if r.of != nil {
		// The step's Tool cancels what it armed through the table: see
		// fcall.over.
		r.of.flags.set(callInCancel)
		defer r.of.flags.clear(callInCancel)
	}
	w.run(func() { r.cancel(w) })
}

//export cabiForeignLoop
func cabiForeignLoop(bsi *C.FutoInAsyncSteps, rec C.uint64_t, i C.uint64_t) {
	r := getRec(uint64(rec))
	w := newCall(bsi, 0, r)
	if r != nil {
		// The previous iteration is over (see fcall.attach).
		r.run.Swap(w.cb).finish()
	}
	switch {
	case r == nil:
		w.cb.flags.clear(callActive)
	case r.repeat != nil:
		w.run(func() { r.repeat(w, int(i)) })
	case r.loop != nil:
		w.run(func() { r.loop(w) })
	}
	w.settle()
	w.cb.attach()
}

//export cabiForeignSched
func cabiForeignSched(rec C.uint64_t) {
	r := getRec(uint64(rec))
	dropRec(uint64(rec))
	if r != nil && r.sched != nil {
		runSched(r.sched)
	}
}

// runSched runs a callback of a foreign table's event loop. A panic must
// not unwind the table's C frames: it is logged, as a Loop logs one of its
// callbacks, and the table's loop goes on.
func runSched(f func()) {
	returned := false
	defer func() {
		if r := recover(); r != nil {
			slog.Error("asyncsteps: panic in loop callback",
				"panic", printsafe.Sprint(r), "stack", string(debug.Stack()))
		} else if !returned {
			logGoexit()
		}
	}()
	f()
	returned = true
}

// inCallback reports whether the caller is the Go callback w was given to.
func (w *foreign) inCallback() bool {
	cb := w.cb
	return cb != nil && cb.flags.has(callActive) && C.pthread_equal(C.pthread_self(), cb.thread) != 0
}

func (w *foreign) abort() {
	if w.inCallback() && w.cb.trampoline {
		panic(foreignAbort{})
	}
}

func (w *foreign) markAdded() {
	if w.cb != nil {
		w.cb.flags.set(callAdded)
	}
}

// handleError raises code with info on the foreign step. From the step's
// own callback it also records them in the Go State, so that the Go error
// handlers of the flow see the info as on our own engine (the foreign
// table keeps its info to itself).
func (w *foreign) handleError(code, info string) { w.raise(code, info, w.inCallback()) }

// raise is handleError, which records code and info in the Go State
// (when the table keeps one: see State) if record is set. Wrap refuses a
// table without handle_error; one that gives its steps another table than
// Wrap saw may still lack it: the error has nowhere to go, and is logged
// rather than dropped in silence.
func (w *foreign) raise(code, info string, record bool) {
	if record {
		w.note(info, &asyncsteps.Error{Code: code, Info: info})
	}
	cc, ci := C.CString(code), C.CString(info)
	defer C.free(unsafe.Pointer(cc))
	defer C.free(unsafe.Pointer(ci))
	if C.cabi_f_handle_error(w.p, cc, ci) == 0 {
		slog.Error("cabi: the foreign table has no handle_error: the error of a Go step is lost, and the step does not complete",
			"code", code, "info", info)
	}
}

// note records an error's info and exception in the flow's Go State,
// when the table keeps one (see State), for the Go error handlers.
func (w *foreign) note(info string, exc error) {
	if st, _ := w.sharedState(); st != nil {
		st.ErrorInfo = info
		st.LastException = exc
	}
}

// misuse reports a wrong use as an InternalError of the step.
func (w *foreign) misuse(info string) {
	if w.parallel {
		w.owner.misuse(info)
		return
	}
	if w.completeOnce() {
		w.handleError(asyncsteps.InternalError, info)
	}
	w.abort()
}

func (w *foreign) refuse(call string) bool {
	if w.parallel {
		w.owner.misuse(call + " called on the value returned by Parallel")
		return true
	}
	return false
}

// over reports whether w's step has completed (a Success earlier in its
// callback, a cancel handler's step): an Add, a loop, a Sync, an Await,
// a Parallel or a wait (SetCancel, SetTimeout, WaitExternal) on it then
// has no effect, as on the engine's flows, and reaches no table, which
// could run the sub-steps after the step, time out or cancel a step that
// is over, or abort. Each looks at it first, as the engine looks at the
// step's state first: a misuse in its arguments would abort the
// callback.
func (w *foreign) over() bool {
	if w.parallel {
		return w.owner.over()
	}
	return w.cb != nil && w.cb.flags.has(callCompleted)
}

// addRaw adds a step made of rec; false when the table cannot add.
func (w *foreign) addRaw(r *frec, withEh bool) bool {
	id := w.putRec(r)
	if C.cabi_f_add(w.p, C.uint64_t(id), boolInt(withEh)) == 0 {
		dropRec(id)
		return false
	}
	w.track(id)
	w.markAdded()
	return true
}

// errorArgs returns the code and the info that handle_error passes for
// Go's Error(code, info...): more than one info is a misuse, which fails
// the step with an InternalError naming them all, as the engine's Error
// does.
func errorArgs(code string, info []string) (string, string) {
	if len(info) > 1 {
		return asyncsteps.InternalError, toolinfo.ErrorCallInfo(code, info)
	}
	return code, firstOf(info)
}

// extraArgs reports a call (call names it) given n of what it takes one
// of at most, an error handler or a label, as a misuse, as the engine
// does; true when it did. The call would otherwise keep the first and
// drop the others unseen.
func (w *foreign) extraArgs(call, what string, n int) bool {
	info := misuse.ExtraArgs(call, what, n)
	if info != "" {
		w.misuse(info)
	}
	return info != ""
}

func firstOf[T any](s []T) (zero T) {
	if len(s) == 0 {
		return zero
	}
	return s[0]
}

// labels holds the C copies of the loop labels given to foreign tables,
// one per distinct label, for the life of the process: a table may keep a
// label pointer for as long as its loop runs and compare it at every break
// and continue (the C++ reference implementation does), and a loop's end
// is not always seen from here (a cancel). Labels are few and constant in
// practice.
var labels sync.Map // string -> *C.char

// withLabel passes label as a C string that stays valid, or NULL.
func withLabel(label []string, f func(l *C.char)) {
	l := firstOf(label)
	if l == "" {
		f(nil)
		return
	}
	if cl, ok := labels.Load(l); ok {
		f(cl.(*C.char))
		return
	}
	mine := C.CString(l)
	cl, loaded := labels.LoadOrStore(l, mine)
	if loaded {
		C.free(unsafe.Pointer(mine)) // another caller's copy is the one kept
	}
	f(cl.(*C.char))
}

// Add implements [asyncsteps.AsyncSteps].
func (w *foreign) Add(f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if w.over() {
		return w
	}
	if f == nil {
		w.misuse("Add: nil step function")
		return w
	}
	if w.extraArgs("Add", "error handler", len(onerror)) {
		return w
	}
	eh := firstOf(onerror)
	if !w.addRaw(&frec{step: f, onerror: eh}, eh != nil) {
		w.misuse("Add: the foreign table has no add")
	}
	return w
}

// Parallel implements [asyncsteps.AsyncSteps].
func (w *foreign) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if w.over() || w.refuse("Parallel") || w.extraArgs("Parallel", "error handler", len(onerror)) || w.lacks("Parallel", fnParallel) {
		return w
	}
	eh := firstOf(onerror)
	var id uint64
	if eh != nil {
		id = w.putRec(&frec{onerror: eh})
	}
	pp := C.cabi_f_parallel(w.p, C.uint64_t(id), boolInt(eh != nil))
	if pp == nil {
		dropRec(id)
		w.misuse("Parallel: the foreign table gave no parallel")
		return w
	}
	w.track(id)
	w.markAdded()
	return &foreign{p: pp, parallel: true, owner: w}
}

var stateVarName = C.CString("github.com/asyncsteps/asyncsteps/cabi.State")

// State implements [asyncsteps.AsyncSteps]: a Go State kept in a state
// variable of the foreign flow, so that all its Go callbacks share it. A
// table that keeps none (no stateVariable, or one that gives no
// variable) makes it a misuse: a State of each callback's own would
// silently lose what the flow's steps give each other, the error info for
// the Go error handlers included. Outside the step's callback, which the
// misuse aborts, it returns an empty State, of no flow, as the step has
// failed.
func (w *foreign) State() *asyncsteps.State {
	st, missing := w.sharedState()
	if st == nil {
		w.misuse("State: " + missing)
		st = &asyncsteps.State{}
	}
	return st
}

// sharedState returns the flow's Go State, or nil and what the table
// lacks to keep it.
func (w *foreign) sharedState() (*asyncsteps.State, string) {
	if w.parallel {
		return w.owner.sharedState()
	}
	if !w.has(fnStateVariable) {
		return nil, "the foreign table has no " + fnStateVariable.String()
	}
	if fv := w.flow(); fv != nil {
		return &fv.state, ""
	}
	return nil, "the foreign table's " + fnStateVariable.String() + " gave no variable"
}

// flow returns the state variable of w's flow, made at its first use, or
// nil when the table keeps none. The callback w was given to has it from
// the record it runs from (see newCall), or keeps it once asked, until the
// table has cleaned it up: a callback's adds, cancel handlers and State
// cost no stateVariable call, a cgo call each. A table that gives the
// step no stateVariable keeps none for it, whatever its root's has.
func (w *foreign) flow() *flowVar {
	if w.parallel {
		return w.owner.flow()
	}
	if !w.has(fnStateVariable) {
		return nil
	}
	if w.cb != nil {
		if fv := w.cb.flow.Load(); fv != nil && !fv.released.Load() {
			return fv
		}
	}
	slot := (*uint64)(C.cabi_f_state_variable(w.p, stateVarName, 1))
	if slot == nil {
		return nil
	}
	if *slot == 0 {
		*slot = putGoValue(&flowVar{recs: make(map[uint64]struct{})})
	}
	fv, _ := getGoValue(*slot).(*flowVar)
	if fv != nil && w.cb != nil {
		w.cb.flow.Store(fv)
	}
	return fv
}

// CopyFrom is not supported on a foreign table: it reports an InternalError.
func (w *foreign) CopyFrom(*asyncsteps.Root) asyncsteps.AsyncSteps {
	w.misuse("CopyFrom is not supported on a foreign AsyncSteps")
	return w
}

// Sync implements [asyncsteps.AsyncSteps] with obj's own Sync on the
// foreign steps.
func (w *foreign) Sync(obj asyncsteps.Syncer, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	switch {
	case w.over():
		return w
	case obj == nil || nilSyncer(obj) || f == nil && nilValue(obj):
		w.misuse("Sync: nil Syncer")
		return w
	case f == nil:
		w.misuse("Sync: nil step function")
		return w
	case w.extraArgs("Sync", "error handler", len(onerror)):
		return w
	}
	return w.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		obj.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { f(as, args...) }, onerror...)
	})
}

// nilSyncer reports whether obj is a nil *Mutex, *Throttle or *Limiter,
// or the key of a nil *KeyedMutex, *KeyedThrottle or *KeyedLimiter, which
// cannot admit anyone: Sync refuses one as the package's own AsyncSteps
// does. A nil Syncer of another type is refused only with a nil f
// (nilValue), since its own Sync may still answer.
func nilSyncer(obj asyncsteps.Syncer) bool {
	switch s := obj.(type) {
	case *asyncsteps.Mutex:
		return s == nil
	case *asyncsteps.Throttle:
		return s == nil
	case *asyncsteps.Limiter:
		return s == nil
	}
	_, nilKeyed := toolinfo.KeyedKey(obj)
	return nilKeyed
}

// nilValue reports whether obj holds a nil pointer, map, slice, channel or
// function.
func nilValue(obj asyncsteps.Syncer) bool {
	switch v := reflect.ValueOf(obj); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return v.IsNil()
	}
	return false
}

// SuccessStep implements [asyncsteps.AsyncSteps].
func (w *foreign) SuccessStep(args ...any) asyncsteps.AsyncSteps {
	if w.refuse("SuccessStep") {
		return w
	}
	return w.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(args...) })
}

// Await implements [asyncsteps.AsyncSteps].
func (w *foreign) Await(f asyncsteps.AwaitFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if w.over() {
		return w
	}
	if f == nil {
		w.misuse("Await: nil function")
		return w
	}
	if w.extraArgs("Await", "error handler", len(onerror)) {
		return w
	}
	return w.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ctx, cancel := context.WithCancel(context.Background())
		as.SetCancel(func(asyncsteps.AsyncSteps) { cancel() })
		go func() {
			defer cancel()
			runAwait(ctx, f, func(v any, err error) {
				if err == nil {
					as.Success(v)
					return
				}
				// As on a Go flow: an *Error keeps its code, a
				// FutoInCoder gives its own, and a transport error is
				// a CommError.
				e := asyncsteps.ErrorFrom(err)
				as.Error(e.Code, e.Info)
			}, func() { as.Error(asyncsteps.InternalError, misuse.GoexitInfo) })
		}()
	}, onerror...)
}

// runAwait is the goroutine of a foreign step's Await: it calls f and
// passes its outcome to done or, if f called runtime.Goexit, calls goexit
// instead, as the goroutine ends. A Goexit ends it whatever is done, also
// when a deferred call of f panicked on the way and callAwait recovered
// that panic, which does not stop the Goexit: so the check is here, after
// callAwait, not in its recover.
func runAwait(ctx context.Context, f asyncsteps.AwaitFunc, done func(any, error), goexit func()) {
	returned := false
	defer func() {
		if !returned {
			goexit()
		}
	}()
	v, err := callAwait(ctx, f)
	returned = true
	done(v, err)
}

// callAwait runs f on the Await's own goroutine. A panic there would end
// the process, so it becomes a *PanicError.
func callAwait(ctx context.Context, f asyncsteps.AwaitFunc) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &asyncsteps.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return f(ctx)
}

// NewInstance implements [asyncsteps.AsyncSteps]: a Go root on w.Tool(),
// which runs while w's step does (see foreignTool). On a table whose
// event loop cannot run a flow (see foreignTool) it is a misuse, which
// names the missing function: the Root it returns would never start. On
// a step that is over, the table is not asked: the Root's start panics.
func (w *foreign) NewInstance() *asyncsteps.Root {
	tool := w.tool()
	if tool.over() {
		return asyncsteps.New(asyncsteps.WithTool(tool))
	}
	if missing := tool.missing(false); missing != "" {
		w.misuse("NewInstance: the foreign table has no " + missing + ": a Root on its Tool cannot run")
	}
	return asyncsteps.New(asyncsteps.WithTool(tool))
}

// IsValid implements [asyncsteps.AsyncSteps]. Without isValid in the
// table, the library knows only of the step's completions it made: a step
// it has completed is over, and any other step's IsValid is a misuse, as
// the table may have ended it (a timeout, a cancel) unseen. A step whose
// callback has returned having added sub-steps is over for the calls on
// its AsyncSteps, as on the engine's flows: IsValid is false there, also
// while the table still runs its sub-steps. So is a step the library has
// completed, or whose cancel handler the table has run, with or without
// isValid: calls on it have no effect, and the table may have freed it.
func (w *foreign) IsValid() bool {
	if w.hasSubSteps() || w.over() {
		return false
	}
	if w.has(fnIsValid) {
		return C.cabi_f_is_valid(w.p) != 0
	}
	w.misuse("IsValid: the foreign table has no " + fnIsValid.String())
	return false
}

// Tool implements [asyncsteps.AsyncSteps]: the foreign table's sched_*
// functions, valid while the wrapped pointer is: for a Go callback's
// AsyncSteps, while its step runs (see foreignTool).
func (w *foreign) Tool() asyncsteps.Tool { return w.tool() }

// tool returns the Tool of w, and notes that it was taken (see
// callToolTaken).
func (w *foreign) tool() foreignTool {
	if cb := w.call(); cb != nil {
		cb.flags.set(callToolTaken)
	}
	return foreignTool{w: w}
}

// completeOnce marks w's step completed, and reports whether it was not
// yet. The record of its Go cancel handler stays: a step that fails
// (Error, a misuse, Break, Continue) has it run, as the table runs the
// failing step's cancel handler (the C++ reference implementation, once
// the callback has returned, before the error handler); it goes as it
// runs, once the table is done with the step (see fcall.attach), or
// with the flow (see flowVar). Success drops it.
func (w *foreign) completeOnce() bool {
	cb := w.cb
	return cb == nil || !cb.flags.swapSet(callCompleted)
}

// hasSubSteps reports whether the callback w was given has returned
// having added sub-steps: the step completes with them, and a Success or
// Error on w has no effect, as on a step of the engine's that waits for
// its sub-steps (a success after add would abort the process on some
// tables). callActive is read before callAdded: a callback seen to have
// returned has made every Add it made seen.
func (w *foreign) hasSubSteps() bool {
	cb := w.cb
	return cb != nil && !cb.flags.has(callActive) && cb.flags.has(callAdded)
}

// afterAdd handles a Success or Error on w after its callback's Add:
// while the callback runs, the call (the callback's own or another
// goroutine's, as on the engine's flows) is the misuse that info names;
// once it has returned, the call has no effect (see hasSubSteps). It
// reports whether the call is handled so. Another goroutine's misuse
// reaches the table as the callback returns (endCompleted), on the loop:
// made from here, it could reach the table after the callback's end,
// under the step's running sub-steps.
func (w *foreign) afterAdd(info string) bool {
	cb := w.cb
	if cb == nil {
		return false
	}
	if w.inCallback() {
		if !cb.flags.has(callAdded) {
			return false
		}
		w.misuse(info)
		return true
	}
	if testHookOutsideAfterAdd != nil {
		testHookOutsideAfterAdd()
	}
	cb.endMu.Lock()
	defer cb.endMu.Unlock()
	running := cb.flags.has(callActive) // before added: see hasSubSteps
	if !cb.flags.has(callAdded) {
		return false
	}
	if running && w.completeOnce() {
		cb.pending = info
	}
	return true
}

// testHookOutsideAfterAdd, set by a test, runs in afterAdd as another
// goroutine's call begins, before it learns whether the callback runs.
var testHookOutsideAfterAdd func()

// Success implements [asyncsteps.AsyncSteps]. After Add it never reaches
// the table (some tables abort the process on such a success): see
// afterAdd. On a step that is over it has no effect, whatever its args,
// and reads nothing of the table, which may have freed the step.
func (w *foreign) Success(args ...any) {
	if w.refuse("Success") || w.afterAdd("Success called after Add in the same callback") || w.over() {
		return
	}
	if info := tooLongForC(args); info != "" {
		w.misuse("Success: " + info)
		return
	}
	if w.lacks("Success", fnSuccess) {
		return
	}
	if !w.completeOnce() {
		return
	}
	if w.cb != nil { // no handler of the step runs after its success
		w.cb.flags.set(callSucceeded)
		dropRec(w.cb.rec.Swap(0))
		dropRec(w.cb.cancelRec.Swap(0))
	}
	a := makeArgs(args, true)
	C.cabi_f_success(w.p, a.args)
	a.free()
}

// Error implements [asyncsteps.AsyncSteps]. After Add, see afterAdd: the
// misplaced call is the misuse reported, named with the code the user
// gave, whatever else is wrong with the call. After a Success it has no
// effect and the callback goes on; on a step that has failed it aborts
// its callback again, as a raise does on the engine's flows.
func (w *foreign) Error(code string, info ...string) {
	if w.refuse("Error") || w.afterAdd("Error("+code+") called after Add in the same callback") {
		return
	}
	code, i := errorArgs(code, info)
	if w.completeOnce() {
		w.handleError(code, i)
	} else if w.cb.flags.has(callSucceeded) {
		return // no effect, and the callback goes on, as on the engine's flows
	}
	w.abort()
}

func (w *foreign) waits() {
	if w.cb != nil {
		w.cb.flags.set(callWaiting)
	}
}

// SetTimeout implements [asyncsteps.AsyncSteps].
func (w *foreign) SetTimeout(d time.Duration) {
	if w.over() || w.refuse("SetTimeout") || w.lacks("SetTimeout", fnSetTimeout) {
		return
	}
	ms := uint32(min(max(d.Milliseconds(), 0), math.MaxUint32))
	if C.cabi_f_set_timeout(w.p, C.uint32_t(ms)) != 0 {
		w.waits()
	}
}

// SetCancel implements [asyncsteps.AsyncSteps].
func (w *foreign) SetCancel(f asyncsteps.CancelFunc) {
	if w.over() || w.refuse("SetCancel") {
		return
	}
	if f == nil {
		w.WaitExternal()
		return
	}
	if w.lacks("SetCancel", fnSetCancel) {
		return
	}
	id := w.putRec(&frec{cancel: f, of: w.cb})
	if C.cabi_f_set_cancel(w.p, C.uint64_t(id)) == 0 {
		dropRec(id)
		return
	}
	if w.cb != nil {
		dropRec(w.cb.cancelRec.Swap(id))
	}
	w.waits()
}

// WaitExternal implements [asyncsteps.AsyncSteps]. On a table without
// waitExternal, the step of a Go callback waits as the spec had steps
// wait before it: with a cancel handler that does nothing, unless the
// step has one of Go's already, which the step's own callback alone can
// have set. Where C may have set one of its own (a pointer Go was given
// by C), WaitExternal fails the step instead: it would replace it.
func (w *foreign) WaitExternal() {
	if w.over() || w.refuse("WaitExternal") {
		return
	}
	if w.has(fnWaitExternal) {
		if C.cabi_f_wait_external(w.p) != 0 {
			w.waits()
		}
		return
	}
	if w.cb == nil || !w.has(fnSetCancel) {
		w.misuse("WaitExternal: the foreign table has no " + fnWaitExternal.String())
		return
	}
	if w.cb.cancelRec.Load() == 0 {
		id := w.putRec(&frec{of: w.cb})
		C.cabi_f_set_cancel(w.p, C.uint64_t(id))
		w.cb.cancelRec.Store(id)
	}
	w.waits()
}

// hostLoop adds a step that runs a loop of the foreign table (call, fn:
// Loop with loop, Repeat with repeat), so that the loop's record is
// dropped when the loop is over. The caller has checked its own table
// for fn; the host's, which the table gives the host step, is checked as
// the loop starts.
func (w *foreign) hostLoop(call string, fn tableFunc, r *frec, start func(h *foreign, rec C.uint64_t) bool) asyncsteps.AsyncSteps {
	if w.over() {
		return w
	}
	id := w.putRec(r)
	host := func(as asyncsteps.AsyncSteps, _ ...any) {
		h := as.(*foreign)
		if !start(h, C.uint64_t(id)) {
			dropRec(id)
			h.misuse(call + ": the foreign table has no " + fn.String())
			return
		}
		h.markAdded()
		h.Add(func(asyncsteps.AsyncSteps, ...any) { endLoop(id) })
	}
	if !w.addRaw(&frec{step: host, onerror: func(asyncsteps.AsyncSteps, string) { endLoop(id) }}, true) {
		dropRec(id)
		w.misuse(call + ": the foreign table has no add")
		return w
	}
	w.track(id)
	return w
}

// Loop implements [asyncsteps.AsyncSteps].
func (w *foreign) Loop(f asyncsteps.LoopFunc, label ...string) asyncsteps.AsyncSteps {
	if w.over() {
		return w
	}
	if f == nil {
		w.misuse("Loop: nil function")
		return w
	}
	if w.extraArgs("Loop", "label", len(label)) || w.lacks("Loop", fnLoop) {
		return w
	}
	return w.hostLoop("Loop", fnLoop, &frec{loop: f}, func(h *foreign, rec C.uint64_t) (ok bool) {
		withLabel(label, func(l *C.char) { ok = C.cabi_f_loop(h.p, rec, l) != 0 })
		return ok
	})
}

// Repeat implements [asyncsteps.AsyncSteps].
func (w *foreign) Repeat(count int, f asyncsteps.RepeatFunc, label ...string) asyncsteps.AsyncSteps {
	if w.over() {
		return w
	}
	if f == nil {
		w.misuse("Repeat: nil function")
		return w
	}
	if w.extraArgs("Repeat", "label", len(label)) || w.lacks("Repeat", fnRepeat) {
		return w
	}
	return w.repeat("Repeat", count, f, label)
}

// repeat is Repeat, for call (Repeat, ForEach).
func (w *foreign) repeat(call string, count int, f asyncsteps.RepeatFunc, label []string) asyncsteps.AsyncSteps {
	n := C.size_t(max(count, 0))
	return w.hostLoop(call, fnRepeat, &frec{repeat: f}, func(h *foreign, rec C.uint64_t) (ok bool) {
		withLabel(label, func(l *C.char) { ok = C.cabi_f_repeat(h.p, rec, n, l) != 0 })
		return ok
	})
}

// ForEach implements [asyncsteps.AsyncSteps] with repeat over a snapshot
// of a slice, array, map (keys sorted when ordered) or iter.Seq2. A *State
// is not supported on a foreign table.
func (w *foreign) ForEach(collection any, f asyncsteps.ForEachFunc, label ...string) asyncsteps.AsyncSteps {
	if w.over() {
		return w // before the snapshot: nothing is iterated
	}
	keys, vals, err := snapshot(collection)
	if err != "" || f == nil {
		w.misuse(cmp.Or(err, "ForEach: nil function"))
		return w
	}
	if w.extraArgs("ForEach", "label", len(label)) || w.lacks("ForEach", fnRepeat) {
		return w
	}
	return w.repeat("ForEach", len(keys), func(as asyncsteps.AsyncSteps, i int) { f(as, keys[i], vals[i]) }, label)
}

func snapshot(c any) (keys, vals []any, err string) {
	if _, ok := c.(*asyncsteps.State); ok {
		return nil, nil, "ForEach over a *State is not supported on a foreign AsyncSteps"
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			keys = append(keys, i)
			vals = append(vals, v.Index(i).Interface())
		}
	case reflect.Map:
		ks := v.MapKeys()
		slices.SortFunc(ks, compareValues)
		for _, k := range ks {
			keys = append(keys, k.Interface())
			vals = append(vals, v.MapIndex(k).Interface())
		}
	case reflect.Func:
		if !v.Type().CanSeq2() {
			return nil, nil, fmt.Sprintf("ForEach: cannot iterate over %T", c)
		}
		for k, x := range v.Seq2() {
			keys = append(keys, k.Interface())
			vals = append(vals, x.Interface())
		}
	default:
		return nil, nil, fmt.Sprintf("ForEach: cannot iterate over %T", c)
	}
	return keys, vals, ""
}

func compareValues(a, b reflect.Value) int {
	switch {
	case a.CanInt():
		return cmp.Compare(a.Int(), b.Int())
	case a.CanUint():
		return cmp.Compare(a.Uint(), b.Uint())
	case a.CanFloat():
		return cmp.Compare(a.Float(), b.Float())
	case a.Kind() == reflect.String:
		return cmp.Compare(a.String(), b.String())
	}
	return 0
}

// Break implements [asyncsteps.AsyncSteps].
func (w *foreign) Break(label ...string) {
	if w.refuse("Break") || w.extraArgs("Break", "label", len(label)) || w.lacks("Break", fnBreakLoop) {
		return
	}
	if w.completeOnce() {
		withLabel(label, func(l *C.char) { C.cabi_f_break(w.p, l) })
	} else if w.cb.flags.has(callSucceeded) {
		return // no effect after a success, as Error (see there)
	}
	w.abort()
}

// Continue implements [asyncsteps.AsyncSteps].
func (w *foreign) Continue(label ...string) {
	if w.refuse("Continue") || w.extraArgs("Continue", "label", len(label)) || w.lacks("Continue", fnContinueLoop) {
		return
	}
	if w.completeOnce() {
		withLabel(label, func(l *C.char) { C.cabi_f_continue(w.p, l) })
	} else if w.cb.flags.has(callSucceeded) {
		return // no effect after a success, as Error (see there)
	}
	w.abort()
}

// foreignTool is the event loop of a foreign table, through its sched_*.
//
// A table may leave some of them NULL. Without sched_immediate nothing
// would run, and without is_same_thread the engine could not tell the
// loop's thread (a waiting step's Error in its own callback would not end
// the callback, a Run on the loop would wait for good rather than fail):
// then Immediate and Deferred panic, naming the function, rather than
// return a handle whose callback never runs, so that a flow's start fails
// where it is made (Execute, Promise and Run let the panic reach their
// caller, the flow not started, as for any Tool whose Immediate panics),
// not later, in silence. Without sched_deferred only Deferred panics: a
// step's SetTimeout then fails the step with InternalError naming it. A
// table without sched_cancel still cancels: the callback's record goes,
// and the callback finds nothing to run when the table runs it; without
// sched_is_valid a handle is valid while its record is.
//
// The Tool of a Go callback's AsyncSteps calls the table with the step's
// pointer, which the table frees as the step ends (the C++ reference
// implementation's sched_* and is_same_thread read it). Once the step is
// over as far as the library can tell (see fcall.over), the tool calls
// the table no more: Immediate and Deferred panic, as the engine
// documents for a Tool that has stopped (a Root's start panics and is
// undone, a step's SetTimeout fails the step, a completion handed from
// another goroutine is logged and lost), IsSameThread is false, and the
// handles it gave let the table be (Cancel drops the callback's record
// only). A handle that never ran its callback would leave a Root started
// on it running for good, in silence. The Tool of a pointer that Wrap
// was given (a root, a step C gave Go) is valid while that pointer is.
type foreignTool struct{ w *foreign }

// overInfo is the panic of a foreignTool whose step is over.
const overInfo = "cabi: the Tool of a foreign step used after the step ended: the table may have freed it"

// over reports whether the step the tool was taken from is over.
func (t foreignTool) over() bool {
	cb := t.w.call()
	return cb != nil && cb.over()
}

func (t foreignTool) Immediate(f func()) asyncsteps.Handle { return t.sched(false, 0, f) }

func (t foreignTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	return t.sched(true, uint32(min(max(d.Milliseconds(), 0), math.MaxUint32)), f)
}

// missing names the first function the table lacks to run a callback
// (or, with deferred, to time one); "" when it has them.
func (t foreignTool) missing(deferred bool) string {
	if name := C.cabi_f_sched_missing(t.w.p, boolInt(deferred)); name != nil {
		return C.GoString(name)
	}
	return ""
}

// sched schedules f through the table. The table's functions are checked
// in the call that uses them, not by a call of their own: a callback a
// flow schedules costs one cgo call.
func (t foreignTool) sched(deferred bool, ms uint32, f func()) asyncsteps.Handle {
	if t.over() {
		panic(overInfo)
	}
	id := putRec(&frec{sched: f})
	h := &foreignHandle{tool: t, rec: id}
	if missing := C.cabi_f_sched(t.w.p, C.uint32_t(ms), boolInt(deferred), C.uint64_t(id), &h.h); missing != nil {
		dropRec(id)
		what := "run"
		if deferred {
			what = "time"
		}
		panic("cabi: the foreign table has no " + C.GoString(missing) + ": its Tool cannot " + what + " a callback")
	}
	return h
}

// IsSameThread implements [asyncsteps.Tool]; false for a table without
// is_same_thread, whose Tool runs nothing, and once the tool's step is
// over (see foreignTool).
func (t foreignTool) IsSameThread() bool {
	return !t.over() && C.cabi_f_is_same_thread(t.w.p) == 1
}

func (t foreignTool) Now() time.Time { return time.Now() }

type foreignHandle struct {
	tool foreignTool
	h    C.FutoInHandle
	rec  uint64
}

// Cancel drops the callback's record, so that the callback runs nothing
// when the table runs it, also for a table without sched_cancel, or once
// the tool's step is over, when the table is not called.
func (h *foreignHandle) Cancel() {
	if h.rec != 0 {
		if !h.tool.over() {
			C.cabi_f_sched_cancel(h.tool.w.p, &h.h)
		}
		dropRec(h.rec)
	}
}

// IsValid reports whether the callback is still to run: its record is
// kept (dropped as it runs or is cancelled), and the table, if it has
// sched_is_valid (-1 without) and the tool's step is not over, says so
// too.
func (h *foreignHandle) IsValid() bool {
	return h.rec != 0 && getRec(h.rec) != nil && (h.tool.over() || C.cabi_f_sched_is_valid(h.tool.w.p, &h.h) != 0)
}
