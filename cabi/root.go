//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"log/slog"
	"reflect"
	"sync"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// rootObj is a root seen from C.
//
// An owned root was made by [New] (futoin_asyncsteps_new) or newInstance:
// C owns it, and free cancels its flow. A root given by [Binary] stays
// Go's: free only releases what C was given. Either way, an error that ends
// an execution goes to the unhandled_error given to the execute that
// started it.
type rootObj struct {
	node  *node
	root  *asyncsteps.Root
	owned bool

	// execute and free may come from any thread at once. mu guards the
	// state they share, and is never held while a callback may run: a
	// Tool of the caller's may run the flow inside execute.
	mu    sync.Mutex
	freed bool
	// starts counts the executes between their check of freed and the
	// return of their start; release is the release of a free called
	// meanwhile, which the last of them runs (see execute).
	starts  int
	release func()
	// dropped is the info of the first call that had no effect and that
	// the root reports: an add made from another thread while the flow
	// ran (see dropAdd), or a step's call made on the root (see
	// misusedOnRoot). The next start reports it and clears it.
	dropped string
}

// goRoots maps the Go roots given to Binary to their rootObj.
var goRoots struct {
	mu sync.Mutex
	m  map[*asyncsteps.Root]*rootObj
}

// New returns a new, empty root on tool (nil: [asyncsteps.DefaultTool]) as
// a FutoInAsyncSteps*. C owns it: release it with its table's free, which
// cancels a running flow first. This is futoin_asyncsteps_new.
func New(tool asyncsteps.Tool) unsafe.Pointer {
	if tool == nil {
		tool = asyncsteps.DefaultTool()
	}
	return unsafe.Pointer(newOwnedRoot(tool).node.bsi)
}

func newOwnedRoot(tool asyncsteps.Tool) *rootObj {
	ro := &rootObj{owned: true}
	ro.root = asyncsteps.New(asyncsteps.WithTool(tool), asyncsteps.WithUnhandledError(ro.onUnhandled))
	fc := flowFor(ro.root.State(), tool)
	fc.owned = true // a new State: no one else has its flowCtx yet
	ro.node = newNode(kindRoot, ro.root, fc, fc.rootID)
	ro.node.root = ro
	return ro
}

// onUnhandled is the owned root's unhandled-error function, for the
// executions given no unhandled_error: the error is logged.
func (ro *rootObj) onUnhandled(err *asyncsteps.Error) {
	slog.Error("asyncsteps: unhandled error", "code", err.Code, "info", err.Info)
}

// isFreed reports whether free was called: the pointer is invalid from
// then on, also before the loop has released it.
func (ro *rootObj) isFreed() bool {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	return ro.freed
}

// report calls fn, the unhandled_error of the execution that err ended,
// with its data; on a freed root, it logs the error.
func (ro *rootObj) report(err *asyncsteps.Error, fn C.FutoInAsyncSteps_error_callback, data C.uintptr_t) {
	ro.mu.Lock()
	freed := ro.freed
	ro.mu.Unlock()
	if freed {
		ro.onUnhandled(err)
		return
	}
	code := C.CString(err.Code)
	defer C.free(unsafe.Pointer(code))
	res := ro.node.flow.res
	res.mu.Lock()
	res.ending = err
	res.mu.Unlock()
	defer func() {
		res.mu.Lock()
		res.ending = nil
		res.mu.Unlock()
	}()
	C.cabi_call_error(fn, ro.node.bsi, data, code)
}

// testHookStart, set by a test, runs in execute after its check of free
// and before the start: where a free from another thread may come.
var testHookStart func()

// testHookStarted, set by a test, runs in execute once the start has
// returned, before the start is uncounted: where the flow's first steps
// may already run on the loop.
var testHookStarted func()

// testHookTaken, set by a test, runs in execute once it has taken the
// recorded misuse, before the start: where a free from another thread
// finds no record to log.
var testHookTaken func()

