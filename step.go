package asyncsteps

import (
	"sync/atomic"
	"time"
)

// step is a queued step definition. It is never modified once queued, so
// Clone and CopyFrom share step slices' elements freely.
type step struct {
	fn      StepFunc
	onerror ErrorFunc
	kind    stepKind // nil for a plain step
}

// stepKind gives a step a built-in behaviour (loop, parallel) in place of a
// user callback. newControl makes the per-execution state.
type stepKind interface {
	newControl() control
}

// control drives a frame of a built-in step. All methods run on the loop.
type control interface {
	// begin starts the step; it returns the frame to go on with, or nil
	// when the flow waits.
	begin(f *frame) *frame
	// drained is called when f has run all its queued sub-steps; it reports
	// whether it queued more (the next loop iteration).
	drained(f *frame) bool
	// catch is offered an error unwinding through f; it returns the frame
	// to go on with and true when it handles the error.
	catch(f *frame, err *Error) (*frame, bool)
}

// Frame handle states, in frame.st. The loop goroutine owns a frame, but a
// waiting step may be completed from any goroutine, so the hand-over
// between the two is this word alone.
const (
	stExec  uint32 = 1 << iota // the frame's callback is running
	stWait                     // the step may be completed from outside
	stClaim                    // Success or Error has claimed the completion
	stReady                    // the claimed completion is written
	stDone                     // the handle is dead: no completion accepted
)

// frame mode
const (
	modeStep    uint8 = iota // a step's callback and its sub-steps
	modeHandler              // an error handler that took over a failed step
	modeBranch               // the root of one parallel branch
	modeBase                 // the root of the flow
)

// frame is one running step: its callback, then its sub-steps. The value
// given to the callback as AsyncSteps is the frame itself, so a frame is
// never reused: a stale handle must stay dead (API decision 12).
type frame struct {
	fl     *flow
	parent *frame
	st     atomic.Uint32

	fn      StepFunc // for AsyncStack
	onerror ErrorFunc
	ctl     control
	mode    uint8

	over    bool // finished or unwound; loop-owned
	waiting bool // suspended until an external completion; loop-owned

	queue    []step
	args     []any  // input of the next sub-step, then the frame's result
	active   *frame // the sub-step running now
	onCancel CancelFunc
	timer    Handle

	// Completion written by Success/Error (stClaim, then stReady) or by an
	// aborted callback (err).
	resArgs []any
	resErr  *Error
	resExc  error // LastException to record with resErr
	err     *Error

	handling *Error // in a handler frame: the error it handles
}

func newFrame(fl *flow, parent *frame, s *step, mode uint8) *frame {
	f := &frame{fl: fl, parent: parent, fn: s.fn, onerror: s.onerror, mode: mode}
	if s.kind != nil {
		f.ctl = s.kind.newControl()
	}
	return f
}

// inCallback reports whether a call with handle state st comes from the
// frame's own running callback, i.e. may abort it by panicking. A waiting
// step may also be completed from another goroutine while its callback still
// runs; only then is the (slower) goroutine check needed.
func (f *frame) inCallback(st uint32) bool {
	if st&stExec == 0 {
		return false
	}
	return st&stWait == 0 || f.fl.tool.IsSameThread()
}

// claim takes the right to complete the step: only one Success or Error of
// a step counts.
func (f *frame) claim() bool {
	for {
		st := f.st.Load()
		if st&(stClaim|stDone) != 0 {
			return false
		}
		if f.st.CompareAndSwap(st, st|stClaim) {
			return true
		}
	}
}

// publish marks the written completion as ready. If the callback has already
// returned, nobody on the loop will look at the frame again by itself, so
// the completion is handed to the loop.
func (f *frame) publish() {
	if f.st.Or(stReady)&stExec == 0 {
		f.fl.inject(f)
	}
}

// abort records err as the outcome of the running callback and unwinds it.
func (f *frame) abort(err *Error, exc error) {
	if f.err == nil {
		f.err = err
		f.resExc = exc
	}
	panic(abortSignal{})
}

// abortSignal unwinds a callback after Error, Break, Continue or misuse.
type abortSignal struct{}

// raise fails the step with code: inside its callback by aborting it, from
// outside as an external completion.
func (f *frame) raise(code, info string, cause error) {
	st := f.st.Load()
	if st&(stClaim|stDone) != 0 {
		return // the step has completed: no effect (API decision 12)
	}
	err := &Error{Code: code, Info: info, Cause: cause}
	if f.inCallback(st) {
		f.fl.noteError(err, exc(err))
		f.abort(err, exc(err))
	}
	f.complete(err, exc(err))
}

// complete fails the step from outside its callback, with exc as the
// LastException to record.
func (f *frame) complete(err *Error, exc error) {
	if f.claim() {
		f.resErr = err
		f.resExc = exc
		f.publish()
	}
}

// misuse reports a wrong use of the API as an InternalError of the step.
func (f *frame) misuse(info string) {
	f.raise(InternalError, info, nil)
}

