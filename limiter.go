package asyncsteps

import (
	"container/heap"
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
	l := new(Limiter)
	limiterConfigOf(opts).apply(l)
	return l
}

// limiterConfig is the limits of a Limiter, those that a KeyedThrottle
// or a KeyedLimiter gives the Limiter of each key.
type limiterConfig struct {
	concurrent, rated bool // which gates are in use
	slots             int  // Concurrent
	maxQueue          queueLimit
	rate              int
	period            time.Duration
	burst             queueLimit
}

// limiterConfigOf returns the limits of opts.
func limiterConfigOf(opts LimiterOptions) limiterConfig {
	return limiterConfig{
		concurrent: opts.Concurrent > 0, rated: opts.Rate > 0,
		slots: opts.Concurrent, maxQueue: queueLimitOf(opts.MaxQueue),
		rate: opts.Rate, period: opts.Period, burst: queueLimitOf(opts.Burst),
	}
}

// apply sets the limits of l, a Limiter not used yet.
func (c limiterConfig) apply(l *Limiter) {
	l.concurrent, l.rated = c.concurrent, c.rated
	l.mutex.limit, l.mutex.maxQueue = c.slots, c.maxQueue
	l.throttle.limit, l.throttle.period, l.throttle.maxQueue = c.rate, c.period, c.burst
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

// KeyedLimiter is a [Limiter] per key: each key (a tenant, an upstream
// host) has a concurrency and a rate limit of its own, as
// NewLimiter(opts) has, while the flows of other keys go on at once. Per
// key it behaves as such a Limiter does, in every respect: its
// [KeyedMutex] rules for the Concurrent slots (the queue, reentrance and
// the detection of deadlocks through Parallel, a slot kept for the
// [AsyncSteps.Await] functions started inside), its [KeyedThrottle] rules
// for the Rate, [KeyedLimiter.Hold] on that key only, the
// [DefenseRejected] "Mutex queue limit" or "Throttle queue limit", and
// the SyncWait hook (see [Hooks]), which is told of the Syncer that Key
// returns for the key.
//
// A key has a Limiter of its own only while it must: while a flow holds
// or waits for one of its slots (an Await function started inside
// included), while a period of its rate runs, and while a hold on it is
// ahead, as the keys of a KeyedMutex and of a KeyedThrottle are kept;
// [KeyedLimiter.Len] counts the keys in use. Bad keys fail the step that
// would enter with [InternalError], whose info starts with
// "KeyedLimiter: ", as a KeyedMutex's do.
//
// A KeyedLimiter is safe for concurrent use: flows on different loops
// may share one. Create it with [NewKeyedLimiter]; the zero value is the
// same as NewKeyedLimiter(LimiterOptions{}): it limits nothing. A
// KeyedLimiter must not be copied after first use.
type KeyedLimiter[K comparable] struct {
	limits limiterConfig  // of each key
	keys   keyLimiters[K] // the keys in use
}

// NewKeyedLimiter returns a KeyedLimiter whose keys each have the limits
// of opts. It panics as [NewLimiter] does, with a message that names
// NewKeyedLimiter ("asyncsteps: NewKeyedLimiter: negative Rate -5").
func NewKeyedLimiter[K comparable](opts LimiterOptions) *KeyedLimiter[K] {
	if bad := negativeLimit(opts); bad != "" {
		panic("asyncsteps: NewKeyedLimiter: negative " + bad)
	}
	return &KeyedLimiter[K]{limits: limiterConfigOf(opts)}
}

// Sync adds to as the steps that wait for a slot of key, then for an
// entry of key's rate, run f with onerror as its error handler, then give
// the slot back, as [Limiter.Sync] does.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (l *KeyedLimiter[K]) Sync(as AsyncSteps, key K, f StepFunc, onerror ...ErrorFunc) {
	if l == nil || f == nil {
		refuseSync(as, l == nil)
		return
	}
	if onerr, ok := syncHandler(as, onerror); ok {
		as.Add(func(as AsyncSteps, args ...any) { l.enterSection(as, key, f, onerr, args) })
	}
}

// Key returns the [Syncer] of key, for [AsyncSteps.Sync] and whatever
// takes a Syncer: its Sync is l.Sync with key. It looks key up at each
// Sync, so that keeping it keeps no Limiter of the key alive. Two Syncers
// of one KeyedLimiter and equal keys are equal (==).
func (l *KeyedLimiter[K]) Key(key K) Syncer { return keyLimiterSyncer[K]{l, key} }

