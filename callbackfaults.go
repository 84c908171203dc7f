package asyncsteps

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/asyncsteps/asyncsteps/internal/misuse"
	"github.com/asyncsteps/asyncsteps/internal/printsafe"
)

// This file holds what keeps a loop alive under callbacks that misbehave:
// runtime.Goexit, panic values that panic when printed, a TestTool driven
// from inside a callback of its own flow.

// goexitInfo is the info of the InternalError a callback raises by calling
// runtime.Goexit (what t.FailNow, t.Fatal and t.SkipNow call).
const goexitInfo = misuse.GoexitInfo

// goexitError records and returns the InternalError of a Goexit.
func (fl *flow) goexitError() *Error {
	err := newGoexitError()
	fl.noteError(err, err)
	return err
}

// newGoexitError returns the InternalError of a Goexit, not recorded yet.
func newGoexitError() *Error { return &Error{Code: InternalError, Info: goexitInfo} }

// completeOrFail runs complete, a completion of the step h through user
// code (a decorator's Success, a hook), on the flow's loop. If that code
// panics or calls runtime.Goexit, h fails with an InternalError instead,
// as after the same in an Await function: a step left waiting would hang
// its flow, and a step let into a gate would hold its slot for ever.
func completeOrFail(h *stepAPI, complete func()) {
	returned := false
	defer func() {
		if returned {
			return
		}
		h.complete(callbackFault(recover()))
	}()
	complete()
	returned = true
}

// callbackFault returns the InternalError with which a completion through
// user code that did not return fails its step: r is what recover
// returned, a panic's value, or nil for a runtime.Goexit.
func callbackFault(r any) *Error {
	if r != nil {
		return awaitError(&PanicError{Value: r, Stack: debug.Stack()})
	}
	return newGoexitError()
}

// goexitPending reports whether err, the InternalError of a recovered
// panic, was raised by a deferred call that runtime.Goexit was running: Go
// resumes the Goexit once the panic is recovered, so the goroutine ends
// all the same, and the flow must go on from the next one as after a
// plain Goexit. Nothing else tells a recovered panic from one raised
// during a Goexit; the stack recorded with the panic does: Goexit runs
// the deferred calls from its own frame, which tracebacks show.
func goexitPending(err *Error) bool {
	p, ok := err.Cause.(*PanicError)
	return ok && inGoexit(p.Stack)
}

// inGoexit reports whether stack, the traceback of a recovered panic,
// shows runtime.Goexit running the deferred call that panicked.
func inGoexit(stack []byte) bool { return bytes.Contains(stack, []byte("\nruntime.Goexit(")) }

// afterGoexit queues t to run before any other task of the tool: the
// goroutine that runs the tool's tasks is ending with runtime.Goexit, and t
// is the rest of what it was doing. A Loop goes on with a new goroutine;
// a TestTool runs t when it is driven again.
//
// t goes on in the turn the goroutine was in, as after a panic: cut off
// while drive ran the flow's steps, the flow lets other queued work run
// before its next step, as drive does after any step; cut off in a task
// before its drive (the handlers run at a timeout, at a completion, at a
// cancel), it takes its next step at once, as that task would have.
func (fl *flow) afterGoexit(t resumption) {
	t.cutOff(fl.driving)
	fl.driving = false // the drive, if any, ended with the goroutine
	fl.sched.postFirst(t)
}

// A resumption is a task that afterGoexit queues: it goes on with a flow
// where a Goexit ended the goroutine, in the turn it ended (goexitTurn).
type resumption interface {
	task
	cutOff(inDrive bool)
}

// goexitTurn is embedded in every resumption: whether the goroutine that
// the Goexit ended was driving the flow's steps.
type goexitTurn struct{ inDrive bool }

func (g *goexitTurn) cutOff(inDrive bool) { g.inDrive = inDrive }

// resume starts what goes on with fl in the turn g records: the work that
// the resumption does before the flow's next step (settling, unwinding,
// cancel handlers) runs as in that turn, so that a Goexit in it is
// resumed alike.
func (g *goexitTurn) resume(fl *flow) { fl.driving = g.inDrive }

