package asyncsteps

import (
	"fmt"
	"iter"
	"slices"
	"sync/atomic"
)

// ForEachLimit adds a step that calls f for each pair of seq, at most
// limit at once: errgroup's Go under SetLimit, for a flow. Each item runs
// as a branch of a Parallel (docs/DESIGN.md#foreachlimit): f gets the
// branch's AsyncSteps, adds the item's steps to it, and the flow's State
// is shared, as by any branch. The first limit pairs start as the step
// begins, in the sequence's order, and the next one each time a slot
// comes free; the step succeeds, with no args, once the sequence has run
// out and every item has ended. An empty sequence succeeds at once.
//
// The limit counts the work really running, as the slots of a [Mutex] do
// and as errgroup's SetLimit counts goroutines: an item holds its slot
// until it has ended and every [AsyncSteps.Await] function started inside
// it has returned. An item whose Await step a timeout or a cancel ended,
// and whose handlers recovered, has ended, but the function, which Go
// cannot stop, may still run: its slot comes free, and the next pair is
// taken, once it returns. The flow does not wait for such functions: an
// item's error goes to the step's handlers at once, and the step ends as
// soon as the sequence has run out and no item runs, though functions of
// ended items may still run; their slots matter only while the step runs.
// So that the step learns in time that the sequence has run out, one pair
// is pulled ahead when no item runs and every slot is held so; its item
// starts once a slot comes free (if the step ends first, the sequence is
// stopped with it, its yield returning false). Past the deadline of Run's
// context, a step that would wait for such a slot with no item running
// fails with Timeout at once, as a step that waits does.
//
// The sequence is pulled one pair at a time (iter.Pull2) on the flow's
// loop, as [AsyncSteps.ForEach] pulls an iter.Seq2, under the same rules:
// it runs as a callback of the loop, a panic in it (or in its cleanup at
// a Break) is an InternalError of the step, and it is stopped, its
// deferred cleanup run, once, however the step ends: when it runs out, at
// a Break, an error, a timeout, a cancel, the close of its Loop. Only the
// items running are held, not one per pair of the sequence, which may be
// endless.
// A sequence that waits (a range over a channel) blocks the loop, and
// every flow of it, while it waits: [ForEachChan] takes a channel's
// values as they arrive without blocking it.
//
// An error of an item that no handler of its own steps recovers from is
// the step's, as for a Parallel: it cancels the items running (their
// cancel handlers run), no further pair is taken, and onerror, the
// step's error handler, sees it first, then the handlers around the
// step. An unlabelled Continue in an item ends that item, as if it had
// succeeded: the next pair is taken. An unlabelled Break ends the item
// and stops the sequence (its cleanup runs then): no further pair is
// taken, the items running go on to their end, and the step then
// succeeds, unless one of them fails it. A labelled Break or Continue,
// meant for a loop around the step, leaves it as from a Parallel branch.
// A loop inside an item takes its own Break and Continue first.
//
// A nil seq or f, or a limit below 1, is a misuse, as a nil function
// given to Await: "ForEachLimit: nil sequence", "ForEachLimit: nil
// function", "ForEachLimit: limit must be at least 1 (0 given)". On a
// decorator (see [Unwrapper]) the step is added to the AsyncSteps it
// wraps, and f receives this package's AsyncSteps, as for [Retry]; an
// AsyncSteps of another package cannot hold the step, and its Error
// reports that. ForEachLimit returns as, to chain further steps.
func ForEachLimit[K, V any](as AsyncSteps, seq iter.Seq2[K, V], limit int, f func(as AsyncSteps, k K, v V), onerror ...ErrorFunc) AsyncSteps {
	if info := limitMisuse("ForEachLimit", "sequence", seq == nil, f == nil, limit); info != "" {
		return refuseNil(as, "ForEachLimit", info)
	}
	if refusedExtraHandlers(as, "ForEachLimit", onerror) {
		return as
	}
	d := &limitDef{limit: limit, bodyPC: funcPC(f)}
	d.items = func(p *frame) limitItems {
		items := &typedItems[K, V]{f: f}
		items.bind(p, seq)
		return items
	}
	return addLimit(as, "ForEachLimit", d, firstHandler(onerror))
}

