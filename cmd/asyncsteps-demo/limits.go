package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
)

// limitOptions are the gateway's limits on the requests it serves: at most
// Concurrent at once with Queue more waiting for a slot, and, if Rate is
// positive, at most Rate entries a Period with Burst more waiting for one.
// A request beyond that is answered 503.
type limitOptions struct {
	Concurrent int
	Queue      int
	Rate       int
	Burst      int
	Period     time.Duration // of Rate; 0 means one second (tests use longer)

	// Cluster, when set (-redis), shares the limits with the other
	// instances through Redis; TTL is then the lease of a slot.
	Cluster *redissync.Client
	TTL     time.Duration
}

func (o limitOptions) period() time.Duration {
	if o.Period > 0 {
		return o.Period
	}
	return time.Second
}

// limitSyncer returns the Syncer that enforces o in the flows gateway: a
// Limiter, or a Mutex when there is no rate limit (every field given, so
// that what a zero option means does not matter). The gateway knows it only
// as an asyncsteps.Syncer: a limit shared by a cluster replaces this one
// constructor call.
func limitSyncer(o limitOptions) asyncsteps.Syncer {
	if o.Cluster != nil {
		return clusterLimit(o.Cluster, o)
	}
	if o.Rate > 0 {
		return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: o.Concurrent, MaxQueue: o.Queue, Rate: o.Rate, Period: o.period(), Burst: o.Burst,
		})
	}
	return asyncsteps.NewMutex(o.Concurrent, o.Queue)
}

// queueCounter counts the flows waiting to enter the flows gateway's
// limit, the queue length /stats reports, which a Syncer does not tell:
// the gateway adds a flow when it asks to enter and takes it off when it
// is inside, rejected or cancelled (see quoteJob.leaveQueue). It is safe
// for concurrent use.
type queueCounter struct{ waiting atomic.Int64 }

// Waiting returns the number of flows waiting to enter.
func (q *queueCounter) Waiting() int64 { return q.waiting.Load() }

// plainLimit is the plain gateway's limit, with the same rules as
// limitSyncer's: a semaphore of Concurrent slots with at most Queue waiters,
// then, holding a slot, a window of Rate entries a Period with at most
// Burst waiters (the rules of asyncsteps.Throttle, see windowLimit). It is
// safe for concurrent use.
type plainLimit struct {
	opts        limitOptions
	slots       chan struct{}
	rate        *windowLimit // nil: no rate limit
	slotWaiting atomic.Int64
}

func newPlainLimit(o limitOptions) *plainLimit {
	l := &plainLimit{opts: o, slots: make(chan struct{}, max(o.Concurrent, 1))}
	if o.Rate > 0 {
		l.rate = &windowLimit{limit: o.Rate, maxQueue: o.Burst, period: o.period()}
	}
	return l
}

// acquire takes a slot and an entry of the rate, or fails with
// DefenseRejected (a queue is full) or ctx's error; after a nil error,
// release gives the slot back.
func (l *plainLimit) acquire(ctx context.Context) error {
	if err := l.takeSlot(ctx); err != nil {
		return err
	}
	if l.rate != nil {
		if err := l.rate.enter(ctx); err != nil {
			l.release()
			return err
		}
	}
	return nil
}

func (l *plainLimit) takeSlot(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if l.slotWaiting.Add(1) > int64(l.opts.Queue) {
		l.slotWaiting.Add(-1)
		return &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: "Mutex queue limit"}
	}
	defer l.slotWaiting.Add(-1)
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *plainLimit) release() { <-l.slots }

// Waiting returns the number of requests waiting for a slot or an entry.
func (l *plainLimit) Waiting() int64 {
	n := l.slotWaiting.Load()
	if l.rate != nil {
		n += l.rate.waiting()
	}
	return n
}

// windowLimit lets at most limit requests enter per period, with the
// rules of asyncsteps.Throttle: a period starts at the first entry after
// idle; the requests beyond limit wait, first in first out, at most
// maxQueue of them, for the next period, which lets up to limit of them in
// at once; a period that ends with nobody waiting leaves it idle, with no
// timer armed. (A token bucket such as x/time/rate spreads entries
// evenly instead: not the same limit.) It is safe for concurrent use.
type windowLimit struct {
	limit, maxQueue int
	period          time.Duration

	mu      sync.Mutex // guards the fields below
	running bool       // a period runs: its timer is armed
	entered int        // entries in the current period
	queue   []chan struct{}
}

// enter waits for an entry, or fails with DefenseRejected or ctx's error.
func (w *windowLimit) enter(ctx context.Context) error {
	w.mu.Lock()
	if !w.running {
		w.running, w.entered = true, 0
		time.AfterFunc(w.period, w.nextPeriod)
	}
	if w.entered < w.limit {
		w.entered++
		w.mu.Unlock()
		return nil
	}
	if len(w.queue) >= w.maxQueue {
		w.mu.Unlock()
		return &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: "Throttle queue limit"}
	}
	ch := make(chan struct{})
	w.queue = append(w.queue, ch)
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		if i := slices.Index(w.queue, ch); i >= 0 {
			w.queue = slices.Delete(w.queue, i, i+1)
			return ctx.Err()
		}
		return nil // let in meanwhile: the entry is used, the caller sees ctx end next
	}
}

// nextPeriod ends a period: the waiting requests enter, up to limit, in a
// new one; with nobody waiting the limit goes idle.
func (w *windowLimit) nextPeriod() {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(w.limit, len(w.queue))
	w.entered = n
	if n == 0 {
		w.running = false
		return
	}
	for _, ch := range w.queue[:n] {
		close(ch)
	}
	w.queue = slices.Delete(w.queue, 0, n)
	time.AfterFunc(w.period, w.nextPeriod)
}

func (w *windowLimit) waiting() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.queue))
}