// execute starts the flow; it only posts to the loop. An error that ends
// this execution goes to fn with data, on the loop, when it ends
// (docs/DESIGN.md#c-execute): the execution keeps them, so that a later
// execute cannot take its report. A Go root given to C reports to fn in
// place of its own function. With no fn, an owned root logs the error and
// a Go root reports to its own function. On a running flow it does
// nothing. A call recorded as having had no effect (see misused) makes
// the execution it starts fail at once with that InternalError.
//
// A free from another thread may come between the check of free and the
// start: its release then waits for the start (see beginStart), which it
// follows as a free that follows the execute does, cancelling the flow.
// Released first, the root would start after it, running the C steps of
// a freed root that nothing cancels any more.
func (ro *rootObj) execute(data C.uintptr_t, fn C.FutoInAsyncSteps_error_callback) {
	if !ro.beginStart() {
		return
	}
	defer ro.endStart()
	if testHookStarted != nil {
		defer testHookStarted()
	}
	if testHookStart != nil {
		testHookStart()
	}
	var unhandled func(*asyncsteps.Error) // nil: the Root's own function
	if fn != nil {
		unhandled = func(err *asyncsteps.Error) { ro.report(err, fn, data) }
	}
	dropped := ro.takeDropped()
	if testHookTaken != nil {
		testHookTaken()
	}
	defer func() {
		if recover() != nil { // a panic on a running flow: nothing started
			ro.keepDropped(dropped)
		}
	}()
	if dropped == "" {
		ro.root.ExecuteWith(unhandled)
		return
	}
	toolinfo.ExecuteMisused(ro.root, unhandled, dropped)
}

// dropAdd records info, that of an add made from another thread while the
// flow ran, which had no effect (see misused); it returns false, for
// mayAdd.
func (ro *rootObj) dropAdd(info string) bool {
	ro.misused(info)
	return false
}

// misused records info, that of a call on the root (or on a parallel made
// on it) that had no effect, unless one is recorded already or the root
// is freed. The engine's Root is not touched off its loop while it runs:
// the next execute fails at once with the info, as after a misuse of an
// engine Root (see execute), and a free that comes first logs it.
func (ro *rootObj) misused(info string) {
	if !ro.owned {
		ro.misusedGo(info)
		return
	}
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if !ro.freed && ro.dropped == "" {
		ro.dropped = info
	}
}

// misusedGo records info, a call made through the pointer of a Go root
// given by Binary (or of a parallel made on it) that had no effect, in
// the engine's Root: Go executes such a root itself, and only the Root's
// own record reaches the executions Go starts. Kept in the rootObj, it
// waited for an execute or a free from C, which may never come, while
// Go's executions ran on without it.
//
// On the flow's loop, or while the Root is idle, it is recorded at once,
// where an add there adds at once (see onFlow): the caller is the Root's
// user then, and what Go does with the Root next (a Clone, an execution)
// sees it. Posted to an idle Root's loop instead, it reached the Root at
// the loop's next turn, beside whatever Go did with the Root meanwhile.
// While the flow runs on another thread it is posted: the loop owns the
// Root, and takes the record in the order of the call with the starts
// (behind what is queued), so an execution started before the call goes
// on without it and the next one reports it. A loop that drops the post
// runs no flow beside the fallback, which records it all the same.
func (ro *rootObj) misusedGo(info string) {
	if ro.isFreed() {
		return
	}
	record := func() { toolinfo.RecordMisuse(ro.root, info) }
	if ro.node.onFlow() {
		record()
		return
	}
	ro.node.post(record, record)
}

// takeDropped returns the info recorded by misused, and clears it.
func (ro *rootObj) takeDropped() string {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	info := ro.dropped
	ro.dropped = ""
	return info
}

