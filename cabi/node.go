//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

type kind uint8

const (
	kindStep     kind = iota // a running step or error handler: a frame of the engine
	kindRoot                 // a root
	kindParallel             // the value returned by parallel
)

// node is the Go object behind one FutoInAsyncSteps we hand out.
//
// id, bsi, kind, as, flow, tool and rootID never change. The rest is owned
// by the flow's loop: exports called from other threads only post to the
// loop.
type node struct {
	// outside is the kind of the first completion that came from outside
	// the step's callback while the step was live (outsideSuccess,
	// outsideError or outsideCall), written by whichever thread made it;
	// 0 if none. Such a completion is posted to the loop, so a cancel
	// may come first: a success accepted so has completed the step, and
	// its cancel handler does not run (cancelHandler), as the engine's
	// rule for a Success claimed from another goroutine; unless the
	// success turns out void (see tookOutsideSuccess).
	outside atomic.Uint32
	// settled: the step's C callback has returned, the step waiting for
	// a completion from outside; a success that claims it from then on
	// claims the engine's step too (see pin). Written on the loop.
	settled atomic.Bool
	// claimed is the engine's claim of the step for the success from
	// outside that claimed it (see pin), delivered by that success's
	// task; nil if none.
	claimed atomic.Pointer[toolinfo.Claimed]
	// claimedErr is claimed for an error from outside, handle_error's or
	// Go's Error through Wrap, delivered by that error's task.
	claimedErr atomic.Pointer[toolinfo.ClaimedError]
	id         uint64
	bsi        *C.FutoInAsyncSteps
	kind       kind
	as         asyncsteps.AsyncSteps
	flow       *flowCtx
	tool       asyncsteps.Tool // the flow's, which flowCtx does not hold (see flows)
	rootID     int64
	root       *rootObj // kindRoot
	// kindStep: the State of the flow the step runs in, which tells the
	// steps of a freed root's flow that its stopped loop left (flowCtx
	// does not: a clone runs its model's C steps).
	st *asyncsteps.State
	// kindParallel made on a root rather than in a step: that root, whose
	// being idle lets any one thread use the parallel as it uses the root.
	owner *rootObj

	// While the C callback given bsi runs, on the loop.
	inCall bool
	// inCancel: the step's cancel handler runs (see runCancel): C's,
	// given to setCancel, with inCall, or Go's, given to Wrap's SetCancel.
	inCancel  bool
	pending   any // a panic (an abort) caught at an export boundary, raised again after the callback
	added     bool
	completed bool
	waiting   bool
	waited    bool // ever waited: its struct gets the long quarantine

	// The step's cancel handler: C's, given to setCancel, or Go's, given
	// to SetCancel through Wrap; the one set last, as the engine keeps
	// one per step.
	cancelFn   C.FutoInAsyncSteps_cancel_callback
	cancelData C.uintptr_t
	goCancel   asyncsteps.CancelFunc
	// hooked: cancelHandler is the engine's cancel handler of the step.
	hooked bool
	// erred: the step failed (handle_error, Error through Wrap, or an
	// abort in its callback) with a cancel handler, which the engine runs
	// as the error unwinds through the step: cancelHandler releases the
	// node then, as fail does.
	erred bool

	onSuccess func() // addSync: the lock step was completed by success
	// The section of a foreign FutoInSync (see addForeignSync): its unlock,
	// for releaseLeft, which no cancel handler of the engine runs before.
	onLeft func()

	// A loop body's success is held until its callback returns: a
	// breakLoop after it in the same callback wins and takes its args to
	// the step after the loop (the C++ reference implementation's await
	// does so).
	body     *loopCarry
	deferred []any
	held     bool

	stacks []stackMem
	link   *stepLink // the step's error handler, if it has one: it outlives the stacks
	// received custom objects, cleaned up when the step completes; under
	// inMu once C has the pointer: a success from another thread passes
	// one on (forward) while the loop may settle the step
	inputs   []*Custom
	inMu     sync.Mutex
	children []*node // parallel objects made in the callback
	external bool    // made by Binary for a Go step: its end is found by sweeping
	// released: the pointer is given back. Written on the loop; read also by
	// isValid, which any thread may call.
	released atomic.Bool
	// atStop is, for a node made by Binary on the loop, what IsValid said
	// of its step as the loop stopped (validAtStop or overAtStop), set on
	// the loop's goroutine then (see recordStop); 0 before, and for a node
	// the loop's stop did not find.
	atStop atomic.Uint32
}

// The values of node.atStop.
const (
	validAtStop uint32 = 1 + iota
	overAtStop
)

type stackMem struct {
	p       unsafe.Pointer
	cleanup C.cabi_stack_cleanup_fn
}

func newNode(k kind, as asyncsteps.AsyncSteps, fc *flowCtx, rootID int64) *node {
	n := unregisteredNode(k, as, fc, rootID)
	n.id = register(n)
	n.bsi = allocBSI(n.id)
	return n
}

// makeNode is newNode for a node that Binary makes, maybe off the loop:
// its pointer stands for nothing until publish, so that it is set up
// before the fallbacks of a stopped loop, which read the nodes of the
// registry (releaseLeft), may find it.
func makeNode(k kind, as asyncsteps.AsyncSteps, fc *flowCtx, rootID int64) *node {
	n := unregisteredNode(k, as, fc, rootID)
	n.id = registry.reserve()
	n.bsi = allocBSI(n.id)
	return n
}

// unregisteredNode returns the node of as, with no id yet.
func unregisteredNode(k kind, as asyncsteps.AsyncSteps, fc *flowCtx, rootID int64) *node {
	n := &node{kind: k, as: as, flow: fc, tool: as.Tool(), rootID: rootID}
	if k == kindStep {
		n.st = as.State()
		// The flow ran, also when Go executed a root of C's (Wrap): a
		// closed loop may leave this step for the root's free to release.
		if !fc.cleanups.Load() {
			fc.cleanups.Store(true)
		}
	}
	return n
}

// publish puts n in the registry: its pointer stands for it from now on.
func (n *node) publish() { registry.set(n.id, n) }

// release ends the node: its pointer turns stale, the stack memory and the
// received custom objects are cleaned up, the parallel objects it made are
// released. Loop only; idempotent.
func (n *node) release() { n.end(false, false) }

// fail is release for a step that an error ends: its stack memory outlives
// it until its own error handler has returned, however many turns of the
// loop the error takes to reach it (through addSync's unlock, for one); if
// the handler never runs (a cancel meanwhile), until the flow's next C
// callback or free.
func (n *node) fail() { n.end(true, true) }