// exc is the LastException of err: err itself unless it has a cause.
func exc(err *Error) error {
	if err.Cause != nil {
		return err.Cause
	}
	return err
}

// adding reports whether the frame accepts new sub-steps: only from its
// running callback. A stale handle accepts nothing (API decision 12).
func (f *frame) adding() bool {
	return f.st.Load()&(stExec|stClaim|stDone) == stExec
}

func (f *frame) push(s step) AsyncSteps {
	f.queue = append(f.queue, s)
	return f
}

// Add implements [AsyncSteps].
func (f *frame) Add(fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addStep(f, fn, onerror)
}

// Parallel implements [AsyncSteps].
func (f *frame) Parallel(onerror ...ErrorFunc) AsyncSteps { return addParallel(f, onerror) }

// State implements [AsyncSteps].
func (f *frame) State() *State { return f.fl.state }

// CopyFrom implements [AsyncSteps].
func (f *frame) CopyFrom(model *Root) AsyncSteps {
	if f.adding() {
		f.queue = append(f.queue, model.queue...)
		f.fl.state.fillMissing(&model.state)
	}
	return f
}

// Sync implements [AsyncSteps].
func (f *frame) Sync(obj Syncer, fn StepFunc, onerror ...ErrorFunc) AsyncSteps {
	return addSync(f, obj, fn, onerror)
}

// SuccessStep implements [AsyncSteps].
func (f *frame) SuccessStep(args ...any) AsyncSteps { return addSuccess(f, args) }

// Await implements [AsyncSteps].
func (f *frame) Await(fn AwaitFunc, onerror ...ErrorFunc) AsyncSteps {
	return addAwait(f, fn, onerror)
}

// NewInstance implements [AsyncSteps].
func (f *frame) NewInstance() *Root { return f.fl.root.NewInstance() }

// IsValid implements [AsyncSteps].
func (f *frame) IsValid() bool { return f.st.Load()&(stClaim|stDone) == 0 }

// Tool implements [AsyncSteps].
func (f *frame) Tool() Tool { return f.fl.tool }

// Success implements [AsyncSteps].
func (f *frame) Success(args ...any) {
	// Only a call that is surely the callback's own may look at the queue;
	// settle catches the other case.
	if st := f.st.Load(); st&(stExec|stWait) == stExec && len(f.queue) > 0 {
		f.misuse("Success called after Add in the same callback")
	}
	if f.claim() {
		f.resArgs = args
		f.publish()
	}
}

// Error implements [AsyncSteps].
func (f *frame) Error(code string, info ...string) {
	if st := f.st.Load(); f.inCallback(st) && len(f.queue) > 0 {
		f.misuse("Error(" + code + ") called after Add in the same callback")
	}
	f.raise(code, firstLabel(info), nil)
}

// SetTimeout implements [AsyncSteps].
func (f *frame) SetTimeout(d time.Duration) {
	if f.st.Load()&stExec == 0 {
		return
	}
	f.fl.armTimeout(f, d)
	f.st.Or(stWait)
}

// SetCancel implements [AsyncSteps].
func (f *frame) SetCancel(fn CancelFunc) {
	if f.st.Load()&stExec == 0 {
		return
	}
	f.onCancel = fn
	f.st.Or(stWait)
}

// WaitExternal implements [AsyncSteps].
func (f *frame) WaitExternal() {
	if f.st.Load()&stExec == 0 {
		return
	}
	f.st.Or(stWait)
}

// Loop implements [AsyncSteps].
func (f *frame) Loop(fn LoopFunc, label ...string) AsyncSteps { return addLoop(f, fn, label) }

// Repeat implements [AsyncSteps].
func (f *frame) Repeat(count int, fn RepeatFunc, label ...string) AsyncSteps {
	return addRepeat(f, count, fn, label)
}

// ForEach implements [AsyncSteps].
func (f *frame) ForEach(collection any, fn ForEachFunc, label ...string) AsyncSteps {
	return addForEach(f, collection, fn, label)
}

// Break implements [AsyncSteps].
func (f *frame) Break(label ...string) { f.raise(LoopBreak, firstLabel(label), nil) }

// Continue implements [AsyncSteps].
func (f *frame) Continue(label ...string) { f.raise(LoopCont, firstLabel(label), nil) }

// owner returns the frame that stands for the flow, or the parallel branch,
// that as runs in: what synchronization primitives count as one holder
// (spec 1.11.4). It is nil for a value that is not a running step.
func owner(as AsyncSteps) *frame {
	f, ok := as.(*frame)
	if !ok {
		return nil
	}
	for f.mode != modeBranch && f.mode != modeBase {
		f = f.parent
	}
	return f
}

// outerOwner returns the owner that the parallel branch o was started from,
// or nil when o is the whole flow.
func outerOwner(o *frame) *frame {
	if o.mode != modeBranch {
		return nil
	}
	return owner(o.parent)
}