// goOn drives fl on from f in the turn g records: n steps into the drive
// that the Goexit cut off, or at the start of one.
func (g *goexitTurn) goOn(fl *flow, f *frame) {
	n := 0
	if g.inDrive {
		n = 1
	}
	fl.steps(f, n)
}

// postFirst queues t before every queued task. Loop goroutine only.
func (l *Loop) postFirst(t task) { l.local.pushFront(t) }

// postFirst queues t before every queued task.
func (t *TestTool) postFirst(tk task) {
	t.mu.Lock()
	t.queue.pushFront(t.entry(tk))
	t.count(tk)
	t.mu.Unlock()
}

// pushFront queues v before every queued value.
func (r *fifo[T]) pushFront(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = v
	r.n++
}

// Resumptions after a Goexit: what the engine was about to do when the
// callback ended the goroutine.
const (
	resumeSettle      uint8 = iota // look at how the callback of f ended
	resumeUnwind                   // go on unwinding err from f
	resumeCancelFault              // as resumeUnwind, err being the fault of f's cancel handler
	resumeTake                     // fail the ForEachLimit f, whose sequence ended it
	resumeIterate                  // go on with the loop f, whose sequence ended it
)

// goexitResume continues a flow after a callback of it called Goexit.
type goexitResume struct {
	h   *stepAPI // f's incarnation when the callback ran
	err *Error
	goexitTurn
	kind uint8
}

func (r *goexitResume) run() {
	fl := r.h.fl
	if !r.current() {
		return // the flow has moved on meanwhile (cancelled)
	}
	f := r.h.f
	if fl.inCall {
		fl.deferTask(r)
		return
	}
	r.resume(fl)
	switch r.kind {
	case resumeSettle:
		f = fl.settle(f)
	case resumeUnwind:
		f = fl.unwind(f, r.err)
	case resumeCancelFault:
		f = fl.unwindFrom(f, r.err, true)
	case resumeTake:
		f = f.impl.(*limitRun).afterGoexit(f)
	case resumeIterate:
		// f itself: the iteration queued raises the error.
	}
	r.goOn(fl, f)
}

// current reports whether the flow is still where the Goexit left it.
func (r *goexitResume) current() bool {
	f := r.h.f
	return f.h == r.h && !f.over && !r.h.fl.done
}

// cancelJob runs the cancel handlers of a tree of frames, innermost first,
// without recursion: a flow nested a million levels deep is cancelled
// like a shallow one. Once done, it calls then, whose frame is where the
// flow goes on. A job is a task too: after a Goexit in a cancel handler it
// goes on from where it was on the next goroutine.
type cancelJob struct {
	fl     *flow
	frames []*frame // in the order their cancel handlers run
	then   func() *frame
	// next counts the frames done, frames[:next]; an int32, so that the
	// job keeps its size class with the turn (a flow is nested far less
	// than 2^31 levels deep: each level takes a frame).
	next int32
	goexitTurn
	// fault is the cancel handler's fault that no handler has seen and
	// that then unwinds (a failed Parallel branch's), or nil: a Close of
	// the loop that drops the job after a Goexit logs it (see
	// Loop.endDropped). Only jobs that cancel pay for the word.
	fault *Error
}

// cancelOrder appends to dst the frames of the tree under top, top
// included, in the order the cancel handlers run: for each frame, the
// branches of its Parallel (or the items of its ForEachLimit) in order,
// then its running sub-step, then the
// frame itself. It walks the tree with a stack of its own, visiting each
// frame before its children, the last child first; the reverse of that
// order is the one wanted.
func cancelOrder(dst []*frame, top *frame) []*frame {
	start := len(dst)
	work := []*frame{top}
	for len(work) > 0 {
		f := work[len(work)-1]
		work = work[:len(work)-1]
		dst = append(dst, f)
		if pr := fanOutOf(f); pr != nil {
			for _, h := range pr.branches {
				if b := h.f; b.h == h && !b.over {
					work = append(work, b)
				}
			}
		}
		if f.active != nil {
			work = append(work, f.active)
		}
	}
	slices.Reverse(dst[start:])
	return dst
}

