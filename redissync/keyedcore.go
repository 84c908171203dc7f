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

// keyState is the state of a key in use of a keyed Syncer (a
// [KeyedMutex]'s Mutex of the key, a [KeyedThrottle]'s Throttle), which
// its keyed Syncer's goroutine serves along with every other key.
type keyState interface {
	gate
	// slot is the part of the state that keyedCore keeps.
	slot() *keySlot
	// keyQueue is the key's queue, whose mu guards what unused reads.
	keyQueue() *gateQueue
	// unused reports whether the key may be dropped: no flow of the
	// process uses it. Called with keyQueue().mu held.
	unused() bool
	// due lists the key for its keyed Syncer's next round.
	due()
	// dueTimes returns the times at which the key's timed rounds are due,
	// each zero for none: its next timed round is due at the first.
	// Used by the keyed Syncer's goroutine only.
	dueTimes() [2]*time.Time
}

// keyNode is a keyState that keyedCore keeps in its map: a pointer.
type keyNode interface {
	comparable
	keyState
}

// keySlot is what keyedCore keeps in each key's state.
type keySlot struct {
	ekey string // the escaped key, as in keyedCore.keys

	// pins counts the flows between finding the key and asking its
	// gate, and the round of the goroutine under way for it: a round's
	// batch is neither fresh nor queued until its answer, so an unused
	// key may still be in use then. Guarded by keyedCore.mu.
	pins   int
	listed bool // in keyedCore.due; guarded by keyedCore.dueMu
	// dropped is set once the key is dropped: its entries in the timers
	// are stale, for a flow that comes later makes the key anew.
	dropped atomic.Bool

	// Used by the goroutine only.
	at     time.Time // the time of the key's entry in timers; zero: none
	serial uint64    // the round of the goroutine that last served the key
}

func (s *keySlot) slot() *keySlot { return s }

// keyQueue implements keyState for the gate of a key.
func (q *gateQueue) keyQueue() *gateQueue { return q }

// keyedCore is what a KeyedMutex and a KeyedThrottle share: the keys in
// use, made on a flow's first ask and dropped once unused, the keys due
// for the next round of the one goroutine that serves them all, and the
// timed rounds of the keys.
type keyedCore[K keyNode] struct {
	newKey func(name string) K // makes the state of the key whose escaped name is name

	// mu guards keys, peak, closed and the pins of the keys. It is taken
	// under a key's mu and under the Client's, never the reverse.
	mu     sync.Mutex
	keys   map[string]K // by escaped key
	peak   int          // the most keys in keys since it was made
	closed bool         // the Client closed: every key refuses

	// dueMu guards due, every and the listed flags of keys; no lock is
	// taken under it.
	dueMu sync.Mutex
	due   []K  // the keys whose gate signalled: a round is due
	every bool // every key in use is due: the connection broke
	wake  chan struct{}
	// stopped is set once the goroutine has ended: a key signalled later
	// (a section that ends after Close) is not listed, for nobody would
	// take it.
	stopped atomic.Bool

	timers keyTimers[K] // the keys' timed rounds; the goroutine's only
	serial uint64       // the goroutine's rounds, to serve each key once in one; its only
	// idle is set by the goroutine at the end of each round with no key
	// in use, its tickers stopped and no timer kept: what a test of the
	// keys' cost waits for.
	idle atomic.Bool
}

func newKeyedCore[K keyNode](newKey func(name string) K) keyedCore[K] {
	return keyedCore[K]{newKey: newKey, wake: make(chan struct{}, 1)}
}

// refuseAll makes every key refuse its flows: the Client is closed.
func (kc *keyedCore[K]) refuseAll() {
	kc.mu.Lock()
	kc.closed = true
	kc.mu.Unlock()
}

// inUse returns the number of keys in use.
func (kc *keyedCore[K]) inUse() int {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	return len(kc.keys)
}

// lookup returns the key named name if it is in use.
func (kc *keyedCore[K]) lookup(name string) (K, bool) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	k, ok := kc.keys[name]
	return k, ok
}

// acquire returns the state of the key named name, made if the key is not
// in use, pinned (see keySlot.pins). After Close, it returns a key that
// refuses every flow, and keeps none.
func (kc *keyedCore[K]) acquire(name string) K {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.closed {
		k := kc.newKey(name)
		k.keyQueue().closed = true
		return k
	}
	k, ok := kc.keys[name]
	if !ok {
		k = kc.newKey(name)
		if kc.keys == nil {
			kc.keys = make(map[string]K)
		}
		kc.keys[name] = k
		kc.peak = max(kc.peak, len(kc.keys))
	}
	k.slot().pins++
	return k
}

// unpin counts out a pin of k.
func (kc *keyedCore[K]) unpin(k K) {
	kc.mu.Lock()
	k.slot().pins--
	kc.mu.Unlock()
}

