package asyncsteps

// This file holds the lock-free stack of flows waiting to start on a Loop
// (Loop.starts): a push is one compare-and-swap, so that goroutines
// starting flows do not contend with the loop.

// startFlow queues the first task of fl, from any goroutine, behind every
// task already queued, on a Treiber stack instead of the inbox: a push is
// one compare-and-swap. On a closed loop the flow ends at once (see
// endStarts).
func (l *Loop) startFlow(fl *flow) {
	l.pushStart(fl)
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

// pushStart pushes fl on the stack of flows to start.
func (l *Loop) pushStart(fl *flow) {
	for {
		head := l.starts.Load()
		fl.setNextStart(head)
		if l.starts.CompareAndSwap(head, fl) {
			return
		}
	}
}

// endLateStarts ends the flows started after the loop stopped on a
// goroutine of its own: their unhandled-error functions must not run inside
// Execute (docs/DESIGN.md#execute-only-schedules). It is a function of its own because the go
// statement inside startFlow made every start slower (3% on workload c).
// The goroutine runs the user's functions for the loop's flows: it counts
// for Wait, unless nothing of the loop counts any more (see
// awaitCalls.enter).
func (l *Loop) endLateStarts() { go l.endLate(l.live().enter()) }

// endLate is the goroutine of endLateStarts; if counted, it counts out of
// the loop's live count as it ends, also after a Goexit, once the flows
// it leaves went to the goroutine that ends them next (see endStarts).
func (l *Loop) endLate(counted bool) {
	if counted {
		defer l.live().exit()
	}
	l.endStarts(true)
}

// endStarts ends the flows waiting to start on a loop that has stopped.
// It runs on the loop's goroutine in shutdown, and on a goroutine of its
// own (late) for a start that came after. An unhandled-error function
// that calls runtime.Goexit ends that goroutine: the flows taken and not
// ended yet go back on the stack, where the loop's next goroutine, which
// goes on with the shutdown, takes them, or, late, a goroutine of their
// own does; else their Promise or Run would wait for ever.
func (l *Loop) endStarts(late bool) {
	rest := l.takeStarts()
	defer func() {
		if rest != nil {
			l.requeueStarts(rest, late)
		}
	}()
	for rest != nil {
		fl := rest
		rest = unlinkStart(fl)
		l.endUnstarted(fl)
	}
}

// requeueStarts puts back the flows of list, oldest first and linked by
// nextStart, for endStarts to end: late, on a goroutine of their own.
func (l *Loop) requeueStarts(list *flow, late bool) {
	for fl := list; fl != nil; {
		next := unlinkStart(fl)
		l.pushStart(fl)
		fl = next
	}
	if late {
		l.endLateStarts()
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