// Hold keeps every flow of key out of its rate limit until the instant
// until, as [Limiter.Hold] does for a Limiter: the flows of other keys go
// on. A KeyedLimiter with no Rate has no rate limit to hold: its Hold
// does nothing. A key that is not in use is made for the hold, and kept
// until its end. It is safe for concurrent use, from a step of any loop
// or from another goroutine.
func (l *KeyedLimiter[K]) Hold(key K, until time.Time) { l.keys.hold(key, l.kind(), until) }

// Len returns the number of keys in use: those a flow, or an Await
// function started inside a critical section, holds or waits for, whose
// period runs, or on which a hold is ahead.
func (l *KeyedLimiter[K]) Len() int { return l.keys.table.len() }

// enterSection runs as the step that enters the critical section of key.
func (l *KeyedLimiter[K]) enterSection(as AsyncSteps, key K, f StepFunc, onerror ErrorFunc, args []any) {
	l.keys.enterSection(as, key, l.kind(), f, onerror, args)
}

// kind is what the keys of l are, for keyLimiters.
func (l *KeyedLimiter[K]) kind() keyKind[K] {
	return keyKind[K]{name: "KeyedLimiter", limits: l.limits, owner: l}
}

// keyLimiterSyncer is the Syncer of one key of a KeyedLimiter.
type keyLimiterSyncer[K comparable] struct {
	l   *KeyedLimiter[K]
	key K
}

// Sync implements [Syncer].
func (s keyLimiterSyncer[K]) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	s.l.Sync(as, s.key, f, onerror...)
}

// enterSection implements sectioner.
func (s keyLimiterSyncer[K]) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	s.l.enterSection(as, s.key, f, onerror, args)
}

// nilSyncer reports whether the KeyedLimiter is nil (see nilSyncer).
func (s keyLimiterSyncer[K]) nilSyncer() bool { return s.l == nil }

// keyedKind implements keyedSyncer: a KeyedLimiter is a Limiter per key.
func (keyLimiterSyncer[K]) keyedKind() string { return "limiter" }

// keyLimiters is what a KeyedThrottle and a KeyedLimiter share: the keys
// in use, each with a Limiter of its own (a KeyedThrottle's has its rate
// limit alone), and when a key may go.
//
// A key is dropped when no step uses it and its Throttle is idle (see
// Throttle.rest). A step uses the key from the step that enters until its
// entry has entered, queued or been refused, with a rate limit alone, or,
// with a concurrency limit, until its slot is back (as in a KeyedMutex);
// a section cancelled before its entry asked lets go of it as it leaves;
// a Hold uses it while it runs. What the entries do then keeps the
// Throttle running: an entry counts in a period that runs, and a flow
// waits for the rate only while one does. A key is settled as the last
// step lets go of it and as each of its periods ends. A key kept with no
// timer to settle it is parked until the instant it may go, and dropped
// then by the first flow that passes, on any key (sweep).
type keyLimiters[K comparable] struct {
	// table maps the keys in use to their Limiter; its mu guards the refs
	// and the parking of their values, and parked. Held, it may lock a
	// key's Throttle's mu, never the reverse.
	table keyTable[K, keyLimiter[K]]
	// parked holds the keys kept with no timer, by the instant they may
	// go: a flow that passes drops those whose instant its clock has
	// reached (sweep).
	parked parkedKeys[K]
}

// keyKind is what the keys of a keyLimiters are: the name of its type,
// which starts the info of a bad key, the limits of each key's Limiter,
// and the type itself, whose Key a SyncWait hook is told of.
type keyKind[K comparable] struct {
	name   string
	limits limiterConfig
	owner  interface{ Key(key K) Syncer } // a pointer: no allocation
}

// enterSection runs as the step that enters the critical section of key:
// it takes the key's Limiter, which the section lets go of as its gates
// say (see keyLimiters).
func (kl *keyLimiters[K]) enterSection(as AsyncSteps, key K, kind keyKind[K], f StepFunc, onerror ErrorFunc, args []any) {
	k, info := kl.acquire(key, kind)
	if k == nil {
		as.Error(InternalError, info)
		return
	}
	gates, n := k.gates()
	if n == 0 {
		kl.release(k) // limits nothing: nothing to keep
	}
	beginSection(as, f, onerror, args, gates[:n]...)
}

// hold holds the rate limit of key until the instant until, if its kind
// has one.
func (kl *keyLimiters[K]) hold(key K, kind keyKind[K], until time.Time) {
	if !kind.limits.rated {
		return
	}
	k, _ := kl.acquire(key, kind)
	if k == nil {
		return
	}
	k.limiter.throttle.Hold(until)
	kl.release(k)
}