// dropIfUnused drops k if nobody uses it: no flow uses it (see
// keyState.unused), nor is about to ask for it, and no round of the
// goroutine is under way for it. A flow that comes later makes the key
// anew, with a gate of its own. It reports whether it dropped the last
// key in use.
func (kc *keyedCore[K]) dropIfUnused(k keyState) bool {
	q := k.keyQueue()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !k.unused() {
		return false
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	s := k.slot()
	if cur, ok := kc.keys[s.ekey]; !ok || cur.slot() != s || s.pins > 0 {
		return false
	}
	delete(kc.keys, s.ekey)
	s.dropped.Store(true)
	kc.shrink()
	return len(kc.keys) == 0
}

// release drops k, as a flow or a Hold leaves it, if nobody uses it.
// The last key dropped wakes the goroutine, which forgets the timers
// then: those of keys dropped meanwhile would keep their state until
// their time.
func (kc *keyedCore[K]) release(k keyState) {
	if kc.dropIfUnused(k) {
		kc.signal1()
	}
}

// shrink gives back the room of a burst of keys that has left, as the
// core's KeyedMutex does: a Go map keeps the room of the most keys it
// held, so once at most a quarter of a peak above keptKeys is left in
// use, those move to a map of their size. Called with mu held.
func (kc *keyedCore[K]) shrink() {
	n := len(kc.keys)
	if kc.peak <= keptKeys || n > kc.peak/4 {
		return
	}
	var fresh map[string]K // none in use: made again by acquire
	if n > 0 {
		fresh = make(map[string]K, n)
		for name, k := range kc.keys {
			fresh[name] = k
		}
	}
	kc.keys, kc.peak = fresh, n
}

// keptKeys is how many keys a keyed Syncer's map may have held at once
// and keep the room of once they have left.
const keptKeys = 1024

// list lists k for the goroutine's next round. It never blocks, and
// takes no lock but dueMu: a key's gate signals under its own mu, and
// the Client under its own.
func (kc *keyedCore[K]) list(k K) {
	if kc.stopped.Load() {
		return
	}
	kc.dueMu.Lock()
	if s := k.slot(); !s.listed {
		s.listed = true
		kc.due = append(kc.due, k)
	}
	kc.dueMu.Unlock()
	kc.signal1()
}

// signal implements signaler: the notification connection broke, or came
// back, and every key in use is served again.
func (kc *keyedCore[K]) signal() {
	kc.dueMu.Lock()
	kc.every = true
	kc.dueMu.Unlock()
	kc.signal1()
}

// signal1 makes the goroutine make a round soon. It never blocks.
func (kc *keyedCore[K]) signal1() {
	select {
	case kc.wake <- struct{}{}:
	default:
	}
}

// wakeKey lists the key named name, if it is in use. Called under the
// Client's mu.
func (kc *keyedCore[K]) wakeKey(name string) {
	if k, ok := kc.lookup(name); ok {
		k.due()
	}
}

// takeDue returns the keys to serve in the goroutine's round, each once,
// pinned: those listed, those whose timer is due at now, and with every,
// all keys in use.
func (kc *keyedCore[K]) takeDue(every bool, now time.Time) []K {
	kc.dueMu.Lock()
	keys := kc.due
	kc.due = nil
	for _, k := range keys {
		k.slot().listed = false
	}
	every = every || kc.every
	kc.every = false
	kc.dueMu.Unlock()
	keys = kc.timers.popDue(keys, now)
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if every {
		for _, k := range kc.keys {
			keys = append(keys, k)
		}
	}
	kc.serial++
	served := keys[:0]
	for _, k := range keys {
		if s := k.slot(); s.serial != kc.serial {
			s.serial = kc.serial
			s.pins++
			served = append(served, k)
		}
	}
	clear(keys[len(served):])
	return served
}

// settleKeys unpins the keys the goroutine served, drops those no longer
// in use, and schedules the timers of the others. It reports whether any
// key is in use; with none, it forgets every timer, all of keys gone.
func (kc *keyedCore[K]) settleKeys(keys []K) bool {
	kc.mu.Lock()
	for _, k := range keys {
		k.slot().pins--
	}
	kc.mu.Unlock()
	for _, k := range keys {
		if kc.dropIfUnused(k); !k.slot().dropped.Load() {
			kc.timers.schedule(k)
		}
	}
	if kc.inUse() > 0 {
		return true
	}
	kc.timers.reset()
	return false
}

// takeAll ends the keys with the Client: it returns every key in use,
// keeps none, and refuses every later flow and listing.
func (kc *keyedCore[K]) takeAll() map[string]K {
	kc.stopped.Store(true)
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.closed = true
	keys := kc.keys
	kc.keys, kc.peak = nil, 0
	return keys
}

// forget drops the timers and the listed keys, once takeAll's keys are
// ended.
func (kc *keyedCore[K]) forget() {
	kc.timers.reset()
	kc.dueMu.Lock()
	kc.due = nil
	kc.dueMu.Unlock()
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

// keyedSyncer is a keyed Syncer: a KeyedMutex or a KeyedThrottle.
type keyedSyncer interface {
	Sync(as asyncsteps.AsyncSteps, key string, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc)
}

// keySyncer is the Syncer of one key of a keyed Syncer.
type keySyncer struct {
	s   keyedSyncer
	key string
}

// Sync implements [asyncsteps.Syncer].
func (s keySyncer) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	s.s.Sync(as, s.key, f, onerror...)
}

// keyGate is the gate of a section of one key: it finds the key's state
// as the flow asks, and leaves it to be dropped as the flow leaves.
type keyGate[K keyNode] struct {
	kc   *keyedCore[K]
	name string // the escaped key
}

// enter implements gate: it asks the gate of the key, made if the key is
// not in use, which is kept from being dropped meanwhile.
func (g keyGate[K]) enter(as asyncsteps.AsyncSteps, w *waiter) {
	k := g.kc.acquire(g.name)
	w.kl = k
	k.enter(as, w)
	g.kc.unpin(k)
}

// inside implements gate.
func (g keyGate[K]) inside(as asyncsteps.AsyncSteps, w *waiter) {
	if w.kl != nil {
		w.kl.inside(as, w)
	}
}

// leave implements gate: the key is dropped if the flow was the last to
// use it; if something of it is still to be sent to Redis (a lease to
// give back), the goroutine drops it after that round trip.
func (g keyGate[K]) leave(as asyncsteps.AsyncSteps, w *waiter) {
	if k := w.kl; k != nil {
		k.leave(as, w)
		g.kc.release(k)
	}
}

// keyTimers are the timed rounds of a keyed Syncer's keys: a heap of keys
// by the time their next round is due (see nextTimer). An entry
// whose time is no longer its key's, or whose key was dropped, is stale,
// and skipped; stale entries are dropped once the heap has doubled since
// the last time.
type keyTimers[K keyNode] struct {
	h      timerHeap[K]
	pruned int // the heap's length after the last drop of stale entries
}

type timerHeap[K keyNode] []keyTimer[K]

type keyTimer[K keyNode] struct {
	at time.Time
	k  K
}

func (h timerHeap[K]) Len() int           { return len(h) }
func (h timerHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap[K]) Push(x any)        { *h = append(*h, x.(keyTimer[K])) }
func (h *timerHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = keyTimer[K]{}
	*h = old[:len(old)-1]
	return e
}

// popDue appends to keys the keys whose round is due at now, and takes
// their due times away: a timer's round is made once.
func (t *keyTimers[K]) popDue(keys []K, now time.Time) []K {
	for len(t.h) > 0 && !t.h[0].at.After(now) {
		e := heap.Pop(&t.h).(keyTimer[K])
		s := e.k.slot()
		if stale(e) {
			continue
		}
		s.at = time.Time{}
		for _, at := range e.k.dueTimes() {
			if !at.After(now) {
				*at = time.Time{} // its round is being made
			}
		}
		keys = append(keys, e.k)
	}
	return keys
}

// nextTimer returns when k's next timed round is due, the first of its
// dueTimes; zero: none.
func nextTimer(k keyState) time.Time {
	var next time.Time
	for _, at := range k.dueTimes() {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = *at
		}
	}
	return next
}

