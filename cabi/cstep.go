//go:build cgo

package cabi

import "github.com/asyncsteps/asyncsteps"

// cStep is what Wrap gives Go for the pointer of a C step: the step's
// AsyncSteps, whose completions take the path of the table's success,
// handle_error, breakLoop and continueLoop through the pointer, so that
// the step's node is released once, as when C completes it. The engine's
// own completion would end the step behind the node's back: a step that
// waits would keep its pointer, its stack memory and its cancel handler
// for good, and an error would call its C cancel handler. What C does not
// complete through the table goes to the step as is.
type cStep struct {
	asyncsteps.AsyncSteps // the engine's step, n.as
	n                     *node
}

// Unwrap implements [asyncsteps.Unwrapper]: the engine's step.
func (s cStep) Unwrap() asyncsteps.AsyncSteps { return s.AsyncSteps }

// Success completes the step as success does: at once in its C callback,
// else on the loop, which releases the node first.
func (s cStep) Success(args ...any) {
	defer guard(s.n)
	s.n.succeed(args, false)
}

// Error fails the step as handle_error does. In its C callback it returns
// to the caller, which must return at once, as must the C callback: a Go
// panic must not unwind C frames.
func (s cStep) Error(code string, info ...string) {
	s.n.handleError(code, firstOf(info))
}

// Break ends the loop as breakLoop does, in the step's C callback (and
// returns, as Error does); elsewhere the engine's Break reports the misuse.
func (s cStep) Break(label ...string) {
	if !s.n.inCallback() {
		s.AsyncSteps.Break(label...)
		return
	}
	s.n.breakLoop(label)
}

// Continue goes to the loop's next iteration as continueLoop does (see
// Break).
func (s cStep) Continue(label ...string) {
	if !s.n.inCallback() {
		s.AsyncSteps.Continue(label...)
		return
	}
	s.n.continueLoop(label)
}
