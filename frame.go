package asyncsteps

// This file holds frame, one running step of a flow, and its state
// machine (see the frame type and docs/DESIGN.md#frame-states).

// frame mode
const (
	modeStep    uint8 = iota // a step's callback and its sub-steps
	modeHandler              // an error handler that took over a failed step
	modeBranch               // the root of one parallel branch
	modeBase                 // the root of the flow
)

// frame is one running step: its callback, then its sub-steps. Frames are
// owned by the flow's loop goroutine and recycled through the loop's pool,
// by any flow of the loop; only the current step API's completion (args) is
// written by other goroutines, and only after a successful claim. A frame
// whose claim is still being written is never recycled (consumed is false).
// At 112 bytes it is within two cache lines: a parked flow is its Root
// (192 bytes, with its base frame), the frame of the waiting step and its
// step API.
//
// A frame's state is spread over its booleans (packed, so that the frame
// stays two cache lines), its queue and active sub-step, and its step API's
// state word (stepAPI.st): docs/DESIGN.md#frame-states is the state machine
// they encode, one incarnation after the other. consumed is orthogonal to
// it: no other goroutine may still write a completion into the frame, so
// that retire may recycle it.
type frame struct {
	// The fields every step touches come first: in the base frame, within
	// one cache line of the Root.
	active *frame // the sub-step running now
	mode   uint8

	over      bool // finished or unwound
	waiting   bool // suspended until an external completion
	consumed  bool // no other goroutine may still write to the frame
	succeeded bool // Success was called by the callback itself, args in args
	unstarted bool // a parallel branch frame whose own step has not run yet
	fast      bool // a parallel branch frame whose own step has not completed
	handling  bool // err is the error this handler frame handles, not one it raised

	queue  []step
	args   []any    // input of the next sub-step, then the frame's result
	h      *stepAPI // the current incarnation; h.fl is the frame's flow
	parent *frame
	// impl is what the frame runs: its step's StepFunc (kept in a handler
	// frame for AsyncStack), the control of a built-in step, or, once the
	// step has entered a critical section, the *section its sub-steps
	// share; see fn and ctl.
	impl any

	// rare holds what few steps have: an error handler, a cancel handler,
	// a timeout. Made on first use, and kept, cleared, when the frame is
	// recycled, so that the frame fits 112 bytes and the Root, with its
	// base frame, 192.
	rare *frameRare

	// err is the error the callback raised (Error, Break, Continue or a
	// panic) or, while handling is set, the error this handler frame
	// handles. A completion from outside the callback is written to args
	// (stClaim, with stFailed for an error, then stReady: see complete).
	err *Error
}

// frameRare is the part of a frame that few steps use.
type frameRare struct {
	onerror  ErrorFunc
	onCancel CancelFunc
	timer    *timerEntry
	await    *awaitCall // an Await step's call, which onCancel cancels
	// branchID is what package cabi keeps for a parallel branch frame
	// (see toolinfo.BranchID), cleared with the frame's rare part when
	// the branch is over and the frame is recycled.
	branchID int64
	// user is, for AsyncStack, the entry address of the user's function
	// that the step of a helper of this package runs, or engineStep for
	// a step of the helper's own (see runsFor); 0 for any other step.
	// It lasts until the frame is recycled, kept when an error handler
	// takes the frame over, so that the stack recorded at an error and
	// the frames it climbs agree.
	user uintptr
	// awaitUser is, in the step of a helper that runs the user's function
	// through an Await function of its own (AwaitThen), the entry address
	// of the user's function, which the Await step it adds takes as its
	// user as it starts (see nameHelpersAwait); 0 in any other frame.
	awaitUser uintptr
	// side holds what only two kinds of frame need, apart so that the
	// rare part keeps its size class: in the base frame of a flow that
	// package cabi runs to hold a lock for a step of another flow (see
	// toolinfo.HoldFor), the owner that the flow counts as for a Mutex;
	// on the branch frame of a ForEachLimit's item, the count of the
	// Await functions started inside the item, made as the first one
	// starts (see itemWorkOf). Nil for any other frame. The base frame's
	// rare part is dropped as each execution begins.
	side *frameSide
	// lent is set on a parallel branch frame that ownerKey gave out as a
	// key: a flow may hold a lock with it beyond the branch's end, so the
	// frame is never recycled for another branch, which would then count
	// as that holder (see recycleTo).
	lent bool
	// cancelRuns is set while the frame's cancel handler runs, and
	// cancelTold once a call it made on its AsyncSteps, which the ended
	// step refused, has been reported: one report per run (see
	// stepAPI.inCancel).
	cancelRuns, cancelTold bool
	// atWait is what package cabi runs as the step's callback returns
	// and the step begins to wait (see toolinfo.AtWait): once, cleared
	// then, when the step is released, and with the rare part when an
	// error handler takes the frame over or the frame is recycled.
	atWait func()
}

