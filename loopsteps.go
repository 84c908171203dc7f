package asyncsteps

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/asyncsteps/asyncsteps/internal/misuse"
)

// loopDef is the definition of a Loop, Repeat, ForEach or Retry step.
// Exactly one of the bodies is set.
type loopDef struct {
	label  string
	count  int // Repeat: iterations; Loop: -1 (until Break)
	loopFn LoopFunc
	repFn  RepeatFunc
	eachFn ForEachFunc
	// collect is a ForEach's collection or, in a Retry's loopDef, the
	// retryDef that holds it (see retryOf): a field of its own would
	// make every loop's definition a larger block.
	collect any

	// first is the control of the definition's first execution, made with
	// it: most loops are added by the step that runs them, and run once,
	// so a loop costs one allocation, not two. A definition that runs
	// again (a step of a model Root, copied into its clones) makes one for
	// each later execution; clones may run on other loops at once, so the
	// first is claimed atomically.
	first      loopRun
	firstTaken atomic.Bool
}

func (d *loopDef) newControl() control {
	if !d.firstTaken.Load() && d.firstTaken.CompareAndSwap(false, true) {
		d.first.def = d
		return &d.first
	}
	return &loopRun{def: d}
}

// loopRun is one execution of a loop: its frame runs one iteration at a time
// as its only queued sub-step, and catches Break and Continue.
type loopRun struct {
	def *loopDef
	// count is the number of iterations, -1 until Break; in a Retry,
	// the current attempt's number plus one, so that an attempt that
	// succeeds ends it as a last iteration would, at no cost to the other
	// loops: retryFailed and Continue raise it while attempts are left.
	count int
	i     int
	items iterator
	seq   *pulled[any, any] // ForEach over an iter.Seq2: pulled one pair at a time
	pc    uintptr           // the entry address of the body, for AsyncStack; 0 until needed
	// queue holds the one queued iteration, the step of the loop's kind
	// that begin sets: the frame's queue is set to it for each iteration,
	// so that an iteration allocates no queue (popping a step leaves a
	// slice without capacity behind it, and the step in place).
	queue [1]step
}

func (lr *loopRun) begin(f *frame) *frame {
	lr.count = lr.def.count
	switch d := lr.def; {
	case d.retryOf() != nil:
		lr.queue[0] = retryStep
		lr.count = 1
	case d.repFn != nil:
		lr.queue[0] = plainStep(repeatIteration, nil)
	case d.loopFn != nil:
		lr.queue[0] = plainStep(loopIteration, nil)
	case isSeq2Value(d.collect):
		lr.queue[0] = plainStep(eachIteration, nil)
		lr.count = -1
		lr.seq = pullSeq(f, d.collect)
	default:
		items, err := snapshot(f, d.collect)
		if err != nil {
			return f.h.fl.fail(f, err)
		}
		lr.items, lr.count = items, items.len()
		lr.queue[0] = plainStep(eachIteration, nil)
	}
	return lr.next(f)
}

// next queues the next iteration, or completes the loop.
func (lr *loopRun) next(f *frame) *frame {
	if lr.count >= 0 && lr.i >= lr.count || lr.seq != nil && !lr.seq.pull(f) {
		return f.h.fl.finish(f, nil)
	}
	lr.queueIteration(f)
	return f
}

func (lr *loopRun) queueIteration(f *frame) {
	f.args = nil          // loop bodies get no incoming args
	f.queue = lr.queue[:] // begin put the iteration step there
}

func (lr *loopRun) drained(f *frame) bool {
	lr.i++
	if lr.count >= 0 && lr.i >= lr.count || lr.seq != nil && !lr.seq.pull(f) {
		return false
	}
	lr.queueIteration(f)
	return true
}

// letGo lets go of the collection's snapshot, or the sequence pulled,
// stopped by now (iter.Pull2 keeps its last pair), as the loop ends: the
// first execution's control lives as long as the definition.
func (lr *loopRun) letGo() { lr.items, lr.seq = nil, nil }