// cancelled is release for a step whose cancel handler the engine runs (a
// cancel, a timeout, an error unwinding through it): its stack memory
// outlives it until the loop's next turn, for an error handler that
// follows in this one.
func (n *node) cancelled() { n.end(true, false) }

func (n *node) end(failed, byError bool) {
	if n.released.Load() {
		return
	}
	n.released.Store(true)
	unregister(n.id)
	releaseBSI(n.bsi, n.waited)
	for _, c := range n.children {
		c.release()
	}
	n.children = nil
	if failed && n.link != nil && len(n.stacks) > 0 {
		n.link.keep(n.stacks)
		l := n.link
		if byError {
			n.flow.failed = append(n.flow.failed, l)
		} else {
			n.post(l.clean, l.clean)
		}
	} else {
		freeStacks(n.stacks)
	}
	n.stacks = nil
	n.inMu.Lock()
	inputs := n.inputs
	n.inputs = nil
	n.inMu.Unlock()
	for _, c := range inputs {
		c.v.release()
	}
	n.cancelFn, n.goCancel = nil, nil
	n.onSuccess = nil
	n.onLeft = nil
}

// releaseLeft releases the steps of the flow whose state is st that its
// loop left unfinished when it stopped (waiting for an external event, or
// for their sub-steps), innermost first (see leave), Go steps given by
// Binary included. Only once the loop has stopped, for a freed root's
// flow or one that no root pointer of C's holds (see
// flowCtx.releaseStopped), or on a tool that runs on after a dropped free
// (see rootObj.droppedLive): the nodes are the loop's until then.
func releaseLeft(st *asyncsteps.State) {
	var left []*node
	registry.eachStep(st, func(n *node) bool {
		left = append(left, n)
		return true
	})
	leaveAll(left)
}

// leaveAll has each node of nodes leave, innermost first: a sub-step is
// newer than its step.
func leaveAll(nodes []*node) {
	slices.SortFunc(nodes, func(a, b *node) int { return cmp.Compare(b.id, a.id) })
	for _, n := range nodes {
		n.leave()
	}
}

// leave releases n, whose step a stopped loop left, or a free that a tool
// dropped cancels: first, if the step is live, the C cancel handler, as
// the flow's cancel on a running loop calls it; then, for the lock step
// of a foreign FutoInSync, the grant of a success from outside that the
// loop did not apply (see successPending); then the unlock of a foreign
// FutoInSync whose section the flow holds, as the section's cancel
// handler does; then the release, as no error handler will run. A
// step that ended (completed by Go, say, its pointer not swept yet) is
// only released: its cancel handler never runs after its end.
func (n *node) leave() {
	if fn := n.cancelFn; fn != nil && !n.released.Load() && n.stepLive() {
		n.cancelFn = nil
		n.inCall = true
		C.cabi_call_cancel(fn, n.bsi, n.cancelData)
		n.inCall = false
		n.pending = nil
	}
	if got := n.onSuccess; got != nil && n.successPending() {
		// The lock step of a foreign FutoInSync, granted by a success from
		// another thread that the loop never applied: the sync counts the
		// lock as given, so the section, which leaves after this step
		// (innermost first), must find it held and unlock it.
		n.onSuccess = nil
		got()
	}
	if left := n.onLeft; left != nil && !n.released.Load() {
		n.onLeft = nil
		left() // a C sync shared with other flows must not stay locked
	}
	n.release()
}

// stepLive reports whether n's step has not ended, as the engine tells
// (toolinfo.StepLive): it waits, or a sub-step it added runs, also in a
// flow its closed loop ended there. A step the engine cannot follow (a
// decorator without Unwrap, given to Binary) is live while its handle is
// valid, or was as its loop stopped (see valid). On the loop, or once it
// has stopped.
func (n *node) stepLive() bool {
	if live, known := toolinfo.StepLive(n.as); known {
		return live
	}
	return n.valid()
}

// valid is IsValid of n's step, as cabi's cleanup needs it also once the
// step's Loop has stopped. IsValid is false then for a step the stop left
// waiting, which the cleanup must tell from one that Go completed before
// the stop: it calls the C cancel handler of the first only (see leave),
// and keeps its pointer for that (see flowCtx.sweep). So a node made by
// Binary answers what IsValid said as the loop stopped: the engine cannot
// tell it for a step given through a decorator without Unwrap. IsValid is
// read first: if it found the loop stopped, the record, made before, is
// seen. Any thread.
func (n *node) valid() bool {
	valid := n.as.IsValid()
	if s := n.atStop.Load(); s != 0 {
		return s == validAtStop
	}
	return valid
}

// recordStop records, as n's loop stops, what IsValid says of its step
// (see valid): on the loop's goroutine, which runs no callback any more,
// before the engine answers IsValid false for a step the stop left. A
// decorator's IsValid that panics, or calls runtime.Goexit (see
// recordStops), records nothing: the loop's shutdown must go on.
func (n *node) recordStop() {
	defer func() { _ = recover() }()
	if n.as.IsValid() {
		n.atStop.Store(validAtStop)
	} else {
		n.atStop.Store(overAtStop)
	}
}

// freeStacks runs the cleanups of stack memory, last allocated first, and
// frees it.
func freeStacks(stacks []stackMem) {
	for i := len(stacks) - 1; i >= 0; i-- {
		s := stacks[i]
		if s.cleanup != nil {
			C.cabi_call_stack_cleanup(s.cleanup, s.p)
		}
		C.free(s.p)
	}
}

// loopCarry holds the args of a loop body's success followed by a
// breakLoop in the same callback, for the step after the loop.
type loopCarry struct{ args []any }

// hold keeps the args of a loop body's success until its callback returns.
func (n *node) hold(vals []any) {
	n.deferred, n.held = vals, true
}

// overrule drops a held success that a break, continue or error in the
// same callback overrides; a break carries its args past the loop.
func (n *node) overrule(carry bool) {
	if !n.held {
		return
	}
	if carry {
		n.body.args = n.deferred
	} else {
		dropArgs(n.deferred, n)
	}
	n.deferred, n.held = nil, false
}

// stepLink joins a C step to its C error handler: the stack memory of a
// step that failed waits there until the handler has returned.
type stepLink struct {
	mu     sync.Mutex // a stopped loop's fallbacks clean up on another goroutine
	stacks []stackMem
}

func (l *stepLink) keep(stacks []stackMem) {
	l.mu.Lock()
	l.stacks = append(l.stacks, stacks...)
	l.mu.Unlock()
}