// frameSide is the part of a frameRare that only two kinds of frame use
// (see frameRare.side): a base frame one field, an item's branch frame
// the other.
type frameSide struct {
	holdsFor *frame
	work     itemWork
}

// userFn returns f's frameRare.user, or 0.
func (f *frame) userFn() uintptr {
	if r := f.rare; r != nil {
		return r.user
	}
	return 0
}

// nameHelpersAwait makes f, the frame of an Await step about to start,
// name for AsyncStack the user's function that the helper which added it
// runs through its own Await function (see frameRare.awaitUser).
func (f *frame) nameHelpersAwait() {
	if p := f.parent; p != nil && p.rare != nil && p.rare.awaitUser != 0 && f.userFn() == 0 {
		f.rareFields().user = p.rare.awaitUser
	}
}

// awaitPC is the entry address of the function of f's Await call, or 0
// when f is no Await step.
func (f *frame) awaitPC() uintptr {
	if r := f.rare; r != nil && r.await != nil {
		return funcPC(r.await.fn)
	}
	return 0
}

// engineStep is frameRare.user of a helper's step that runs none of the
// user's functions: AsyncStack leaves it out.
const engineStep = ^uintptr(0)

// rareFields returns f's rare part, made on first use.
func (f *frame) rareFields() *frameRare {
	if f.rare == nil {
		f.rare = new(frameRare)
	}
	return f.rare
}

// onerror returns f's error handler, or nil.
func (f *frame) onerror() ErrorFunc {
	if r := f.rare; r != nil {
		return r.onerror
	}
	return nil
}

// timer returns f's armed timeout, or nil.
func (f *frame) timer() *timerEntry {
	if r := f.rare; r != nil {
		return r.timer
	}
	return nil
}

// clearedRare returns f's rare part cleared for the frame's next use, or nil.
func (f *frame) clearedRare() *frameRare {
	r := f.rare
	if r != nil {
		*r = frameRare{}
	}
	return r
}

// fn returns the frame's step function, or nil.
func (f *frame) fn() StepFunc {
	fn, _ := f.impl.(StepFunc)
	return fn
}

// ctl returns the control of a built-in step's frame, or nil. A type switch
// on the three kinds is cheaper than asserting to the interface.
func (f *frame) ctl() control {
	switch c := f.impl.(type) {
	case *loopRun:
		return c
	case *parallelRun:
		return c
	case *limitRun:
		return c
	}
	return nil
}

// owner returns the frame that stands for the flow, or the parallel branch,
// that as runs in: what synchronization primitives count as one holder
// (spec 1.11.4). It is nil for a value that is not a running step. The
// base frame is never recycled, and a branch frame only once the branch has
// finished, after the primitives have let go of it (see flow.retire), or
// never if ownerKey gave it out, so the key is unique while it is held.
func owner(as AsyncSteps) *frame {
	h, ok := as.(*stepAPI)
	if !ok {
		if h = unwrapStep(as); h == nil {
			return nil
		}
	}
	o := ownerOf(h.f)
	if r := o.rare; r != nil && r.side != nil && r.side.holdsFor != nil {
		return r.side.holdsFor // a flow that holds on behalf of another's
	}
	return o
}

// ownerKey is toolinfo.OwnerKey: the owner of as, a step whose callback
// runs now, or nil. A branch frame given out is never recycled: the key
// stays that branch's, also once it has ended.
func ownerKey(as any) any {
	h := callingStep(as)
	if h == nil {
		return nil
	}
	return lend(owner(h))
}

// outerKeys is toolinfo.OuterKeys: the owners that the owner of as, a
// step whose callback runs now, was started from, the nearest first,
// each lent as ownerKey lends it.
func outerKeys(as any) []any {
	h := callingStep(as)
	if h == nil {
		return nil
	}
	var keys []any
	for p := outerOwner(owner(h)); p != nil; p = outerOwner(p) {
		keys = append(keys, lend(p))
	}
	return keys
}

