package redissync

import (
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// KeyedThrottle is a [Throttle] per key (a tenant, an API key) shared by
// the whole cluster: "each API key gets 100 requests per second in the
// whole fleet". Flows that sync on one key enter at most Rate per Period
// in every process of the cluster together, while flows on other keys
// count against their own keys' rates. It is for an open set of keys,
// where a Throttle per key would keep a goroutine and a timer for every
// key ever served (see Client). It is the cluster's counterpart of
// [asyncsteps.KeyedThrottle], but for its queue: the core's queues
// without limit unless told, this one queues none unless MaxQueue says
// (see [ThrottleOptions]). Enter a key with [KeyedThrottle.Sync],
// or with [asyncsteps.AsyncSteps.Sync] on the Syncer that
// [KeyedThrottle.Key] returns.
//
// Per key it behaves as a Throttle of the options given to
// [Client.NewKeyedThrottle], named [KeyedThrottle.ThrottleName] of the
// key, in every respect: the GCRA on Redis's clock, the queue of this
// process's flows, first in, first out, and its limit (MaxQueue, whose
// overflow fails with [asyncsteps.DefenseRejected], info "Throttle queue
// limit"), [KeyedThrottle.Hold], a waiter's cancel and timeout, a closed
// Loop's waiters, FailOpen, the faults of the package documentation and
// Close. A Throttle of that name, made with [Client.NewThrottle] and the
// same options by any process, shares the key's rate and holds: a flow
// of the Throttle "api/k1" and a flow of key "k1" of the KeyedThrottle
// "api" take entries of one rate.
//
// A key has state in the process only while a flow of the process asks
// or waits for it (an admitted flow holds nothing: its section runs
// without it), and while a hold of this process on it is still to be
// given to Redis, or, for a FailOpen KeyedThrottle, lasts (a Throttle
// keeps this process's flows out until the end of its own hold while
// Redis is lost): the first flow that comes makes it, and it is dropped
// once its last waiter has entered or left, so that the keys seen once
// cost nothing afterwards. [KeyedThrottle.Len] counts the keys in use.
// In Redis, a key's keys expire as a Throttle's do (see Keys in the
// package documentation): its "tat" once the time it holds has passed,
// its "hold" just after the hold's end, and its call record 2×OpTimeout
// after its last call.
//
// One goroutine of the KeyedThrottle makes the round trips of all its
// keys: each key's waiters are tried together in one call of the
// Throttle's script, as a Throttle's are, and the calls of the keys due
// at one time go to Redis together, in pipelines of up to 512 calls,
// sent at once, each bounded by Options.OpTimeout. Each key with waiters
// has an entry in one timer heap, at the time Redis named for its next
// entry; the goroutine and its one timer live as long as the Client.
//
// # Names
//
// The Throttle of key k is named N/E (see ThrottleName), where N is the
// KeyedThrottle's name and E is k escaped as a [KeyedMutex]'s keys are
// (see KeyedMutex): two keys never share a name, and on a Redis Cluster
// every key's Redis keys have the hash tag N/E of their own. The names of
// KeyedThrottles, Throttles and Limiters (a Limiter named N uses the
// Throttle "N/rate") share one space: keep them apart where they must
// not share.
//
// A KeyedThrottle is safe for concurrent use: flows on any loops may
// share it. Make it with [Client.NewKeyedThrottle]; a nil or zero
// KeyedThrottle, or one made by a zero Client, fails every flow that
// enters it with InternalError.
type KeyedThrottle struct {
	kc     keyedCore[*keyRate] // the keys in use and the rounds due
	c      *Client
	name   string
	spec   rateSpec
	record string // names the call record of each key: see Throttle.keys
	calls  uint64 // numbers the calls of every key; used by run's goroutine only
}

// keyRate is the state of a key in use: its Throttle, served by its
// KeyedThrottle's goroutine.
type keyRate struct {
	Throttle
	keySlot
	kt *KeyedThrottle

	// Used by run's goroutine only.
	next    time.Time // when Redis named the next entry, with waiters; zero: none
	holdEnd time.Time // when a hold that keeps the key in use ends; zero: none
}

// NewKeyedThrottle returns the KeyedThrottle named name: a rate limit per
// key (a tenant, an API key) shared by every process of the cluster, each
// key with the limits of opts (see [ThrottleOptions]). It panics if Rate
// or Period is negative. Use one KeyedThrottle per name in a process:
// every flow of the process syncs on it.
func (c *Client) NewKeyedThrottle(name string, opts ThrottleOptions) *KeyedThrottle {
	refuseNegative("NewKeyedThrottle", countOption("Rate", opts.Rate), spanOption("Period", opts.Period))
	if c.unmade() {
		return new(KeyedThrottle) // its Sync fails every flow: see Client
	}
	kt := &KeyedThrottle{c: c, name: name, spec: c.rateSpec(opts), record: c.leaseID()}
	kt.kc = newKeyedCore(kt.newKey)
	c.startSyncer(&kt.kc, kt.kc.refuseAll, kt.run)
	return kt
}

// Sync adds to as the steps that wait for an entry of key, then run f
// with onerror as its error handler, as [Throttle.Sync] does for the
// key's Throttle. With a nil f, the step it adds fails with
// InternalError, "Sync: nil step function", and asks Redis for nothing.
func (kt *KeyedThrottle) Sync(as asyncsteps.AsyncSteps, key string, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if kt == nil || kt.c.unmade() {
		refuseUnmade(as, "KeyedThrottle", onerror)
		return
	}
	syncSection(as, f, onerror, keyGate[*keyRate]{&kt.kc, escapeKey(key)})
}

// Key returns the [asyncsteps.Syncer] of key: its Sync is kt.Sync with
// key. It finds the key's state at each Sync, so that keeping it keeps
// no key in use. Two Syncers of one KeyedThrottle and equal keys are
// equal (==).
func (kt *KeyedThrottle) Key(key string) asyncsteps.Syncer { return keySyncer{kt, key} }

// Hold keeps every flow of the cluster out of key until the instant
// until, as [Throttle.Hold] does for the key's Throttle: an upstream's
// 429 for one tenant, met by one process, pauses that tenant's flows in
// every process, and no other tenant's. The key is in use until the
// hold is given to Redis (or, for a FailOpen KeyedThrottle, until it
// ends), even with no flow of the process on it. Once the key is
// dropped, its state forgets the hold: a shorter hold made later by this
// process makes a round trip, where a Throttle's would make none, and
// Redis keeps the later end all the same.
func (kt *KeyedThrottle) Hold(key string, until time.Time) {
	if kt == nil || kt.c.unmade() || !until.After(time.Now()) {
		return
	}
	k := kt.kc.acquire(escapeKey(key))
	if holdFound != nil {
		holdFound(k)
	}
	// Close's goroutine closes the keys it takes under their lock, maybe
	// this one since acquire found it. A key closed later keeps the hold
	// to no effect: nobody lists it any more.
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if !closed {
		k.Hold(until)
	}
	kt.kc.unpin(k)
	kt.kc.release(k)
}

// holdFound, set by a test only, runs in KeyedThrottle.Hold once the
// key is found, before it is held: to close the Client meanwhile.
var holdFound func(k *keyRate)

// Len returns the number of keys in use in this process: those that a
// flow asks or waits for, or whose hold keeps them (see KeyedThrottle).
func (kt *KeyedThrottle) Len() int {
	if kt == nil {
		return 0
	}
	return kt.kc.inUse()
}

// ThrottleName returns the name of the Throttle of key: the
// KeyedThrottle's name, "/", and key with "%", "/", "{" and "}" escaped
// as %25, %2F, %7B and %7D. A [Throttle] of that name and the same
// options shares the key's rate and holds.
func (kt *KeyedThrottle) ThrottleName(key string) string {
	if kt == nil {
		return ""
	}
	return kt.name + "/" + escapeKey(key)
}

func (kt *KeyedThrottle) newKey(name string) *keyRate {
	k := &keyRate{kt: kt, keySlot: keySlot{ekey: name}}
	kt.c.initThrottle(&k.Throttle, kt.name+"/"+name, kt.spec, kt.record, &kt.calls)
	k.gateQueue.key = k
	return k
}

// due lists k for run's next round.
func (k *keyRate) due() { k.kt.kc.list(k) }

// dueTimes implements keyState: the next entry's time and the end of a
// hold that keeps the key.
func (k *keyRate) dueTimes() [2]*time.Time { return [2]*time.Time{&k.next, &k.holdEnd} }

// keptHold returns the end of the hold that keeps k in use (see
// Throttle.unused), or zero.
func (k *keyRate) keptHold() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.holdKept(time.Now()) {
		return k.held
	}
	return time.Time{}
}

