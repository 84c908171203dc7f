package redissync

import (
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// LimiterOptions configures a [Limiter]; its first five fields are those
// of [asyncsteps.LimiterOptions], for the whole cluster, except that a
// zero Concurrent or Rate means 1 (the FutoIn spec's default), not "no
// limit". The zero value lets 1 flow in at a time, at most once per
// second, and queues none.
//
// This differs from the core's: asyncsteps.LimiterOptions{Rate: 100} has
// no concurrency limit, LimiterOptions{Rate: 100} here lets one flow of
// the cluster in at a time. Set Concurrent for as many as the cluster
// should run at once (see the package doc's "Zero values differ from the
// core's").
type LimiterOptions struct {
	Concurrent int           // flows inside at once in the cluster; 0 means 1 (the core's 0 means no concurrency limit)
	MaxQueue   int           // flows of this process waiting for concurrency; 0: none; negative: unlimited
	Rate       int           // entries per Period in the cluster; 0 means 1 (the core's 0 means no rate limit)
	Period     time.Duration // 0 means one second
	Burst      int           // flows of this process waiting for rate; 0: none; negative: unlimited
	TTL        time.Duration // the lease of a concurrency slot, as MutexOptions.TTL
	FailOpen   bool          // the rate limit lets flows in while Redis is lost (the concurrency limit never does)
}

// Limiter imposes both a concurrency and a rate limit on its critical
// sections, for the whole cluster: it is a [Mutex] (Concurrent, MaxQueue,
// TTL) followed by a [Throttle] (Rate, Period, Burst), whose keys are the
// Limiter's name followed by "/concurrent" and "/rate". A flow first waits
// for a slot, then, holding it, for an entry; it gives the slot back
// however its section ends. A flow that the rate limit refuses gives the
// slot back at once, before the error handler given to Sync sees the
// refusal.
//
// A flow refused by either limit fails with [asyncsteps.DefenseRejected]
// and the info "Mutex queue limit" or "Throttle queue limit", or, when
// Redis cannot be reached, with [asyncsteps.CommError]; the error handler
// given to Sync sees it first. The fencing token of the slot is read with
// [Limiter.Token].
//
// A flow whose Loop is closed stops without its cancel handlers: while it
// waits for a slot or an entry, it leaves that queue at the next round
// trip and is never admitted; a slot it holds is given back at the next
// renewal or re-check, as a [Mutex]'s lease.
//
// A Limiter is safe for concurrent use: flows on any loops may share it.
// Make it with [Client.NewLimiter]; a nil or zero Limiter, or one made by a
// zero Client, fails every flow that enters it with InternalError.
type Limiter struct {
	mutex    *Mutex
	throttle *Throttle
}

// NewLimiter returns the Limiter name with the limits of opts. It panics
// if Concurrent, Rate, Period or TTL is negative. Use one Limiter per
// name in a process.
func (c *Client) NewLimiter(name string, opts LimiterOptions) *Limiter {
	refuseNegative("NewLimiter", countOption("Concurrent", opts.Concurrent), countOption("Rate", opts.Rate),
		spanOption("Period", opts.Period), spanOption("TTL", opts.TTL))
	return &Limiter{
		mutex: c.NewMutex(name+"/concurrent", MutexOptions{
			Max: opts.Concurrent, MaxQueue: opts.MaxQueue, TTL: opts.TTL,
		}),
		throttle: c.NewThrottle(name+"/rate", ThrottleOptions{
			Rate: opts.Rate, Period: opts.Period, MaxQueue: opts.Burst, FailOpen: opts.FailOpen,
		}),
	}
}

// Sync implements [asyncsteps.Syncer]: it adds to as the steps that wait
// for a slot, then for an entry, run f with onerror as its error handler,
// then give the slot back. The success args of f's step are the result of
// the steps added.
// With a nil f, the step it adds fails with InternalError, "Sync: nil step
// function", and asks Redis for nothing.
func (l *Limiter) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if l == nil || l.mutex == nil || l.mutex.c.unmade() {
		refuseUnmade(as, "Limiter", onerror)
		return
	}
	syncSection(as, f, onerror, l.mutex, l.throttle)
}

// Hold keeps every flow of the cluster out of the Limiter's rate limit
// until the instant until, as [Throttle.Hold] does; in Redis, the hold is
// that of the Throttle named N/rate. A Limiter here always has a rate
// limit (a zero Rate means 1), so its Hold always holds, where the
// in-process [asyncsteps.Limiter] without Rate holds nothing. The flows
// that hold a concurrency slot, or come and take one, wait for the
// hold's end with the flows waiting for the rate, within Burst (with
// none, they are refused at once): their slots stay taken in the whole
// cluster meanwhile, as the in-process Limiter's do in one process. On a
// nil or zero Limiter it does nothing.
func (l *Limiter) Hold(until time.Time) {
	if l != nil {
		l.throttle.Hold(until)
	}
}

// Token returns the fencing token of the concurrency slot the flow of as
// holds, as [Mutex.Token].
func (l *Limiter) Token(as asyncsteps.AsyncSteps) (int64, bool) {
	if l == nil {
		return 0, false
	}
	return l.mutex.Token(as)
}