// callingStep returns the step API of as, a step of this package or a
// decorator that unwraps to one, when its callback runs now and the
// caller runs on its loop; nil otherwise.
func callingStep(as any) *stepAPI {
	a, ok := as.(AsyncSteps)
	if !ok {
		return nil
	}
	h, ok := a.(*stepAPI)
	if !ok {
		h = unwrapStep(a)
	}
	// Only from the step's running callback: elsewhere its frames are the
	// loop's to change, and a branch's may be another branch's by then.
	// The goroutine is checked whatever the state: a C thread given the
	// pointer of a step that never waited sees the state of a running
	// callback, which inCallback takes for the loop's own call. It is
	// told as Error and Break tell it (onCallbackGoroutine): a Loop's
	// goroutine carries a mark, which costs a few instructions, where
	// IsSameThread reads the stack twice; redissync asks this at every
	// Sync of its Mutex, on the loop, between the flows a round trip
	// gathers. As for Error, a callback of another flow that is given as
	// passes for the step's own.
	if h == nil {
		return nil
	}
	if st := h.st.Load(); st&(stIdle|stDone) != 0 || !onCallbackGoroutine() {
		return nil
	}
	return h
}

// lend marks o, an owner given out as a key, so that a branch frame is
// never recycled for another branch, which would then count as o.
func lend(o *frame) *frame {
	if o.mode == modeBranch {
		o.rareFields().lent = true
	}
	return o
}

// holdFor is toolinfo.HoldFor: the flow of as, a step whose callback runs
// now, counts as key, an owner from ownerKey, for a Mutex until its
// execution ends. Only the base of the flow may stand for another owner:
// a parallel branch of it is a holder of its own.
func holdFor(as any, key any) bool {
	a, ok := as.(AsyncSteps)
	k, isFrame := key.(*frame)
	if !ok || !isFrame || k == nil {
		return false
	}
	h, ok := a.(*stepAPI)
	if !ok {
		h = unwrapStep(a)
	}
	if h == nil || h.st.Load()&(stIdle|stDone) != 0 {
		return false
	}
	o := ownerOf(h.f)
	if o.mode != modeBase {
		return false
	}
	o.rareFields().side = &frameSide{holdsFor: k}
	return true
}

// maxUnwrap bounds the chain of decorators unwrapStep follows, so that
// one whose Unwrap never ends (a cycle) cannot hang the loop.
const maxUnwrap = 64

// unwrapStep returns the step API that the decorator as wraps (see
// Unwrapper), directly or through other decorators, if that step's
// callback is running: the one that called the decorator, whose frame
// the loop's goroutine owns. It returns nil when as does not unwrap to a
// step API, or to one whose step has completed or waits outside its
// callback: nothing of its frame may be read then.
func unwrapStep(as AsyncSteps) *stepAPI {
	h, _ := unwrapHost(as).(*stepAPI)
	return h
}

// unwrapHost returns what the decorator as wraps, directly or through
// other decorators, when that holds steps of this package: a step API as
// unwrapStep finds it, a Root, or the value Parallel returns. It returns
// nil for anything else.
func unwrapHost(as AsyncSteps) host {
	for range maxUnwrap {
		u, ok := as.(Unwrapper)
		if !ok {
			return nil
		}
		as = u.Unwrap()
		switch h := as.(type) {
		case *stepAPI:
			if h == nil || h.st.Load()&(stIdle|stDone) != 0 {
				return nil
			}
			return h
		case host:
			return h
		}
	}
	return nil
}

// outerOwner returns the owner that the parallel branch o was started from,
// or nil when o is the whole flow.
func outerOwner(o *frame) *frame {
	if o.mode != modeBranch {
		return nil
	}
	return ownerOf(o.parent)
}

// branchID is toolinfo.BranchID: the id kept in the branch frame that as
// runs in, set to id if it had none.
func branchID(as any, id int64) (branch int64, known bool) {
	a, ok := as.(AsyncSteps)
	if !ok {
		return 0, false
	}
	h, ok := a.(*stepAPI)
	if !ok {
		h = unwrapStep(a)
	}
	if h == nil || h.st.Load()&(stIdle|stDone) != 0 {
		return 0, false // not a running step: its frame may be another's now
	}
	o := ownerOf(h.f)
	if o.mode != modeBranch {
		return 0, true
	}
	r := o.rareFields()
	if r.branchID == 0 {
		r.branchID = id
	}
	return r.branchID, true
}

