//go:build cgo

package cabi

import (
	"sync"
	"sync/atomic"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// loopCtx is what cabi keeps of one Loop, from the first flow made on it
// until it has stopped: the pin of its thread (see pinLoop) and the
// callbacks posted to it (see flowCtx.post) from their post until the loop
// runs them. A closing Loop drops the callbacks it accepted and had not
// run, and refuses later ones: once it has stopped, a single goroutine per
// loop forgets it and queues the fallback of each callback still kept (see
// afterStop), so that the cleanups of a free, say, run all the same, after
// the loop's last callback and never beside it.
//
// A post whose callback runs costs a lock to link it and one to unlink it:
// no goroutine, no channel. The loop of DefaultTool, which never closes
// (toolinfo.NeverCloses), has no watcher, and its posts are not kept.
type loopCtx struct {
	loop *asyncsteps.Loop
	// neverCloses: the loop of DefaultTool, which drops nothing it
	// accepts and refuses nothing: no watcher, and posts are not kept.
	neverCloses bool
	pinMu       sync.Mutex // held only briefly, never while waiting for the loop
	pin         *pinned
	mu          sync.Mutex
	head, tail  *posted // in the order posted
	stopped     bool    // the loop has stopped: its watcher took the list
	forgotten   bool    // under flows.mu: the watcher dropped the loop's flows
}

// posted is one callback posted to a loop, with its fallback. Whichever
// of the two claims it first runs; the other never does.
type posted struct {
	claimed    atomic.Bool
	f, dropped func()
	prev, next *posted
	in         *loopCtx
}

var (
	// loops holds the loopCtx of each Loop that a C flow runs on, until
	// the loop has stopped: then its watcher forgets it, so that a
	// program that makes and closes loops does not keep every closed one.
	loops sync.Map // *asyncsteps.Loop -> *loopCtx

	// afterStop runs the fallbacks one at a time, in the order they come,
	// also those of posts to loops that had stopped already: they touch the
	// state of a flow (its nodes, its state variables) that the loop no
	// longer owns, and a later call must find an earlier one done (a free
	// after a success given to a step must not cancel that step).
	afterStop struct {
		mu      sync.Mutex
		queue   []*posted
		running bool // a goroutine runs the queue (see runDropped)
	}
)

// loopFor returns the loopCtx of l, made and watched on first use (but
// for the loop of DefaultTool, which never stops). On a loop that has
// stopped it is made all the same, and forgotten at once.
func loopFor(l *asyncsteps.Loop) *loopCtx {
	if v, ok := loops.Load(l); ok {
		return v.(*loopCtx)
	}
	v, loaded := loops.LoadOrStore(l, &loopCtx{loop: l, neverCloses: toolinfo.NeverCloses(l)})
	p := v.(*loopCtx)
	if !loaded && !p.neverCloses {
		// Before any node of the loop's flows is made. Refused, the loop
		// has begun to stop: it runs no step that could give C one.
		toolinfo.BeforeStop(l, p.stopping)
		go p.watch()
	}
	return p
}

// stopping runs on the loop's goroutine as it stops (toolinfo.BeforeStop),
// before IsValid turns false for the steps it leaves waiting: it records
// what IsValid says then of each Go step given to C by Binary in its
// flows (see node.valid).
func (lp *loopCtx) stopping() { recordStops(lp.external()) }

// recordStops records the stop for each of nodes (see node.recordStop).
// A decorator's IsValid that calls runtime.Goexit ends the loop's
// goroutine, which the loop replaces, and recover does not stop it: the
// nodes after it are recorded as it unwinds, so that the steps left
// waiting still get their C cancel handlers. That one records nothing,
// as for a panic.
func recordStops(nodes []*node) {
	defer func() {
		if len(nodes) > 0 { // a Goexit in nodes[0]'s IsValid
			recordStops(nodes[1:])
		}
	}()
	for len(nodes) > 0 {
		nodes[0].recordStop()
		nodes = nodes[1:]
	}
}

// external returns the nodes that Binary made on the loop for the steps
// of its flows and that are not released yet. IsValid, user code for a
// decorator, is called on them after flows.mu is let go. On the loop.
func (lp *loopCtx) external() []*node {
	flows.mu.Lock()
	defer flows.mu.Unlock()
	var nodes []*node
	for _, fc := range flows.m {
		if fc.loop != lp {
			continue
		}
		for _, n := range fc.external {
			if !n.released.Load() {
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// watch waits until the loop has stopped, forgets it, then queues the
// fallback of every callback the loop did not run.
func (lp *loopCtx) watch() {
	<-lp.loop.Done()
	// A flow made from now on gets a loopCtx of its own, watched again; one
	// made before posts through lp, into the list or, once it is stopped,
	// straight to afterStop.
	loops.CompareAndDelete(lp.loop, lp)
	lp.forgetFlows()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	var left []*posted
	for p := lp.head; p != nil; {
		next := p.next
		p.prev, p.next = nil, nil
		left = append(left, p)
		p = next
	}
	lp.head, lp.tail, lp.stopped = nil, nil, true
	// Under lp.mu: ahead of every post that finds lp stopped.
	dropLater(left...)
}

// forgetFlows drops the loop's flows from flows once it has stopped. An
// entry keeps its Loop, and a Loop may still reach the State of a flow
// that ran on it (its engine's pools keep objects of the last steps),
// whose going the entry waits for: neither would ever go. A flow made on
// the loop from now on is not kept in flows (see flowFor): nothing will
// run it.
func (lp *loopCtx) forgetFlows() {
	flows.mu.Lock()
	defer flows.mu.Unlock()
	lp.forgotten = true
	for key, fc := range flows.m {
		if fc.loop == lp {
			delete(flows.m, key)
		}
	}
}

// post schedules f on the loop, and keeps dropped in case the loop drops
// or refuses f; on a loop that has stopped, dropped is queued at once.
func (lp *loopCtx) post(f, dropped func()) {
	if lp.neverCloses {
		lp.loop.Immediate(f) // it runs f: no fallback to keep
		return
	}
	p := &posted{f: f, dropped: dropped, in: lp}
	if !lp.link(p) {
		dropLater(p)
		return
	}
	// Refused (the loop is closing): p stays linked for watch.
	lp.loop.Immediate(p.run)
}

// link appends p to the list; false once the loop has stopped.
func (lp *loopCtx) link(p *posted) bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.stopped {
		return false
	}
	p.prev = lp.tail
	if lp.tail != nil {
		lp.tail.next = p
	} else {
		lp.head = p
	}
	lp.tail = p
	return true
}

// unlink takes p out of the list, unless watch has taken the list.
func (lp *loopCtx) unlink(p *posted) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.stopped {
		return
	}
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		lp.head = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		lp.tail = p.prev
	}
	p.prev, p.next = nil, nil
}

// run is the callback the loop runs.
func (p *posted) run() {
	if p.claimed.CompareAndSwap(false, true) {
		p.in.unlink(p)
		p.f()
	}
}

// drop runs the fallback, once the loop has stopped, on afterStop's
// goroutine.
func (p *posted) drop() {
	if p.claimed.CompareAndSwap(false, true) {
		p.dropped()
	}
}

// dropLater queues the fallbacks of ps, in order, and starts the goroutine
// that runs the queue unless it runs already. It never waits for a
// fallback: a fallback may post (a cancel handler that calls success).
func dropLater(ps ...*posted) {
	if len(ps) == 0 {
		return
	}
	afterStop.mu.Lock()
	defer afterStop.mu.Unlock()
	afterStop.queue = append(afterStop.queue, ps...)
	if !afterStop.running {
		afterStop.running = true
		go runDropped()
	}
}

// runDropped runs the queued fallbacks until the queue is empty; then its
// goroutine ends.
func runDropped() {
	for {
		afterStop.mu.Lock()
		if len(afterStop.queue) == 0 {
			afterStop.running = false
			afterStop.mu.Unlock()
			return
		}
		p := afterStop.queue[0]
		afterStop.queue[0] = nil
		afterStop.queue = afterStop.queue[1:]
		afterStop.mu.Unlock()
		p.drop()
	}
}
