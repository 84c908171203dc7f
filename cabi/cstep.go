//go:build cgo

package cabi

import (
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// cStep is what Wrap gives Go for the pointer of a C step: the step's
// AsyncSteps, whose calls that change the step's life take the path of
// the table's through the pointer, so that the step behaves the same
// whichever side makes them: its completions (success, handle_error,
// breakLoop, continueLoop) release the step's node once, as when C
// completes it; its sub-steps (add, and Go's Parallel, loops, Sync,
// Await, CopyFrom and SuccessStep, which add some too) and its waits
// (setCancel, waitExternal, setTimeout) keep the node, its stack memory
// and its cancel handler until the step is over. The engine's own calls
// would change the step behind the node's back: a node that knew nothing
// of sub-steps or a wait was released as the C callback returned, while
// the step still ran; a step that waits and that the engine completed
// kept its node for good. The other calls go to the step as they are.
type cStep struct {
	asyncsteps.AsyncSteps // the engine's step, n.as
	n                     *node
}

// Unwrap implements [asyncsteps.Unwrapper]: the engine's step.
func (s cStep) Unwrap() asyncsteps.AsyncSteps { return s.AsyncSteps }

// Fail finds the step's FailStep only through the interface: a change of
// its signature must not turn it into a method of no use.
var _ toolinfo.StepFailer = cStep{}

// Success completes the step as success does: at once in its C callback,
// else on the loop, which releases the node first. From a sub-step of a
// step that waits for its sub-steps it is the engine's misuse, as success
// through the pointer is there.
func (s cStep) Success(args ...any) {
	defer goGuard(s.n)
	s.n.succeed(args, false)
}

// Error fails the step as handle_error does. In its C callback it returns
// to the caller, which must return at once, as must the C callback: a Go
// panic must not unwind C frames.
func (s cStep) Error(code string, info ...string) {
	code, i := errorArgs(code, info)
	s.n.handleError(code, i, goGuard)
}

// Break ends the loop as breakLoop does, in the step's C callback (and
// returns, as Error does); elsewhere the engine's Break completes a step
// that waits, or reports the misuse (see outside).
func (s cStep) Break(label ...string) {
	if !s.n.inCallback() {
		s.outside(func() { s.AsyncSteps.Break(label...) })
		return
	}
	s.n.breakLoop(label)
}

// Continue goes to the loop's next iteration as continueLoop does (see
// Break).
func (s cStep) Continue(label ...string) {
	if !s.n.inCallback() {
		s.outside(func() { s.AsyncSteps.Continue(label...) })
		return
	}
	s.n.continueLoop(label)
}

// FailStep implements asyncsteps.Fail on the step as Error fails it: in
// the step's C callback, the callback returns first, and the node learns
// that the step failed; elsewhere, see outside. The engine raises the Go
// error, kept as the Cause.
func (s cStep) FailStep(f toolinfo.Failure) {
	fail := func() { asyncsteps.Fail(s.AsyncSteps, f.Err) }
	if !s.n.inCallback() {
		s.outside(fail)
		return
	}
	s.n.failInCallback(fail)
}

// outside makes engine's call, made outside the step's C callback, on
// the engine's step: as for a Go step, it takes sub-steps and waits only
// from the step's own callback; once that has returned, the call fails a
// step that waits for a completion from outside, and one from a sub-step
// of a step that waits for its sub-steps raises InternalError in that
// sub-step, as the table's calls through the pointer do (see elsewhere).
// A C callback that the call aborts (Go that C called, there) gets the
// abort once it has returned; a Go one is unwound by it. Such a call
// completes a waiting step from outside, so it claims the step first, as
// success and handle_error through the pointer do (see claimOutside): it
// has no effect once one of theirs claimed the step, whose task the
// loop may not have run yet, and the engine would take it then, failing
// the step while the claim says it succeeded, which skips the step's
// cancel handler. One from a sub-step's callback claims nothing: the
// step completes no more, and the engine raises the misuse there, also
// when a completion from another thread claimed the step before its
// callback added the sub-steps, which made that completion void.
func (s cStep) outside(engine func()) {
	defer goGuard(s.n)
	if !s.n.refusesOutside() && !s.n.claimOutside(outsideCall) {
		return
	}
	engine()
}

// adds runs add, which adds sub-steps to the step, as add through the
// pointer does: in the step's C callback, the node learns that the step
// is over only after them (see finish), and an abort of the engine (a
// misuse) is raised again once the C callback has returned, as a Go
// panic must not unwind C frames. Elsewhere, see outside.
func (s cStep) adds(add func()) {
	if !s.n.inCallback() {
		s.outside(add)
		return
	}
	defer guard(s.n)
	s.n.adds()
	add()
}

// Add implements [asyncsteps.AsyncSteps] as add does (see adds).
func (s cStep) Add(f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.Add(f, onerror...) })
	return s
}