// clean frees what keep was given; loop only, idempotent.
func (l *stepLink) clean() {
	l.mu.Lock()
	stacks := l.stacks
	l.stacks = nil
	l.mu.Unlock()
	freeStacks(stacks)
}

// dropTaken forgets the received custom objects that the C step took over
// during its callback (its FutoInArgs slot no longer holds them): the
// receiver owns what it is given, so they are no longer ours to clean up.
func (n *node) dropTaken(in []any, args *C.FutoInArgs) {
	n.inMu.Lock()
	defer n.inMu.Unlock()
	if len(n.inputs) == 0 || args == nil {
		return
	}
	slots := (*[4]C.FutoInBinaryValue)(unsafe.Pointer(args))
	for i, v := range in[:min(len(in), len(slots))] {
		c, ok := v.(*Custom)
		if !ok {
			continue
		}
		var f C.cabi_flat
		C.cabi_read_value(&slots[i], &f)
		if f._type == c.v.flat._type && f.p == c.v.flat.p && f.custom_data == c.v.flat.custom_data {
			continue // still there: ours until the step completes
		}
		for j, d := range n.inputs {
			if d == c {
				n.inputs = append(n.inputs[:j], n.inputs[j+1:]...)
				c.v.done.Store(true)
				break
			}
		}
	}
}

// forward finds f among the custom objects the step received: passed on in
// success, it is the receiver's to clean up, no longer this step's. Any
// thread.
func (n *node) forward(f *C.cabi_flat) *Custom {
	n.inMu.Lock()
	defer n.inMu.Unlock()
	for i, c := range n.inputs {
		if c.v.flat._type == f._type && c.v.flat.p == f.p && c.v.flat.custom_data == f.custom_data {
			n.inputs = append(n.inputs[:i], n.inputs[i+1:]...)
			return c
		}
	}
	return nil
}

// cancelHandler is the engine's cancel handler of a C step that waits or
// has sub-steps: the step's cancel handler, C's or Go's, then the
// release, also when Go's panics (the engine reports the panic).
func (n *node) cancelHandler(asyncsteps.AsyncSteps) {
	defer func() {
		if n.erred {
			n.fail() // its error handler is next
		} else {
			n.cancelled()
		}
	}()
	if !n.released.Load() && !n.tookOutsideSuccess() {
		n.runCancel()
	}
}

// tookOutsideSuccess reports whether a success from outside the step's
// callback has completed the step, maybe before the loop has applied it:
// one that claimed the engine's step (see pin) has, and the engine runs
// no cancel handler of a step so claimed. A C step's success that
// claimed only node is void: the cancel or the timeout that runs this
// handler came first, or the step's callback went on to add sub-steps
// or to fail. A Go step given by Binary is claimed in the engine only
// once it waits; a success claimed in node before counts unless the
// callback went on to add sub-steps or to fail, or an error beat it to
// the loop (see over). Loop only.
func (n *node) tookOutsideSuccess() bool {
	if n.claimed.Load() != nil {
		return true
	}
	return n.external && n.outside.Load() == outsideSuccess && !n.added && !n.erred
}

// successPending reports whether a success from outside the step's
// callback completed the step, claiming the engine's step (see pin),
// and the loop has not applied it yet: a cancel meanwhile ran none of
// the step's cancel handlers, which would have released n. It reads
// outside, not claimed: the claiming thread writes outside before it
// claims the engine's step, and claimed only after, so a cancel that
// found the engine's step claimed may not see claimed yet. Loop only.
func (n *node) successPending() bool {
	return n.outside.Load() == outsideSuccess && !n.released.Load() && !n.added && !n.erred
}

// The kinds of node.outside.
const (
	outsideSuccess uint32 = 1 + iota
	// outsideError: handle_error, or Go's Error through Wrap, whose code
	// and info are known as it claims; it claims the engine's step too
	// (see pin).
	outsideError
	// outsideCall: a call that fails a waiting step from outside its
	// callback, whose error the engine makes as it takes the call on the
	// loop (see elsewhere, cStep.outside); the engine's step is not
	// claimed before.
	outsideCall
)

// claimOutside records a completion of the kind made from outside the
// step's callback, if it is the first and the step is live: not over,
// and with no sub-steps running (on such a step the engine ignores a
// completion, and so does the task posted for it). It reports whether
// the completion may apply: false when another one from outside claimed
// the step first. Each is posted after its claim, so two threads racing
// may post in the other order; the loop applies the first claimed, as
// the engine's claim decides for Go's completions from other goroutines.
// One made on a step that is not live claims nothing: its task finds the
// step over. A success or an outsideError that wins on a step that
// waits for it claims the engine's step too (see pin).
func (n *node) claimOutside(kind uint32) (mayApply bool) {
	// The step is read first: a completion of ours marks outside before
	// it claims the engine's step (see pin), so a step found invalid with
	// outside still 0 is not live, rather than claimed by a completion
	// that won meanwhile (which, read in the other order, would let both
	// apply).
	if !n.stepValid() && n.outside.Load() == 0 {
		return true
	}
	won := n.outside.CompareAndSwap(0, kind)
	if won && (n.external || n.settled.Load()) {
		n.pin(kind)
	}
	if testHookClaimed != nil {
		testHookClaimed(n, kind, won)
	}
	return won
}

// pin claims the engine's step for the completion from outside, of the
// kind given, that claimed n, once the step waits for it: the C step's
// callback has returned waiting (settled, on whichever side comes
// second: the completion's thread or finish), or a Go step given by
// Binary has waited. A cancel or a timeout of the step that comes
// before the completion's task then finds it completed, as it finds a
// Go step whose Success or Error another goroutine claimed: the timer
// does not fall due, and the task delivers the completion; a cancel runs
// no cancel handler of a step that succeeded so, and runs those of one
// that failed. One that came before the pin wins, and the completion is
// void (see tookOutsideSuccess). An outsideCall claims nothing here.
// Any thread; the second call of two does nothing.
func (n *node) pin(kind uint32) {
	switch kind {
	case outsideSuccess:
		if n.claimed.Load() != nil {
			return
		}
		if c := toolinfo.ClaimSuccess(n.as); c != nil {
			n.claimed.Store(&c)
		}
	case outsideError:
		if n.claimedErr.Load() != nil {
			return
		}
		if c := toolinfo.ClaimError(n.as); c != nil {
			n.claimedErr.Store(&c)
		}
	}
}