// limitMisuse returns the misuse info of a ForEachLimit or ForEachChan
// (call) given a nil source (what it is) or function, or a limit below 1;
// "" when there is none.
func limitMisuse(call, source string, nilSource, nilFunc bool, limit int) string {
	switch {
	case nilSource:
		return call + ": nil " + source
	case nilFunc:
		return call + ": nil function"
	case limit < 1:
		return fmt.Sprintf("%s: limit must be at least 1 (%d given)", call, limit)
	}
	return ""
}

// addLimit adds the step of d to as, or to what the decorator as wraps,
// as Retry adds its loop; call names the helper.
func addLimit(as AsyncSteps, call string, d *limitDef, onerror ErrorFunc) AsyncSteps {
	if h := builtinHost(as, call); h != nil {
		h.push(builtinStep(d, onerror))
	}
	return as
}

// builtinHost returns where the helper call adds a step of the engine's
// own (a ForEachLimit's, a race's): as, or what the decorator as wraps. It
// returns nil when there is none, having failed as, an AsyncSteps of
// another package that cannot hold the step, or when that refused the
// step (see host.addRefused).
func builtinHost(as AsyncSteps, call string) host {
	h, ok := as.(host)
	if !ok {
		if h = unwrapHost(as); h == nil {
			as.Error(InternalError, fmt.Sprintf("%s: %T is not an AsyncSteps of this package", call, as))
			return nil
		}
	}
	if !h.adding() {
		h.addRefused(call)
		return nil
	}
	return h
}

// limitDef is the definition of a ForEachLimit step.
type limitDef struct {
	// items starts pulling the step's sequence, typed, for its frame p,
	// as an execution begins.
	items  func(p *frame) limitItems
	bodyPC uintptr // the entry address of the user's function, for AsyncStack
	limit  int
	// consumes is set when a pull takes the pair from others, as a
	// receive from a channel does: no pair is pulled ahead (see take), so
	// that none is taken that no slot can run, or lost as the step ends.
	consumes bool

	// first is the control of the definition's first execution, made with
	// it, as a loop's is (see loopDef.first).
	first      limitRun
	firstTaken atomic.Bool
}

// limitItems is the sequence of one execution of a ForEachLimit, pulled
// as a ForEach pulls its iter.Seq2 (see pulled), with the step of the
// item of each pair: a *typedItems[K, V] for the step's own types, so
// that an item costs its step function and no boxed pair. A ForEachChan's
// is a *chanItems[T], whose values may come later, from a goroutine.
type limitItems interface {
	// pull fetches the next pair for the step's frame f.
	pull(f *frame) pullOutcome
	stopAtBreak(f *frame) *Error
	stopOnLoop()
	// dropPair lets go of the pair pulled last, which no item will run.
	dropPair()
	// failure returns the error of the last pull, a panic or a Goexit in
	// the sequence, once, or nil.
	failure() *Error
	// item returns the step of the item of the pair pulled last.
	item() StepFunc
}

// pullOutcome is what a pull of a ForEachLimit's sequence found.
type pullOutcome uint8

const (
	pulledPair pullOutcome = iota // a pair, for item (or a failure)
	pulledNone                    // nothing: the sequence has run out, and is stopped
	// pulledLater: nothing yet; a goroutine waits for the next pair and
	// queues it on the loop (see itemArrival), where the step pulls again.
	pulledLater
)

// typedItems is the limitItems of a ForEachLimit over an iter.Seq2[K, V].
type typedItems[K, V any] struct {
	pulled[K, V]
	f func(as AsyncSteps, k K, v V)
}

func (t *typedItems[K, V]) pull(f *frame) pullOutcome {
	if t.pulled.pull(f) {
		return pulledPair
	}
	return pulledNone
}

func (t *typedItems[K, V]) failure() *Error {
	err := t.err
	t.err = nil
	return err
}

func (t *typedItems[K, V]) dropPair() {
	var zk K
	var zv V
	t.k, t.v = zk, zv
}

func (t *typedItems[K, V]) item() StepFunc {
	k, v, f := t.k, t.v, t.f
	t.dropPair() // the item holds the pair, the sequence no more
	return func(as AsyncSteps, _ ...any) {
		if lateItem(as) {
			return
		}
		f(as, k, v)
	}
}

func (d *limitDef) newControl() control {
	if !d.firstTaken.Load() && d.firstTaken.CompareAndSwap(false, true) {
		d.first.def = d
		return &d.first
	}
	return &limitRun{def: d}
}

