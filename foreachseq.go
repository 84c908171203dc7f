package asyncsteps

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"runtime/debug"
)

// pulled is an iter.Seq2 that a ForEach pulls one pair per iteration
// (iter.Pull2), and a ForEachLimit one pair per item, so that an endless
// or huge sequence runs in constant memory and a Break, an error, a
// timeout, a cancel or the close of the loop stops it: its stop function
// runs, and with it the sequence's deferred cleanup. A ForEach pulls any
// pairs (a pulled[any, any]); a ForEachLimit its sequence's own types,
// which no pair is boxed for.
type pulled[K, V any] struct {
	next    func() (K, V, bool)
	stopSeq func()
	k       K // the pair of the current iteration, k and v
	v       V
	err     *Error // a panic or Goexit while pulling, raised by the iteration
	unbind  func() bool
	// live is the count of the Loop the sequence runs for (see
	// Loop.Wait), which the goroutine of iter.Pull2 is in until the
	// sequence's stop has returned; nil once counted out, or if not
	// counted.
	live     *awaitCalls
	finished bool
	// waiting holds the flow's events that waited for a pull that drove
	// the flow's TestTool into the flow, until a ForEach's iteration has
	// raised the error of that misuse (see leavePull).
	waiting []task
}

// isSeq2Value reports whether ForEach pulls c lazily: an iter.Seq2.
func isSeq2Value(c any) bool {
	if _, ok := c.(*State); ok {
		return false
	}
	return reflect.ValueOf(c).Kind() == reflect.Func
}

// pullSeq starts pulling the iter.Seq2 c, of any types, for the loop
// frame f.
func pullSeq(f *frame, c any) *pulled[any, any] {
	p := &pulled[any, any]{}
	p.start(f, anySeq(c))
	return p
}

// start starts pulling seq for the loop frame f. The sequence is stopped
// when f is cancelled (its cancel handler, which a panic in the sequence's
// cleanup ends as it would any cancel handler) or when the loop closes,
// which runs no cancel handler.
func (p *pulled[K, V]) start(f *frame, seq iter.Seq2[K, V]) {
	p.bind(f, seq)
	fl := f.h.fl
	f.rareFields().onCancel = func(AsyncSteps) {
		defer p.postWaiting(fl) // the loop ends before its iteration raised err
		p.stopOnLoop()
	}
}

// bind starts pulling seq for the frame f, a loop's or a ForEachLimit's,
// and stops it when the loop closes; f's cancel handler, which stops it
// when f is cancelled, is the caller's to set (a ForEachLimit's has more
// to do: see cancelLimit).
func (p *pulled[K, V]) bind(f *frame, seq iter.Seq2[K, V]) {
	if live := liveOf(f.h.fl.sched); live.enter() {
		p.live = live
	}
	p.next, p.stopSeq = iter.Pull2(asLoopCallback(stopOnFalse(seq), f.h.fl.sched))
	if life := f.h.fl.sched.lifetime(); life != nil {
		// The loop's goroutine runs no more tasks then: the stop runs
		// alone.
		p.unbind = context.AfterFunc(life, p.stop)
	}
}

// asLoopCallback returns seq as a callback of the Loop s, when s is one.
// iter.Pull2 runs the sequence on a goroutine of its own while the loop's
// goroutine waits for each pair, so the sequence is a callback of the loop
// (docs/DESIGN.md#what-a-callback-may-do-to-its-loop) on a goroutine
// without the loop's marks: it gets them for as long as it runs, so that
// Run and RunHelping called from it fail at once and Close does not wait
// (loopGoroutines), as they would block the loop for ever, and a fault in
// it panics (markLoopGoroutine).
func asLoopCallback[K, V any](seq iter.Seq2[K, V], s scheduler) iter.Seq2[K, V] {
	if t, ok := s.(*TestTool); ok {
		return asTestToolCallback(seq, t)
	}
	l, ok := s.(*Loop)
	if !ok {
		return seq
	}
	return func(yield func(K, V) bool) {
		markLoopGoroutine()
		id := goid()
		loopGoroutines.Store(id, l)
		defer loopGoroutines.Delete(id)
		seq(yield)
	}
}