// waitBegins is, for a Go step given to C by Binary in its callback, what
// finish does for a C step whose callback returned waiting: the engine
// runs it as the Go callback returns and the step begins to wait (see
// toolinfo.AtWait), before the loop may run the step's timer. A
// completion from outside that claimed n while the callback ran, before
// the step waited, could not claim the engine's step then (the engine
// takes a call on a step that does not wait for its callback's own): it
// claims it now, so that the step's timer falling due before the
// completion's task loses to it. One that comes after claims the
// engine's step itself (see claimOutside). Loop only.
func (n *node) waitBegins() {
	n.settled.Store(true)
	if k := n.outside.Load(); k != 0 {
		n.pin(k)
	}
}

// testHookClaimed, set by a test, runs in claimOutside once a completion
// from outside has made its claim (won: it holds it), before it is
// posted.
var testHookClaimed func(n *node, kind uint32, won bool)

// stepValid is the step's IsValid, from any thread: off the loop, one of
// a step whose callback runs would read what that callback writes (the
// engine allows it only for a step that waits), so the engine answers
// from the step's state alone there, a running callback's step valid;
// once the loop has stopped, as it stopped (see valid).
func (n *node) stepValid() bool {
	if !n.onLoop() {
		if valid, known := toolinfo.ValidOffLoop(n.as); known {
			return valid
		}
	}
	return n.valid()
}

// runCancel calls the step's cancel handler, C's or Go's, if it has one,
// once.
func (n *node) runCancel() {
	fn, goFn := n.cancelFn, n.goCancel
	n.cancelFn, n.goCancel = nil, nil
	switch {
	case fn != nil:
		n.flow.repin()
		n.inCall, n.inCancel = true, true
		C.cabi_call_cancel(fn, n.bsi, n.cancelData)
		n.inCall, n.inCancel = false, false
		n.pending = nil // the step is over: an abort has nothing left to abort
	case goFn != nil:
		n.inCancel = true
		defer func() { n.inCancel = false }() // a panic goes on to the engine
		goFn(cStep{n.as, n})
	}
}

// hookCancel makes cancelHandler the engine's cancel handler of the step.
func (n *node) hookCancel() {
	n.hooked = true
	n.as.SetCancel(n.cancelHandler)
}

// wait marks the step as waiting for an external completion.
func (n *node) wait() {
	n.waiting = true
	n.waited = true
	n.hookCancel()
}

// setCancel sets the step's cancel handler, C's fn with data or Go's
// goFn (neither: none), as setCancel does: the step waits.
func (n *node) setCancel(fn C.FutoInAsyncSteps_cancel_callback, data C.uintptr_t, goFn asyncsteps.CancelFunc) {
	n.cancelFn, n.cancelData, n.goCancel = fn, data, goFn
	n.wait()
}

// setTimeout arms the step's timeout, as setTimeout does: the step waits.
func (n *node) setTimeout(d time.Duration) {
	n.as.SetTimeout(d)
	n.wait()
}

// waitExternal makes the step wait, as waitExternal does.
func (n *node) waitExternal() {
	n.as.WaitExternal()
	n.wait()
}

// failing settles the node of a step that an error ends, before the
// engine unwinds it. The engine runs the failing step's own cancel
// handler first, as for a Go step: where the step has one, cancelHandler
// runs it and then fails the node; else the node fails now.
func (n *node) failing() {
	if n.hooked && (n.cancelFn != nil || n.goCancel != nil) {
		n.erred = true
		return
	}
	n.fail()
}

// over reports whether a completion from outside the step's callback
// comes too late: the pointer is released, or the engine takes no
// completion of the step any more (it completed, or its sub-steps run).
// The node is released then, but for a step whose sub-steps run, which
// may use its pointer and stack memory (their end releases it), and for
// an error of the step whose unwinding is to come, whose cancel handler
// releases it (see failing).
func (n *node) over() bool {
	if !n.released.Load() && n.valid() {
		return false
	}
	if !n.erred && !n.subStepsRun() {
		n.release()
	}
	return true
}

// refusesOutside reports, on the loop, whether the engine refuses n's
// step a call from outside its C callback, which is then made on the
// engine's step at once rather than as a completion from outside: sub-
// steps of the step run (see subStepsRun), from whose callbacks the
// engine raises the call as a misuse, or the step's cancel handler does,
// whose calls on its own step the engine logs as the handler's misuse.
func (n *node) refusesOutside() bool {
	return n.onLoop() && (n.inCancel || n.subStepsRun())
}

// subStepsRun reports whether sub-steps of n's step run: for a C step,
// whether its callback added some, whose end or cancel handler releases
// n (see finish); for a Go step given by Binary, to which Go adds them
// unseen, whether the engine still runs the step (a sweep releases n once
// it does not). Loop only.
func (n *node) subStepsRun() bool {
	if n.released.Load() {
		return false
	}
	if n.external {
		running, known := toolinfo.StepRunning(n.as)
		return known && running
	}
	return n.added
}

// inCallback reports whether a call on n comes from the C callback n was
// given, i.e. from the loop while that callback runs.
// inCall is loop-owned, so the thread is checked first.
func (n *node) inCallback() bool { return n.onLoop() && n.inCall }

// ownCallbackRuns tells, on the loop, whether the callback running is
// n's own. A C step's node is inCall only then; a Go step's given by
// Binary stays inCall for the C calls its Go callback makes, also while a
// sub-step's callback runs, so the engine tells (a step it cannot reach
// counts as running, as inCall says).
func (n *node) ownCallbackRuns() bool {
	if !n.external {
		return true
	}
	runs, known := toolinfo.CallbackRuns(n.as)
	return runs || !known
}

// mayAdd reports whether steps may be added on n now, a pointer that is
// not outsideCallback: a step in its own callback, a parallel made in a
// step (the engine checks its step) on the loop, or a root, or a parallel
// made on it, on the loop or, from any one thread at a time, while the
// root is idle (see onFlow); a root until free has returned, which makes
// the pointer invalid. Off the loop while the root's flow runs, the add
// would race with the loop, which takes the root's steps and branches
// as it goes: it has no effect, as on a parallel made in a step, and is
// recorded in the root for its next execute to report (see dropAdd);
// call names the function in that report.
func (n *node) mayAdd(call string) bool {
	switch {
	case n.root != nil:
		if n.root.isFreed() {
			return false
		}
		return n.onFlow() || n.root.dropAdd(call+" called from another thread on a running root: the step was not added")
	case n.owner != nil:
		return n.onFlow() || n.owner.dropAdd(call+" called from another thread on a parallel made on a running root: the branch was not added")
	case n.kind == kindParallel && !n.onLoop():
		// Made in a step: off the loop, the engine's check would read the
		// step's frame, which its running callback writes, and add the
		// branch from there. The step has sub-steps (the parallel), and
		// on such a step a call from another thread has no effect (see
		// elsewhere).
		return false
	}
	return true
}

