package redissync

import (
	"fmt"
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
	kc     keyedCore[*keyLock] // the keys in use and the rounds due
	c      *Client
	name   string
	opts   MutexOptions
	record string // names the call record of each key: see Mutex.keys
	calls  uint64 // numbers the calls of every key; used by run's goroutine only
}

// keyLock is the state of a key in use: its Mutex, served by its
// KeyedMutex's goroutine.
type keyLock struct {
	Mutex
	keySlot
	km *KeyedMutex

	// Used by run's goroutine only.
	expiry  time.Time     // when the first lease in Redis runs out, with waiters; zero: none
	retry   time.Time     // when the owed leases are given back again; zero: none owed
	backoff time.Duration // the wait before that retry (see Mutex.owedRetry)
}

// pipelineMax is the most calls a keyed Syncer sends to Redis in one
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
	refuseNegative("NewKeyedMutex", countOption("Max", opts.Max), spanOption("TTL", opts.TTL))
	if c.unmade() {
		return new(KeyedMutex) // its Sync fails every flow: see Client
	}
	opts.TTL = leaseTTL(opts.TTL)
	km := &KeyedMutex{c: c, name: name, opts: opts, record: c.leaseID()}
	km.kc = newKeyedCore(km.newKey)
	c.mu.Lock()
	if c.keyed == nil {
		c.keyed = make(map[string][]*KeyedMutex)
	}
	c.keyed[name] = append(c.keyed[name], km)
	c.mu.Unlock()
	c.startSyncer(&km.kc, km.kc.refuseAll, km.run)
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
	syncSection(as, f, onerror, keyGate[*keyLock]{&km.kc, escapeKey(key)})
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
	k, ok := km.kc.lookup(escapeKey(key))
	if !ok {
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
	return km.kc.inUse()
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

func (km *KeyedMutex) newKey(name string) *keyLock {
	k := &keyLock{km: km, keySlot: keySlot{ekey: name}}
	km.c.initMutex(&k.Mutex, km.name+"/"+name, km.opts, km.record, &km.calls)
	k.gateQueue.key = k
	return k
}

// due lists k for run's next round.
func (k *keyLock) due() { k.km.kc.list(k) }

// dueTimes implements keyState: its expiry and its retry.
func (k *keyLock) dueTimes() [2]*time.Time { return [2]*time.Time{&k.expiry, &k.retry} }

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
		case <-km.kc.wake:
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
		keys := km.kc.takeDue(every, time.Now())
		km.serve(keys, renewing, every)
		inUse := km.kc.settleKeys(keys)
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
		km.kc.timers.arm(timer)
		km.kc.idle.Store(!ticking && km.kc.timers.len() == 0)
	}
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

// shutdown ends the KeyedMutex with its Client: every key's waiters
// fail, and the leases held, released or owed are given back, as a
// Mutex's shutdown does, in pipelines. If some cannot be, Close reports
// how many.
func (km *KeyedMutex) shutdown() {
	keys := km.kc.takeAll()
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
	km.kc.forget()
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