// acquire returns the Limiter of key, made if key is not in use, counted
// as used by one more step, which releases it; or nil and why key cannot
// be one.
func (kl *keyLimiters[K]) acquire(key K, kind keyKind[K]) (*keyLimiter[K], string) {
	kl.table.mu.Lock()
	defer kl.table.mu.Unlock()
	k, info := kl.table.find(key, kind.name, func() *keyLimiter[K] {
		k := &keyLimiter[K]{owner: kl, key: key, obj: kind.owner.Key(key)}
		kind.limits.apply(&k.limiter)
		k.limiter.throttle.owner = k
		return k
	})
	if k != nil {
		k.refs++
	}
	return k, info
}

// release counts out a step that no longer uses k, and settles k once
// none does.
func (kl *keyLimiters[K]) release(k *keyLimiter[K]) {
	kl.passed(k, true, nil, time.Time{})
}

// passed, for a flow that passed the rate limit of k on tool, whose clock
// read now, releases k if letGo, and sweeps the parked keys.
func (kl *keyLimiters[K]) passed(k *keyLimiter[K], letGo bool, tool Tool, now time.Time) {
	kl.table.mu.Lock()
	defer kl.table.mu.Unlock()
	if letGo {
		k.refs--
		kl.settle(k)
	}
	if !now.IsZero() {
		kl.sweep(tool, now)
	}
}

// settle, with keys.mu held, drops k if nothing needs it kept (see
// Throttle.rest), parks it if it is kept with no timer, and unparks it
// while its timer keeps it. A key some step uses is settled as the last
// one lets go of it.
func (kl *keyLimiters[K]) settle(k *keyLimiter[K]) {
	if k.refs > 0 || kl.table.byKey[k.key] != k {
		return
	}
	k.limiter.throttle.mu.Lock()
	idle, until, _ := k.limiter.throttle.rest()
	k.limiter.throttle.mu.Unlock()
	switch {
	case idle:
		kl.unpark(k)
		kl.table.drop(k.key)
	case until.IsZero():
		kl.unpark(k)
	default:
		kl.park(k, until)
	}
}

// sweep, with keys.mu held, drops the parked keys that no step uses whose
// instant the clock of tool, which read now, has reached: a flow that
// came to such a key would end what keeps it and open a new period, as
// it does in a key made anew. A key parked on the other kind of clock
// (see otherClock) is left, as its Throttle would refuse such a flow.
func (kl *keyLimiters[K]) sweep(tool Tool, now time.Time) {
	var other []*keyLimiter[K]
	for len(kl.parked) > 0 && !now.Before(kl.parked[0].parkedUntil) {
		k := kl.parked[0]
		kl.unpark(k)
		if k.refs > 0 {
			continue // settled again as it is let go of
		}
		k.limiter.throttle.mu.Lock()
		idle, until, clock := k.limiter.throttle.rest()
		k.limiter.throttle.mu.Unlock()
		switch {
		case idle || !until.IsZero() && !now.Before(until) && !otherClock(clock, tool):
			kl.table.drop(k.key)
		case until.IsZero(): // timed again
		case now.Before(until): // lengthened by a Hold
			kl.park(k, until)
		default:
			k.parkedUntil = until
			other = append(other, k)
		}
	}
	for _, k := range other {
		kl.park(k, k.parkedUntil)
	}
}

// park, with keys.mu held, parks k until the instant until, or moves it
// there if parked.
func (kl *keyLimiters[K]) park(k *keyLimiter[K], until time.Time) {
	k.parkedUntil = until
	if k.parkedAt > 0 {
		heap.Fix(&kl.parked, k.parkedAt-1)
		return
	}
	heap.Push(&kl.parked, k)
}

// unpark, with keys.mu held, takes k out of parked, if it is there.
func (kl *keyLimiters[K]) unpark(k *keyLimiter[K]) {
	if k.parkedAt > 0 {
		heap.Remove(&kl.parked, k.parkedAt-1)
	}
}

// parkedKeys is the heap of the parked keys, the earliest instant first
// (container/heap).
type parkedKeys[K comparable] []*keyLimiter[K]

func (p parkedKeys[K]) Len() int { return len(p) }
func (p parkedKeys[K]) Less(i, j int) bool {
	return p[i].parkedUntil.Before(p[j].parkedUntil)
}
func (p parkedKeys[K]) Swap(i, j int) {
	p[i], p[j] = p[j], p[i]
	p[i].parkedAt, p[j].parkedAt = i+1, j+1
}
func (p *parkedKeys[K]) Push(x any) {
	k := x.(*keyLimiter[K])
	*p = append(*p, k)
	k.parkedAt = len(*p)
}
func (p *parkedKeys[K]) Pop() any {
	old := *p
	k := old[len(old)-1]
	old[len(old)-1] = nil
	*p = old[:len(old)-1]
	p.shrink()
	k.parkedAt = 0
	return k
}