// guard catches a panic (an abort by the engine) at an export boundary:
// Go panics must not unwind C frames. The abort is raised again once the
// C callback it aborts has returned (see keepAbort, runC). With no C
// callback to raise it after (C code that a Go callback called), it is
// dropped: the engine has recorded the error, which fails the Go
// callback's step once it returns.
func guard(n *node) {
	if r := recover(); r != nil && n != nil {
		n.keepAbort(r)
	}
}

// goGuard is guard for Go's calls through Wrap: with no C callback to
// raise the abort after, the panic goes on unwinding the Go callback
// that made the call, as the engine's own calls do.
func goGuard(n *node) {
	if r := recover(); r != nil && !n.keepAbort(r) {
		panic(r)
	}
}

// keepAbort records r, an abort of the engine during a call on n, for the
// C callback it aborts (see aborted), to be raised once that callback has
// returned; the first abort of a callback is kept. It reports whether
// there is such a callback.
func (n *node) keepAbort(r any) bool {
	c := n.aborted()
	if c == nil {
		return false
	}
	if c.pending == nil {
		c.pending = r
	}
	return true
}

// aborted returns the node whose C callback an abort during a call on n
// aborts, or nil: n's own callback while it runs; else the C callback of
// n's flow that runs on the loop, for a call on the pointer of a step
// that waits for its sub-steps, made from a sub-step's callback, which
// the engine aborts (see elsewhere); else, for a Go step given by Binary,
// its Go callback, as C calls on its pointer come from there.
func (n *node) aborted() *node {
	if n.inCall && !n.external {
		return n
	}
	if n.onLoop() && n.flow.running != nil {
		return n.flow.running
	}
	if n.inCall {
		return n
	}
	return nil
}

// flowCtx is what the C side of one flow shares: its loop, its rootId and
// the C memory handed out by stateVariable. It does not hold the flow's
// tool, which may reach the flow's State (see flows): a node holds it,
// and a caller with no node gives it.
type flowCtx struct {
	pin    *pinned
	loop   *loopCtx // nil for a tool that is not a Loop
	rootID int64
	res    *flowRes

	// owned: the flow is that of a root owned by C, whose free cleans up
	// its state variables (cleanVars). Set before C is given the root.
	owned bool
	vars  []*cVar // loop-owned; of an owned flow only (see node.variable)
	// cleanups is set once the flow may hold something whose cleanup is a
	// C callback: it was executed, by C or by Go, which a step with a C
	// side tells (see unregisteredNode), or a state variable or stack
	// memory was allocated.
	// free waits for the loop only then (see rootObj.free).
	cleanups atomic.Bool
	external []*node // loop-owned: nodes made by Binary, swept when their step is over
	sweepDue bool    // loop-owned: a sweep of external is posted (see sweepLater)
	// end is what watchEnd gives the engine, its function made once per
	// flow: the engine keeps it once per execution, beside the FlowEnds
	// of other packages (asynchttp's, in the flow of a Handler).
	end toolinfo.FlowEnd
	// endTool is the tool of the execution whose end ended awaits, held
	// only until then: a flowCtx holds no tool for good (see flows).
	// Loop-owned.
	endTool asyncsteps.Tool
	// left: a C step of the running execution was left waiting, or
	// waiting for sub-steps, and the engine runs ended as the execution
	// ends (see watchLeft). Loop-owned.
	left bool
	// loop-owned: the links of steps that failed with an error, whose stack
	// memory waits for their error handler (handling: the one now running);
	// the flow's next other C callback, or free, cleans up what is left.
	failed   []*stepLink
	handling *stepLink
	// running is the node whose C callback runs now, the innermost one:
	// an abort that a call on another pointer raises there is kept for it
	// (see aborted). Loop-owned.
	running *node
	// loop-owned: in a copy of a Root (see of), the rootId of each branch
	// of the model's parallels, by the model's id, made on first use.
	branchIDs map[int64]int64
	// loop-owned: in a copy of a Root, the copy's link of each of the
	// model's steps that has a C error handler (see linkIn).
	links map[*stepLink]*stepLink
	// locks are the holders that the table's lock of our syncs made for
	// steps of the running execution; ended gives back those its unlock
	// has not (see syncObj.leaveAtEnd). Loop-owned.
	locks []tableLock
}

// flowRes is the part of a flowCtx that a GC cleanup frees once the flow's
// State is gone; it must not reach the State.
type flowRes struct {
	key     weak.Pointer[asyncsteps.State]
	mu      sync.Mutex // the cleanup runs off the loop
	errInfo cstr
	lastExc cstr
	// ending is the error that ended the execution while its C
	// unhandled_error runs: "error_info" and "last_exception" tell of it,
	// also when no step raised it (the flow's loop was closed), which the
	// State does not record (see rootObj.report).
	ending *asyncsteps.Error
}

// cstr is a C copy of a Go string, kept until the string changes.
type cstr struct {
	s string
	p *C.char
}

func (c *cstr) get(s string) *C.char {
	if c.p == nil || c.s != s {
		if c.p != nil {
			C.free(unsafe.Pointer(c.p))
		}
		c.s, c.p = s, C.CString(s)
	}
	return c.p
}

func (c *cstr) free() {
	if c.p != nil {
		C.free(unsafe.Pointer(c.p))
		c.p = nil
	}
}

// cVar is a state variable made by stateVariable's allocate, the value
// the flow's State holds under its name.
//
// Its C cleanup runs exactly once: by the free of the root for a flow owned
// by C (cleanVars, which stops gc), else by gc once the cVar is unreachable.
// A Go root outlives the C pointer Binary gave: it may run C steps again,
// which find their variables in its State. So such a variable ends only
// when the State lets go of it: the State collected, or the entry replaced
// or removed.
type cVar struct {
	varCleanup
	gc   runtime.Cleanup
	done bool // loop-owned: cleaned up by cleanVars
	// owner is the flow that allocated the variable: the State of a copy
	// of its Root (Clone, CopyFrom) holds it too, but the copy's C steps
	// get a variable of their own (see node.variable).
	owner *flowRes
}

// varCleanup is what the cleanup of a cVar needs; it must not reach the
// cVar, or the cVar would never be unreachable.
type varCleanup struct {
	ptr     unsafe.Pointer
	cleanup C.cabi_var_cleanup_fn
	data    C.uintptr_t
}