// keepDropped records again info, taken by an execute that started
// nothing: it was the first. A free that came since found no record to
// log, and no execute will report it now: it is logged here, once.
func (ro *rootObj) keepDropped(info string) {
	if info == "" {
		return
	}
	ro.mu.Lock()
	freed := ro.freed
	if !freed {
		ro.dropped = info
	}
	ro.mu.Unlock()
	if freed {
		ro.onUnhandled(&asyncsteps.Error{Code: asyncsteps.InternalError, Info: info})
	}
}

// beginStart reports whether the root is not freed, and if so counts a
// start under way, until endStart: a free called meanwhile leaves its
// release to endStart. A lock held over the start would deadlock on a Tool
// that runs the flow inside Immediate, where a C step may free the root.
func (ro *rootObj) beginStart() bool {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if ro.freed {
		return false
	}
	ro.starts++
	ro.node.flow.cleanups.Store(true)
	return true
}

// endStart ends a start counted by beginStart; the last one runs the
// release of a free called meanwhile.
func (ro *rootObj) endStart() {
	ro.mu.Lock()
	ro.starts--
	var release func()
	if ro.starts == 0 {
		release, ro.release = ro.release, nil
	}
	ro.mu.Unlock()
	if release != nil {
		release()
	}
}

// free releases the root: it posts to the loop, which cancels a running
// flow of an owned root, then cleans up the state variables allocated
// through stateVariable and the stack memory. The table's free returns at
// once (wait false), as the C interface's rules want of it. With wait,
// the call of FreeWait, it returns only once the loop has run those
// cleanups, as the C++ reference implementation's destructor does, when
// waiting is safe (see waitsForRelease; docs/DESIGN.md#c-threads).
func (ro *rootObj) free(wait bool) {
	var released chan struct{} // closed once finish has run, for FreeWait only
	if wait {
		released = make(chan struct{})
	}
	ro.mu.Lock()
	if ro.freed {
		ro.mu.Unlock()
		return
	}
	ro.freed = true
	dropped := ro.dropped
	ro.dropped = ""
	starting := ro.starts > 0
	if starting {
		// An execute is starting the flow: the release follows the start.
		ro.release = func() { ro.postRelease(released) }
	}
	ro.mu.Unlock()
	if dropped != "" {
		// No execute will report it now: the C producer that lost the
		// step would never learn of it otherwise.
		ro.onUnhandled(&asyncsteps.Error{Code: asyncsteps.InternalError, Info: dropped})
	}
	if !ro.owned {
		goRoots.mu.Lock()
		if goRoots.m[ro.root] == ro {
			delete(goRoots.m, ro.root)
		}
		goRoots.mu.Unlock()
	}
	switch {
	case starting:
		// The release follows the execute, which may not have returned
		// yet on its thread when the flow's first step frees the root:
		// the flow is cancelled at once all the same (see cancelOnLoop).
		ro.cancelOnLoop()
	case ro.releasesHere():
		ro.node.release()
		ro.node.flow.res.forget()
	default:
		ro.postRelease(released)
	}
	if !wait {
		return
	}
	if loop := ro.waitsForRelease(); loop != nil {
		waitReleased(released, loop)
	}
}

// releasesHere reports whether free may release the root on the caller's
// thread rather than on the loop: an owned root that was never executed
// (by execute, or by Go through Wrap, which a step with a C side tells:
// see flowCtx.cleanups) and holds no state variable or stack memory has
// nothing for the loop to cancel and no C cleanup to run, and nothing on
// the loop refers to it (an idle root is its owner's alone, see
// node.onFlow). Making and freeing such roots from C then costs no turn
// of the loop. A flow that ran leaves its steps to the free when its loop
// is closed (see releaseLeft).
func (ro *rootObj) releasesHere() bool {
	return ro.owned && !ro.node.flow.cleanups.Load() && !ro.root.Running()
}