// asTestToolCallback returns seq as a callback of the TestTool t. The
// goroutine of iter.Pull2 runs it while the goroutine that drives t, which
// pulled the pair, waits: while the sequence's code runs, that goroutine
// is the one driving t (IsSameThread), so that driving t from it is a
// nested call, as from a step, and Run of a flow of t fails at once;
// either waited for ever for the turn its puller holds. The driver gets
// the tool back at each yield, the one that pulls next (another
// goroutine may drive t by then) gives it again.
func asTestToolCallback[K, V any](seq iter.Seq2[K, V], t *TestTool) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		own := goid()
		driver := t.runner.Swap(own)
		defer func() { t.runner.Store(driver) }()
		seq(func(k K, v V) bool {
			t.runner.Store(driver)
			more := yield(k, v)
			driver = t.runner.Swap(own)
			return more
		})
	}
}

// anySeq returns c, an iter.Seq2 of any types, as an iter.Seq2[any, any].
func anySeq(c any) iter.Seq2[any, any] {
	switch s := c.(type) {
	case iter.Seq2[any, any]:
		return s
	case func(func(any, any) bool):
		return s
	}
	v := reflect.ValueOf(c)
	return func(yield func(any, any) bool) {
		y := reflect.MakeFunc(v.Type().In(0), func(in []reflect.Value) []reflect.Value {
			return []reflect.Value{reflect.ValueOf(yield(in[0].Interface(), in[1].Interface()))}
		})
		v.Call([]reflect.Value{y})
	}
}

// stopOnFalse returns seq with a yield that panics when called again after
// it returned false. A sequence that ignores that false and goes on
// yielding would otherwise make the stop of a Break spin forever on the
// loop's goroutine, as iter.Pull2's yield keeps returning false; a range
// over the sequence panics the same way.
func stopOnFalse[K, V any](seq iter.Seq2[K, V]) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		stopped := false
		seq(func(k K, v V) bool {
			if stopped {
				panic(errSeqContinued)
			}
			stopped = !yield(k, v)
			return !stopped
		})
	}
}

// errSeqContinued is the panic of a sequence that yields after its yield
// returned false.
var errSeqContinued = errors.New("asyncsteps: ForEach: the iter.Seq2 yielded again after yield returned false")

// pull fetches the next pair for the frame f, a loop's or a
// ForEachLimit's. It reports false when the sequence is exhausted (and
// stopped). A panic in the sequence is kept in err for f to raise; a
// Goexit in it ends the goroutine: the flow goes on at f on the next
// goroutine, which raises the error (see afterGoexit). So is the misuse
// of a sequence that drove its TestTool into the flow (see enterSeq),
// the pair it yielded dropped.
func (p *pulled[K, V]) pull(f *frame) (more bool) {
	fl := f.h.fl
	returned := false
	enterSeq(fl)
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			p.err = p.leavePull(f, raisedAtPull(f, panicError(r, debug.Stack())))
			p.finished = true
			more = true
			return
		}
		p.finished = true
		p.afterGoexit(f, p.leavePull(f, raisedAtPull(f, newGoexitError())))
	}()
	k, v, ok := p.next()
	if !ok {
		p.stop() // its cleanup may Goexit too
	}
	returned = true
	if err := p.leavePull(f, nil); err != nil {
		p.err = err
		return true
	}
	if !ok {
		return false
	}
	p.k, p.v = k, v
	return true
}

// enterSeq marks the flow fl as in a callback while its sequence runs,
// pulled or stopped at a Break, as while a step's callback runs: the
// sequence is a callback of the flow's tool (see asTestToolCallback), and
// a TestTool that it drives runs no event of the flow inside it, where
// the event would pull the sequence again, or stop it, from its own
// goroutine; they wait until it returns (see flow.deferTask). The engine
// pulls and stops a sequence between callbacks, never inside one; its
// cancel handler's stop runs inside callCancel, which marks the flow.
func enterSeq(fl *flow) { fl.inCall = true }

// leaveSeq ends what enterSeq began and returns err, the error of the
// sequence (a panic or a Goexit in it) or nil, or else the InternalError
// of the misuse if the sequence drove the TestTool into its flow: the
// events that waited are queued, and the step fails, as a step whose
// callback drove its tool does (see afterReentry).
func leaveSeq(fl *flow, err *Error) *Error {
	fl.inCall = false
	if !fl.reent {
		return err
	}
	c := &frame{err: err}
	fl.afterReentry(c)
	return c.err
}

// leavePull is leaveSeq for a pull by the frame f. A ForEachLimit raises
// the error as the pull returns; a ForEach in its next iteration, which
// may come a turn later: the events that waited stay in p.waiting until
// then (see postWaiting), so that the misuse is raised before they run,
// as a step's is, rather than hidden by a timeout that was due.
func (p *pulled[K, V]) leavePull(f *frame, err *Error) *Error {
	fl := f.h.fl
	if _, loop := f.impl.(*loopRun); !loop || !fl.reent {
		return leaveSeq(fl, err)
	}
	fl.inCall = false
	if err == nil {
		err = newReentryError() // recorded by the iteration too
	}
	p.waiting = fl.takeReentered()
	return err
}

