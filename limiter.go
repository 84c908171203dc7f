package asyncsteps

import (
	"strconv"
	"time"
)

// Unlimited, given as a queue limit (the maxQueue of [NewMutex] and
// [NewThrottle], [LimiterOptions.MaxQueue] and [LimiterOptions.Burst]),
// lets any number of flows wait.
//
// The three primitives share one queue rule: a queue limit n lets at most
// n flows wait, so 0 lets none wait and a flow that finds no room fails at
// once with [DefenseRejected]; any negative limit is unlimited; and a limit
// left out is unlimited: NewMutex and NewThrottle without maxQueue, the
// zero Mutex and the zero Throttle. A LimiterOptions field cannot be left
// out, so its zero is a limit of 0, as in the FutoIn spec.
const Unlimited = -1

// queueLimit is the queue limit of a Mutex or Throttle. Its zero value is
// unlimited, so that the zero Mutex and Throttle queue without limit.
type queueLimit struct {
	n       int
	limited bool
}

// queueLimitOf returns the limit n: negative is unlimited.
func queueLimitOf(n int) queueLimit {
	if n < 0 {
		return queueLimit{}
	}
	return queueLimit{n: n, limited: true}
}

// optionalQueueLimit is the optional maxQueue argument: none is unlimited.
func optionalQueueLimit(maxQueue []int) queueLimit {
	if len(maxQueue) == 0 {
		return queueLimit{}
	}
	return queueLimitOf(maxQueue[0])
}

// full reports whether a queue of length n has no room left.
func (q queueLimit) full(n int) bool { return q.limited && n >= q.n }

// LimiterOptions configures a [Limiter]. A zero Concurrent or Rate means
// "not limited by this", so LimiterOptions{} lets every flow in at once
// (a zero MaxQueue or Burst, a queue limit, lets none wait: see
// [Unlimited]); set Concurrent for a concurrency limit, Rate for a rate
// limit, or start from [SpecLimiterOptions] for the FutoIn spec's defaults.
type LimiterOptions struct {
	// Concurrent is how many flows may be inside the Limiter's critical
	// sections at once; 0 means no concurrency limit (MaxQueue is unused
	// then).
	Concurrent int
	// MaxQueue is how many flows may wait for one of the Concurrent slots;
	// 0 lets none wait (a flow that finds every slot taken is rejected),
	// a negative value ([Unlimited]) lets any number wait.
	MaxQueue int
	// Rate is how many flows may enter per Period; 0 means no rate limit
	// (Period and Burst are unused then).
	Rate int
	// Period is the length of a rate period; 0 means one second.
	Period time.Duration
	// Burst is how many flows may wait for the next period once Rate
	// flows have entered in this one; 0 lets none wait, a negative value
	// ([Unlimited]) lets any number wait. It is a queue limit, not the
	// burst of golang.org/x/time/rate's token bucket: a period begins with
	// its first entry and its Rate entries may all come at once, so Rate-1
	// entries just before a period's end and Rate as the next begins make
	// 2×Rate-1 within moments. A shorter Period with a smaller Rate
	// halves that (5 per 500ms for 10 a second: 9 rather than 19); while
	// flows wait, Rate enter at the start of each period. A Rate of 1
	// with Period divided by the rate, rounded up (1 per 100ms for 10 a
	// second), never lets more than that rate in within any window of
	// the whole Period, as flows enter: what an upstream that counts over
	// a sliding window allows, less a margin for the latencies.
	Burst int
}

// SpecLimiterOptions returns the defaults of the FutoIn spec's Limiter
// (section 2.5): one flow inside at a time, one entry per second, no queue
// for either. They are not the zero LimiterOptions, whose zero Concurrent
// and Rate mean "no limit"; to keep the spec's defaults and change one limit, start from
// them:
//
//	opts := asyncsteps.SpecLimiterOptions()
//	opts.Burst = 10
//	lim := asyncsteps.NewLimiter(opts)
func SpecLimiterOptions() LimiterOptions {
	return LimiterOptions{Concurrent: 1, MaxQueue: 0, Rate: 1, Period: time.Second, Burst: 0}
}