// postRelease posts the release of a freed root to its loop: the cancel
// of an owned root's flow, then finish; released, if not nil, is closed
// once finish has run.
func (ro *rootObj) postRelease(released chan struct{}) {
	fc := ro.node.flow
	var once sync.Once // finish may be called by the loop, or after it stopped
	finish := func() {
		once.Do(func() {
			if released != nil {
				defer close(released)
			}
			ro.node.release()
			if ro.owned {
				fc.cleanVars()
				fc.res.forget()
			}
		})
	}
	// A loop that does not run the release (it is closing, or was closed
	// before the release's turn) cleans up once it has stopped, also
	// after the steps it left live, C steps and Go steps given by Binary,
	// of a Go root's flow too: it ran no cancel handler of theirs, and
	// never will run the flow again.
	stopped := func() {
		releaseLeft(ro.root.State())
		finish()
	}
	if reportsDrops(ro.node.tool) {
		// A TestTool whose ResetEvents dropped the release runs later
		// callbacks, though, and so may a DropReporter: see droppedLive.
		stopped = func() { ro.droppedLive(finish) }
	}
	ro.cancelOnLoop()
	ro.node.post(func() {
		if ro.owned {
			ro.root.Cancel() // a no-op after a cancel on the loop above
			// Cancel posts the cancel of the flow: clean up behind it.
			ro.node.post(finish, stopped)
			return
		}
		finish()
	}, stopped)
}

// cancelOnLoop cancels the flow of an owned root at once when free is
// called on the flow's loop (a step that ends its request frees its own
// root), as the table's cancel does there: the flow sees it before its
// next step. Posted only, the cancel came after the next step, which ran
// with a root its owner had freed, and with what the steps use. Off the
// loop the cancel stays posted, behind what the loop runs already (a tool
// that drops the post runs the cancel in its fallback).
func (ro *rootObj) cancelOnLoop() {
	if ro.owned && ro.node.onLoop() {
		ro.root.Cancel()
	}
}

// droppedLive does what a free that a tool dropped would have done, on a
// tool that may run later callbacks (a TestTool, inside ResetEvents, or a
// DropReporter); finish is the release it would have posted after the
// cancel. A Go root's flow stays Go's and runs on: only its root
// pointer goes, and its C steps keep theirs, which their completion needs.
// An owned root's flow is cancelled, as a closed loop ends it, so that no
// C step of the freed root runs on a completion that comes later and the
// syncs the flow holds come back; the cancel applies when the tool runs
// next, but C memory is released now, as ResetEvents promises: the steps
// the flow left waiting after their cancel handlers (see releaseLeft),
// whose engine cancel then finds them released.
func (ro *rootObj) droppedLive(finish func()) {
	if !ro.owned {
		finish()
		return
	}
	ro.root.Cancel()
	releaseLeft(ro.root.State())
	finish()
}

// waitsForRelease returns the loop that FreeWait, called now, waits
// for to release the root, or nil where it does not wait: not for a root
// never executed and with no state variable or stack memory (taken on it
// idle, or on a parallel made on it), which has no C callback to wait for
// (making and freeing roots stays cheap), nor on a tool that is not a
// Loop, nor where waiting could deadlock: on a loop's thread, where the
// loop may be the one that has to run them, or wait for this one.
func (ro *rootObj) waitsForRelease() *asyncsteps.Loop {
	fc := ro.node.flow
	loop, ok := ro.node.tool.(*asyncsteps.Loop)
	switch {
	case !ok:
		return nil // a TestTool, or a tool of the caller's: the caller may be what drives it
	case !fc.cleanups.Load() && !ro.root.Running():
		return nil // no C callback to wait for
	case onLoopGoroutine() || ro.node.onLoop():
		// onLoop too: the flow's own loop stays known to a callback that
		// cleared its goroutine's mark.
		return nil
	}
	return loop
}

