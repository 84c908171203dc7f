package asyncsteps

import (
	"slices"
	"sync"
	"sync/atomic"
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
// most maxIdleAwaitWorkers goroutines wait for work; one more ends. One
// timer for the pool, armed while any goroutine waits, ends those that have
// waited idleFor: each ends after between idleFor and idleFor plus the
// timer's latency, without a timer of its own to reset and stop for each
// function. A closed Loop ends the waiting ones at once, and the busy ones
// when their function returns, so that no goroutine outlives the Loop;
// Loop.Wait waits for both (see live). A
// function that calls runtime.Goexit ends its goroutine, as it would a new
// one; a locked OS thread or profiler labels that a function leaves set are
// not undone, and Go offers no way to see the lock (docs/DESIGN.md#await).
// It is safe for concurrent use; its zero value keeps no goroutine waiting.
type awaitWorkers struct {
	idleFor time.Duration // set before the first run
	// live counts the goroutines for Loop.Wait, from their start to their
	// end: a goroutine kept costs a function no count of its own. Set
	// before the first run; nil counts nothing.
	live *awaitCalls

	mu sync.Mutex
	// idle are the waiting goroutines, most recently used last, so the
	// longest waiting first: a goroutine is handed work from the end, and
	// the timer ends them from the start.
	idle   []idleWorker
	epoch  time.Time   // the origin of idleWorker.since, set on first use
	timer  *time.Timer // ends the goroutines that waited idleFor; made on first use
	armed  bool        // the timer will run, or runs
	closed bool
}

// idleWorker is a goroutine that waits on ch for its next function (nil,
// or ch closed: it ends), since when (after the pool's epoch: reading the
// monotonic clock alone costs less than time.Now).
type idleWorker struct {
	ch    chan *awaitCall
	since time.Duration
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

// run runs the call c on a waiting goroutine, or on a new one. A call, not
// a func value, is handed over: a method value would cost an allocation.
func (p *awaitWorkers) run(c *awaitCall) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1].ch
		p.idle[n-1] = idleWorker{}
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- c // buffered, and its goroutine waits for nothing else
		return
	}
	p.mu.Unlock()
	go p.work(c, p.live.enter())
}

// work runs the call job, then the calls handed to it, until it is not kept or is
// ended (its channel closed), or a function calls runtime.Goexit. A
// goroutine counted (see awaitWorkers.live) is counted out as it ends.
func (p *awaitWorkers) work(job *awaitCall, counted bool) {
	defer p.ended(counted)
	var ch chan *awaitCall // made once kept: a goroutine never kept needs none
	for job != nil {
		job.run()
		job = nil // let the collector have what it held while waiting
		if ch == nil {
			ch = make(chan *awaitCall, 1)
		}
		if !p.keep(ch) {
			return
		}
		job = <-ch // nil once ended
	}
}

// ended counts a goroutine of the pool out of the loop's live count, if
// counted, as it ends.
func (p *awaitWorkers) ended(counted bool) {
	if hook := testHookAwaitWorkerEnds.Load(); hook != nil {
		(*hook)(p)
	}
	if counted {
		p.live.exit()
	}
}

// testHookAwaitWorkerEnds, set by a test, runs on a goroutine of the pool
// p as it ends, before it counts out of the loop's live count. Atomic: the
// goroutines of other tests' loops may end as a test sets it.
var testHookAwaitWorkerEnds atomic.Pointer[func(p *awaitWorkers)]

// keep adds ch, a goroutine that has finished its job, to the waiting
// ones, unless the Loop is closed or enough wait already, and arms the
// timer if it is not.
func (p *awaitWorkers) keep(ch chan *awaitCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.idleFor <= 0 || len(p.idle) >= maxIdleAwaitWorkers {
		return false
	}
	if p.epoch.IsZero() {
		p.epoch = time.Now()
	}
	p.idle = append(p.idle, idleWorker{ch: ch, since: time.Since(p.epoch)})
	if !p.armed {
		p.armed = true
		p.arm(p.idleFor)
	}
	return true
}

// arm sets the timer to run expire after d. Under mu.
func (p *awaitWorkers) arm(d time.Duration) {
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.expire)
		return
	}
	p.timer.Reset(d)
}

// expire ends the goroutines that have waited idleFor or more, and arms
// the timer for the longest waiting of the others.
func (p *awaitWorkers) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.armed {
		return
	}
	now := time.Since(p.epoch)
	n := 0
	for n < len(p.idle) && now-p.idle[n].since >= p.idleFor {
		close(p.idle[n].ch)
		n++
	}
	p.idle = slices.Delete(p.idle, 0, n)
	if len(p.idle) == 0 {
		p.armed = false
		return
	}
	p.arm(p.idleFor - (now - p.idle[0].since))
}

// close ends the waiting goroutines; the busy ones end after their job.
func (p *awaitWorkers) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	for _, w := range idle {
		close(w.ch)
	}
}
