package asyncsteps

import "time"

// LimiterOptions configures a [Limiter]. The zero value of each field is
// the spec's default (2.5), so LimiterOptions{} lets 1 flow in at a time,
// at most once per second, and queues none.
type LimiterOptions struct {
	Concurrent int           // flows inside at once; 0 means 1
	MaxQueue   int           // flows waiting for concurrency; 0: none
	Rate       int           // entries per Period; 0 means 1
	Period     time.Duration // 0 means one second
	Burst      int           // flows waiting for rate; 0: none
}

// Limiter imposes both a concurrency and a rate limit on its critical
// sections (spec 1.11.7 and 2.5): it is a [Mutex] (Concurrent, MaxQueue)
// followed by a [Throttle] (Rate, Period, Burst). A flow first waits for one
// of the Concurrent slots, then, holding it, for an entry in the current
// period; it gives the slot back however its critical section ends, also
// when the Throttle rejects it.
//
// A flow refused by either limit fails with [DefenseRejected] and the info
// "Mutex queue limit" or "Throttle queue limit", which the error handler
// given to Sync sees first. Reentrance and deadlock detection are those of
// the Mutex; every entry counts for the rate.
//
// A Limiter is safe for concurrent use: flows running on different loops
// may share one. Create it with [NewLimiter]; the zero value is the same as
// NewLimiter(LimiterOptions{}). A Limiter must not be copied after first
// use.
type Limiter struct {
	mutex    Mutex
	throttle Throttle
}

// NewLimiter returns a Limiter with the limits of opts. It panics if an
// option is negative.
func NewLimiter(opts LimiterOptions) *Limiter {
	if opts.Concurrent < 0 || opts.MaxQueue < 0 || opts.Rate < 0 || opts.Period < 0 || opts.Burst < 0 {
		panic("asyncsteps: NewLimiter: negative option")
	}
	l := &Limiter{}
	// Zero fields keep the zero values of the Mutex and Throttle, which
	// are the spec's defaults.
	l.mutex.limit, l.mutex.maxQueue = opts.Concurrent, opts.MaxQueue
	l.throttle.limit, l.throttle.period, l.throttle.maxQueue = opts.Rate, opts.Period, opts.Burst
	return l
}

// Sync implements [Syncer]: it adds to as the steps that wait for a slot of
// the Mutex, then for an entry of the Throttle, run f with onerror as its
// error handler, then give the slot back. The success args of f's step are
// the result of the steps added.
func (l *Limiter) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	addSection(as, f, firstHandler(onerror), &l.mutex, &l.throttle)
}

// enterSection implements sectioner.
func (l *Limiter) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	enterSection(as, f, onerror, args, &l.mutex, &l.throttle)
}
