package redissync

import (
	"container/heap"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// KeyedMutex is a [Mutex] per key (an account, an order, a user) shared
// by the whole cluster: flows that sync on one key take turns as in a
// Mutex of MutexOptions.Max slots, in every process of the cluster, while
// flows on other keys go on at once. It is the cluster's counterpart of
// [asyncsteps.KeyedMutex], for an open set of keys, where a Mutex per key
// would keep a goroutine and timers for every key ever served (see
// Client). Enter a key with [KeyedMutex.Sync], or with
// [asyncsteps.AsyncSteps.Sync] on the Syncer that [KeyedMutex.Key]
// returns.
//
// Per key it behaves as a Mutex of the options given to
// [Client.NewKeyedMutex], named [KeyedMutex.MutexName] of the key, in
// every respect: leases and their TTL and renewals, fencing tokens (read
// with [KeyedMutex.Token]), the queue of this process's flows, first in,
// first out, and its limit (MaxQueue, whose overflow fails with
// [asyncsteps.DefenseRejected], info "Mutex queue limit"), a waiter's
// cancel and timeout, the lease given back however a section ends, also
// by a flow cancelled while its round trip is under way, reentrance, the
// deadlock of a parallel branch, a closed Loop's holders and waiters,
// notifications and re-checks, the faults of the package documentation
// and Close. It always fails closed, as a Mutex does.
//
// A key has state in the process only while a flow of the process holds
// or waits for it, or a lease of it is still to be given back: the first
// flow that comes makes it, and it is dropped once its last flow has left
// and its lease is back in Redis, so that the keys seen once cost nothing
// afterwards. [KeyedMutex.Len] counts the keys in use. In Redis, a key's
// leases are removed when given back and run out by their TTL, and its
// other keys expire as a Mutex's do (see Keys in the package
// documentation): its call record two minutes after its last call, and
// its fence keys a day after its last lease.
//
// One goroutine of the KeyedMutex makes the round trips of all its keys:
// each key's waiters are tried together in one call of the Mutex's
// script, as a Mutex's are, and the calls of the keys due at one time
// (the renewal of every key held, every TTL/3) go to Redis together, in
// pipelines of up to 512 calls, sent at once, each bounded by
// Options.OpTimeout: a Redis that stalls fails them all within about one
// OpTimeout, as it fails the round trips of as many Mutexes. The
// goroutine and its timers live as long as the Client, as a Mutex's do;
// its renewal and re-check tickers stop while no key is in use.
//
// # Names
//
// The Mutex of key k is named N/E (see MutexName), where N is the
// KeyedMutex's name and E is k with "%", "/", "{" and "}" escaped as
// %25, %2F, %7B and %7D: two keys never share a name, nor do the keys of
// two KeyedMutexes of different names, and on a Redis Cluster every
// key's Redis keys have the hash tag N/E of their own (see Keys in the
// package documentation), so the keys spread over the nodes, unless N
// holds a "}" (then the tag ends in N, and the keys of one KeyedMutex
// share a node) or the Client's Prefix has a tag of its own. Keys
// become part of Redis key names, whole: use short ones (an account's
// id, not a document).
//
// A KeyedMutex's key and a Mutex of the same name share one lock: a
// flow of a Mutex named "accounts/42" (of any process) and a flow of key
// "42" of the KeyedMutex "accounts" exclude each other, given the same
// Max and TTL, as two Mutexes of one name do. The names of KeyedMutexes,
// Mutexes and Limiters (a Limiter named N uses the Mutex "N/concurrent")
// share one space: keep them apart where they must not share. A flow
// that holds one of them and enters the other asks Redis as any other
// flow does (and waits for itself).
//
// A KeyedMutex is safe for concurrent use: flows on any loops may share
// it. Make it with [Client.NewKeyedMutex]; a nil or zero KeyedMutex, or
// one made by a zero Client, fails every flow that enters it with
// InternalError.
type KeyedMutex struct {
	c      *Client
	name   string
	opts   MutexOptions
	record string // names the call record of each key: see Mutex.keys
	calls  uint64 // numbers the calls of every key; used by run's goroutine only

	// mu guards keys, peak, closed and the pins of the keys. It is taken
	// under a key's mu and under the Client's, never the reverse.
	mu     sync.Mutex
	keys   map[string]*keyLock // by escaped key
	peak   int                 // the most keys in keys since it was made
	closed bool                // the Client closed: every key refuses

	// dueMu guards due, every and the listed flags of keys; no lock is
	// taken under it.
	dueMu sync.Mutex
	due   []*keyLock // the keys whose Mutex signalled: a round is due
	every bool       // every key in use is due: the connection broke
	wake  chan struct{}
	// stopped is set once run has ended: a key signalled later (a section
	// that ends after Close) is not listed, for nobody would take it.
	stopped atomic.Bool

	timers keyTimers // the keys' timed rounds; run's goroutine only
	serial uint64    // run's rounds, to serve each key once in one; run's only
	// idle is set by run at the end of each round with no key in use,
	// its tickers stopped and no timer kept: what a test of the keys' cost
	// waits for.
	idle atomic.Bool
}

// keyLock is the state of a key in use: its Mutex, served by its
// KeyedMutex's goroutine.
type keyLock struct {
	Mutex
	km   *KeyedMutex
	ekey string // the escaped key, as in km.keys

	// pins counts the flows between finding the key and asking its
	// Mutex, and run's round under way for it: a round's batch is neither
	// fresh nor queued until its answer, so an unused Mutex may still be
	// in use then. Guarded by km.mu.
	pins   int
	listed bool // in km.due; guarded by km.dueMu

	// Used by run's goroutine only.
	expiry  time.Time     // when the first lease in Redis runs out, with waiters; zero: none
	retry   time.Time     // when the owed leases are given back again; zero: none owed
	backoff time.Duration // the wait before that retry (see Mutex.owedRetry)
	at      time.Time     // the time of the key's entry in timers; zero: none
	serial  uint64        // the round of run that last served the key
}

// pipelineMax is the most calls a KeyedMutex sends to Redis in one
// pipeline: a pipeline's calls share its OpTimeout, and Redis runs them
// one after the other, so a larger one could time out under load.
const pipelineMax = 512

// NewKeyedMutex returns the KeyedMutex named name: a lock per key (an
// account, an order) shared by every process of the cluster, each key
// with the limits of opts (see [MutexOptions]). It panics if Max or TTL is
// negative. Use one KeyedMutex per name in a process: every flow of the
// process syncs on it. (Values made for one name each keep their own
// queue of a key, as Mutexes of one name do.)
func (c *Client) NewKeyedMutex(name string, opts MutexOptions) *KeyedMutex {
	if opts.Max < 0 || opts.TTL < 0 {
		panic("redissync: NewKeyedMutex: negative option")
	}
	if c.unmade() {
		return new(KeyedMutex) // its Sync fails every flow: see Client
	}
	opts.TTL = leaseTTL(opts.TTL)
	km := &KeyedMutex{c: c, name: name, opts: opts, record: c.leaseID(), wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.keyed == nil {
		c.keyed = make(map[string][]*KeyedMutex)
	}
	c.keyed[name] = append(c.keyed[name], km)
	c.mu.Unlock()
	c.startSyncer(km, func() {
		km.mu.Lock()
		km.closed = true
		km.mu.Unlock()
	}, km.run)
	return km
}

// Sync adds to as the steps that wait for a lease of key, run f with
// onerror as its error handler, then give the lease back, as
// [Mutex.Sync] does for the key's Mutex. With a nil f, the step it adds
// fails with InternalError, "Sync: nil step function", and asks Redis
// for nothing.
func (km *KeyedMutex) Sync(as asyncsteps.AsyncSteps, key string, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if km == nil || km.c.unmade() {
		refuseUnmade(as, "KeyedMutex", onerror)
		return
	}
	syncSection(as, f, onerror, keyGate{km, escapeKey(key)})
}

// Key returns the [asyncsteps.Syncer] of key: its Sync is km.Sync with
// key. It finds the key's state at each Sync, so that keeping it keeps
// no key in use. Two Syncers of one KeyedMutex and equal keys are equal
// (==).
func (km *KeyedMutex) Key(key string) asyncsteps.Syncer { return keySyncer{km, key} }

// Token returns the fencing token of the lease the flow of as holds on
// key, and whether it holds one, as [Mutex.Token] does for the key's
// Mutex.
func (km *KeyedMutex) Token(as asyncsteps.AsyncSteps, key string) (int64, bool) {
	if km == nil {
		return 0, false
	}
	km.mu.Lock()
	k := km.keys[escapeKey(key)]
	km.mu.Unlock()
	if k == nil {
		return 0, false
	}
	return k.Token(as)
}

// Len returns the number of keys in use in this process: those that a
// flow holds or waits for, or whose lease is still to be given back.
func (km *KeyedMutex) Len() int {
	if km == nil {
		return 0
	}
	km.mu.Lock()
	defer km.mu.Unlock()
	return len(km.keys)
}

// MutexName returns the name of the Mutex of key: the KeyedMutex's name,
// "/", and key with "%", "/", "{" and "}" escaped as %25, %2F, %7B and
// %7D. A [Mutex] of that name shares the key's lock.
func (km *KeyedMutex) MutexName(key string) string {
	if km == nil {
		return ""
	}
	return km.name + "/" + escapeKey(key)
}

// escapeKey escapes the bytes of key that would make two keys' names
// equal ("/", and "%" itself) or cut the hash tag of the key's Redis keys
// short ("{", "}"). A key without them is returned as it is.
func escapeKey(key string) string {
	if !strings.ContainsAny(key, "%/{}") {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := range len(key) {
		switch c := key[i]; c {
		case '%', '/', '{', '}':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// keySyncer is the Syncer of one key of a KeyedMutex.
type keySyncer struct {
	km  *KeyedMutex
	key string
}

// Sync implements [asyncsteps.Syncer].
func (s keySyncer) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	s.km.Sync(as, s.key, f, onerror...)
}

// keyGate is the gate of a section of one key: it finds the key's state
// as the flow asks, and leaves it to be dropped as the flow leaves.
type keyGate struct {
	km   *KeyedMutex
	name string // the escaped key
}

// enter implements gate: it asks the Mutex of the key, made if the key
// is not in use, which is kept from being dropped meanwhile.
func (g keyGate) enter(as asyncsteps.AsyncSteps, w *waiter) {
	k := g.km.acquire(g.name)
	w.kl = k
	k.enter(as, w)
	g.km.unpin(k)
}

// inside implements gate.
func (g keyGate) inside(as asyncsteps.AsyncSteps, w *waiter) {
	if w.kl != nil {
		w.kl.inside(as, w)
	}
}

// leave implements gate: the key is dropped if the flow was the last to
// use it; if its lease is to be given back, run drops it after that
// round trip.
func (g keyGate) leave(as asyncsteps.AsyncSteps, w *waiter) {
	if k := w.kl; k != nil {
		k.leave(as, w)
		k.dropIfUnused()
	}
}

// acquire returns the state of the key named name, made if the key is not
// in use, pinned (see keyLock.pins). After Close, it returns a key that
// refuses every flow, and keeps none.
func (km *KeyedMutex) acquire(name string) *keyLock {
	km.mu.Lock()
	defer km.mu.Unlock()
	if km.closed {
		k := km.newKey(name)
		k.closed = true
		return k
	}
	k := km.keys[name]
	if k == nil {
		k = km.newKey(name)
		if km.keys == nil {
			km.keys = make(map[string]*keyLock)
		}
		km.keys[name] = k
		km.peak = max(km.peak, len(km.keys))
	}
	k.pins++
	return k
}

func (km *KeyedMutex) newKey(name string) *keyLock {
	k := &keyLock{km: km, ekey: name}
	km.c.initMutex(&k.Mutex, km.name+"/"+name, km.opts, km.record, &km.calls)
	k.gateQueue.key = k
	return k
}

// unpin counts out a pin of k.
func (km *KeyedMutex) unpin(k *keyLock) {
	km.mu.Lock()
	k.pins--
	km.mu.Unlock()
}

// dropIfUnused drops k if nobody uses it: no flow holds, waits for or is
// about to ask for it, no round of run is under way for it, and no lease
// of it is to be given back. A flow that comes later makes the key anew,
// with a Mutex of its own.
func (k *keyLock) dropIfUnused() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.unused() {
		return
	}
	km := k.km
	km.mu.Lock()
	defer km.mu.Unlock()
	if k.pins == 0 && km.keys[k.ekey] == k {
		delete(km.keys, k.ekey)
		km.shrink()
	}
}

// shrink gives back the room of a burst of keys that has left, as the
// core's KeyedMutex does: a Go map keeps the room of the most keys it
// held, so once at most a quarter of a peak above keptKeys is left in
// use, those move to a map of their size. Called with mu held.
func (km *KeyedMutex) shrink() {
	n := len(km.keys)
	if km.peak <= keptKeys || n > km.peak/4 {
		return
	}
	var fresh map[string]*keyLock // none in use: made again by acquire
	if n > 0 {
		fresh = make(map[string]*keyLock, n)
		for name, k := range km.keys {
			fresh[name] = k
		}
	}
	km.keys, km.peak = fresh, n
}

// keptKeys is how many keys a KeyedMutex's map may have held at once and
// keep the room of once they have left.
const keptKeys = 1024

// due lists k for run's next round. It never blocks, and takes no lock
// but dueMu: a key's Mutex signals under its own mu, and the Client under
// its own.
func (k *keyLock) due() {
	km := k.km
	if km.stopped.Load() {
		return
	}
	km.dueMu.Lock()
	if !k.listed {
		k.listed = true
		km.due = append(km.due, k)
	}
	km.dueMu.Unlock()
	km.signal1()
}

// signal implements signaler: the notification connection broke, or came
// back, and every key in use tries its waiters again.
func (km *KeyedMutex) signal() {
	km.dueMu.Lock()
	km.every = true
	km.dueMu.Unlock()
	km.signal1()
}

// signal1 makes run make a round soon. It never blocks.
func (km *KeyedMutex) signal1() {
	select {
	case km.wake <- struct{}{}:
	default:
	}
}

// wakeKey lists the key named name, if it is in use: a notification told
// that a lease of its Mutex came free. Called under the Client's mu.
func (km *KeyedMutex) wakeKey(name string) {
	km.mu.Lock()
	k := km.keys[name]
	km.mu.Unlock()
	if k != nil {
		k.due()
	}
}

// run is the KeyedMutex's goroutine: it makes every round trip of every
// key, as a Mutex's goroutine does for its Mutex. Its renewal and
// re-check tickers run only while a key is in use.
func (km *KeyedMutex) run() {
	renew := time.NewTicker(km.opts.TTL / 3)
	renew.Stop()
	defer renew.Stop()
	recheck := time.NewTicker(km.c.opts.Recheck)
	recheck.Stop()
	defer recheck.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	ticking := false
	for {
		renewing, every := false, false
		select {
		case <-km.c.done:
		case <-km.wake:
		case <-timer.C:
		case <-recheck.C:
			every = true
		case <-renew.C:
			every, renewing = true, true
		}
		if km.c.closing() {
			km.shutdown()
			return
		}
		keys := km.takeDue(every, time.Now())
		km.serve(keys, renewing, every)
		inUse := km.settleKeys(keys)
		if inUse != ticking {
			ticking = inUse
			if inUse {
				renew.Reset(km.opts.TTL / 3)
				recheck.Reset(km.c.opts.Recheck)
			} else {
				renew.Stop()
				recheck.Stop()
			}
		}
		km.timers.arm(timer)
		km.idle.Store(!ticking && km.timers.len() == 0)
	}
}

// takeDue returns the keys to serve in run's round, each once, pinned:
// those listed by due, those whose timer is due at now, and with every,
// all keys in use.
func (km *KeyedMutex) takeDue(every bool, now time.Time) []*keyLock {
	km.dueMu.Lock()
	keys := km.due
	km.due = nil
	for _, k := range keys {
		k.listed = false
	}
	every = every || km.every
	km.every = false
	km.dueMu.Unlock()
	keys = km.timers.popDue(keys, now)
	km.mu.Lock()
	defer km.mu.Unlock()
	if every {
		for _, k := range km.keys {
			keys = append(keys, k)
		}
	}
	km.serial++
	served := keys[:0]
	for _, k := range keys {
		if k.serial != km.serial {
			k.serial = km.serial
			k.pins++
			served = append(served, k)
		}
	}
	clear(keys[len(served):])
	return served
}

// serve makes the round of each key of keys: the round trips that a
// Mutex's round makes, those of all keys in pipelines (see callAll): the
// owed leases that go first (see Mutex.giveBackOwedFirst) in one, then
// the rest. During an outage, every key's round trips fail together,
// within one OpTimeout. Then each key's timers are set as a Mutex's
// goroutine sets its own.
func (km *KeyedMutex) serve(keys []*keyLock, renewing, holders bool) {
	trips := make([]roundTrip, len(keys))
	var first []int // the keys whose owed leases go first
	for i, k := range keys {
		trips[i] = k.begin(renewing, holders)
		if trips[i].owesFirst() {
			first = append(first, i)
		}
	}
	km.callRounds(keys, first, func(i int) roundTrip { return trips[i].owedFirst() },
		func(i int, res []any, err error) {
			if !keys[i].endOwedFirst(&trips[i], res, err) {
				trips[i] = roundTrip{} // failed, its waiters with it
			}
		})
	var rest []int
	for i := range keys {
		if !trips[i].empty() {
			rest = append(rest, i)
		}
	}
	km.callRounds(keys, rest, func(i int) roundTrip { return trips[i] },
		func(i int, res []any, err error) {
			if next, ok := keys[i].end(trips[i], res, err); ok {
				keys[i].expiry = time.Now().Add(next)
			}
		})
	for _, k := range keys {
		k.backoff = k.owedRetry(k.backoff)
		k.retry = time.Time{}
		if k.backoff > 0 {
			k.retry = time.Now().Add(k.backoff)
		}
	}
}

// callRounds makes the round trip trip(i) of each key keys[i] of which,
// together, and passes each outcome to end.
func (km *KeyedMutex) callRounds(keys []*keyLock, which []int, trip func(int) roundTrip, end func(i int, res []any, err error)) {
	if len(which) == 0 {
		return
	}
	calls := make([]scriptCall, len(which))
	for j, i := range which {
		calls[j] = scriptCall{keys: keys[i].keys, args: keys[i].roundArgs(trip(i))}
	}
	for j, r := range km.c.callAll(mutexScript, calls) {
		end(which[j], r.res, r.err)
	}
}

// settleKeys unpins the keys run served, schedules their timers, and
// drops those no longer in use. It reports whether any key is in use;
// with none, it forgets every timer, all of keys gone.
func (km *KeyedMutex) settleKeys(keys []*keyLock) bool {
	km.mu.Lock()
	for _, k := range keys {
		k.pins--
	}
	km.mu.Unlock()
	for _, k := range keys {
		km.timers.schedule(k)
		k.dropIfUnused()
	}
	if km.Len() > 0 {
		return true
	}
	km.timers.reset()
	return false
}

// shutdown ends the KeyedMutex with its Client: every key's waiters
// fail, and the leases held, released or owed are given back, as a
// Mutex's shutdown does, in pipelines. If some cannot be, Close reports
// how many.
func (km *KeyedMutex) shutdown() {
	km.stopped.Store(true)
	km.mu.Lock()
	km.closed = true
	keys := km.keys
	km.keys, km.peak = nil, 0
	km.mu.Unlock()
	var trips []roundTrip
	var calls []scriptCall
	for _, k := range keys {
		rt := k.closeRound()
		if !rt.empty() {
			trips = append(trips, rt)
			calls = append(calls, scriptCall{keys: k.keys, args: k.roundArgs(rt)})
		}
	}
	lost, keysLost := 0, 0
	var first error
	for i, r := range km.c.callAll(mutexScript, calls) {
		if r.err != nil {
			lost += len(trips[i].releases) + len(trips[i].owed)
			keysLost++
			if first == nil {
				first = km.c.commError(r.err)
			}
		}
	}
	if lost > 0 {
		km.c.closeFailed(km.closeError(lost, keysLost, first))
	}
	km.timers.reset()
	km.dueMu.Lock()
	km.due = nil
	km.dueMu.Unlock()
}

// closeError is Close's error when its last round trips could not give
// back n leases of keys keys of km.
func (km *KeyedMutex) closeError(n, keys int, err error) error {
	ofKeys := fmt.Sprintf(" of %d keys", keys)
	if keys == 1 {
		ofKeys = " of 1 key"
	}
	return leasesLost(fmt.Sprintf("KeyedMutex %q", km.name), n, ofKeys, err, km.opts.TTL)
}

// keyTimers are the timed rounds of a KeyedMutex's keys: a heap of keys
// by the time their next round is due, the first of a key's expiry and
// retry. An entry whose time is no longer its key's is stale, and
// skipped; stale entries are dropped once the heap has doubled since the
// last time.
type keyTimers struct {
	h      timerHeap
	pruned int // the heap's length after the last drop of stale entries
}

type timerHeap []keyTimer

type keyTimer struct {
	at time.Time
	k  *keyLock
}

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(keyTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = keyTimer{}
	*h = old[:len(old)-1]
	return e
}

// popDue appends to keys the keys whose round is due at now, and takes
// their due times away: a timer's round is made once.
func (t *keyTimers) popDue(keys []*keyLock, now time.Time) []*keyLock {
	for len(t.h) > 0 && !t.h[0].at.After(now) {
		e := heap.Pop(&t.h).(keyTimer)
		k := e.k
		if !k.at.Equal(e.at) {
			continue // stale
		}
		k.at = time.Time{}
		if !k.expiry.IsZero() && !k.expiry.After(now) {
			k.expiry = time.Time{}
		}
		if !k.retry.IsZero() && !k.retry.After(now) {
			k.retry = time.Time{}
		}
		keys = append(keys, k)
	}
	return keys
}

// schedule gives k an entry at the first of its expiry and retry, if it
// has one that is not in the heap already.
func (t *keyTimers) schedule(k *keyLock) {
	next := k.expiry
	if next.IsZero() || (!k.retry.IsZero() && k.retry.Before(next)) {
		next = k.retry
	}
	if next.Equal(k.at) {
		return
	}
	k.at = next
	if next.IsZero() {
		return
	}
	if len(t.h) > 2*t.pruned+64 {
		t.prune()
	}
	heap.Push(&t.h, keyTimer{next, k})
}

// prune drops the stale entries.
func (t *keyTimers) prune() {
	kept := t.h[:0]
	for _, e := range t.h {
		if e.k.at.Equal(e.at) {
			kept = append(kept, e)
		}
	}
	clear(t.h[len(kept):])
	t.h = kept
	heap.Init(&t.h)
	t.pruned = len(t.h)
}

// reset forgets every entry: no key is in use.
func (t *keyTimers) reset() { *t = keyTimers{} }

// len returns the number of entries, stale ones included.
func (t *keyTimers) len() int { return len(t.h) }

// arm sets timer to the first entry's time, or stops it.
func (t *keyTimers) arm(timer *time.Timer) {
	timer.Stop()
	if len(t.h) > 0 {
		timer.Reset(time.Until(t.h[0].at))
	}
}