func ownerOf(f *frame) *frame {
	for f.mode != modeBranch && f.mode != modeBase {
		f = f.parent
	}
	return f
}

// kill makes f's step API dead, noting whether another goroutine may still
// be writing a completion into f: one that claimed it but has not made it
// ready. Until then f must not be recycled. A step API whose completion is
// claimed and written is dead already (nothing accepts a second one), and
// costs no atomic write: the steps completed from outside all end so.
//
// It reports whether a Success from outside had claimed the step (written
// or not): the step has completed, though the loop, which kills it now,
// will not apply that completion (docs/DESIGN.md#cancel-handlers). The
// claim carries its kind, so the answer needs no wait for the writer; a
// Success that comes after the Or finds the step dead and counts for
// nothing.
func (f *frame) kill() (succeeded bool) {
	old := f.killState()
	return old&stDone == 0 && old&(stClaim|stFailed) == stClaim
}

// killState is kill, returning the state word of f's step API as it was
// before: whether, and how, another goroutine had claimed the completion
// by then, also one that came after the caller last read the word.
//
// A completion that Run's deadline found on its way (stLate) owes the
// deadline's timeout once it has run (see flow.completed); killed
// instead, the first kill queues that timeout, so that the flow still
// times out where it has got to. A dead step API, the word of every step
// that never waited, pays nothing for it; a step that waited, one test.
func (f *frame) killState() uint32 {
	st := f.h.st.Load()
	if st&stDone != 0 {
		return st
	}
	if st&(stClaim|stReady) == stClaim|stReady {
		// Not marked dead: only the first kill (f not consumed yet) owes.
		if st&stLate != 0 && !f.consumed {
			f.lateKilled()
		}
		f.consumed = true
		return st
	}
	old := f.h.st.Or(stIdle | stClaim | stDone)
	f.consumed = old&stClaim == 0 || old&stReady != 0
	if old&stLate != 0 {
		f.lateKilled()
	}
	return old
}

// lateKilled queues the deadline's timeout that the completion claimed on
// f's step API owed, as f is killed (see killState).
func (f *frame) lateKilled() {
	fl := f.h.fl
	fl.expireAfterClaim(fl.wait)
}

// timeOutWins decides between the timeout of the waiting step f and a
// completion from outside, in one atomic step: false if a completion has
// claimed the step (it wins: docs/DESIGN.md#timeouts); otherwise it makes
// the step API dead, so that no completion claims it while the timeout
// fails the step and runs its cancel handler, and reports true. A plain
// read of the state would leave a window between the decision and the
// kill that the unwinding makes later, in which a Success could be
// accepted and still see the step time out and its cancel handler run.
func (f *frame) timeOutWins() bool {
	for {
		st := f.h.st.Load()
		switch {
		case st&stDone != 0:
			return true
		case st&stClaim != 0:
			return false
		case f.h.st.CompareAndSwap(st, st|stIdle|stClaim|stDone):
			f.consumed = true // nothing claimed it: no writer
			return true
		}
	}
}

// stackPC is the entry address of the user's function that f runs, for
// AsyncStack, or 0 if it runs none: for a step of a helper (Then, Gather),
// the user's function it runs, if any (see runsFor); for an iteration of a
// loop, the loop's body; for an item of a ForEachLimit, the function given
// to it; for a step of a critical section, the function given to Sync (the
// engine's own steps around it are not the user's); for an Await step, its
// function (the engine's step runs it, whichever way it was added: see
// addAwait); else f's step function.
func (f *frame) stackPC() uintptr {
	if r := f.rare; r != nil && r.user != 0 {
		if r.user == engineStep {
			return 0
		}
		return r.user
	}
	if p := f.parent; p != nil {
		switch c := p.impl.(type) {
		case *loopRun:
			return c.bodyPC()
		case *limitRun:
			return c.def.bodyPC
		case *section:
			return funcPC(c.f)
		}
	}
	if pc := f.awaitPC(); pc != 0 {
		return pc
	}
	if fn := f.fn(); fn != nil {
		return funcPC(fn)
	}
	return 0
}