// raisedAtPull records err, the fault of a pull by the frame f, where the
// pull raises it: a ForEachLimit's, as the pull returns. A ForEach raises
// it in the iteration that the pull queues, a turn later, and records it
// there (see eachIteration): a cancel that comes first, as a failed
// sibling branch's, ends the loop before it, and the StepError hook and
// the State are told nothing of an error nobody saw.
func raisedAtPull(f *frame, err *Error) *Error {
	if _, loop := f.impl.(*loopRun); !loop {
		f.h.fl.noteError(err, faultException(err))
	}
	return err
}

// postWaiting queues the events that waited for a pull that drove the
// flow's TestTool (see leavePull), once the iteration has raised its
// error, or the loop has ended without raising it.
func (p *pulled[K, V]) postWaiting(fl *flow) {
	for _, t := range p.waiting {
		fl.sched.post(t)
	}
	p.waiting = nil
}

// stopAtBreak stops the sequence as its loop frame f takes a Break, or
// as an item of the ForEachLimit frame f raises one. It returns the
// InternalError of a panic in the sequence's cleanup, for f to fail with,
// as a panic in the sequence fails it when it runs out. A Goexit in the
// cleanup ends the goroutine there, outside of any callback: the flow
// goes on, on the next goroutine, unwinding an InternalError from f, as
// after a Goexit in a cancel handler; a ForEachLimit's step fails with it
// as with an item's error, which first cancels the items running.
func (p *pulled[K, V]) stopAtBreak(f *frame) (err *Error) {
	fl := f.h.fl
	returned := false
	enterSeq(fl)
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			err = leaveSeq(fl, fl.panicked(r))
			return
		}
		gerr := leaveSeq(fl, fl.goexitError())
		if _, items := f.impl.(*limitRun); items {
			p.afterGoexit(f, gerr)
			return
		}
		// Raised at the loop, as a panic there is (see loopRun.catch):
		// its stack, not the Break's.
		fl.noteStack(f)
		fl.afterGoexit(&goexitResume{h: f.h, err: gerr, kind: resumeUnwind})
	}()
	p.stopOnLoop()
	returned = true
	return leaveSeq(fl, nil)
}

// afterGoexit queues what goes on with the flow at f, a loop's frame or a
// ForEachLimit's, once a Goexit in the sequence has ended the goroutine
// that pulled it: the loop's iteration, which raises err, or the
// ForEachLimit's take, which fails the step with it after cancelling the
// items running.
func (p *pulled[K, V]) afterGoexit(f *frame, err *Error) {
	p.err = err
	fl := f.h.fl
	if lr, ok := f.impl.(*loopRun); ok {
		lr.queueIteration(f)
		fl.afterGoexit(&goexitResume{h: f.h, kind: resumeIterate})
		return
	}
	fl.afterGoexit(&goexitResume{h: f.h, kind: resumeTake})
}

// stopOnLoop stops the sequence, once, on its flow's loop: a panic in its
// cleanup goes on to the caller, the engine, which reports it. The panic
// of a sequence that yields again after its yield returned false
// (errSeqContinued) is not one: the stop provoked it to end the sequence,
// which it did.
func (p *pulled[K, V]) stopOnLoop() {
	defer p.unbindLoop().exit() // once the cleanup has run, however it ends
	defer func() {
		if r := recover(); r != nil && r != errSeqContinued {
			panic(r)
		}
	}()
	p.stopSeq()
}

// stop stops the sequence, once; a panic in its cleanup is dropped: it
// runs where nobody would see it (the loop has closed) or after the
// sequence has run out.
func (p *pulled[K, V]) stop() {
	defer p.unbindLoop().exit() // once the cleanup has run, however it ends
	defer func() { _ = recover() }()
	p.stopSeq()
}

// unbindLoop ends the watch of the loop's close, once, and returns the
// count the sequence's goroutine is in, for its stop to count it out once
// the sequence has ended; nil the second time, or if not counted.
func (p *pulled[K, V]) unbindLoop() *awaitCalls {
	if p.unbind != nil {
		p.unbind()
		p.unbind = nil
	}
	live := p.live
	p.live = nil
	return live
}