// waitReleased waits until released is closed, or until loop, the loop
// of the root's flow, is closing: a closing loop runs the release only
// once it has stopped (see flowCtx.post), and its last step may itself
// wait for the caller. It waits on both channels, and nothing else: the
// loop is not probed (a timer scheduled from another goroutine wakes a
// sleeping loop), nor is the caller woken before either comes.
func waitReleased(released <-chan struct{}, loop *asyncsteps.Loop) {
	select {
	case <-released:
	case <-toolinfo.Closing(loop):
	}
}

// binaryRoot returns the rootObj of a Go root, made on first use.
func binaryRoot(r *asyncsteps.Root) *rootObj {
	goRoots.mu.Lock()
	ro := goRoots.m[r]
	goRoots.mu.Unlock()
	if ro != nil {
		return ro
	}
	fc := flowFor(r.State(), r.Tool())
	goRoots.mu.Lock()
	defer goRoots.mu.Unlock()
	if ro := goRoots.m[r]; ro != nil {
		return ro
	}
	if goRoots.m == nil {
		goRoots.m = make(map[*asyncsteps.Root]*rootObj)
	}
	ro = &rootObj{root: r}
	ro.node = newNode(kindRoot, r, fc, fc.rootID)
	ro.node.root = ro
	goRoots.m[r] = ro
	return ro
}

// sameSteps reports whether a and b are the same AsyncSteps. A decorator
// passed by value whose type cannot be compared (a struct with a slice,
// say) is never the same as another: == would panic on it, and a new
// step pointer for each call is the safe answer.
func sameSteps(a, b asyncsteps.AsyncSteps) bool {
	va := reflect.ValueOf(a)
	if va.Type() != reflect.TypeOf(b) || !va.Comparable() {
		return false
	}
	return a == b
}

// Binary returns as as a FutoInAsyncSteps* for C:
//
//   - a *Root: a root pointer, the same each time until C frees it with
//     its table's free, which releases only what C was given (the Root
//     stays Go's and is not cancelled);
//   - a step given to a Go callback: a step pointer, valid until the step
//     is over, the sub-steps it added included (stack memory taken through
//     the pointer lives until they have ended, as a C step's does), with
//     the C-side semantics of the package and the rootId of
//     the flow or parallel branch the step runs in (one of its own for a
//     decorator without Unwrap, whose branch cannot be told). If a C function
//     given this pointer raises an error (handle_error, breakLoop,
//     continueLoop), the Go callback should return at once. Go code that
//     such a C function calls back (an //export of the program's) must
//     not end the step with the step's Error, Fail, Break or Continue,
//     nor those of Wrap of the pointer, which gives the step's
//     AsyncSteps: they abort the Go callback with a panic, which would
//     unwind the C frames in between without running the rest of them
//     (and which the address sanitizer does not follow); it leaves the
//     error to the C function (handle_error through the pointer) or to
//     the Go callback, once C has returned. Call it in
//     the callback, on the loop. Off the loop (by another goroutine, for
//     a step that waits) it returns a new pointer each time, whose rootId
//     is one of its own, as the branch cannot be told there; and it reads
//     the flow's State, which only the loop may make: the flow must have
//     one already (a C step of the flow, or Binary on the loop, made it).
//     However Go ends the step (Success or Error from another goroutine,
//     a timeout, a cancel of the flow, its Loop closed), the pointer is
//     released once the step is over, at the latest as the flow's
//     execution ends, with no later C step or Binary needed (a step its
//     closed Loop left waiting in a flow whose root pointer C holds goes
//     with the free of that pointer, after the C cancel handler set on
//     it and those of the C sub-steps it added). The
//     exception is a step whose flow the engine cannot reach, given
//     through a decorator without Unwrap: its pointer goes at the flow's
//     next C step or Binary, or with the execution's end only if a Binary
//     of a step the engine reaches came in that execution;
//   - an AsyncSteps made by [Wrap] from a pointer: that pointer.
//
// It returns nil for nil.
func Binary(as asyncsteps.AsyncSteps) unsafe.Pointer {
	switch v := as.(type) {
	case nil:
		return nil
	case *foreign:
		return unsafe.Pointer(v.p)
	case *asyncsteps.Root:
		return unsafe.Pointer(binaryRoot(v).node.bsi)
	}
	tool := as.Tool()
	fc := flowFor(as.State(), tool)
	onLoop := fc.onLoop(tool)
	var rootID int64
	if onLoop {
		fc.sweep()
		for _, n := range fc.external {
			if !n.released.Load() && sameSteps(n.as, as) {
				return unsafe.Pointer(n.bsi)
			}
		}
		rootID = fc.branchRootID(as)
	} else {
		// The step's frame is not ours to read, so its branch cannot be
		// told: a rootId of its own, never the flow's, which a branch's
		// step would share with the flow (as for a decorator without
		// Unwrap, see branchRootID).
		rootID = newRootID()
	}
	n := makeNode(kindStep, as, fc, rootID)
	n.external = true
	n.inCall = true // C calls on it come from inside the Go callback
	n.waited = true
	n.publish()
	if onLoop {
		fc.external = append(fc.external, n)
		toolinfo.AtWait(as, n.waitBegins)
		if !fc.watchEnd(as) {
			// The flow's end cannot be watched through this step: a
			// sweep after the callback releases its node if it does not
			// wait, as it may be the flow's last with a C side.
			fc.sweepLater(tool)
		}
	} else {
		// fc.external is the loop's: the loop adds n, to be released by a
		// sweep once its step is over (see adoptExternal; or by the
		// fallback, at once).
		n.post(func() { fc.adoptExternal(n) }, n.release)
	}
	return unsafe.Pointer(n.bsi)
}

