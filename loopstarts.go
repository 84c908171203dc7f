package asyncsteps

// This file holds the lock-free stack of flows waiting to start on a Loop
// (Loop.starts): a push is one compare-and-swap, so that goroutines
// starting flows do not contend with the loop.

// startFlow queues the first task of fl, from any goroutine, behind every
// task already queued, on a Treiber stack instead of the inbox: a push is
// one compare-and-swap. On a closed loop the flow ends at once (see
// endStarts).
func (l *Loop) startFlow(fl *flow) {
	for {
		head := l.starts.Load()
		fl.setNextStart(head)
		if l.starts.CompareAndSwap(head, fl) {
			break
		}
	}
	// Both the push and shutdown's store of ended are sequentially
	// consistent: either shutdown takes the flow, or this sees ended.
	if l.ended.Load() {
		l.endLateStarts()
		return
	}
	// Likewise with sleep's store of sleeping: either this sees the loop
	// asleep, or the loop sees the flow before it sleeps.
	if l.sleeping.Load() {
		l.mu.Lock()
		l.unlockAndWake(true)
	}
}

// endLateStarts ends the flows started after the loop stopped on a
// goroutine of its own: their unhandled-error functions must not run inside
// Execute (docs/DESIGN.md#execute-only-schedules). It is a function of its own because the go
// statement inside startFlow made every start slower (3% on workload c).
func (l *Loop) endLateStarts() { go l.endStarts() }

// endStarts ends the flows waiting to start on a loop that has stopped.
// It runs on the loop's goroutine in shutdown, and on a goroutine of its
// own for a start that came after.
func (l *Loop) endStarts() {
	for fl := l.takeStarts(); fl != nil; {
		next := unlinkStart(fl)
		l.endUnstarted(fl)
		fl = next
	}
}

// unlinkStart takes fl out of the list takeStarts returned, so that its
// base frame can be set up, and returns the flow after it.
func unlinkStart(fl *flow) *flow {
	next := fl.nextStart()
	fl.setNextStart(nil)
	return next
}

// takeStarts empties the stack of flows to start and returns them oldest
// first, linked by nextStart.
func (l *Loop) takeStarts() *flow {
	if l.starts.Load() == nil {
		return nil
	}
	var oldest *flow
	for fl := l.starts.Swap(nil); fl != nil; {
		next := fl.nextStart()
		fl.setNextStart(oldest)
		oldest = fl
		fl = next
	}
	return oldest
}
