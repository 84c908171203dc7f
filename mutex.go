package asyncsteps

import (
	"fmt"
	"slices"
	"sync"
)

// Mutex lets at most max flows at a time (see [NewMutex]) run inside its
// critical sections (spec 1.11.1 and 2.3). A flow enters with
// [AsyncSteps.Sync]; while the Mutex is full, the flows that try to enter
// wait in a first-in, first-out queue, and each slot given back goes to the
// flow at its head.
//
// A Mutex is for a section that spans steps that wait: a cache's lookup,
// the fetch on a miss and the store, run as one section. Memory read or
// written within a single callback needs none: a [sync.Mutex] locked and
// unlocked in that callback guards it, also against flows on other loops,
// since nothing else of the flow runs until the callback returns (see
// ExampleMutex_cache).
//
// A Mutex counts flows, not entries: a flow that already holds it enters
// again at once, so nested Sync calls on one Mutex do not deadlock. Each
// branch of a Parallel counts as a flow of its own and inherits no lock
// from the flow it was started from (spec 1.11.4). Sync given a decorator
// of the flow's AsyncSteps tells the flow only through [Unwrapper] (see
// [Syncer]).
//
// A slot is given back however the critical section ends: success, error,
// timeout or cancel, and also when the flow's [Loop] is closed, which runs
// no cancel handler but gives back what its flows hold. A flow cancelled
// while it waits, or whose Loop is closed, leaves the queue and never holds
// a slot. With a queue limit, a flow that finds the queue full fails at
// once with [DefenseRejected] and the info "Mutex queue limit", which the
// error handler given to Sync sees first (see [Unlimited] for the queue
// rule).
//
// A Mutex counts the work really running inside it. An
// [AsyncSteps.Await] function started inside a critical section runs on a
// goroutine that Go cannot stop: when its step is cancelled (a timeout, a
// failed parallel sibling, a cancel, a closed loop) its context is
// cancelled and the flow moves on at once, but the slot stays taken until
// the function has returned, so a function that ignores its context never
// lets more than max calls run at once. Meanwhile the slot belongs to the
// running function, not to the flow: a flow that comes back to the Mutex
// waits like any other. Closing a Loop does not wait for such functions
// either; their slots come back when they return, from the function's own
// goroutine (on a [TestTool], like any completion from another goroutine). [AwaitChan],
// [AwaitResult] and [AwaitFlow] only wait on a goroutine that their step's
// cancel stops at once, so they hold nothing once their step has ended (a
// flow run by AwaitFlow is a flow of its own: it holds what its own Sync
// calls enter).
//
// Deadlocks through Parallel are detected (spec 1.11.5): a branch that
// would wait forever, because every slot is held by flows that wait for
// their parallel branches to end, one of which waits for this Mutex,
// fails instead with [InternalError] and an info that starts with
// "Mutex deadlock". The typical case is a flow inside a Mutex(1) whose
// Parallel branch syncs on the same Mutex. A cycle through two different
// Mutexes is not detected.
//
// A Mutex is safe for concurrent use: flows running on different loops may
// share one. Create it with [NewMutex]; the zero value is a Mutex(1) with
// an unlimited queue, like NewMutex(1). A Mutex must not be copied after
// first use.
type Mutex struct {
	limit    int // 0 means 1
	maxQueue queueLimit

	mu      sync.Mutex // guards the fields below; never held while user code or a Tool runs
	holders holderSet  // by owner
	queue   waitQueue
	// branchWaiters counts the queued entries that wait from inside a
	// parallel branch: only those can take part in a deadlock.
	branchWaiters int
	// outerWaits counts, per outer flow, the queued entries whose chain
	// holds it, so that the deadlock check costs O(holders), not
	// O(queue): a Parallel of N branches on one Mutex is then linear.
	outerWaits map[*frame]int
}