// Parallel implements [asyncsteps.AsyncSteps] as parallel does (see adds):
// the branches are sub-steps of the step.
func (s cStep) Parallel(onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	var p asyncsteps.AsyncSteps
	s.adds(func() { p = s.AsyncSteps.Parallel(onerror...) })
	if p == nil { // the engine aborted: the callback is to return
		return s
	}
	return p
}

// CopyFrom implements [asyncsteps.AsyncSteps] (see adds).
func (s cStep) CopyFrom(model *asyncsteps.Root) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.CopyFrom(model) })
	return s
}

// Sync implements [asyncsteps.AsyncSteps] as addSync does (see adds).
func (s cStep) Sync(obj asyncsteps.Syncer, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.Sync(obj, f, onerror...) })
	return s
}

// SuccessStep implements [asyncsteps.AsyncSteps] (see adds).
func (s cStep) SuccessStep(args ...any) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.SuccessStep(args...) })
	return s
}

// Await implements [asyncsteps.AsyncSteps] (see adds).
func (s cStep) Await(f asyncsteps.AwaitFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.Await(f, onerror...) })
	return s
}

// Loop implements [asyncsteps.AsyncSteps] as loop does (see adds).
func (s cStep) Loop(f asyncsteps.LoopFunc, label ...string) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.Loop(f, label...) })
	return s
}

// Repeat implements [asyncsteps.AsyncSteps] as repeat does (see adds).
func (s cStep) Repeat(count int, f asyncsteps.RepeatFunc, label ...string) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.Repeat(count, f, label...) })
	return s
}

// ForEach implements [asyncsteps.AsyncSteps] (see adds).
func (s cStep) ForEach(collection any, f asyncsteps.ForEachFunc, label ...string) asyncsteps.AsyncSteps {
	s.adds(func() { s.AsyncSteps.ForEach(collection, f, label...) })
	return s
}

// waits runs wait, which makes the step wait, in the step's C callback,
// as the table's setCancel, waitExternal and setTimeout do; elsewhere it
// passes the call to the engine, which refuses it as it refuses an add
// there (see outside).
func (s cStep) waits(engine, wait func()) {
	if !s.n.inCallback() {
		s.outside(engine)
		return
	}
	defer guard(s.n)
	wait()
}

// SetCancel implements [asyncsteps.AsyncSteps] as setCancel does: f is
// the step's cancel handler, in place of one C set (the engine keeps one
// per step), called with this AsyncSteps; a nil f sets none. Like C's, it
// runs once, if the step is cancelled or fails before it completes
// otherwise, not when a closed loop leaves the step (a closed loop runs no
// Go cancel handler). In f the step is over, as in any Go cancel handler:
// its calls on this AsyncSteps, and the table's through the step's
// pointer, that add, make the step wait or complete it have no effect,
// and the engine logs the first as a misuse of the handler.
func (s cStep) SetCancel(f asyncsteps.CancelFunc) {
	s.waits(func() { s.AsyncSteps.SetCancel(f) }, func() { s.n.setCancel(nil, 0, f) })
}

// WaitExternal implements [asyncsteps.AsyncSteps] as waitExternal does.
func (s cStep) WaitExternal() {
	s.waits(s.AsyncSteps.WaitExternal, s.n.waitExternal)
}

// SetTimeout implements [asyncsteps.AsyncSteps] as setTimeout does.
func (s cStep) SetTimeout(d time.Duration) {
	s.waits(func() { s.AsyncSteps.SetTimeout(d) }, func() { s.n.setTimeout(d) })
}