// shrink gives back the room of a burst of parked keys that has left, as
// keyTable.shrink does for the keys' map: once at most a quarter of a
// room above keptKeys is in use, the keys left move to a heap of their
// size, in their order (their parkedAt holds). The room was at least
// half full when it was made (append at most doubles it; a move fills
// it), so at least as many keys have left since as move now: the moves
// cost O(1) a key.
func (p *parkedKeys[K]) shrink() {
	n := len(*p)
	switch {
	case n == 0:
		*p = nil
	case cap(*p) > keptKeys && n <= cap(*p)/4:
		*p = append(parkedKeys[K](nil), *p...)
	}
}

// keyLimiter is the Limiter of a key in use of a KeyedThrottle or a
// KeyedLimiter. Its gates are keyMutexGate and keyRateGate.
type keyLimiter[K comparable] struct {
	limiter Limiter
	owner   *keyLimiters[K]
	key     K
	obj     Syncer // the key's Syncer, for a SyncWait hook
	// Guarded by owner.table.mu.
	refs        int       // steps that use it (see keyLimiters)
	parkedAt    int       // its index in owner.parked plus one; 0 when not parked
	parkedUntil time.Time // when parked, the instant it may go
}

// periodEnded implements periodWatcher: the key may have gone idle, or
// need parking.
func (k *keyLimiter[K]) periodEnded() {
	k.owner.table.mu.Lock()
	defer k.owner.table.mu.Unlock()
	k.owner.settle(k)
}

// gates returns the gates of k in use, in the order a flow passes them.
func (k *keyLimiter[K]) gates() (g [2]gate, n int) {
	if k.limiter.concurrent {
		g[n] = (*keyMutexGate[K])(k)
		n++
	}
	if k.limiter.rated {
		g[n] = (*keyRateGate[K])(k)
		n++
	}
	return g, n
}

// letGo counts e's section out of k, once: e is the entry of the gate
// whose end lets go of the key.
func (k *keyLimiter[K]) letGo(e *entry) {
	if !e.unkeyed {
		e.unkeyed = true
		k.owner.release(k)
	}
}

// keyMutexGate and keyRateGate are the gates of a key's Limiter, which
// tell a SyncWait hook of the key's Syncer. Each is the key's state under
// another type, as limiterMutex and limiterThrottle are a Limiter's.
type (
	keyMutexGate[K comparable] keyLimiter[K]
	keyRateGate[K comparable]  keyLimiter[K]
)

// enter implements gate. A refused flow neither holds nor waits: it lets
// go of the key at once, not once onerror has run.
func (g *keyMutexGate[K]) enter(as AsyncSteps, e *entry) {
	k := (*keyLimiter[K])(g)
	k.limiter.mutex.enterFor(as, e, k.obj)
	if e.err != nil {
		k.letGo(e)
	}
}

// leave implements gate: the key is let go of once the slot is back, as
// in a KeyedMutex (see keyLock.leave).
func (g *keyMutexGate[K]) leave(e *entry, on *flow) {
	k := (*keyLimiter[K])(g)
	k.limiter.mutex.leave(e, on)
	k.letGo(e)
}

func (g *keyMutexGate[K]) holds() *Mutex { return &g.limiter.mutex }

// enter implements gate. With no concurrency limit, the section lets go
// of the key once its entry has entered, queued or been refused: what the
// entry does then keeps the key as long as it must.
func (g *keyRateGate[K]) enter(as AsyncSteps, e *entry) {
	k := (*keyLimiter[K])(g)
	tool := as.Tool()
	now := clockOf(tool)
	letGo := !k.limiter.concurrent
	if letGo {
		e.unkeyed = true // leave lets go of it no more
	}
	defer k.owner.passed(k, letGo, tool, now)
	if testHookKeyRateEnter != nil {
		testHookKeyRateEnter()
	}
	k.limiter.throttle.enterAt(as, e, k.obj, tool, now)
}

// testHookKeyRateEnter, set by a test, runs in keyRateGate.enter once the
// section has taken the key, before its entry asks the key's Throttle.
var testHookKeyRateEnter func()

// leave implements gate. With no concurrency limit, a section cancelled
// before its entry asked the key's Throttle lets go of the key here.
func (g *keyRateGate[K]) leave(e *entry, on *flow) {
	g.limiter.throttle.leave(e, on)
	if k := (*keyLimiter[K])(g); !k.limiter.concurrent {
		k.letGo(e)
	}
}

func (*keyRateGate[K]) holds() *Mutex { return nil }