// NewMutex returns a Mutex that lets at most max flows at a time into its
// critical sections, and queues at most maxQueue more: with no maxQueue, or
// a negative one, the queue is unlimited; 0 queues none (see [Unlimited]).
// It panics if max is below 1.
func NewMutex(max int, maxQueue ...int) *Mutex {
	if max < 1 {
		panic("asyncsteps: NewMutex: max must be at least 1")
	}
	return &Mutex{limit: max, maxQueue: optionalQueueLimit(maxQueue)}
}

// Sync implements [Syncer]: it adds to as the steps that wait for a slot,
// run f with onerror as its error handler, then give the slot back. The
// success args of f's step are the result of the steps added.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (m *Mutex) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	if m == nil || f == nil {
		refuseSync(as, m == nil)
		return
	}
	if onerr, ok := syncHandler(as, onerror); ok {
		addSection(as, f, onerr, m)
	}
}

// enterSection implements sectioner.
func (m *Mutex) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	beginSection(as, f, onerror, args, m)
}

// slots is the number of flows let in at once.
func (m *Mutex) slots() int { return max(m.limit, 1) }

// enter implements gate.
func (m *Mutex) enter(as AsyncSteps, e *entry) { m.enterFor(as, e, m) }

// holds implements gate.
func (m *Mutex) holds() *Mutex { return m }

// enterFor runs as the step that asks for a slot of a Sync called on obj:
// m, or the Limiter m is part of, which a SyncWait hook is told of. The
// first try does not
// make the step wait, so that a free Mutex costs no external completion;
// only when the flow must queue does the step wait. A step of this package
// is made to wait under mu as it queues, in one try. Any other, or one
// whose wait a hook observes (observeWait reads the Tool's clock, which
// may be user code), is made to wait outside mu, and then tries again,
// since a slot may have been given back in between.
func (m *Mutex) enterFor(as AsyncSteps, e *entry, obj Syncer) {
	var chain []*frame
	if o := owner(as); o != nil {
		e.key = o
		for p := outerOwner(o); p != nil; p = outerOwner(p) {
			chain = append(chain, p)
		}
	} else {
		e.key = new(frame) // not one of our steps: a key of its own, no reentrance
	}
	if h, ok := as.(*stepAPI); ok && !waitObserved(h.fl) {
		m.admit(e, h, chain) // h waits if it queues
		return
	}
	if m.admit(e, nil, chain) {
		return
	}
	as.WaitExternal()
	if m.admit(e, observeWait(as, obj), chain) {
		as.Success()
	}
}

// admit lets e in, refuses it or, when waiter is not nil, queues it. It
// reports whether e is settled (in or refused); false means it must wait.
// A waiter of this package's own is made to wait before it is queued.
func (m *Mutex) admit(e *entry, waiter AsyncSteps, chain []*frame) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.holders.enter(e.key, m.slots()):
		e.state = entryHeld
	case m.maxQueue.full(m.queue.len()):
		e.err = &Error{Code: DefenseRejected, Info: "Mutex queue limit"}
	case m.deadlocked(chain):
		e.err = &Error{Code: InternalError, Info: "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"}
	case waiter == nil:
		return false
	default:
		if h, ok := waiter.(*stepAPI); ok {
			h.wait() // no user code: a store to the step's state
		}
		e.state = entryQueued
		e.as = waiter
		e.chain = chain
		if len(chain) > 0 {
			m.branchWaiters++
			if m.outerWaits == nil {
				m.outerWaits = make(map[*frame]int)
			}
			for _, p := range chain {
				m.outerWaits[p]++
			}
		}
		m.queue.push(e)
		return false
	}
	return true
}

// deadlocked reports whether a new waiter whose outer flows are chain would
// complete a deadlock: every holder is an outer flow of a waiting branch,
// so none can give its slot back before a waiter has entered. Called with
// mu held and the Mutex full.
func (m *Mutex) deadlocked(chain []*frame) bool {
	if len(chain) == 0 && m.branchWaiters == 0 {
		return false
	}
	stuck := true
	m.holders.all(func(p *frame) bool {
		// p can go on and give its slot back unless it waits
		stuck = m.outerWaits[p] > 0 || slices.Contains(chain, p)
		return stuck
	})
	return stuck
}

