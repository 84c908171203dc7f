package asyncsteps

import (
	"context"
	"time"
)

// This file builds the context given to an Await function. It carries the
// values of Run's context and the nearest deadline around the step: the
// step timeouts of the steps it runs in (SetTimeout) and the deadline of
// Run's context. Its Done channel is closed by the engine only, when the
// step is cancelled, never by a timer of its own: the flow's loop decides
// when a timeout happens, so the function and its error handlers see one
// order of events, not a race between two clocks. Err then says
// context.DeadlineExceeded when a deadline caused the cancel, else
// context.Canceled.

// deadlineContext is a cancellable context that reports a deadline it does
// not enforce itself.
type deadlineContext struct {
	context.Context
	deadline time.Time
}

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Err is context.DeadlineExceeded when the engine cancelled the context
// because a deadline had passed.
func (c *deadlineContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// farFuture bounds the step timeouts that give a deadline: a longer one
// (typically math.MaxInt64, "never") gives none, rather than a time that
// overflows.
const farFuture = 100 * 365 * 24 * time.Hour

// awaitContext returns the context of an Await function started by the
// step of frame f, and the function that cancels it, to be called from the
// step's cancel handler or when the function has returned. Loop goroutine
// only.
func (fl *flow) awaitContext(f *frame) (context.Context, func()) {
	run := fl.runContext()
	base := context.WithoutCancel(run)
	left, stepDue := fl.stepTimeLeft(f)
	runDeadline, runDue := run.Deadline()
	if !stepDue && !runDue {
		return context.WithCancel(base)
	}
	deadline := runDeadline
	var toolDeadline time.Time // on the tool's clock, for a step timeout
	if stepDue {
		toolDeadline = fl.sched.Now().Add(left)
		if wall := time.Now().Add(left); !runDue || wall.Before(deadline) {
			deadline = wall
		}
	}
	ctx, cancelCause := context.WithCancelCause(base)
	cancel := func() {
		cause := context.Canceled
		if stepDue && !fl.sched.Now().Before(toolDeadline) || runDue && !time.Now().Before(runDeadline) {
			cause = context.DeadlineExceeded
		}
		cancelCause(cause)
	}
	return &deadlineContext{Context: ctx, deadline: deadline}, cancel
}

// stepTimeLeft returns the time left before the nearest step timeout armed
// on f or a step around it falls due, on the tool's clock, and false when
// none is armed or the tool's timers cannot be read (a Tool of the user's).
func (fl *flow) stepTimeLeft(f *frame) (left time.Duration, ok bool) {
	for ; f != nil; f = f.parent {
		e := f.timer()
		if e == nil {
			continue
		}
		d, known := fl.timerLeft(e)
		if known && d < farFuture && (!ok || d < left) {
			left, ok = max(d, 0), true
		}
	}
	return left, ok
}

// timerLeft returns the time left on the step timer e.
func (fl *flow) timerLeft(e *timerEntry) (time.Duration, bool) {
	switch s := fl.sched.(type) {
	case *Loop:
		if e.unstamped {
			// Armed in this pass of the loop: due d after the pass ends,
			// so at least d from now.
			return e.list.d, true
		}
		return time.Duration(e.due - s.clock()), true
	case *TestTool:
		s.mu.Lock()
		defer s.mu.Unlock()
		return time.Duration(e.due - s.now), true
	}
	return 0, false
}