// run calls the C cleanup, if any, with the variable's value.
func (c varCleanup) run() {
	if c.cleanup != nil {
		C.cabi_call_var_cleanup(c.cleanup, c.data, c.ptr)
	}
}

var rootIDs atomic.Int64

func newRootID() int64 { return rootIDs.Add(1) }

// flows maps the State of a flow to its flowCtx, so that Binary finds the
// context of a Go step inside a C flow. Keys are weak: a flow's entry goes
// when its State does (flowRes.forget), or when its Loop has stopped.
//
// Go has no ephemerons: an entry keeps its value reachable whatever its
// key, so nothing a flowCtx holds for good may reach the flow's State, or
// the key would never die, nor the entry. The flow's tool may reach it: a
// TestTool keeps its last flows in its engine's pools, a Tool of another
// package may keep the callbacks it was given. So flowCtx does not hold
// the tool (each node holds its flow's), and only reaches a State through
// its list of nodes given by Binary while their steps run (the flow's end
// empties it). A Loop is the exception, held through loopCtx and pinned:
// a running one is kept anyway, and once it has stopped its entries go
// (loopCtx.forgetFlows).
var flows struct {
	mu sync.Mutex
	m  map[weak.Pointer[asyncsteps.State]]*flowCtx
}

// flowFor returns the flowCtx of the flow whose state is st, made if needed.
func flowFor(st *asyncsteps.State, tool asyncsteps.Tool) *flowCtx {
	key := weak.Make(st)
	flows.mu.Lock()
	fc := flows.m[key]
	flows.mu.Unlock()
	if fc != nil {
		return fc
	}
	var lp *loopCtx // nil for a tool that is not a Loop: a TestTool runs on whoever drives it
	var pin *pinned
	if l, ok := tool.(*asyncsteps.Loop); ok {
		lp = loopFor(l)
		pin = lp.pinLoop() // may wait for the loop: not under flows.mu
	}
	flows.mu.Lock()
	defer flows.mu.Unlock()
	if fc := flows.m[key]; fc != nil {
		return fc
	}
	if flows.m == nil {
		flows.m = make(map[weak.Pointer[asyncsteps.State]]*flowCtx)
	}
	fc = &flowCtx{pin: pin, loop: lp, rootID: newRootID(), res: &flowRes{key: key}}
	if lp == nil || !lp.forgotten {
		flows.m[key] = fc // else its loop has stopped (see loopCtx.forgetFlows)
	}
	runtime.AddCleanup(st, (*flowRes).forget, fc.res)
	return fc
}

// forget drops the flow from flows and frees its C strings; the state
// variables are cleaned up by the free of a root owned by C, else once the
// State lets them go (see cVar).
func (r *flowRes) forget() {
	flows.mu.Lock()
	if fc := flows.m[r.key]; fc != nil && fc.res == r {
		delete(flows.m, r.key)
	}
	flows.mu.Unlock()
	r.mu.Lock()
	r.errInfo.free()
	r.lastExc.free()
	r.mu.Unlock()
}

// repin makes sure, before a C callback runs on the loop, that the loop's
// goroutine is locked to the loop's thread. After a Goexit the loop's new
// goroutine is locked the first time something asks (onLoop); a C callback
// that asks nothing would otherwise run on whichever thread the goroutine
// is on, and the next one on another.
func (fc *flowCtx) repin() {
	if fc.pin != nil {
		fc.pin.onThread()
	}
}

// onLoop reports whether the caller runs on the flow's loop: its OS thread
// for a pinned loop, else the answer of tool, the flow's.
func (fc *flowCtx) onLoop(tool asyncsteps.Tool) bool {
	if fc.pin != nil {
		return fc.pin.onThread()
	}
	return tool.IsSameThread()
}

// onLoop is the flow's onLoop, on n's tool.
func (n *node) onLoop() bool { return n.flow.onLoop(n.tool) }

// post runs f on the flow's loop, whose tool is tool, or, if the loop
// does not run it (it refused f because it was closing, or accepted f and
// was closed before f's turn), runs dropped instead, once the loop has
// stopped, so that it never runs beside a callback of the flow. At most
// one of the two runs, and post never waits for either. On a TestTool,
// dropped runs if ResetEvents drops f, inside ResetEvents (see
// toolinfo.PostOrDrop); on a tool of another package, if the tool
// reports the drop (DropReporter). Another tool only schedules f: a
// callback it drops is lost, as cabi cannot learn of it.
func (fc *flowCtx) post(tool asyncsteps.Tool, f, dropped func()) {
	postOn(tool, fc.loop, f, dropped)
}

// post is the flow's post, on n's tool.
func (n *node) post(f, dropped func()) { n.flow.post(n.tool, f, dropped) }

// postOn is post for tool, whose loopCtx is lp (nil for a tool that is
// not a Loop).
func postOn(tool asyncsteps.Tool, lp *loopCtx, f, dropped func()) {
	if lp != nil {
		lp.post(f, dropped)
		return
	}
	if toolinfo.PostOrDrop(tool, f, dropped) {
		return
	}
	if d, ok := tool.(DropReporter); ok {
		d.ImmediateOrDropped(f, dropped)
		return
	}
	tool.Immediate(f)
}

// reportsDrops reports whether tool runs the fallback of a callback it
// drops and may run later callbacks after the drop: a TestTool, or a
// tool of another package that implements DropReporter.
func reportsDrops(tool asyncsteps.Tool) bool {
	if _, ok := tool.(*asyncsteps.TestTool); ok {
		return true
	}
	_, ok := tool.(DropReporter)
	return ok
}

// cleanVars calls the cleanup of every state variable allocated in the flow.
func (fc *flowCtx) cleanVars() {
	for _, v := range fc.vars {
		if !v.done {
			v.done = true
			v.gc.Stop() // reachable through fc.vars: its cleanup has not started
			v.run()
		}
	}
	fc.vars = nil
	fc.handling = nil
	fc.cleanFailed()
}

// cleanFailed cleans up the stack memory of failed steps, but that of the
// step whose error handler is about to run.
func (fc *flowCtx) cleanFailed() {
	kept := fc.failed[:0]
	for _, l := range fc.failed {
		if l == fc.handling {
			kept = append(kept, l) // cleaned when its handler returns
			continue
		}
		l.clean()
	}
	clear(fc.failed[len(kept):])
	fc.failed = kept
}