// adoptExternal adds n, made by Binary off the loop, to the flow's list
// of pointers given by Binary, or releases it if its step is over
// already: the completion may have come before the post that adds n
// (from the goroutine that made n, while the step's callback still ran,
// which the loop applies as the callback returns), and the flow's last
// sweep with it. Loop only.
func (fc *flowCtx) adoptExternal(n *node) {
	if !n.valid() {
		n.release()
		return
	}
	fc.sweep()
	fc.external = append(fc.external, n)
	fc.watchEnd(n.as)
}

// Wrap adopts a FutoInAsyncSteps* from C. One of ours becomes the Go value
// it stands for again (a *Root, or the Go step's AsyncSteps that Binary
// was given); that of a C step, a decorator of the step's AsyncSteps
// whose Unwrap gives the step, and whose calls that change the step's
// life do what the table's do through the pointer: Success, Error, Break
// and Continue what success, handle_error, breakLoop and continueLoop do,
// and [asyncsteps.Fail] what handle_error does, the Go error kept as the
// Cause, after which the pointer turns stale (in the step's C callback,
// Error, Fail, Break and Continue return to the caller, which must return
// at once);
// in the step's C callback, the calls that add sub-steps what add does,
// and SetCancel, WaitExternal and SetTimeout what setCancel,
// waitExternal and setTimeout do, the pointer then staying valid until
// the step is over; a foreign one, from another implementation of the table, becomes
// an AsyncSteps that calls through that table (see the package doc). It
// returns nil for nil and for a stale pointer of ours, and panics for a
// foreign pointer whose table has no handle_error, or whose api is NULL:
// no Go call on it could fail its step.
func Wrap(p unsafe.Pointer) asyncsteps.AsyncSteps {
	bsi := (*C.FutoInAsyncSteps)(p)
	if bsi == nil {
		return nil
	}
	if isOurs(bsi) {
		n := nodeOf(bsi)
		switch {
		case n == nil:
			return nil
		case n.kind == kindStep && !n.external:
			return cStep{n.as, n} // completed through the node (see cStep)
		}
		return n.as
	}
	return wrapForeign(bsi)
}