// schedule gives k an entry at its nextTimer, if it has one that is not
// in the heap already.
func (t *keyTimers[K]) schedule(k K) {
	next := nextTimer(k)
	s := k.slot()
	if next.Equal(s.at) {
		return
	}
	s.at = next
	if next.IsZero() {
		return
	}
	if len(t.h) > 2*t.pruned+64 {
		t.prune()
	}
	heap.Push(&t.h, keyTimer[K]{next, k})
}

// prune drops the stale entries.
func (t *keyTimers[K]) prune() {
	kept := t.h[:0]
	for _, e := range t.h {
		if !stale(e) {
			kept = append(kept, e)
		}
	}
	clear(t.h[len(kept):])
	t.h = kept
	heap.Init(&t.h)
	t.pruned = len(t.h)
}

// stale reports whether e no longer stands for a round of its key.
func stale[K keyNode](e keyTimer[K]) bool {
	s := e.k.slot()
	return !s.at.Equal(e.at) || s.dropped.Load()
}

// reset forgets every entry: no key is in use.
func (t *keyTimers[K]) reset() { *t = keyTimers[K]{} }

// len returns the number of entries, stale ones included.
func (t *keyTimers[K]) len() int { return len(t.h) }

// arm sets timer to the first entry's time, or stops it.
func (t *keyTimers[K]) arm(timer *time.Timer) {
	timer.Stop()
	if len(t.h) > 0 {
		timer.Reset(time.Until(t.h[0].at))
	}
}
