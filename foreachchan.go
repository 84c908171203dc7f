package asyncsteps

// ForEachChan adds a step that calls f for each value received from ch,
// at most limit at once, until ch is closed: a worker that consumes a
// queue whose values arrive over time. It is [ForEachLimit] over a
// channel (docs/DESIGN.md#foreachchan), and follows its rules: each value
// is an item, a branch of a Parallel whose AsyncSteps f gets to add the
// item's steps to; values are received in the channel's order, the first
// limit as the step begins if they are there, the next one each time a
// slot comes free; the step succeeds, with no args, once ch is closed and
// drained and every item has ended. An item's slot is held until the item
// has ended and every [AsyncSteps.Await] function started inside it has
// returned, as ForEachLimit holds it. Unlike ForEachLimit, the step
// receives nothing ahead while every slot is held so: a value is taken
// from ch only for a free slot, and stays there, for another consumer,
// until then; a close is seen once a slot is free too.
//
// The loop never waits for ch. A value that is there when a slot is free
// is received on the loop, with no goroutine. When ch is empty, one
// goroutine of the step waits for the next value, or the close, and hands
// it to the loop: one goroutine at most per step, never one per item, and
// none once the step has ended or its [Loop] has closed. Meanwhile the
// flow waits, as a step that waits for an external event does: its
// timeouts, [Root.Cancel] and the deadline of Run's context reach it.
//
// An item's error that no handler of its own steps recovers from is the
// step's, as in ForEachLimit: the items running are cancelled, nothing
// more is received, and onerror, then the handlers around the step, see
// it. An error handler on the item's steps that recovers keeps the item's
// failure its own (see ExampleForEachChan_worker). An unlabelled
// Continue ends its item; an unlabelled Break ends it and stops
// receiving, the items running go on to their end, and the step then
// succeeds.
//
// Once the step ends by an error, a timeout or a cancel, or by a Break,
// nothing more is received: the values still in ch stay there, for the
// next consumer. Only a value that the waiting goroutine receives as the
// step ends, in a race with the stop, is dropped, not put back into ch,
// as [AwaitChan] drops one. A queue whose values must not be lost leases
// them, and gives back those whose item never began.
//
// A nil ch or f, or a limit below 1, is a misuse, as a nil function given
// to Await: "ForEachChan: nil channel", "ForEachChan: nil function",
// "ForEachChan: limit must be at least 1 (0 given)". On a decorator (see
// [Unwrapper]) the step is added to the AsyncSteps it wraps, and f
// receives this package's AsyncSteps; an AsyncSteps of another package
// cannot hold the step, and its Error reports that. ForEachChan returns
// as, to chain further steps.
func ForEachChan[T any](as AsyncSteps, ch <-chan T, limit int, f func(as AsyncSteps, v T), onerror ...ErrorFunc) AsyncSteps {
	if info := limitMisuse("ForEachChan", "channel", ch == nil, f == nil, limit); info != "" {
		return refuseNil(as, "ForEachChan", info)
	}
	if refusedExtraHandlers(as, "ForEachChan", onerror) {
		return as
	}
	d := &limitDef{limit: limit, bodyPC: funcPC(f), consumes: true}
	d.items = func(p *frame) limitItems {
		return &chanItems[T]{ch: ch, f: f, arrival: itemArrival{lr: p.impl.(*limitRun), fl: p.h.fl}}
	}
	return addLimit(as, "ForEachChan", d, firstHandler(onerror))
}

// chanItems is the limitItems of a ForEachChan: the values of a channel,
// received on the loop while one is there, else by a goroutine that waits
// for one (see wait) and hands it to the loop in the task arrival.
type chanItems[T any] struct {
	ch <-chan T
	f  func(as AsyncSteps, v T)
	v  T // the value received last, for item

	// The state of the wait, on the loop: has is set while v holds a
	// value that the waiting goroutine received, closed once ch has been
	// found closed, waiting while a goroutine waits, stopped once the
	// step has stopped receiving; stop, made for the first goroutine, is
	// closed then.
	has, closed, waiting, stopped bool
	stop                          chan struct{}

	// got and gotOK are what the waiting goroutine received, written
	// before it queues arrival and read by arrival on the loop.
	got     T
	gotOK   bool
	arrival itemArrival
}