// finish runs the cancel handlers left and returns then's frame. An
// error raised before the job, which it follows (the panic of a
// ForEachLimit's sequence, which cancels the items), is told to the
// StepError hook before the cancel handlers run, as the error of an item
// is before the others are cancelled.
func (j *cancelJob) finish() *frame {
	fl := j.fl
	if fl.hasUnreported() {
		fl.reportErrors(resumePoint{job: j})
	}
	for int(j.next) < len(j.frames) {
		// A frame whose cancel handler ended with Goexit is done again
		// from here: its handler is gone, so that costs nothing twice.
		f := j.frames[j.next]
		f.dropQueue()
		f.active = nil
		f.waiting = false
		fl.callCancel(f, j, nil) // a panic in it is recorded; nothing is left to fail
		fl.release(f)
		fl.retire(f)
		j.next++
		if fl.hasUnreported() {
			fl.reportErrors(resumePoint{job: j})
		}
	}
	j.frames = nil
	then := j.then
	if then == nil {
		return nil
	}
	// Once only: a job queued to go on after a Goexit may also have been
	// finished by the goroutine it was queued from (see goexitPending).
	j.then, j.fault = nil, nil
	return then()
}

func (j *cancelJob) run() {
	if j.fl.inCall {
		j.fl.deferTask(j)
		return
	}
	j.resume(j.fl)
	j.goOn(j.fl, j.finish())
}

// cancelFrames cancels the trees under tops, in order, then goes on with
// then (nil: nothing). It returns where the flow goes on.
func (fl *flow) cancelFrames(then func() *frame, tops ...*frame) *frame {
	return fl.newCancelJob(then, tops...).finish()
}

// newCancelJob returns the job that cancels the trees under tops, in
// order, then goes on with then (see cancelFrames).
func (fl *flow) newCancelJob(then func() *frame, tops ...*frame) *cancelJob {
	var buf [8]*frame
	frames := buf[:0]
	for _, top := range tops {
		frames = cancelOrder(frames, top)
	}
	return &cancelJob{fl: fl, frames: frames, then: then}
}

// Re-entrance: a callback that drives its own TestTool (NextEvent, Advance,
// Run) would run tasks of its own flow inside itself, and the flow would
// go on under the callback's feet. Such a task waits until the callback
// returns, and the callback's step fails with an InternalError.

const reentryInfo = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): " +
	"its own events wait until the callback returns"

// reentered holds the tasks of flows that were run from inside a callback
// of their own flow, by flow. It is used on the misuse path only.
var reentered sync.Map // *flow -> *[]task

// deferTask keeps t until the running callback of fl returns.
func (fl *flow) deferTask(t task) {
	fl.reent = true
	v, _ := reentered.LoadOrStore(fl, new([]task))
	p := v.(*[]task)
	*p = append(*p, t)
}

// afterReentry fails c, whose callback drove the tool into its own flow,
// and queues the tasks that waited for the callback to return.
func (fl *flow) afterReentry(c *frame) {
	if c.err == nil || c.handling {
		c.err, c.handling = fl.reentryError(), false
	}
	fl.endReentry()
}

// reentryError returns the InternalError of a callback of fl that drove
// the tool into its own flow, noted as raised.
func (fl *flow) reentryError() *Error {
	err := newReentryError()
	fl.noteError(err, err)
	return err
}

// newReentryError returns the InternalError of a callback that drove the
// tool into its own flow, not recorded yet.
func newReentryError() *Error { return &Error{Code: InternalError, Info: reentryInfo} }

// endReentry queues the tasks that waited for the callback of fl that
// drove the tool into its own flow to return.
func (fl *flow) endReentry() {
	for _, t := range fl.takeReentered() {
		fl.sched.post(t)
	}
}

// takeReentered returns the tasks that wait for the callback of fl that
// drove the tool into its own flow, for the caller to queue them.
func (fl *flow) takeReentered() []task {
	fl.reent = false
	if v, ok := reentered.LoadAndDelete(fl); ok {
		return *v.(*[]task)
	}
	return nil
}

