package asyncsteps

// SetBursts chooses how the flows of l take turns. By default (false), a
// flow that has run a step lets every other task queued on l run before
// its next step: the order of the FutoIn reference implementation, where
// the steps of flows started together interleave one by one. With true, a
// flow runs its steps back to back, up to 256 in a row, until it waits or
// ends; only then do the other flows, the callbacks and the timers queued
// meanwhile on l run. The branches of a Parallel still take turns after
// each step, as they do by default.
//
// Bursts save the loop a turn per step, and keep a flow's objects in the
// processor's cache between its steps, at the cost of the order above and
// of latency: a flow that runs 256 steps delays every other task on l by
// that much. It is for loops whose flows are independent of one another.
// It may be called at any time, from any goroutine; it applies from the
// next step on.
func (l *Loop) SetBursts(on bool) { l.engine.bursts.Store(on) }

// bursting reports whether the flow, having run a step and going on at f,
// may run its next step before other queued work: bursts are on, and f is
// not inside a parallel branch.
func (fl *flow) bursting(f *frame) bool {
	st := fl.sched.pools() // only a Loop's can have bursts on
	return st != nil && st.bursts.Load() && ownerOf(f).mode != modeBranch
}
