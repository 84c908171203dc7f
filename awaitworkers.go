package asyncsteps

import (
	"slices"
	"sync"
	"time"
)

// awaitWorkers runs the Await functions of a Loop's flows on goroutines
// that the Loop keeps between them, rather than on a new goroutine each.
//
// A new goroutine starts with the smallest stack, and a function that
// makes an HTTP request grows it several times over; each growth copies
// the stack and walks every frame on it. For the gateway of
// cmd/asyncsteps-demo that was a quarter of the instructions of a request.
// A goroutine kept from one Await function to the next has its stack grown
// already, and costs a channel hand-off instead of a goroutine start.
//
// Each function still runs alone on its goroutine, as Await promises. At
// most maxIdleAwaitWorkers goroutines wait for work, each for at most
// idleFor: one more, or one that waited that long, ends. A closed Loop ends
// the waiting ones at once, and the busy ones when their function returns,
// so that no goroutine outlives the Loop. A function that calls
// runtime.Goexit ends its goroutine, as it would a new one; a locked OS
// thread or profiler labels that a function leaves set are not undone, and
// Go offers no way to see the lock (docs/DESIGN.md#await). It is safe for
// concurrent use; its zero value keeps no goroutine waiting.
type awaitWorkers struct {
	idleFor time.Duration // set before the first run

	mu     sync.Mutex
	idle   []chan func() // the waiting goroutines, most recently used last
	closed bool
}

// awaitWorkerIdle is how long a kept goroutine waits for its next Await
// function: far longer than the gaps between requests of a busy service,
// short enough that a burst leaves no goroutines behind for long.
const awaitWorkerIdle = time.Second

// maxIdleAwaitWorkers bounds the goroutines a Loop keeps waiting for Await
// functions: enough for the requests in flight of a busy service on one
// loop, few enough that their stacks (shrunk by the collector while they
// wait) cost little.
const maxIdleAwaitWorkers = 128

// run runs job on a waiting goroutine, or on a new one.
func (p *awaitWorkers) run(job func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- job // buffered, and its goroutine waits for nothing else
		return
	}
	p.mu.Unlock()
	go p.work(job)
}

// work runs job, then the jobs handed to it, until it is not kept or has
// waited idleFor for one.
func (p *awaitWorkers) work(job func()) {
	var ch chan func() // made once kept: a goroutine never kept needs none
	var idle *time.Timer
	for job != nil {
		job()
		job = nil // let the collector have what it held while waiting
		if ch == nil {
			ch = make(chan func(), 1)
		}
		if !p.keep(ch) {
			return
		}
		if idle == nil {
			idle = time.NewTimer(p.idleFor)
		} else {
			idle.Reset(p.idleFor)
		}
		select {
		case job = <-ch: // nil once the Loop is closed
			idle.Stop()
		case <-idle.C:
			if !p.drop(ch) {
				job = <-ch // handed a job meanwhile, or closed
			}
		}
	}
}

// keep adds ch, a goroutine that has finished its job, to the waiting
// ones, unless the Loop is closed or enough wait already.
func (p *awaitWorkers) keep(ch chan func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.idleFor <= 0 || len(p.idle) >= maxIdleAwaitWorkers {
		return false
	}
	p.idle = append(p.idle, ch)
	return true
}

// drop takes ch, a goroutine that waited idleFor, from the waiting ones;
// false if run or close took it first.
func (p *awaitWorkers) drop(ch chan func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, ch)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	return true
}

// close ends the waiting goroutines; the busy ones end after their job.
func (p *awaitWorkers) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}