// limitRun is one execution of a ForEachLimit: a Parallel whose branches,
// the items, are made one per pair of the sequence as slots come free, at
// most def.limit slots at once. Its frame has no sub-step of its own: the
// items are branch frames (modeBranch) queued on the loop, which the
// engine reaches through fanOutOf, as a Parallel's.
//
// A slot is an item running, or an item that has ended while Await
// functions started inside it still run, as a critical section keeps its
// Mutex slot for them (sectionwork.go): the item's itemWork counts them,
// and the last one to return gives the slot back through the loop.
type limitRun struct {
	parallelRun // the items: branches holds those made lately, pending those running
	def         *limitDef
	items       limitItems
	// at is the step API of the step's frame as the execution began: the
	// frame is the step's while it is the frame's (see running).
	at *stepAPI
	// held counts the slots of ended items kept by their Await functions.
	held int
	// taken is set once no further pair is taken: the sequence has run
	// out, an item raised Break or an error, or pulling failed.
	taken bool
	// ahead is set while a pair is pulled but its item not made: no item
	// ran, and the slots were all held, when it was pulled to learn
	// whether the sequence had run out (see take).
	ahead bool
	// ended is set, on the loop, once the step has ended: the slots no
	// longer matter, and the goroutines of the Await functions that held
	// them, which read it, give nothing back (see itemWork.release).
	ended atomic.Bool
}

func (lr *limitRun) begin(p *frame) *frame {
	lr.branches = lr.few[:0]
	lr.at = p.h
	lr.items = lr.def.items(p)
	p.rareFields().onCancel = cancelLimit
	return lr.take(p)
}

// cancelLimit is the cancel handler of a ForEachLimit's step, which an
// error, a timeout or a cancel ends: the slots no longer matter, and the
// sequence is stopped (a panic in its cleanup is one of a cancel handler).
func cancelLimit(as AsyncSteps) {
	lr := as.(*stepAPI).f.impl.(*limitRun)
	lr.end()
	lr.items.stopOnLoop()
}

// end notes that the step has ended, and lets go of a pair pulled ahead.
func (lr *limitRun) end() {
	lr.ended.Store(true)
	lr.dropAhead()
}

// letGo lets go of what the execution made, as its frame ends: the
// sequence, stopped by now (iter.Pull2 keeps its last pair), the items'
// step APIs and the frame's, which keep the flow. A model keeps the
// control of its step's first execution with the definition. The step
// has ended then, as the goroutines of Await functions still running in
// ended items find: they reach the flow through their itemWork, not at.
func (lr *limitRun) letGo() {
	lr.end()
	lr.parallelRun.letGo()
	lr.items, lr.at = nil, nil
}

// dropAhead lets go of the pair pulled ahead, if any: no item will run it
// (its yield returns false as the sequence is stopped).
func (lr *limitRun) dropAhead() {
	if lr.ahead {
		lr.ahead = false
		lr.items.dropPair()
	}
}

// running reports whether the step's frame p still runs lr's step: a
// task that reaches it from outside (see itemWork) checks it first. The
// frame is recycled once the step has ended, the step API never.
func (lr *limitRun) running(p *frame) bool {
	return p.h == lr.at && !p.over && !lr.at.fl.done
}

// free reports whether a slot is free for the next item.
func (lr *limitRun) free() bool { return int(lr.pending)+lr.held < lr.def.limit }

func (lr *limitRun) drained(*frame) bool { return false }

// catch takes nothing: a Break or Continue of an item comes to itemFailed,
// and one that unwinds from the step itself is meant for a loop around it.
func (lr *limitRun) catch(*frame, *Error) (*frame, bool) { return nil, false }

// take starts items, one per pair pulled, until every slot is taken or
// the sequence has run out, and completes the step once no item runs and
// none is left to take. When no item runs but every slot is held by the
// Await functions of ended items, it pulls one pair ahead, kept until a
// slot comes back: the step ends as soon as the sequence has run out,
// without waiting for those functions. A ForEachChan receives nothing
// ahead (see limitDef.consumes): it waits for the slot. A panic in the
// sequence fails the step as an item's error would. It returns where the
// flow goes on.
func (lr *limitRun) take(p *frame) *frame {
	for !lr.taken {
		if !lr.ahead {
			if !lr.free() && lr.pending > 0 {
				return nil // an item's end comes first
			}
			if !lr.free() && lr.def.consumes {
				return lr.waitForSlot(p) // a slot given back comes first
			}
			switch lr.items.pull(p) {
			case pulledNone:
				lr.taken = true // and the sequence stopped
				continue
			case pulledLater:
				return lr.waitForSlot(p) // for the pair, which the loop takes then
			}
			if err := lr.items.failure(); err != nil {
				return lr.failSeq(p, err)
			}
			lr.ahead = true
		}
		if !lr.free() {
			return lr.waitForSlot(p)
		}
		lr.ahead = false
		lr.start(p)
	}
	if lr.pending == 0 {
		lr.end()
		return p.h.fl.finish(p, nil)
	}
	return nil
}

