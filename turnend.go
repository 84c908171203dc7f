package asyncsteps

// This file holds AtTurnEnd: a callback run once the steps that run on a
// tool at about the same time have all run (docs/DESIGN.md#turn-ends).

import "sync/atomic"

// AtTurnEnd schedules f to run on tool once the tool's current turn is
// over, and returns its Handle. A turn is the run of the steps and
// callbacks ready on the tool, and of those they make ready: the steps of
// every flow and parallel branch that can go on without waiting. So f
// sees what all of them did, whichever came first: a DataLoader gathers
// the keys that the flows on a loop ask for in one turn, and asks for them
// in one call at its end (Example_loader).
//
// On a [TestTool], the turn is over once no immediate is left: f runs
// before the next deferred callback, however long the turn lasts. On a
// [Loop], it is over at the end of the first pass over the loop's queue
// (up to 256 callbacks, before the timers due) in which every callback
// that the loop's queue held when AtTurnEnd was called has run (the steps
// ready then among them): those run first, and the steps they make ready
// until that pass ends. A loop that stays busy
// still ends the turn: it delays f by the rest of that pass at most, as
// it delays its timers. Both tools end a turn alike for flows whose steps
// go on from one another (the branches of a Parallel, the iterations of a
// loop, the next step or sub-step of a flow, a flow let into a [Mutex] by
// another of the same loop), as long as the turn's steps fit in the rest
// of the Loop's pass: beyond, a Loop ends the turn with that pass, and a
// TestTool once they have all run. They differ also on what comes from
// outside a flow's own steps, even from the tool's goroutine: a flow
// started, a callback given to Immediate, a Success or Error called on a
// waiting step from outside its callback (from a step of another flow, an
// Await function's goroutine or any other), a [Root.Cancel], run before
// the turn's end on a TestTool, whose one queue holds them, and after it
// on a Loop, which takes them at its next pass (see [Loop]).
//
// The callbacks whose turn has ended run one after another, in the order
// they were scheduled; one that AtTurnEnd schedules from such a callback
// runs at the end of the next turn. A callback that panics is logged as
// the tool's other callbacks are, and the others still run.
//
// Called off the tool's goroutine ([Tool.IsSameThread] false), where no
// turn of the caller's is under way, AtTurnEnd is the tool's Immediate:
// f runs after the callbacks already scheduled with Immediate. So it is on
// a Tool of another package, which has no turns this package knows of. On
// a closed Loop it returns an invalid handle and f never runs, as
// Immediate does; a Loop closed before f ran drops it, and its handle
// becomes invalid. A nil f or a nil tool schedules nothing: the handle is
// invalid.
func AtTurnEnd(tool Tool, f func()) Handle {
	if f == nil || tool == nil {
		return deadHandle{}
	}
	return schedulerOf(tool).atTurnEnd(f)
}

// atTurnEnd is AtTurnEnd on a tool of another package: its Immediate.
func (t foreignTool) atTurnEnd(f func()) Handle { return t.Immediate(f) }

// atTurnEnd queues f for the end of the turn, on the loop's goroutine:
// its mark waits behind every callback queued now (see loopTurnEnd.run).
func (l *Loop) atTurnEnd(f func()) Handle {
	if !l.IsSameThread() {
		return l.Immediate(f) // also a zero Loop's dead handle
	}
	if l.closing.Load() {
		return deadHandle{}
	}
	e := &loopTurnEnd{l: l}
	e.f = f
	l.local.push(e)
	l.turnMarks++
	return e
}

// loopTurnEnd is a callback given to AtTurnEnd on a Loop, its own handle.
// It is queued first as its mark, behind the callbacks queued when it was
// scheduled; the mark moves it to the callbacks that run at the end of
// the pass.
type loopTurnEnd struct {
	loopImmediate
	l *Loop
}

// run is the mark's: every callback queued before it has run, and the
// callback runs once the pass's batch is over.
func (e *loopTurnEnd) run() {
	e.l.turnMarks--
	e.l.ending.push(&e.loopImmediate)
}