// Limiter imposes both a concurrency and a rate limit on its critical
// sections (spec 1.11.7 and 2.5): it is a [Mutex] (Concurrent, MaxQueue)
// followed by a [Throttle] (Rate, Period, Burst), each present only when
// its limit is set. A flow first waits for one of the Concurrent slots,
// then, holding it, for an entry in the current period; it gives the slot
// back however its critical section ends, and, as with a Mutex, only once
// every [AsyncSteps.Await] function started inside the section has
// returned. A flow that the Throttle rejects gives the slot back at once,
// before the error handler given to Sync sees the rejection.
//
// A flow refused by either limit fails with [DefenseRejected] and the info
// "Mutex queue limit" or "Throttle queue limit", which the error handler
// given to Sync sees first. Its rate limit refuses a flow of a Loop and
// one of a TestTool within one period as a [Throttle] does, with the same
// InternalError, after giving the slot back. Reentrance and deadlock
// detection are those of the Mutex; every entry counts for the rate.
//
// A Limiter is safe for concurrent use: flows running on different loops
// may share one. Create it with [NewLimiter]; the zero value is the same as
// NewLimiter(LimiterOptions{}): it limits nothing. A Limiter must not be
// copied after first use.
type Limiter struct {
	mutex    Mutex
	throttle Throttle
	// Which of the two gates are in use: a zero Concurrent or Rate leaves
	// its gate out.
	concurrent, rated bool
}

// NewLimiter returns a Limiter with the limits of opts. It panics if
// Concurrent, Rate or Period is negative, with a message that names the
// field and its value ("asyncsteps: NewLimiter: negative Rate -5"; the
// first of them, in that order, if several are).
func NewLimiter(opts LimiterOptions) *Limiter {
	if bad := negativeLimit(opts); bad != "" {
		panic("asyncsteps: NewLimiter: negative " + bad)
	}
	l := &Limiter{concurrent: opts.Concurrent > 0, rated: opts.Rate > 0}
	l.mutex.limit, l.mutex.maxQueue = opts.Concurrent, queueLimitOf(opts.MaxQueue)
	l.throttle.limit, l.throttle.period = opts.Rate, opts.Period
	l.throttle.maxQueue = queueLimitOf(opts.Burst)
	return l
}

// Hold keeps every flow out of the Limiter's rate limit until the
// instant until, as [Throttle.Hold] does: the flows that hold a slot of
// Concurrent, or come and take one, wait for the hold's end with the
// flows waiting for the rate, within Burst. A Limiter with no Rate has no
// rate limit to hold: its Hold does nothing, so a Limiter that must pause
// for an upstream needs a Rate.
func (l *Limiter) Hold(until time.Time) {
	if l.rated {
		l.throttle.Hold(until)
	}
}

// negativeLimit returns the first of Concurrent, Rate and Period of opts
// that is negative, named with its value ("Period -1s"), or "". A
// configuration read from a file or flags is fixed by the field it names.
func negativeLimit(opts LimiterOptions) string {
	switch {
	case opts.Concurrent < 0:
		return "Concurrent " + strconv.Itoa(opts.Concurrent)
	case opts.Rate < 0:
		return "Rate " + strconv.Itoa(opts.Rate)
	case opts.Period < 0:
		return "Period " + opts.Period.String()
	}
	return ""
}

// Sync implements [Syncer]: it adds to as the steps that wait for a slot of
// the Mutex, then for an entry of the Throttle, run f with onerror as its
// error handler, then give the slot back. The success args of f's step are
// the result of the steps added.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (l *Limiter) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	if l == nil || f == nil {
		refuseSync(as, l == nil)
		return
	}
	onerr, ok := syncHandler(as, onerror)
	if !ok {
		return
	}
	gates, n := l.gates()
	addSection(as, f, onerr, gates[:n]...)
}

// enterSection implements sectioner.
func (l *Limiter) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	gates, n := l.gates()
	beginSection(as, f, onerror, args, gates[:n]...)
}

// gates returns the gates in use, in the order a flow passes them.
func (l *Limiter) gates() (g [2]gate, n int) {
	if l.concurrent {
		g[n] = (*limiterMutex)(l)
		n++
	}
	if l.rated {
		g[n] = (*limiterThrottle)(l)
		n++
	}
	return g, n
}

// limiterMutex and limiterThrottle are the gates of a Limiter: its Mutex
// and its Throttle, which tell a SyncWait hook of the Limiter, the Syncer
// that Sync was called on, not of themselves. Each is the Limiter under
// another type: as a gate it is one pointer, like &l.mutex, and the
// section keeps no more for it.
type (
	limiterMutex    Limiter
	limiterThrottle Limiter
)

func (g *limiterMutex) enter(as AsyncSteps, e *entry) { g.mutex.enterFor(as, e, (*Limiter)(g)) }
func (g *limiterMutex) leave(e *entry, on *flow)      { g.mutex.leave(e, on) }
func (g *limiterMutex) holds() *Mutex                 { return &g.mutex }

func (g *limiterThrottle) enter(as AsyncSteps, e *entry) {
	g.throttle.enterFor(as, e, (*Limiter)(g))
}
func (g *limiterThrottle) leave(e *entry, on *flow) { g.throttle.leave(e, on) }
func (*limiterThrottle) holds() *Mutex              { return nil }