// run is the KeyedThrottle's goroutine: it makes every round trip of
// every key, as a Throttle's goroutine does for its Throttle.
func (kt *KeyedThrottle) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-kt.c.done:
		case <-kt.kc.wake:
		case <-timer.C:
		}
		if kt.c.closing() {
			kt.shutdown()
			return
		}
		keys := kt.kc.takeDue(false, time.Now())
		kt.serve(keys)
		kt.kc.settleKeys(keys)
		kt.kc.timers.arm(timer)
		kt.kc.idle.Store(kt.kc.timers.len() == 0)
	}
}

// serve makes the round of each key of keys: the round trip that a
// Throttle's round makes, those of all keys in pipelines (see
// Client.callAll). During an outage, every key's round trips fail
// together, within one OpTimeout. Then each key's timer is set as a
// Throttle's goroutine sets its own.
func (kt *KeyedThrottle) serve(keys []*keyRate) {
	trips := make([]rateTrip, len(keys))
	var which []int
	var calls []scriptCall
	for i, k := range keys {
		k.next = time.Time{}
		if rt, ok := k.begin(); ok {
			trips[i] = rt
			which = append(which, i)
			calls = append(calls, scriptCall{keys: k.keys, args: k.roundArgs(rt)})
		}
	}
	if len(calls) > 0 {
		for j, r := range kt.c.callAll(gcraScript, calls) {
			k := keys[which[j]]
			if d, ok := k.end(trips[which[j]], r.res, r.err); ok {
				k.next = time.Now().Add(d)
			}
		}
	}
	for _, k := range keys {
		k.holdEnd = k.keptHold()
	}
}

// shutdown ends the KeyedThrottle with its Client: every key's waiters
// fail, as a Throttle's do.
func (kt *KeyedThrottle) shutdown() {
	for _, k := range kt.kc.takeAll() {
		k.mu.Lock()
		done := k.shut()
		k.mu.Unlock()
		complete(done)
	}
	kt.kc.forget()
}