// leave gives back the slot e holds, or takes e out of the queue. The slot
// goes to the waiters at the head of the queue, which are resumed after mu
// is released.
func (m *Mutex) leave(e *entry, on *flow) {
	m.mu.Lock()
	switch e.state {
	case entryQueued:
		m.dequeue(e)
		m.queue.remove(e)
		e.state = entryLeft
		m.mu.Unlock()
		return
	case entryHeld:
		e.state = entryLeft
		if m.holders.drop(e.key) > 0 {
			m.mu.Unlock()
			return
		}
	default:
		m.mu.Unlock()
		return
	}
	var room [4]AsyncSteps // most leaves admit one waiter: no allocation
	admitted := room[:0]
	for m.holders.len() < m.slots() {
		w := m.queue.pop()
		if w == nil {
			break
		}
		m.dequeue(w)
		m.holders.addNew(w.key)
		w.state = entryHeld
		admitted = append(admitted, w.as)
		w.as = nil
	}
	m.mu.Unlock()
	for _, as := range admitted {
		resume(as, on)
	}
}

// dequeue drops what a queued entry keeps for the deadlock check. Called
// with mu held.
func (m *Mutex) dequeue(e *entry) {
	if len(e.chain) > 0 {
		m.branchWaiters--
		for _, p := range e.chain {
			if m.outerWaits[p]--; m.outerWaits[p] == 0 {
				delete(m.outerWaits, p)
			}
		}
		e.chain = nil
	}
}

// smallHolders is the largest number of slots for which a Mutex keeps its
// holders in a list: scanning that many keys costs less than hashing one.
const smallHolders = 16

// holderSet counts, per holder (a flow or parallel branch, see owner), the
// entries a Mutex has admitted and not taken back. A Mutex of at most
// smallHolders slots keeps them in a list, a larger one in a map; the
// zero value is an empty list. Guarded by the Mutex's mu.
type holderSet struct {
	list  []holderCount
	byKey map[*frame]int
}

type holderCount struct {
	key *frame
	n   int
}

// len is the number of holders.
func (h *holderSet) len() int {
	if h.byKey != nil {
		return len(h.byKey)
	}
	return len(h.list)
}

// enter counts one more entry of key if key holds the Mutex already (it
// enters again) or fewer than slots holders do; it reports whether it did.
func (h *holderSet) enter(key *frame, slots int) bool {
	if h.byKey == nil && slots > smallHolders {
		h.byKey = make(map[*frame]int)
	}
	if h.byKey != nil {
		n := h.byKey[key]
		if n == 0 && len(h.byKey) >= slots {
			return false
		}
		h.byKey[key] = n + 1
		return true
	}
	for i := range h.list {
		if h.list[i].key == key {
			h.list[i].n++
			return true
		}
	}
	if len(h.list) >= slots {
		return false
	}
	h.list = append(h.list, holderCount{key: key, n: 1})
	return true
}

// addNew counts the first entry of key, which holds nothing, without a
// scan: a waiter that the Mutex admits from its queue (its flow or branch
// is stopped at the step that waits, and did not hold the Mutex when it
// queued, or it would have entered again at once), or a key just made.
func (h *holderSet) addNew(key *frame) {
	if h.byKey != nil {
		h.byKey[key] = 1
		return
	}
	h.list = append(h.list, holderCount{key: key, n: 1})
}

// drop takes one entry of key back and returns how many it still holds;
// a holder left with none is no longer one.
func (h *holderSet) drop(key *frame) int {
	if h.byKey != nil {
		n := h.byKey[key] - 1
		if n > 0 {
			h.byKey[key] = n
		} else {
			delete(h.byKey, key)
		}
		return n
	}
	for i := range h.list {
		if h.list[i].key != key {
			continue
		}
		h.list[i].n--
		n := h.list[i].n
		if n == 0 {
			last := len(h.list) - 1
			h.list[i] = h.list[last]
			h.list[last] = holderCount{} // let the frame go
			h.list = h.list[:last]
		}
		return n
	}
	return 0
}