// catch takes a Break or Continue meant for this loop (docs/DESIGN.md#break-and-continue): an
// unlabelled one is meant for the innermost loop.
func (lr *loopRun) catch(f *frame, err *Error) (*frame, bool) {
	if err.Code != LoopBreak && err.Code != LoopCont {
		return nil, false
	}
	if err.Info != "" && err.Info != lr.def.label {
		return nil, false
	}
	if err.Code == LoopBreak {
		if lr.seq != nil {
			if perr := lr.seq.stopAtBreak(f); perr != nil {
				return f.h.fl.fail(f, perr), true
			}
		}
		return f.h.fl.finish(f, nil), true
	}
	if lr.def.retryOf() != nil {
		lr.count = min(lr.i+2, lr.def.count) // the next attempt, if one is left
	}
	lr.i++
	return lr.next(f), true
}

// bodyPC returns the entry address of the loop's body, looked up once:
// an error in each iteration would look it up again.
func (lr *loopRun) bodyPC() uintptr {
	if lr.pc == 0 {
		lr.pc = funcPC(lr.def.body())
	}
	return lr.pc
}

// body returns the function each iteration runs.
func (d *loopDef) body() any {
	switch {
	case d.loopFn != nil:
		return d.loopFn
	case d.repFn != nil:
		return d.repFn
	}
	return d.eachFn
}

// repeatIteration, loopIteration and eachIteration run the body of the
// current iteration of a Repeat, a Loop and a ForEach. They are plain
// functions, not method values of the loopRun: a method value would cost
// each loop an allocation. The iteration's frame is a sub-step of the
// loop's frame, whose control is the loopRun (see iterationOf).
func repeatIteration(as AsyncSteps, _ ...any) {
	lr := iterationOf(as)
	if lateIteration(as.(*stepAPI), lr) {
		return
	}
	lr.def.repFn(as, lr.i)
}

func loopIteration(as AsyncSteps, _ ...any) {
	lr := iterationOf(as)
	if lateIteration(as.(*stepAPI), lr) {
		return
	}
	lr.def.loopFn(as)
}

// iterationOf returns the loopRun whose iteration as runs.
func iterationOf(as AsyncSteps) *loopRun { return as.(*stepAPI).f.parent.impl.(*loopRun) }

func eachIteration(as AsyncSteps, _ ...any) {
	lr := iterationOf(as)
	h := as.(*stepAPI)
	if lr.seq != nil && lr.seq.err != nil {
		// Pulling this pair failed: the iteration raises it, and records
		// it as raised now (see raisedAtPull).
		h.fl.noteError(lr.seq.err, faultException(lr.seq.err))
		h.f.err, h.f.handling = lr.seq.err, false
		lr.seq.err = nil
		lr.seq.postWaiting(h.fl) // they come after the error, as after a step's
		return
	}
	if lateIteration(h, lr) {
		return
	}
	if lr.seq == nil {
		k, v := lr.items.at(lr.i)
		lr.def.eachFn(as, k, v)
		return
	}
	lr.def.eachFn(as, lr.seq.k, lr.seq.v)
}

func addLoop(h host, fn LoopFunc, label []string) AsyncSteps {
	return addLabelled(h, fn == nil, "Loop", len(label), &loopDef{label: firstLabel(label), count: -1, loopFn: fn})
}

func addRepeat(h host, count int, fn RepeatFunc, label []string) AsyncSteps {
	return addLabelled(h, fn == nil, "Repeat", len(label), &loopDef{label: firstLabel(label), count: max(count, 0), repFn: fn})
}

func addForEach(h host, collection any, fn ForEachFunc, label []string) AsyncSteps {
	if h.adding() && !iterable(collection) {
		h.misuse(fmt.Sprintf("ForEach: cannot iterate over %T", collection))
		return h
	}
	return addLabelled(h, fn == nil, "ForEach", len(label), &loopDef{label: firstLabel(label), eachFn: fn, collect: collection})
}

// addLabelled is addLoopDef for a loop given labels of which it takes one
// at most.
func addLabelled(h host, nilBody bool, call string, labels int, d *loopDef) AsyncSteps {
	if info := misuse.ExtraArgs(call, "label", labels); info != "" && !nilBody && h.adding() {
		h.misuse(info)
		return h
	}
	return addLoopDef(h, nilBody, call, d)
}

func addLoopDef(h host, nilBody bool, call string, d *loopDef) AsyncSteps {
	if !h.adding() {
		h.addRefused(call)
		return h
	}
	if nilBody {
		h.misuse(call + ": nil body function")
		return h
	}
	return h.push(builtinStep(d, nil))
}