// waitForSlot returns where the flow goes on while the step waits for a
// slot that the Await functions of ended items hold, or for the next
// value of a ForEachChan's channel: nowhere, unless Run's deadline has
// passed and no item runs. The step then waits for nothing
// of the flow's, and past the deadline a step that waits fails at once
// with Timeout, as the deadline's (see lateIteration).
func (lr *limitRun) waitForSlot(p *frame) *frame {
	fl := p.h.fl
	if lr.pending > 0 || fl.wait == nil || fl.wait.late == nil {
		return nil
	}
	fl.wait.late.timedOut(p)
	err := fl.deadlineError()
	fl.noteError(err, err)
	return fl.fail(p, err)
}

// fail fails the step with err, as the error of an item: the items
// running are cancelled, and no further pair is taken. faulted is as for
// flow.unwindFrom: err is a cancel handler's fault that no handler has
// seen yet.
func (lr *limitRun) fail(p *frame, err *Error, faulted bool) *frame {
	lr.taken = true
	return lr.branchFailed(p, err, faulted)
}

// failSeq fails the step with err, an error of its sequence (a panic or
// a Goexit in it, or in its cleanup at a Break), as fail does. The error
// is raised at the step, not in an item: its AsyncStack is recorded there,
// as an error raised by a step is, rather than left as an earlier error
// (or the Break of an item) recorded it.
func (lr *limitRun) failSeq(p *frame, err *Error) *frame {
	p.h.fl.noteStack(p)
	return lr.fail(p, err, false)
}

// afterGoexit goes on with the step after a Goexit in its sequence, or in
// the sequence's cleanup at a Break, ended the goroutine that pulled it
// (see pulled.afterGoexit): the step fails with the error kept.
func (lr *limitRun) afterGoexit(p *frame) *frame {
	return lr.failSeq(p, lr.items.failure())
}

// start makes the item of the pair just pulled, a branch frame that runs
// the item's step itself, and queues it behind the other work of the
// loop, as a Parallel queues its branches.
func (lr *limitRun) start(p *frame) {
	h := lr.newBranch(p, plainStep(lr.items.item(), nil), nil)
	lr.pending++
	lr.track(h)
	p.h.fl.requeue(h.f)
}

// track adds the item h to branches, the items that a cancel or a timeout
// of the step must reach. Those that have ended are dropped when the slice
// is full, and it grows when it would be more than half full without
// them, so that it holds about twice as many as run at once, not one per
// item, for a cost of one check per item.
func (lr *limitRun) track(h *stepAPI) {
	if len(lr.branches) == cap(lr.branches) {
		live := lr.branches[:0]
		for _, b := range lr.branches {
			if f := b.f; f.h == b && !f.over {
				live = append(live, b)
			}
		}
		clear(lr.branches[len(live):])
		lr.branches = live
		if 2*len(live) >= cap(live) {
			lr.branches = slices.Grow(live, cap(live))
		}
	}
	lr.branches = append(lr.branches, h)
}

// lateItem fails the item whose step as is with Timeout, and reports
// whether it did, once a timeout of Run's deadline has gone through an
// earlier item of its ForEachLimit (see lateIteration).
func lateItem(as AsyncSteps) bool {
	h := as.(*stepAPI)
	if w := h.fl.wait; w == nil || w.late == nil {
		return false // the common case, at the cost of two loads
	}
	return lateIteration(h, h.f.parent.impl.(*limitRun))
}

// itemDone takes the next pairs once the item b has succeeded.
func (lr *limitRun) itemDone(p, b *frame) *frame {
	lr.itemEnds(b)
	return lr.next(p)
}

// next takes the next pairs, unless the step has ended.
func (lr *limitRun) next(p *frame) *frame {
	if p.over {
		return nil
	}
	return lr.take(p)
}