// all calls f with each holder until it returns false.
func (h *holderSet) all(f func(key *frame) bool) {
	if h.byKey != nil {
		for key := range h.byKey {
			if !f(key) {
				return
			}
		}
		return
	}
	for _, c := range h.list {
		if !f(c.key) {
			return
		}
	}
}

// KeyedMutex is a [Mutex] per key: flows that sync on one key (an account,
// a SKU, a user) take turns as in a Mutex of max slots, while flows on other
// keys go on at once. Per key it behaves as NewMutex(max, maxQueue...)
// does, in every respect: the order of its queue, the queue limit and its
// [DefenseRejected] "Mutex queue limit", reentrance and the detection of
// deadlocks through Parallel for a flow that already holds the key, cancel
// and timeout of a waiting flow, the slot kept by the [AsyncSteps.Await]
// functions started inside, the slots given back by a closed [Loop], and
// the SyncWait hook (see [Hooks]), which is told of the Syncer that Key
// returns for the key.
//
// A key has a Mutex of its own only while a flow holds or waits for it: it
// is made when the first flow comes and dropped as the last one leaves,
// however it leaves (success, error, timeout, cancel, a full queue, a
// closed Loop, or the return of the last Await function started inside), so
// that the keys seen once cost nothing afterwards. A flow that comes as the
// last one leaves finds either the key's Mutex, still in use, or a new one:
// a key never has two Mutexes, nor more than max holders. [KeyedMutex.Len]
// counts the keys in use.
//
// With no queue, NewKeyedMutex(1, 0) is a try-lock per key: a flow that
// finds its key held fails at once with DefenseRejected "Mutex queue
// limit" (Example_poller skips a target's tick so). The onerror given to
// Sync sees that refusal and the errors raised inside the section alike:
// let the section handle its own errors, or tell the refusal by
// State().ErrorInfo as well as its code.
//
// Keys are compared as map keys are. A key that cannot be one (an interface
// key whose value is a slice, a map or a func) or that is not equal to
// itself (a NaN, or a value holding one), which could never be found again
// nor dropped, is a misuse: the step that would enter fails with
// [InternalError], whose info starts with "KeyedMutex: ", and neither f
// nor the onerror given to Sync runs.
//
// A KeyedMutex is safe for concurrent use: flows on different loops may
// share one. Create it with [NewKeyedMutex]; the zero value is the same as
// NewKeyedMutex(1): one flow at a time per key, with an unlimited queue. A
// KeyedMutex must not be copied after first use.
type KeyedMutex[K comparable] struct {
	limit    int // per key; 0 means 1
	maxQueue queueLimit

	// keys maps the keys in use to their Mutex; its mu guards the refs of
	// their values too, and is never held with a key's.
	keys keyTable[K, keyLock[K]]
}

// NewKeyedMutex returns a KeyedMutex that lets at most max flows at a time
// into the critical sections of each key, and queues at most maxQueue more
// per key, as [NewMutex] does. It panics if max is below 1.
func NewKeyedMutex[K comparable](max int, maxQueue ...int) *KeyedMutex[K] {
	if max < 1 {
		panic("asyncsteps: NewKeyedMutex: max must be at least 1")
	}
	return &KeyedMutex[K]{limit: max, maxQueue: optionalQueueLimit(maxQueue)}
}

// Sync adds to as the steps that wait for a slot of key, run f with onerror
// as its error handler, then give the slot back, as [Mutex.Sync] does. It
// costs no more than Mutex.Sync while key is in use, and the making of the
// key's Mutex when it is not.
// On a nil receiver it adds nothing and the step fails with InternalError,
// "Sync: nil Syncer"; with a nil f, likewise, "Sync: nil step function".
func (m *KeyedMutex[K]) Sync(as AsyncSteps, key K, f StepFunc, onerror ...ErrorFunc) {
	if m == nil || f == nil {
		refuseSync(as, m == nil)
		return
	}
	if onerr, ok := syncHandler(as, onerror); ok {
		as.Add(func(as AsyncSteps, args ...any) { m.enterSection(as, key, f, onerr, args) })
	}
}