// endTurn runs the callbacks whose turn has ended, at the end of a pass.
// Each is taken out as it runs, so that after one that calls
// runtime.Goexit the next goroutine runs the rest, first (see run).
func (l *Loop) endTurn() {
	l.endingCut = true
	for !l.closing.Load() {
		e, ok := l.ending.pop()
		if !ok {
			break
		}
		l.runTurnEnd(e)
	}
	l.endingCut = false
}

// runTurnEnd runs one callback at the end of a turn; a panic is logged,
// and the next one still runs.
func (l *Loop) runTurnEnd(e *loopImmediate) {
	defer l.recoverPanic()
	e.run()
}

// dropTurnEnds drops the callbacks whose turn has ended, as the loop
// stops: their handles become invalid. Those whose marks were still
// queued are dropped with the queue.
func (l *Loop) dropTurnEnds() {
	for e, ok := l.ending.pop(); ok; e, ok = l.ending.pop() {
		dropTask(e)
	}
}

// atTurnEnd queues f for the end of the turn, on the goroutine driving
// the tool: once no immediate is left (see TestTool.step).
func (t *TestTool) atTurnEnd(f func()) Handle {
	if !t.IsSameThread() {
		return t.Immediate(f)
	}
	e := &testTurnEnd{f: f, tool: t}
	t.mu.Lock()
	t.turnEnds.push(e)
	t.turnLive++
	t.mu.Unlock()
	return e
}

// endTurn runs, as one event, the callbacks waiting for the end of the
// turn: those queued when the turn ended, or the rest of them if a
// callback cut the event short with runtime.Goexit, or a nested NextEvent
// runs them; with next, the next turn's if none of those is left to run.
// Those scheduled meanwhile wait for the next turn's end, after the
// immediates scheduled before them. Each is taken out as it runs, so that
// after one that calls runtime.Goexit the rest run first when the tool is
// driven again (see step). It reports whether it ran one. Called with mu
// held; it holds mu again as it returns.
func (t *TestTool) endTurn(next bool) bool {
	ran := false
	for {
		if t.ending == 0 {
			if ran || !next || t.turnLive == 0 { // ResetEvents, from a callback
				return ran
			}
			t.ending = t.turnEnds.len()
		}
		t.ending--
		e, _ := t.turnEnds.pop()
		if f := e.claim(); f != nil {
			ran = true
			t.mu.Unlock()
			runLogged(f)
			t.mu.Lock()
		}
	}
}

// dropTurnEnds drops the callbacks waiting for the end of the turn, for
// ResetEvents, and the cancelled ones as the tool idles. Called with mu
// held.
func (t *TestTool) dropTurnEnds() {
	for e, ok := t.turnEnds.pop(); ok; e, ok = t.turnEnds.pop() {
		e.state.CompareAndSwap(handleScheduled, handleCancelled)
		e.f = nil
	}
	t.turnLive, t.ending = 0, 0
}

// testTurnEnd is a callback given to AtTurnEnd on a TestTool, its own
// handle.
type testTurnEnd struct {
	f     func()
	tool  *TestTool
	state atomic.Uint32 // written under tool.mu; read without it by IsValid
}

// claim marks the callback run and returns it, or nil if it was
// cancelled. Called with tool.mu held.
func (e *testTurnEnd) claim() func() {
	if !e.state.CompareAndSwap(handleScheduled, handleRan) {
		return nil
	}
	e.tool.turnLive--
	f := e.f
	e.f = nil
	return f
}

// Cancel uncounts the callback at once, so HasEvents sees it gone; its
// entry is skipped when the turn ends.
func (e *testTurnEnd) Cancel() {
	e.tool.mu.Lock()
	if e.state.CompareAndSwap(handleScheduled, handleCancelled) {
		e.tool.turnLive--
		e.f = nil
	}
	e.tool.mu.Unlock()
}

func (e *testTurnEnd) IsValid() bool { return e.state.Load() == handleScheduled }