// iterator gives ForEach random access to a snapshot of its collection.
type iterator interface {
	len() int
	at(i int) (key, value any)
}

// pairs is a collected snapshot: a map in key order, a State.
type pairs []struct{ k, v any }

func (p pairs) len() int            { return len(p) }
func (p pairs) at(i int) (any, any) { return p[i].k, p[i].v }
func (p *pairs) add(k, v any)       { *p = append(*p, struct{ k, v any }{k, v}) }

// sliceItems reads a slice or array in place, keyed by index.
type sliceItems struct{ v reflect.Value }

func (s sliceItems) len() int            { return s.v.Len() }
func (s sliceItems) at(i int) (any, any) { return i, s.v.Index(i).Interface() }

// iterable reports whether ForEach supports c (see [AsyncSteps.ForEach]).
func iterable(c any) bool {
	if s, ok := c.(*State); ok {
		return s != nil
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return true
	case reflect.Func:
		return isSeq2(v.Type()) && !v.IsNil()
	}
	return false
}

// isSeq2 reports whether t has the shape of iter.Seq2[K, V].
func isSeq2(t reflect.Type) bool {
	if t.NumIn() != 1 || t.NumOut() != 0 {
		return false
	}
	y := t.In(0)
	return y.Kind() == reflect.Func && y.NumIn() == 2 && y.NumOut() == 1 && y.Out(0).Kind() == reflect.Bool
}

// snapshot returns iterate(c), or the InternalError of a panic in it: the
// String method of a map's keys is user code, run here, for the loop frame
// f, outside any step's callback. One that calls runtime.Goexit ends the
// goroutine here: f then fails with the InternalError on the next one. An
// iter.Seq2 is not snapshot but pulled (see pulled).
func snapshot(f *frame, c any) (items iterator, err *Error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		fl := f.h.fl
		if r := recover(); r != nil {
			items, err = nil, fl.panicked(r)
			return
		}
		f.err, f.handling = fl.goexitError(), false
		fl.afterGoexit(&goexitResume{h: f.h, kind: resumeSettle})
	}()
	items = iterate(c)
	returned = true
	return items, nil
}

// iterate snapshots c when the loop starts: slices are read in place, maps
// in sorted key order, a *State is collected in full.
func iterate(c any) iterator {
	if s, ok := c.(*State); ok {
		var p pairs
		for _, name := range s.names() {
			p.add(name, s.Get(name))
		}
		return p
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		return sliceItems{v}
	default:
		return mapItems(v)
	}
}

// mapItems reads the map's entries as they are, rather than looking each
// key up again, which finds nothing for a NaN key.
func mapItems(v reflect.Value) pairs {
	type entry struct{ k, v reflect.Value }
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		entries = append(entries, entry{it.Key(), it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := compareKeys(a.k, b.k); c != 0 {
			return c
		}
		return compareTied(a.k, a.v, b.k, b.v)
	})
	p := make(pairs, 0, len(entries))
	for _, e := range entries {
		p.add(e.k.Interface(), e.v.Interface())
	}
	return p
}

// compareKeys orders map keys: by value for ordered kinds, by their printed
// form otherwise, so that runs are reproducible.
func compareKeys(a, b reflect.Value) int {
	switch a.Kind() {
	case reflect.String:
		return cmp.Compare(a.String(), b.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp.Compare(a.Int(), b.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmp.Compare(a.Uint(), b.Uint())
	case reflect.Float32, reflect.Float64:
		return cmp.Compare(a.Float(), b.Float())
	}
	return cmp.Compare(fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface()))
}

// compareTied orders two entries whose keys compareKeys finds equal, which
// distinct keys of a map can be: NaN keys, or keys of an interface type
// that print alike (1 and "1" in a map[any]V). By the keys' types, then
// their Go syntax, then the values', so that the order the map happened
// to give them does not show in the loop.
func compareTied(ak, av, bk, bv reflect.Value) int {
	a, b := ak.Interface(), bk.Interface()
	if c := cmp.Compare(fmt.Sprintf("%T", a), fmt.Sprintf("%T", b)); c != 0 {
		return c
	}
	if c := cmp.Compare(fmt.Sprintf("%#v", a), fmt.Sprintf("%#v", b)); c != 0 {
		return c
	}
	return cmp.Compare(fmt.Sprintf("%#v", av.Interface()), fmt.Sprintf("%#v", bv.Interface()))
}