// Key returns the [Syncer] of key, for [AsyncSteps.Sync] and whatever takes
// a Syncer: its Sync is m.Sync with key. It looks key up at each Sync, so
// that keeping it keeps no Mutex of the key alive. Two Syncers of one
// KeyedMutex and equal keys are equal (==). Each call makes one: keep it
// where a flow syncs on one key often, or call m.Sync.
func (m *KeyedMutex[K]) Key(key K) Syncer { return keySyncer[K]{m, key} }

// Len returns the number of keys in use: those whose Mutex a flow, or an
// Await function started inside a critical section, holds or waits for.
func (m *KeyedMutex[K]) Len() int { return m.keys.len() }

// enterSection runs as the step that enters the critical section of key:
// it takes the key's Mutex, which the section lets go of as it leaves.
func (m *KeyedMutex[K]) enterSection(as AsyncSteps, key K, f StepFunc, onerror ErrorFunc, args []any) {
	k, info := m.acquire(key)
	if k == nil {
		as.Error(InternalError, info)
		return
	}
	beginSection(as, f, onerror, args, k)
}

// acquire returns the Mutex of key, made if key is not in use, counted as
// used by one more section; or nil and why key cannot be one.
func (m *KeyedMutex[K]) acquire(key K) (*keyLock[K], string) {
	m.keys.mu.Lock()
	defer m.keys.mu.Unlock()
	k, info := m.keys.find(key, "KeyedMutex", func() *keyLock[K] {
		k := &keyLock[K]{owner: m, key: key, obj: keySyncer[K]{m, key}}
		k.mutex.limit, k.mutex.maxQueue = m.limit, m.maxQueue
		return k
	})
	if k != nil {
		k.refs++
	}
	return k, info
}

// release counts out a section that let go of k, and drops k once none
// uses it: nobody holds or waits for it then.
func (m *KeyedMutex[K]) release(k *keyLock[K]) {
	m.keys.mu.Lock()
	defer m.keys.mu.Unlock()
	if k.refs--; k.refs == 0 {
		m.keys.drop(k.key)
	}
}

// keyTable maps the keys in use of a KeyedMutex, a KeyedThrottle or a
// KeyedLimiter to the state of each, a V, with the rules they share: a
// key that cannot be found again is refused (find), and the room of a
// burst of keys that has left is given back (shrink). Its methods but len
// are called with mu held; the zero value is empty.
type keyTable[K comparable, V any] struct {
	mu    sync.Mutex // never held while user code or a Tool runs
	byKey map[K]*V
	peak  int // the most keys in byKey since it was made
}

// keptKeys is how many keys a keyTable's map, or a heap of parked keys,
// may have held at once and keep the room of once they have left (see
// keyTable.shrink, parkedKeys.shrink).
const keptKeys = 1024

// find returns the state of key, made by newV if key is not in use; or
// nil and why key cannot be a key, an info that starts with typeName,
// the keyed type's: a key that cannot be compared (an interface holding a
// slice, a map or a func) or is not equal to itself (a NaN, or a value
// holding one) could never be found again, nor dropped.
func (kt *keyTable[K, V]) find(key K, typeName string, newV func() *V) (v *V, info string) {
	defer func() {
		if r := recover(); r != nil { // comparing an uncomparable value
			v, info = nil, fmt.Sprint(typeName, ": key not comparable: ", r)
		}
	}()
	if key != key {
		return nil, typeName + ": key not equal to itself (NaN)"
	}
	if v = kt.byKey[key]; v == nil {
		if kt.byKey == nil {
			kt.byKey = make(map[K]*V)
		}
		v = newV()
		kt.byKey[key] = v
		kt.peak = max(kt.peak, len(kt.byKey))
	}
	return v, ""
}

// drop takes key out of use.
func (kt *keyTable[K, V]) drop(key K) {
	delete(kt.byKey, key)
	kt.shrink()
}