// sweep releases the nodes made by Binary whose Go step is over, its
// sub-steps included: a C sub-step it added through the pointer may read
// the step's stack memory, as the sub-steps of a C step may. A step the
// engine cannot follow (a decorator without Unwrap) is over once its
// handle is; after the loop's stop, once it was as the loop stopped (see
// valid): a step the stop left waiting is kept for its cancel handler.
func (fc *flowCtx) sweep() {
	kept := fc.external[:0]
	for _, n := range fc.external {
		if n.released.Load() {
			continue
		}
		if !n.valid() {
			if running, known := toolinfo.StepRunning(n.as); !known || !running {
				n.release()
				continue
			}
		}
		kept = append(kept, n)
	}
	clear(fc.external[len(kept):])
	fc.external = kept
}

// sweepLater posts a sweep of the nodes made by Binary, unless one is
// posted already. Binary on the loop calls it for a step through which the
// engine cannot watch the flow's end (see watchEnd): the step may be the
// flow's last with a C side, and then no later Binary or C step sweeps its
// node. The sweep runs after the step's callback has returned, when a step
// that did not wait is over. A dropped post sweeps once the loop has
// stopped, when no callback of the flow runs beside it. tool is the
// flow's. Loop only.
func (fc *flowCtx) sweepLater(tool asyncsteps.Tool) {
	if fc.sweepDue {
		return
	}
	fc.sweepDue = true
	sweep := func() {
		fc.sweepDue = false
		fc.sweep()
	}
	fc.post(tool, sweep, sweep)
}

// watchEnd has the nodes made by Binary released as the execution that
// as, a step of the flow, belongs to ends (see ended), so that a Go step
// that waits, and that Go ends (Success or Error from a goroutine, a
// timeout, a cancel, a closed loop), keeps its pointer no longer than its
// flow: no later C step or Binary of the flow may come to sweep it. It
// reports false when the engine cannot reach the step's flow (a decorator
// without Unwrap): the node then waits for the flow's next sweep. Loop
// only.
func (fc *flowCtx) watchEnd(as asyncsteps.AsyncSteps) bool {
	if fc.end.Fn == nil {
		fc.end.Fn = fc.ended
	}
	if !toolinfo.AtFlowEnd(as, &fc.end) {
		return false
	}
	fc.endTool = as.Tool()
	return true
}

// ended runs inside the engine as an execution of the flow ends, on the
// loop: every node of the flow's list of pointers given by Binary belongs
// to it, or to an earlier one, and their steps are all over, but on a
// closed loop, which ends its flows where they stand. It posts their
// release, so that the C cleanups of their stack memory run after the
// engine is done with the flow, as a callback of the loop, or once the
// loop has stopped; at most one of the two runs. A later execution of the
// Root, which may begin before the post runs, starts a list of its own.
//
// A loop that does not run the post has stopped, and it may have left
// steps waiting: the fallback releases them (see releaseStopped).
func (fc *flowCtx) ended() {
	defer func() { _ = recover() }() // a Tool's Immediate that panics: nothing to fail, inside the engine
	ended := fc.external
	fc.external = nil
	left := fc.left
	fc.left = false
	tool := fc.endTool
	fc.endTool = nil
	locks := fc.locks
	fc.locks = nil
	for _, l := range locks {
		l.o.release(l.h) // before a later execution of the Root may lock again
	}
	if len(ended) == 0 && !left {
		return
	}
	release := func() {
		for _, n := range ended {
			n.release() // idempotent: a sweep or a fallback may have come first
		}
	}
	var st *asyncsteps.State
	if left {
		st = fc.res.key.Value() // alive: the flow's steps hold it
	}
	fc.post(tool, release, func() { fc.releaseStopped(st, ended) })
}

// watchLeft has the engine run ended as the execution that as, a step of
// the flow, belongs to ends, for a C step left waiting (for an external
// event or for its sub-steps) in a flow whose stopped loop would leave it
// for good: the flow of a Go Root on a Loop that may close. A root made
// by C has its free for that (see rootObj.postRelease). Set once per
// execution; a step the engine cannot reach (over already) leaves it to
// the flow's next C step left. Loop only.
func (fc *flowCtx) watchLeft(as asyncsteps.AsyncSteps) {
	if fc.left || fc.owned || fc.loop == nil || fc.loop.neverCloses {
		return
	}
	fc.left = fc.watchEnd(as)
}

// releaseStopped releases what an execution of the flow left when its
// loop stopped, once no callback of the flow can run: in the fallback of
// the post of ended. ended are the nodes Binary made for the execution;
// st, if not nil, is the flow's state, in which C steps were left waiting
// too. Each step the stop left live goes with its C cancel handler, once
// (see leave), innermost first, a Go step given by Binary as a C step:
// either may hold C data that only its cancel handler frees. A flow whose
// free is to come (a root made by C, or a Go Root whose root pointer C
// holds) keeps its live steps for that free, which releases them all
// innermost first (see rootObj.postRelease), as it always has: a success
// that C gives a step after the loop stopped then still completes it, a
// lock it grants still counts as held, and a Go step's stack memory
// outlives its C sub-steps' cancel handlers, which may read it. Only the
// nodes of the Go steps that ended go now.
func (fc *flowCtx) releaseStopped(st *asyncsteps.State, ended []*node) {
	if fc.owned || fc.heldByC() {
		for _, n := range ended {
			if !n.released.Load() && !n.stepLive() {
				n.release()
			}
		}
		return
	}
	if st != nil {
		releaseLeft(st) // ended's nodes too: they are nodes of st
		return
	}
	leaveAll(ended)
}

// heldByC reports whether C holds a root pointer of the flow, given by
// Binary for its Go Root, that its free has not released.
func (fc *flowCtx) heldByC() bool {
	goRoots.mu.Lock()
	defer goRoots.mu.Unlock()
	for _, ro := range goRoots.m {
		if ro.node.flow.res.key == fc.res.key { // the same State
			return true
		}
	}
	return false
}

// of returns the flowCtx of the flow that as runs in, and rootID there.
// A step added in one flow runs in another when a Root is copied with it
// (Clone, CopyFrom): its C side is then that flow's own (its state
// variables, its loop, its rootId), not the model's, whose free must not
// clean up what the copy holds. Loop only.
func (fc *flowCtx) of(as asyncsteps.AsyncSteps, rootID int64) (*flowCtx, int64) {
	st := as.State()
	if fc.res.key.Value() == st {
		return fc, rootID
	}
	own := flowFor(st, as.Tool())
	return own, own.copiedID(fc, rootID)
}