// loopGoroutines holds the goroutine ids of the running Loops, so that
// Close called from a callback of any Loop does not wait: two loops
// closing each other from their callbacks would wait for each other.
var loopGoroutines sync.Map // int64 -> *Loop

// onSomeLoop reports whether the caller runs on the goroutine of a Loop.
func onSomeLoop() bool {
	_, ok := loopGoroutines.Load(goid())
	return ok
}

// enterGoroutine registers the calling goroutine as l's and returns its id.
func (l *Loop) enterGoroutine() int64 {
	id := goid()
	loopGoroutines.Store(id, l)
	return id
}

// leaveGoroutine runs when l's goroutine ends. Unless the loop ended, a
// callback called runtime.Goexit: the loop goes on with a new goroutine
// (the tasks that were left to run are all in the loop's queues), which
// is then the loop's own for IsSameThread, and counts for Wait in its
// place.
func (l *Loop) leaveGoroutine(ended *bool) {
	loopGoroutines.Delete(l.gid.Load())
	if !*ended {
		go l.run()
		return
	}
	l.awaitCalls.exit() // the loop's goroutine: last, see Loop.Wait
}

// endParked ends the flows of a closing loop that wait for another
// goroutine: those whose Await calls are in flight, and those it noted
// when they parked with nothing of the loop's holding them (see
// flow.noteParked). The loop holds the latter weakly, so that a flow that
// waits and that nothing else refers to is collected. A waiter's flows
// are ended by endAwaited, a step timer's by endTimed.
func (l *Loop) endParked() {
	for _, fl := range l.awaitCalls.flows() {
		if !fl.done {
			l.endClosed(fl)
		}
	}
	for _, p := range l.engine.parked {
		if fl := p.Value(); fl != nil && !fl.done {
			l.endClosed(fl)
		}
	}
	l.engine.parked = nil
}

// endTimed ends the flows that the closing loop's step timers held. A flow
// that waits with a timeout is not noted as parked (see flow.noteParked):
// its timer holds it, and would have ended it. Each is taken out before
// it is ended: the goroutine that goes on after an unhandled-error
// function's Goexit ends the rest.
func (l *Loop) endTimed() {
	for len(l.timedAtClose) > 0 {
		fl := l.timedAtClose[0]
		l.timedAtClose = l.timedAtClose[1:]
		if !fl.done {
			l.endClosed(fl)
		}
	}
	l.timedAtClose = nil
}

// endDropped ends the flow that t, a task the closing loop drops, would
// have continued: a flow between two steps is referred to by its queued
// continuation only. A cancel handler's fault that t would have unwound,
// which no handler has seen, is logged first: the flow ends with "the
// flow's loop is closed", and no handler ever sees it (see
// flow.unwindFrom).
func (l *Loop) endDropped(t task) {
	var fl *flow
	switch t := t.(type) {
	case *stepAPI:
		fl = t.fl
	case *baseResume:
		fl = (*flow)(t)
	case *goexitResume:
		fl = t.h.fl
		if t.kind == resumeCancelFault && t.current() {
			logCancelFault(t.err)
		}
	case *unwindResume:
		fl = t.fl
		if t.faulted && t.current() {
			logCancelFault(t.err)
		}
	case *foreignFailure:
		fl = t.h.fl
	case *cancelJob:
		fl = t.fl
		if t.fault != nil && !fl.done {
			logCancelFault(t.fault)
		}
	case *startFailure:
		fl = t.fl
	case *itemWork:
		fl = t.fl
	case *itemArrival:
		fl = t.fl
	}
	if fl != nil && !fl.done && fl.sched == scheduler(l) {
		l.endClosed(fl)
	}
}

// runLogged runs f, logging a panic in it rather than letting it out: a
// TestTool treats the callbacks it runs like a Loop does.
func runLogged(f func()) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("asyncsteps: panic in TestTool callback",
				"panic", printsafe.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}