func (c *chanItems[T]) pull(f *frame) pullOutcome {
	switch {
	case c.has:
		c.has = false
		return pulledPair
	case c.closed:
		return pulledNone
	case c.waiting:
		return pulledLater // an item's end while a goroutine waits
	}
	select {
	case v, ok := <-c.ch:
		if !ok {
			c.closed = true
			return pulledNone
		}
		c.v = v
		return pulledPair
	default:
	}
	c.wait(f)
	return pulledLater
}

// wait starts the goroutine that waits for ch's next value for the step's
// frame f. It ends at the value (or the close), at the step's stop, or
// at the close of the flow's Loop, which ends the flow: the loop notes the
// flow (see flow.noteParked), which only that goroutine refers to then.
func (c *chanItems[T]) wait(f *frame) {
	if c.stop == nil {
		c.stop = make(chan struct{})
	}
	c.waiting = true
	fl := f.h.fl
	fl.noteParked(f)
	loop, _ := fl.sched.(*Loop) // the only tool that stops for good
	go c.receive(loop, loop.live().enter())
}

// receive waits, on a goroutine of its own, for ch's next value, and
// queues it on the flow's loop unless the step has stopped first or loop
// (nil: a tool that never stops) has closed. If counted, it counts out of
// the loop's live count (see Loop.Wait) as it ends. It reads the rest of
// what it needs (c.stop, made before it starts and never changed) itself:
// a go statement's arguments cost an allocation as large as they are.
func (c *chanItems[T]) receive(loop *Loop, counted bool) {
	if counted {
		defer loop.live().exit()
	}
	stop, closed := c.stop, loop.lifetimeDone()
	if testHookChanWaitBegins != nil {
		testHookChanWaitBegins()
	}
	if waitStopped(stop, closed) {
		return // rather than a value that a select could pick as well
	}
	select {
	case v, ok := <-c.ch:
		c.got, c.gotOK = v, ok
		if a := &c.arrival; !a.lr.ended.Load() {
			a.fl.sched.inject(a)
		}
	case <-stop:
	case <-closed:
	}
}

// testHookChanWaitBegins, set by a test, runs on the goroutine of a
// ForEachChan's wait as it begins, before it looks at anything.
var testHookChanWaitBegins func()

// waitStopped reports whether stop or closed is done: the step that
// waits has stopped receiving, or its loop has closed.
func waitStopped(stop, closed <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-closed:
		return true
	default:
		return false
	}
}

// arrived takes what the waiting goroutine received, on the loop.
func (c *chanItems[T]) arrived() {
	c.waiting = false
	if c.gotOK {
		c.v, c.has = c.got, true
	} else {
		c.closed = true
	}
	var zero T
	c.got = zero
}

func (c *chanItems[T]) stopAtBreak(*frame) *Error {
	c.stopOnLoop()
	return nil
}

// stopOnLoop stops receiving, once: the goroutine that waits, if any,
// ends.
func (c *chanItems[T]) stopOnLoop() {
	if !c.stopped && c.stop != nil {
		close(c.stop)
	}
	c.stopped = true
}

func (c *chanItems[T]) dropPair() {
	var zero T
	c.v, c.has = zero, false
}

// failure is nil: receiving from a channel runs none of the user's code.
func (c *chanItems[T]) failure() *Error { return nil }

func (c *chanItems[T]) item() StepFunc {
	v, f := c.v, c.f
	c.dropPair() // the item holds the value, the step no more
	return func(as AsyncSteps, _ ...any) {
		if lateItem(as) {
			return
		}
		f(as, v)
	}
}

// itemArrival is the task in which the goroutine of a ForEachChan that
// waited for its channel hands what it received to the step, on the loop
// of the flow fl: the step takes it as the next value, or as the close,
// unless it has ended meanwhile (the value is dropped then). A closing
// Loop drops the task, and ends the flow instead (see Loop.endDropped).
type itemArrival struct {
	lr *limitRun
	fl *flow
}

// arrivedItems is the part of a ForEachChan's chanItems that its
// itemArrival reaches without its type.
type arrivedItems interface{ arrived() }

func (a *itemArrival) run() {
	lr := a.lr
	if lr.wakes(a, a.fl) {
		lr.items.(arrivedItems).arrived()
		lr.goOn(a.fl)
	}
}

// stale reports whether the step has ended: nothing it received matters
// any more (see TestTool.inject).
func (a *itemArrival) stale() bool { return a.lr.ended.Load() }
