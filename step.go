package asyncsteps

import (
	"slices"
)

// step is a queued step definition. It is never modified once queued, but
// for the branches of a Parallel, which the value Parallel returned adds
// to: Clone and CopyFrom copy those (detached), and share the rest.
type step struct {
	// impl is the step's StepFunc, the stepKind of a built-in step, the
	// *awaitCall of an Await step added by a running step, or, for a step
	// with an error handler, a *guarded holding one of those: one
	// field, so that a step is 16 bytes and a flow's first four steps fit
	// a 64-byte array. Most steps have no handler of their own.
	impl any
}

// guarded is a step with its error handler.
type guarded struct {
	impl    any // StepFunc, stepKind or *awaitCall
	onerror ErrorFunc
}

// plainStep and builtinStep make the two kinds of step. They type impl:
// a function literal stored as is would not be a StepFunc.
func plainStep(fn StepFunc, onerror ErrorFunc) step { return newStep(fn, onerror) }

func builtinStep(k stepKind, onerror ErrorFunc) step { return newStep(k, onerror) }

func newStep(impl any, onerror ErrorFunc) step {
	if onerror != nil {
		return step{impl: &guarded{impl: impl, onerror: onerror}}
	}
	return step{impl: impl}
}

// copySteps appends to dst the steps of src, detached from the model.
func copySteps(dst, src []step) []step {
	dst = slices.Grow(dst, len(src))
	for _, s := range src {
		dst = append(dst, s.detached())
	}
	return dst
}

// detached returns s, or a copy of it whose Parallel definition is a copy,
// so that branches added to the model's afterwards are not in it.
func (s step) detached() step {
	impl, onerror := s.parts()
	d, ok := impl.(*parallelDef)
	if !ok {
		return s
	}
	return builtinStep(d.clone(), onerror)
}

// parts returns what the step runs, a StepFunc, a stepKind or an
// *awaitCall, and its error handler.
func (s *step) parts() (impl any, onerror ErrorFunc) {
	if g, ok := s.impl.(*guarded); ok {
		return g.impl, g.onerror
	}
	return s.impl, nil
}

// plain returns the step's StepFunc if it is a plain step without an error
// handler, or nil.
func (s *step) plain() StepFunc {
	fn, _ := s.impl.(StepFunc)
	return fn
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
	// letGo lets go of what the execution made (a sequence, a snapshot,
	// the step APIs of branches), as its frame ends: the control of a
	// definition's first execution lives as long as the definition, which
	// a model Root keeps for its clones (see loopDef.first).
	letGo()
}

// appendStep appends s to the queue q. An empty queue gets room for four
// steps at once, since most flows and steps have a few: it grows once, not
// thrice. A recycled frame may bring the tail of an array its earlier steps
// were popped from, too short to be worth filling.
func appendStep(q []step, s step) []step {
	if len(q) == 0 && cap(q) < 4 {
		q = make([]step, 0, 4)
	}
	return append(q, s)
}
