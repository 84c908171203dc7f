//go:build cgo

package cabi

import (
	"sync"
	"sync/atomic"

	"github.com/asyncsteps/asyncsteps"
)

// loopPosts keeps, for one Loop, the callbacks posted to it (see
// flowCtx.post) from their post until the loop runs them. A closing Loop
// drops the callbacks it accepted and had not run, and refuses later ones:
// once it has stopped, a single goroutine per loop runs the fallback of
// each callback still kept, so that the cleanups of a free, say, run all
// the same, after the loop's last callback and never beside it.
//
// A post whose callback runs costs a lock to link it and one to unlink it:
// no goroutine, no channel.
type loopPosts struct {
	loop       *asyncsteps.Loop
	mu         sync.Mutex
	head, tail *posted // in the order posted
	stopped    bool    // the loop has stopped: its watcher took the list
}

// posted is one callback posted to a loop, with its fallback. Whichever
// of the two claims it first runs; the other never does.
type posted struct {
	claimed    atomic.Bool
	f, dropped func()
	prev, next *posted
	in         *loopPosts
}

var (
	// postsOf holds the loopPosts of each Loop that cabi posts to, from
	// its first post until it has stopped.
	postsOf sync.Map // *asyncsteps.Loop -> *loopPosts

	// afterStop makes the fallbacks run one at a time, also those of posts
	// to loops that had stopped already: they touch the state of a flow
	// (its nodes, its state variables) that the loop no longer owns.
	afterStop sync.Mutex
)

// postsFor returns the loopPosts of l, made and watched on first use.
func postsFor(l *asyncsteps.Loop) *loopPosts {
	if v, ok := postsOf.Load(l); ok {
		return v.(*loopPosts)
	}
	v, loaded := postsOf.LoadOrStore(l, &loopPosts{loop: l})
	p := v.(*loopPosts)
	if !loaded {
		go p.watch()
	}
	return p
}

// watch waits until the loop has stopped, then runs the fallback of every
// callback the loop did not run.
func (lp *loopPosts) watch() {
	<-lp.loop.Done()
	lp.mu.Lock()
	left := lp.head
	lp.head, lp.tail, lp.stopped = nil, nil, true
	lp.mu.Unlock()
	postsOf.CompareAndDelete(lp.loop, lp) // a post from now on finds lp stopped, through its flow
	for p := left; p != nil; {
		next := p.next
		p.prev, p.next = nil, nil
		p.drop()
		p = next
	}
}

// post schedules f on the loop, and keeps dropped in case the loop drops
// or refuses f; on a loop that has stopped, dropped runs at once, on a
// goroutine of its own.
func (lp *loopPosts) post(f, dropped func()) {
	p := &posted{f: f, dropped: dropped, in: lp}
	if !lp.link(p) {
		go p.drop()
		return
	}
	// Refused (the loop is closing): p stays linked for watch.
	lp.loop.Immediate(p.run)
}

// link appends p to the list; false once the loop has stopped.
func (lp *loopPosts) link(p *posted) bool {
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
func (lp *loopPosts) unlink(p *posted) {
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

// drop runs the fallback, once the loop has stopped.
func (p *posted) drop() {
	if p.claimed.CompareAndSwap(false, true) {
		afterStop.Lock()
		defer afterStop.Unlock()
		p.dropped()
	}
}