// copiedID returns the rootId in fc, a copy of model's Root, of the steps
// whose rootId is id in model: fc's own for the model's, and one of fc's
// for each branch of the model's parallels. The copy and the model may
// run at once, and a rootId tells their flows apart (a sync entered
// through its lock function is reentrant per rootId).
func (fc *flowCtx) copiedID(model *flowCtx, id int64) int64 {
	if id == model.rootID {
		return fc.rootID
	}
	if own, ok := fc.branchIDs[id]; ok {
		return own
	}
	if fc.branchIDs == nil {
		fc.branchIDs = make(map[int64]int64)
	}
	own := newRootID()
	fc.branchIDs[id] = own
	return own
}

// branchRootID returns the rootId for as, a Go step whose callback runs
// on the loop: that of the parallel branch it runs in, which the branch's
// C steps have too, or the flow's. A step whose branch the engine cannot
// tell (a decorator without Unwrap) gets an id of its own: taken for the
// flow's, two branches' such steps would share a holder of a sync's lock
// function (safety over liveness, as a Mutex does for such a decorator).
func (fc *flowCtx) branchRootID(as asyncsteps.AsyncSteps) int64 {
	fresh := newRootID()
	id, known := toolinfo.BranchID(as, fresh)
	switch {
	case !known:
		return fresh
	case id != 0:
		return id
	}
	return fc.rootID
}

// linkIn returns the link, in fc, of the step of model that link joins to
// its error handler: link itself in model's own flow, and one of fc's in
// a copy of model's Root. The model and the copy may fail in the step at
// once, and each handler cleans up the stack memory of its own flow's step
// only. Loop only.
func (fc *flowCtx) linkIn(model *flowCtx, link *stepLink) *stepLink {
	if link == nil || fc == model {
		return link
	}
	if own, ok := fc.links[link]; ok {
		return own
	}
	if fc.links == nil {
		fc.links = make(map[*stepLink]*stepLink)
	}
	own := &stepLink{}
	fc.links[link] = own
	return own
}

// runC runs a C callback for the engine's step as, in the flow as runs in
// (see of): it makes the node given to C, converts the input args (when in
// is not nil), calls call, then settles the node (see finish).
func (fc *flowCtx) runC(as asyncsteps.AsyncSteps, rootID int64, in []any, setup func(*node), call func(bsi *C.FutoInAsyncSteps, args *C.FutoInArgs)) {
	fc, rootID = fc.of(as, rootID)
	if rootID != fc.rootID {
		// A step of a branch: a Go step of the branch given to C later
		// (Binary) gets the branch's rootId, not a new one.
		toolinfo.BranchID(as, rootID)
	}
	fc.repin()
	if len(fc.external) > 0 {
		fc.sweep()
	}
	if len(fc.failed) > 0 {
		fc.cleanFailed()
	}
	fc.handling = nil
	n := newNode(kindStep, as, fc, rootID)
	if setup != nil {
		setup(n)
	}
	var a *cArgs
	if in != nil {
		a = makeArgs(in, false)
		for _, v := range in {
			if c, ok := v.(*Custom); ok && c.v.owned && !c.v.done.Load() {
				n.inputs = append(n.inputs, c) // before C has the pointer: no lock
			}
		}
	}
	var args *C.FutoInArgs
	if a != nil {
		args = a.args
	}
	outer := fc.running
	fc.running, n.inCall = n, true
	call(n.bsi, args)
	fc.running, n.inCall = outer, false
	n.dropTaken(in, args)
	a.free()
	n.finish()
}

// finish settles a node whose callback has returned. A step that completed
// or failed in its callback, or returned without doing anything (an
// implicit success, or for an error handler a plain return) is over now. A
// step with sub-steps is over after them: a last sub-step releases it, and
// so does its cancel handler if an error or a cancel ends it early. A step
// that waits is released by the completion, its cancel handler, or the
// timeout.
func (n *node) finish() {
	p := n.pending
	n.pending = nil
	if n.held {
		n.held = false
		if p == nil {
			n.as.Success(n.deferred...)
		} else {
			dropArgs(n.deferred, n)
		}
		n.deferred = nil
	}
	switch {
	case p != nil:
		n.failing() // an error, Break or Continue: its error handler is next
	case n.completed:
		n.release()
	case n.added:
		n.waited = n.waited || n.waiting
		n.hookCancel()
		n.as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			n.release()
			as.Success(args...)
		})
		n.flow.watchLeft(n.as)
	case n.waiting:
		n.flow.watchLeft(n.as)
		// A completion from outside that claimed the step while its
		// callback ran claims the engine's step now, before the loop may
		// run a timer; one that comes after sees settled (see pin).
		n.settled.Store(true)
		if k := n.outside.Load(); k != 0 {
			n.pin(k)
		}
	default:
		n.release()
	}
	if p != nil {
		panic(p)
	}
}

// newLink returns the link of a step whose C error handler is eh; nil
// when it has none.
func newLink(eh unsafe.Pointer) *stepLink {
	if eh == nil {
		return nil
	}
	return &stepLink{}
}

// stepFn is the engine's step function of a C execute_callback.
func (fc *flowCtx) stepFn(rootID int64, f C.FutoInAsyncSteps_execute_callback, data C.uintptr_t, link *stepLink) asyncsteps.StepFunc {
	setup := func(n *node) { n.link = n.flow.linkIn(fc, link) }
	return func(as asyncsteps.AsyncSteps, args ...any) {
		if info := tooLongForC(args); info != "" {
			as.Error(asyncsteps.InternalError, "args of a C step: "+info)
			return
		}
		if args == nil {
			args = []any{}
		}
		fc.runC(as, rootID, args, setup, func(bsi *C.FutoInAsyncSteps, a *C.FutoInArgs) {
			C.cabi_call_exec(f, bsi, data, a)
		})
	}
}

// errFn is the engine's error handler of a C error_callback; nil for NULL.
// Once the handler has returned, the stack memory of the step it handles
// for is cleaned up.
func (fc *flowCtx) errFn(rootID int64, eh C.FutoInAsyncSteps_error_callback, data C.uintptr_t, link *stepLink) asyncsteps.ErrorFunc {
	if eh == nil {
		return nil
	}
	return func(as asyncsteps.AsyncSteps, code string) {
		own, rid := fc.of(as, rootID)
		l := own.linkIn(fc, link)
		own.handling = l
		own.runC(as, rid, nil, nil, func(bsi *C.FutoInAsyncSteps, _ *C.FutoInArgs) {
			cs := C.CString(code)
			defer C.free(unsafe.Pointer(cs))
			C.cabi_call_error(eh, bsi, data, cs)
			if l != nil {
				l.clean()
			}
		})
	}
}
