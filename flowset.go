package asyncsteps

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// FlowSet keeps the flows that a service starts in the background (a job
// of a worker, a poll of a poller), on any loops, until they end, so that
// its shutdown can let them end within a grace period, cancel the rest and
// know when none runs ([FlowSet.Shutdown]). It holds no flow that has
// ended. The zero FlowSet is ready to use; it must not be copied once
// used.
//
// Start, Len and Cancel are safe from any goroutine, a loop's callbacks
// included. Wait and Shutdown block: called on the goroutine of a [Loop]
// they return an InternalError at once, as [Loop.Wait] does, since the
// loop they would block may be the one that the flows need to end. A
// flow on a [TestTool] ends only while the test drives the tool: wait for
// it from the goroutine that drives it no more than for [Root.Promise].
//
// At a service's shutdown: the server first (http.Server.Shutdown, which
// waits for the flows of asynchttp's Handler, each run by its request),
// then the background flows' FlowSet.Shutdown, then [LoopGroup.Close]
// (or [Loop.Close]) and [LoopGroup.Wait] for the Await functions that the
// cancelled flows left running.
type FlowSet struct {
	mu      sync.Mutex
	running map[*Root]setEntry
	starts  uint64 // Starts made, the order of the next
	n       int
	cancels uint64 // Cancel calls made: a Start that one comes within cancels its flow
	closed  bool
	idle    chan struct{} // made by a waiter; closed, and dropped, when n falls to 0
}

// setEntry is a Root of a FlowSet: its executions counted (a then may
// start its Root again) and the order of its first Start, which Cancel
// follows.
type setEntry struct {
	n     int
	order uint64
}

// Start executes r as [Root.ExecuteThen] does, with then, and keeps r in
// the set until then has returned, so that what then does (settle a job)
// is done once Wait returns. A nil then makes it [Root.Execute]: an error
// that ends the flow goes to r's unhandled-error function
// ([WithUnhandledError]). Once Shutdown has begun, Start starts nothing
// and returns false: r keeps its steps and then is not called. As
// ExecuteThen, Start panics if r is running; the set then does not keep
// it.
func (s *FlowSet) Start(r *Root, then func(Result)) bool {
	return s.start(r, then, r.ExecuteThen)
}

// StartContext is Start under ctx: it executes r as
// [Root.ExecuteThenContext] does, so that ctx's values, cancel and
// deadline reach the flow (a job's).
func (s *FlowSet) StartContext(ctx context.Context, r *Root, then func(Result)) bool {
	return s.start(r, then, func(done func(Result)) { r.ExecuteThenContext(ctx, done) })
}

// start counts r in the set and executes it with exec, whose done ends
// the count once then has returned.
func (s *FlowSet) start(r *Root, then func(Result), exec func(done func(Result))) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.running == nil {
		s.running = map[*Root]setEntry{}
	}
	e, ok := s.running[r]
	if !ok {
		e.order = s.starts
	}
	e.n++
	s.running[r] = e
	s.starts++
	s.n++
	cancels := s.cancels
	s.mu.Unlock()
	if testHookFlowSetCounted != nil {
		testHookFlowSetCounted()
	}
	// One end per Start, whichever comes: then's return, or a panic of
	// ExecuteThen (r running already), which starts nothing.
	var ended, delivered atomic.Bool
	end := func() {
		if ended.CompareAndSwap(false, true) {
			s.ended(r)
		}
	}
	started := false
	defer func() {
		if !started {
			end()
		}
	}()
	exec(func(res Result) {
		delivered.Store(true) // before then, which may execute r again
		defer end()
		if then != nil {
			then(res)
		} else if e, ok := res.Err.(*Error); ok {
			r.fl.unhandled(e) // as Execute's end does (flow.deliver)
		}
	})
	started = true
	s.cancelIfMissed(r, cancels, &delivered)
	return true
}