// len returns the number of keys in use.
func (kt *keyTable[K, V]) len() int {
	kt.mu.Lock()
	defer kt.mu.Unlock()
	return len(kt.byKey)
}

// shrink gives back the room of a burst of keys that has left: a Go map
// keeps the room of the most keys it held, so once at most a quarter of
// a peak above keptKeys is left in use, those move to a map of their
// size. Each key moved was one of the peak, and three times as many have
// left since: the moves cost O(1) a key.
func (kt *keyTable[K, V]) shrink() {
	n := len(kt.byKey)
	if kt.peak <= keptKeys || n > kt.peak/4 {
		return
	}
	var fresh map[K]*V // none in use: made again by find
	if n > 0 {
		fresh = make(map[K]*V, n)
		for key, v := range kt.byKey {
			fresh[key] = v
		}
	}
	kt.byKey, kt.peak = fresh, n
}

// keyLock is the Mutex of a key in use, and the gate of its sections.
type keyLock[K comparable] struct {
	mutex Mutex
	owner *KeyedMutex[K]
	key   K
	obj   Syncer // Key(key), for a SyncWait hook
	refs  int    // sections that have not let go of it; guarded by owner.keys.mu
}

// enter implements gate. A refused flow neither holds nor waits: it lets go
// of the key at once, not once onerror has run.
func (k *keyLock[K]) enter(as AsyncSteps, e *entry) {
	k.mutex.enterFor(as, e, k.obj)
	if e.err != nil {
		k.letGo(e)
	}
}

// leave implements gate. The section calls it as the flow leaves, and again
// once the Await functions started inside have returned, if it kept the
// slot for them (see section.giveBack): the key is let go of once the slot
// is back.
func (k *keyLock[K]) leave(e *entry, on *flow) {
	k.mutex.leave(e, on)
	if testHookKeyLeft != nil {
		testHookKeyLeft()
	}
	k.letGo(e)
}

// testHookKeyLeft, set by a test, runs in keyLock.leave once the section
// has left the key's Mutex, before it lets go of the key.
var testHookKeyLeft func()

// holds implements gate.
func (k *keyLock[K]) holds() *Mutex { return &k.mutex }

// letGo counts e's section out of k, once.
func (k *keyLock[K]) letGo(e *entry) {
	if !e.unkeyed {
		e.unkeyed = true
		k.owner.release(k)
	}
}

// keySyncer is the Syncer of one key of a KeyedMutex.
type keySyncer[K comparable] struct {
	m   *KeyedMutex[K]
	key K
}

// Sync implements [Syncer].
func (s keySyncer[K]) Sync(as AsyncSteps, f StepFunc, onerror ...ErrorFunc) {
	s.m.Sync(as, s.key, f, onerror...)
}

// enterSection implements sectioner.
func (s keySyncer[K]) enterSection(as AsyncSteps, f StepFunc, onerror ErrorFunc, args []any) {
	s.m.enterSection(as, s.key, f, onerror, args)
}

// nilSyncer reports whether the KeyedMutex is nil (see nilSyncer).
func (s keySyncer[K]) nilSyncer() bool { return s.m == nil }

// keyedKind implements keyedSyncer: a KeyedMutex is a Mutex per key.
func (keySyncer[K]) keyedKind() string { return "mutex" }

// keyedSyncer is the Syncer of one key of a KeyedMutex, a KeyedThrottle or
// a KeyedLimiter, of whatever type of key.
type keyedSyncer interface {
	// keyedKind is the primitive each key has: "mutex", "throttle" or
	// "limiter".
	keyedKind() string
	// nilSyncer reports whether the keyed primitive is nil.
	nilSyncer() bool
}

// keyedKey implements toolinfo.KeyedKey: a key's Syncer, of whatever type
// of key, is told by the methods only the key Syncers have.
func keyedKey(obj any) (kind string, nilKeyed bool) {
	if s, ok := obj.(keyedSyncer); ok {
		return s.keyedKind(), s.nilSyncer()
	}
	return "", false
}
