package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
	"golang.org/x/time/rate"
)

// limitOptions are the gateway's limits on the requests it serves: at most
// Concurrent at once with Queue more waiting for a slot, and, if Rate is
// positive, at most Rate entries a second with Burst more waiting for one.
// A request beyond that is answered 503.
type limitOptions struct {
	Concurrent int
	Queue      int
	Rate       int
	Burst      int

	// Cluster, when set (-redis), shares the limits with the other
	// instances through Redis; TTL is then the lease of a slot.
	Cluster *redissync.Client
	TTL     time.Duration
}

// newLimit returns the flows gateway's limit: a Limiter, or a Mutex when
// there is no rate limit, counted by a queueCounter. The gateway knows it
// only as an asyncsteps.Syncer, so a limit shared by a cluster is this one
// constructor call away.
func newLimit(o limitOptions) *queueCounter {
	var s asyncsteps.Syncer
	switch {
	case o.Cluster != nil:
		s = clusterLimit(o.Cluster, o)
	case o.Rate > 0:
		s = asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: o.Concurrent, MaxQueue: o.Queue, Rate: o.Rate, Period: time.Second, Burst: o.Burst,
		})
	default:
		s = asyncsteps.NewMutex(o.Concurrent, o.Queue)
	}
	return &queueCounter{syncer: s}
}

// queueCounter is a Syncer that counts the flows waiting to enter the one
// it wraps: the limiter's queue length, for /stats. It is safe for
// concurrent use.
type queueCounter struct {
	syncer  asyncsteps.Syncer
	waiting atomic.Int64
}

// Sync implements asyncsteps.Syncer. A flow counts as waiting from the
// moment it asks to enter until it is inside, rejected or cancelled.
func (q *queueCounter) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		q.waiting.Add(1)
		waiting := true // read and written on the flow's loop only
		leave := func() {
			if waiting {
				waiting = false
				q.waiting.Add(-1)
			}
		}
		as.SetCancel(func(asyncsteps.AsyncSteps) { leave() })
		q.syncer.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
			leave()
			f(as, args...)
		}, func(as asyncsteps.AsyncSteps, code string) {
			leave()
			if len(onerror) > 0 && onerror[0] != nil {
				onerror[0](as, code)
			}
		})
	})
}

// Waiting returns the number of flows waiting to enter.
func (q *queueCounter) Waiting() int64 { return q.waiting.Load() }

// plainLimit is the plain gateway's limit, with the same rules as
// newLimit's: a semaphore of Concurrent slots with at most Queue waiters,
// then a token bucket of Rate a second with at most Burst waiters. It is
// safe for concurrent use.
type plainLimit struct {
	opts        limitOptions
	slots       chan struct{}
	rate        *rate.Limiter // nil: no rate limit
	slotWaiting atomic.Int64
	rateWaiting atomic.Int64
}

func newPlainLimit(o limitOptions) *plainLimit {
	l := &plainLimit{opts: o, slots: make(chan struct{}, max(o.Concurrent, 1))}
	if o.Rate > 0 {
		l.rate = rate.NewLimiter(rate.Limit(o.Rate), o.Rate)
	}
	return l
}

// acquire takes a slot and a rate token, or fails with DefenseRejected (a
// queue is full) or ctx's error; after a nil error, release gives the
// slot back.
func (l *plainLimit) acquire(ctx context.Context) error {
	if err := l.takeSlot(ctx); err != nil {
		return err
	}
	if err := l.takeToken(ctx); err != nil {
		l.release()
		return err
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

func (l *plainLimit) takeToken(ctx context.Context) error {
	if l.rate == nil {
		return nil
	}
	r := l.rate.Reserve()
	delay := r.Delay()
	if delay == 0 {
		return nil
	}
	if l.rateWaiting.Add(1) > int64(l.opts.Burst) {
		l.rateWaiting.Add(-1)
		r.Cancel()
		return &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: "Throttle queue limit"}
	}
	defer l.rateWaiting.Add(-1)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

func (l *plainLimit) release() { <-l.slots }

// Waiting returns the number of requests waiting for a slot or a token.
func (l *plainLimit) Waiting() int64 { return l.slotWaiting.Load() + l.rateWaiting.Load() }