// cancelIfMissed cancels the execution of r that start has just begun if
// a Cancel came since the set counted it (cancels was then the count of
// Cancel calls): that Cancel found r not running yet, which Root.Cancel
// ignores, and Shutdown would have waited for the flow to end on its own.
// Only that execution: one that its then began (delivered is set before
// then runs) is not the set's to cancel, and requestStop ignores one that
// has ended.
func (s *FlowSet) cancelIfMissed(r *Root, cancels uint64, delivered *atomic.Bool) {
	gen, running := r.fl.execution()
	if !running || delivered.Load() {
		return
	}
	s.mu.Lock()
	missed := s.cancels != cancels
	s.mu.Unlock()
	if !missed {
		return
	}
	if req := r.fl.requestStop(gen, context.Canceled); req != nil {
		r.fl.postCancel(req)
	}
}

// testHookFlowSetCounted, set by a test, runs in Start once the set has
// counted the flow, before it executes it.
var testHookFlowSetCounted func()

// ended takes an execution of r off the set, and tells a waiter once no
// flow is left.
func (s *FlowSet) ended(r *Root) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.running[r]; e.n > 1 {
		e.n--
		s.running[r] = e
	} else {
		delete(s.running, r)
	}
	if s.n--; s.n == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// Len returns the number of flows started through Start whose then has
// not returned yet.
func (s *FlowSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Cancel cancels every flow of the set ([Root.Cancel]), in the order they
// were started, and returns: each ends once its cancel handlers have run,
// on its loop (on one loop, in that order). A flow started after Cancel is
// not cancelled; one whose Start had begun, and counted it in Len, is,
// even if its execution begins as Cancel returns.
func (s *FlowSet) Cancel() {
	s.mu.Lock()
	s.cancels++
	roots := make([]*Root, 0, len(s.running))
	for r := range s.running {
		roots = append(roots, r)
	}
	slices.SortFunc(roots, func(a, b *Root) int { return cmp.Compare(s.running[a].order, s.running[b].order) })
	s.mu.Unlock()
	for _, r := range roots { // outside the lock: a Cancel may end r at once, and ended locks
		r.Cancel()
	}
}

// Wait waits until no flow of the set runs: it returns nil then, or
// ctx.Err() if ctx ends first. With no flow running it returns nil at
// once, also under a ctx that has ended. Flows may be started meanwhile:
// Wait returns at the first moment none runs.
func (s *FlowSet) Wait(ctx context.Context) error {
	if err := blockMisuse("FlowSet.Wait", setWaitOnLoopInfo, ctx); err != nil {
		return err
	}
	return s.wait(ctx)
}

// setWaitOnLoopInfo is the info of FlowSet.Wait and FlowSet.Shutdown
// called on the goroutine of a Loop, after the method's name.
const setWaitOnLoopInfo = " called on the goroutine of a Loop: it would block that loop," +
	" which the flows it waits for may need"

func (s *FlowSet) wait(ctx context.Context) error {
	s.mu.Lock()
	if s.n == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops the set: Start starts no flow from now on. It waits up
// to grace (on the wall clock, the bubble's in a testing/synctest test)
// for the flows running to end (a grace of 0 or less: not at all),
// cancels those still running then, and waits for them to end. It returns nil once none runs, or ctx.Err() if
// ctx ends first: the flows are then cancelled, without waiting for the
// grace's end, and may still be stopping. A cancelled flow ends promptly
// (its cancel handlers run, an Await step's function has its context
// cancelled and is not waited for), so ctx bounds a loop too busy to run
// them. Shutdown may be called again, to wait again.
func (s *FlowSet) Shutdown(ctx context.Context, grace time.Duration) error {
	if err := blockMisuse("FlowSet.Shutdown", setWaitOnLoopInfo, ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	err := s.wait(graceCtx)
	cancel()
	if err == nil {
		return nil
	}
	s.Cancel()
	return s.wait(ctx)
}
