package redissync

import (
	"sync/atomic"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/misuse"
)

// gate is one admission stage of a critical section: a Mutex or a
// Throttle. Its methods run on the flow's loop.
type gate interface {
	// enter runs as the step that asks to enter. It settles w at once, or
	// makes as wait and hands w to the gate's goroutine, which completes
	// as once w is admitted or refused.
	enter(as asyncsteps.AsyncSteps, w *waiter)
	// inside runs in the section's body step, before f, for an admitted w.
	inside(as asyncsteps.AsyncSteps, w *waiter)
	// leave gives back what w holds, or takes it out of the queue.
	leave(as asyncsteps.AsyncSteps, w *waiter)
}

// wstate is where a waiter is. It is guarded by the mutex of its gate.
type wstate uint8

const (
	wNone   wstate = iota // not asked (or entered again without asking)
	wFresh                // asked, its first try not made yet
	wQueued               // tried, waits in the gate's queue
	wHeld                 // admitted
	wLeft                 // given back, or left the queue
)

// waiter is one flow's passage through one gate.
type waiter struct {
	state wstate                // guarded by the gate's mutex
	as    asyncsteps.AsyncSteps // the waiting step, while fresh or queued

	// Written by the gate's goroutine before it completes the waiting
	// step, read on the flow's loop after.
	err   *asyncsteps.Error // the refusal, raised by the body step
	lease string            // Mutex: the lease's name
	token int64             // Mutex: the fencing token

	// Mutex: the lease is known to be gone (a renewal found it gone, or
	// Close gave it back). Set by the gate's goroutine while the section
	// runs, read by Token on the flow's loop.
	lost atomic.Bool

	hold *hold           // Mutex: the hold this section shares, set inside
	kl   keyState        // a keyed Syncer: the state of the key entered, set by enter
	key  any             // Mutex: the holder it asks for, its flow or parallel branch
	tool asyncsteps.Tool // the flow's loop, to find a waiter or holder whose loop was closed
	// Mutex: the flows and branches that key was started from, which
	// wait for it to end (see toolinfo.OuterKeys); none for a flow.
	outer []any
}

// section is one pass of a flow through a critical section guarded by one
// or two gates (a Limiter's Mutex and Throttle), entered in order:
//
//	enter step     cancel handler: leave every gate
//	├─ enterNext   once per gate; waits for the gate's goroutine
//	├─ body        raises a refusal, or runs f with the enter step's args and onerror as its handler
//	└─ end         leaves every gate, then succeeds with f's result
//
// An error that leaves f's step (a panic is one), a timeout and a cancel
// all pass the enter step, whose cancel handler gives the gates back; on
// success, end does it and passes f's result on, so the section is
// transparent to the args. A refusal is raised by body so that onerror
// sees it first; f does not run then, and the gates were left just before.
//
// Its fields are used on the flow's loop only.
type section struct {
	f       asyncsteps.StepFunc
	args    []any
	gates   [2]gate
	waiters [2]waiter
	n       int  // gates in use
	next    int  // the gate the next enterNext asks
	left    bool // leave ran
}

// syncSection adds to as the step that runs f in a critical section
// guarded by gates. A nil f is refused before any gate is asked, with the
// info the Syncers of asyncsteps give it, so that the user learns which
// argument was nil rather than meeting a nil dereference inside the
// section.
func syncSection(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror []asyncsteps.ErrorFunc, gates ...gate) {
	if f == nil {
		refuse(as, "Sync: nil step function", onerror)
		return
	}
	if info := misuse.ExtraArgs("Sync", "error handler", len(onerror)); info != "" {
		// As the Syncers of asyncsteps refuse it.
		refuse(as, info, nil)
		return
	}
	var g [2]gate
	n := copy(g[:], gates)
	var handler asyncsteps.ErrorFunc
	if len(onerror) > 0 {
		handler = onerror[0]
	}
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		s := &section{f: f, args: args, gates: g, n: n}
		as.SetCancel(s.cancel)
		for range n {
			as.Add(s.enterNext)
		}
		if handler != nil {
			as.Add(s.body, handler)
		} else {
			as.Add(s.body)
		}
		as.Add(s.end)
	})
}

func (s *section) enterNext(as asyncsteps.AsyncSteps, _ ...any) {
	i := s.next
	s.next++
	if s.refusal() == nil {
		s.gates[i].enter(as, &s.waiters[i])
	}
}

func (s *section) body(as asyncsteps.AsyncSteps, _ ...any) {
	if err := s.refusal(); err != nil {
		// A refused flow is not inside: what the gates before the one
		// that refused gave it (a Limiter's slot) goes back now, not once
		// the refusal has unwound past onerror, which may recover by
		// waiting.
		s.leave(as)
		raise(as, err)
		return
	}
	for i := range s.n {
		s.gates[i].inside(as, &s.waiters[i])
	}
	s.f(as, s.args...)
}

func (s *section) end(as asyncsteps.AsyncSteps, args ...any) {
	s.leave(as)
	as.Success(args...)
}

func (s *section) cancel(as asyncsteps.AsyncSteps) { s.leave(as) }

// leave gives back every gate, the last entered first, once.
func (s *section) leave(as asyncsteps.AsyncSteps) {
	if s.left {
		return
	}
	s.left = true
	for i := s.n - 1; i >= 0; i-- {
		s.gates[i].leave(as, &s.waiters[i])
	}
}

// raise fails the step of as with err. One with a cause (the Go error of
// a failed round trip, which names the Redis server) is raised as
// [asyncsteps.AwaitResult] raises a flow's error, so that the cause stays
// under the flow's error for the logs, also when as is a decorator that
// unwraps (see asyncsteps.Unwrapper): Error takes only the code and the
// info, which do not name the server. The Result waits in the channel
// already: the step takes it at once, without a goroutine.
func raise(as asyncsteps.AsyncSteps, err *asyncsteps.Error) {
	if err.Cause == nil {
		as.Error(err.Code, err.Info)
		return
	}
	ready := make(chan asyncsteps.Result, 1)
	ready <- asyncsteps.Result{Err: err}
	asyncsteps.AwaitResult(as, ready)
}

// refusal returns the first refusal of a gate, or nil.
func (s *section) refusal() *asyncsteps.Error {
	for i := range s.n {
		if err := s.waiters[i].err; err != nil {
			return err
		}
	}
	return nil
}

// waitList is a first-in, first-out list of waiters. A waiter that leaves
// is only marked (wLeft) and dropped by tidy, on the gate's goroutine.
type waitList struct {
	items []*waiter
	live  int // those that wait (wQueued)
}

func (l *waitList) push(w *waiter) {
	l.items = append(l.items, w)
	l.live++
}

// tidy drops the waiters at the front that no longer wait, and the others
// that no longer wait once they are most of the list: each waiter costs
// its share of a walk, not a walk at each round trip. Called with the
// gate's mutex held.
func (l *waitList) tidy() {
	i := 0
	for i < len(l.items) && l.items[i].state != wQueued {
		i++
	}
	clear(l.items[:i])
	l.items = l.items[i:]
	if len(l.items) > 2*l.live+16 {
		l.compact()
	}
}

// compact drops the waiters that have left or been admitted. Called with
// the gate's mutex held.
func (l *waitList) compact() {
	kept := l.items[:0]
	for _, w := range l.items {
		if w.state == wQueued {
			kept = append(kept, w)
		}
	}
	clear(l.items[len(kept):])
	l.items = kept
	l.live = len(kept)
}