// itemEnds counts out the item b, which has ended: its slot is free,
// unless Await functions started inside it still run; they then keep it,
// and the last of them to return gives it back (see itemWork). Called
// before b is recycled, which drops its rare part.
func (lr *limitRun) itemEnds(b *frame) {
	lr.pending--
	r := b.rare
	if r == nil || r.side == nil {
		return
	}
	w := &r.side.work
	r.side = nil
	lr.held++
	// The flow's unit, as a section's leave takes it back: no function
	// starts in b any more, so a count of zero cannot grow again.
	if w.work.Add(-1) == 0 {
		lr.held-- // they have all returned already
	}
}

// slotBack runs on the loop once the last Await function of an ended
// item has returned: its slot is free again, and the next pair is taken.
func (lr *limitRun) slotBack(w *itemWork) {
	if lr.wakes(w, w.fl) {
		lr.held--
		lr.goOn(w.fl)
	}
}

// wakes reports whether t, a task that another goroutine queued on the
// loop of lr's flow fl (a slot given back, a ForEachChan's value), finds
// the step running and may go on with it now; a task that a callback of
// the flow, driving its TestTool, runs is deferred until the callback
// returns.
func (lr *limitRun) wakes(t task, fl *flow) bool {
	if lr.ended.Load() {
		return false // and at let go of (see letGo)
	}
	if !lr.running(lr.at.f) {
		return false
	}
	if fl.inCall { // a callback of the flow drives its TestTool
		fl.deferTask(t)
		return false
	}
	return true
}

// goOn takes the next pairs in the task that woke the step (see wakes).
// The task, like a step, takes a turn: the flow lets other queued work
// run before its next step, unless bursts let it go on. The pull of the
// next pair runs in that turn, so that the flow goes on alike after a
// Goexit in it (see afterGoexit).
func (lr *limitRun) goOn(fl *flow) {
	fl.driving = true
	fl.steps(lr.take(lr.at.f), 1)
}

// itemWork counts the Await functions started inside one item of a
// ForEachLimit that have not returned, plus one for the item itself from
// the first of them until the item ends (see holdWork): the count of a
// critical section, for the item's slot. Whoever brings it to zero gives
// the slot back: the item's end (itemEnds), or the goroutine of the last
// function, which queues the itemWork on the flow's loop as the task that
// takes the next pair (slotBack), unless the step has ended meanwhile. A
// closing Loop drops that task, and ends the flow instead (see
// Loop.endDropped).
type itemWork struct {
	work atomic.Int32
	lr   *limitRun
	fl   *flow // the item's, which the step's end does not let go of (see letGo)
}

// itemWorkOf returns the count of the Await functions started inside the
// item whose branch frame f is, made now if none has started yet; nil
// when f is no item's. Loop goroutine only.
func itemWorkOf(f *frame) *itemWork {
	if f.mode != modeBranch {
		return nil
	}
	lr, ok := f.parent.impl.(*limitRun)
	if !ok {
		return nil
	}
	r := f.rareFields()
	if r.side == nil {
		r.side = &frameSide{work: itemWork{lr: lr, fl: f.h.fl}}
	}
	return &r.side.work
}

func (w *itemWork) release() {
	if w.work.Add(-1) == 0 && !w.lr.ended.Load() {
		if testHookSlotBackChecked != nil {
			testHookSlotBackChecked()
		}
		w.fl.sched.inject(w)
	}
}

// testHookSlotBackChecked, set by a test, runs in itemWork.release once
// the last function of an ended item has found the step running, before
// it queues the slot back.
var testHookSlotBackChecked func()

func (w *itemWork) run() { w.lr.slotBack(w) }

// stale reports whether the step has ended: its slot matters no more
// (see TestTool.inject).
func (w *itemWork) stale() bool { return w.lr.ended.Load() }

// itemFailed goes on after the item b unwound err: an unlabelled Continue
// ends it as a success would, an unlabelled Break too, once it has stopped
// the sequence; any other error is the step's, as a Parallel branch's
// (docs/DESIGN.md#foreachlimit), faulted as for flow.unwindFrom.
func (lr *limitRun) itemFailed(p, b *frame, err *Error, faulted bool) *frame {
	if err.Info != "" || err.Code != LoopBreak && err.Code != LoopCont {
		return lr.fail(p, err, faulted)
	}
	lr.itemEnds(b)
	p.h.fl.retire(b)
	if err.Code == LoopBreak && !lr.taken && !p.over {
		lr.taken = true // no pair is pulled ahead while an item runs
		if perr := lr.items.stopAtBreak(p); perr != nil {
			return lr.failSeq(p, perr)
		}
	}
	return lr.next(p)
}
