package redissync

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
	"github.com/redis/go-redis/v9"
)

// MutexOptions configures a [Mutex]. The zero value is a Mutex(1) with no
// queue and a ten-second lease.
type MutexOptions struct {
	// Max is the number of holders in the whole cluster; 0 means 1 (the
	// core's NewMutex(0) panics).
	Max int
	// MaxQueue is the number of this process's flows that may wait; more
	// are refused with DefenseRejected. 0: none wait; negative: unlimited.
	// This differs from the core's: asyncsteps.NewMutex(n) queues without
	// limit, MutexOptions{Max: n} here queues none, and refuses a flow
	// that finds every slot taken; MaxQueue: asyncsteps.Unlimited queues
	// as the core's does.
	MaxQueue int
	// TTL is the lease of a holder: it is renewed every TTL/3 while the
	// section runs, and runs out TTL after the last renewal when its
	// process can no longer renew it (killed, or cut off from Redis). 0
	// means ten seconds; it is rounded up to whole milliseconds, the unit
	// of Redis's clock (down within a millisecond of the largest Duration).
	// Give it at least 3×Options.OpTimeout: a renewal may take OpTimeout
	// before it fails, and the Mutex's round trips wait for it, so with a
	// shorter TTL a single slow round trip can make a lease run out while
	// its section runs (Token then reports it lost). Shorter ones are
	// accepted, for tests and a Redis known to be near.
	TTL time.Duration
}

// Mutex lets at most Max flows of the whole cluster (every process whose
// [Client] uses the same Redis and Prefix) run inside its critical
// sections at once. It implements [asyncsteps.Syncer]: enter with
// [asyncsteps.AsyncSteps.Sync].
//
// A flow that enters holds a lease in Redis and a fencing token, a number
// from Redis that grows with every lease given out, read with
// [Mutex.Token] inside the section: a resource that the section writes to
// can refuse a writer whose token is older than the last it saw, which
// tells apart a holder whose lease ran out (a stalled process) from the
// current one. Tokens grow strictly across the cluster: by one a lease
// while one Redis server runs, and past every token given before when
// Redis restarts, without its data or with an older copy of it (a
// snapshot, a replica that lagged taking over), which would give the same
// tokens again: the first lease a server gives raises the counter to that
// server's clock in microseconds. That holds as long as fewer than a
// million leases a second were given out, and the clock of the server is
// not behind the last one's. The first lease after a day without one
// raises the counter too, when it has expired (see Keys in the package
// documentation), which it does only once the clock has passed it: that
// raise goes past every token given whatever the clock did. (A Redis user
// whom the ACL does not allow
// INFO, by which a restart is told, gets the raise at every round trip
// that takes leases: its tokens grow with the clock.)
//
// The lease is given back however the section ends: success, error (a
// panic in f is one), timeout and cancel. While the section runs, its
// process renews the lease every TTL/3, for all its holders in one round
// trip. A process killed while it holds a lease gives nothing back: the
// lease runs out after TTL and its slot is free again. When a renewal
// fails (Redis lost), the section is not interrupted; its lease runs out
// TTL after the last renewal, and its token is then out of date. A
// renewal that finds the lease gone (run out, or lost by Redis) does not
// interrupt it either: from then on, [Mutex.Token] reports no token.
//
// A flow that finds the Mutex full waits in this process's queue, first
// in, first out; with the queue full (MaxQueue), it fails with
// [asyncsteps.DefenseRejected] and the info "Mutex queue limit", which the
// error handler given to Sync sees first. A flow that asks while a round
// trip is under way is judged by that round trip's answer (the Mutex full
// then makes it queue, or be refused), unless a section of the process
// left meanwhile: it is then tried in the next round trip, which gives
// that section's lease back first. Waiters are woken by a
// notification (Redis pub/sub) when a lease is given back, and at the
// time the first lease in Redis runs out; a fallback re-check every
// Options.Recheck covers a notification lost with a connection. A lease
// given back notifies only while some process waits, or waited within
// 2×(Options.Recheck + 2×Options.OpTimeout): an uncontended section costs
// no message to the fleet (see a waiter not notified, in Faults). Every
// flow of the process that waits is tried in one round trip: a thousand
// waiters cost one round trip per wake-up, not a thousand. Waiters of
// different processes are not served in a global order.
//
// When Redis cannot be reached, the flows that wait fail with
// [asyncsteps.CommError] (info "redis: timed out", say: see Faults in the
// package documentation), which their error
// handler sees first: at most about OpTimeout after a round trip starts,
// and Options.Recheck + OpTimeout when nothing else happens. A Mutex
// always fails closed.
//
// A flow whose Loop is closed stops without its cancel handlers. If it
// holds the Mutex, its lease is given back at the next renewal or
// re-check (every TTL/3, and every Options.Recheck), which find that the
// loop is closed. If it waits, it leaves the queue at the next round trip
// (another flow asking, a lease given back, a re-check), before that
// round trip could admit it: it is never admitted, and no longer counts
// against MaxQueue once a later flow asks. (A flow's first try is not
// checked while the queue is empty, to keep uncontended entries cheap: a
// flow whose loop closes as it first asks may get the lease, then given
// back as a holder's.)
//
// A flow that holds the Mutex enters it again at once, with the same
// lease and token, so nested Sync calls do not deadlock. As in the
// in-process [asyncsteps.Mutex], each branch of a Parallel counts as a
// flow of its own and inherits no hold from the flow or branch it was
// started from: it asks for a lease of its own, and reads its own token.
// Sync given a decorator of the flow's AsyncSteps tells the flow only
// through [asyncsteps.Unwrapper]: through one that does not unwrap, each
// entry is a holder of its own, and a nested Sync waits for the section
// around it.
//
// A branch that would wait forever fails instead with
// [asyncsteps.InternalError] and the info "Mutex deadlock: every holder of
// the lock waits for a parallel branch that waits for it", which its
// error handler sees first: when every lease the process may take (Max)
// is held by its own flows, each of which waits for a parallel branch
// that waits for this Mutex. The typical case is a flow inside a
// Mutex(1) whose Parallel branch syncs on the same Mutex. It is told only
// when the queue has room (else the branch is refused by the queue
// limit), and never across processes: a branch that waits for a lease
// held by another process's flow, which waits for a branch of its own,
// waits as any other flow does. The flows of a closed Loop count neither
// as holders nor as waiters: their leases come back.
//
// A Mutex is safe for concurrent use: flows on any loops may share it.
// Make it with [Client.NewMutex]; a nil or zero Mutex, or one made by a
// zero Client, fails every flow that enters it with InternalError.
type Mutex struct {
	gateQueue
	name  string
	limit int
	ttl   time.Duration
	keys  []string // holders (a sorted set: lease → expiry), fence counter, fence's server, tombstones, last call, waiting

	// Guarded by gateQueue.mu.
	holds    map[any]*hold        // by holder: a flow or parallel branch inside (see waiter.key)
	held     map[*waiter]struct{} // leases to renew
	releases []string             // leases to give back in the next round trip
	// owed are the leases of round trips that failed, given back, each
	// with a tombstone, until a round trip of them succeeds: Redis may
	// have run such a round trip, or may still run it.
	owed []string
	// branches are the waiters from inside a parallel branch, for the
	// deadlock check, and outerCount counts, per key, the branches in it
	// started from that key. Those that no longer wait are pruned when the
	// check needs exact counts, and when branches has doubled since the
	// last prune (prunedLen after it): an ask then costs O(Max), not
	// O(branches waiting), and a Parallel of n branches on one full Mutex
	// stays linear in n.
	branches   map[*waiter]struct{}
	outerCount map[any]int
	prunedLen  int

	// calls numbers the round trips made: the Mutex's own count, or, for
	// a key of a KeyedMutex, the count of every key's, which keep one
	// call record per key across the lives of its state (see
	// KeyedMutex). Used by the goroutine that makes the round trips only.
	calls *uint64
	// argv is the start of mutexScript's ARGV, with the arguments that do
	// not change from one call to the next boxed once: each boxed at each
	// call cost an allocation (see callArgs).
	argv []any
}

// goneFor is how long, on Redis's clock, the tombstone of an owed lease
// makes Redis refuse to take it: a call that took it must reach Redis
// within that time of the give-back to be refused. Redis keeps the record
// of a Mutex's last call as long, which refuses a call that comes after a
// later one. A call held back
// longer (in a network that lost its packets for minutes) takes the lease
// for nobody, to run out after its TTL. Tombstones are few: a round trip
// owes leases only when the last one succeeded (see Mutex.round).
const goneFor = 2 * time.Minute

// fenceFor is how long, on Redis's clock, a Mutex's fence counter and the
// name of the server that raised it are kept after its last lease, and
// after that clock has passed the counter (in µs), if that is later: a
// counter raised while the clock was ahead (set wrong at boot, stepped
// back since) stays until the clock has caught up with it. Gone, they
// cost nothing in tokens: the next lease raises the counter to Redis's
// clock, by then past every token given, whatever the clock did meanwhile.
// Kept for good, a Mutex per account left two keys for every account
// ever served.
const fenceFor = 24 * time.Hour

// hold is a holder's hold on a Mutex, kept by the Mutex value while the
// holder (a flow, or a parallel branch) is inside: nested sections of the
// holder share it. It is the Mutex value's own: a hold keyed by name and
// prefix was shared by the Mutexes of Clients on different Redis servers
// or databases, and a flow holding one entered the other without asking
// its Redis.
type hold struct {
	w     *waiter // the section that took the lease
	depth int     // sections of the holder inside
}

// deadlockInfo is the info of a branch's deadlock, the in-process Mutex's.
const deadlockInfo = "Mutex deadlock: every holder of the lock waits for a parallel branch that waits for it"

// NewMutex returns the Mutex name (the key Redis shares between
// processes) with the limits of opts. It panics if Max or TTL is
// negative. Use one Mutex per name in a process: every flow of the
// process syncs on it. (Values made for one name each get in line on
// their own, and a slot that comes free wakes them all.) A flow's hold is known by the Mutex value it
// entered: a flow that holds one Mutex and enters another of the same
// name, of the same Client or of one on another Redis, asks Redis as any
// other flow does (and, on the same Redis, waits for itself).
func (c *Client) NewMutex(name string, opts MutexOptions) *Mutex {
	refuseNegative("NewMutex", countOption("Max", opts.Max), spanOption("TTL", opts.TTL))
	if c.unmade() {
		return new(Mutex) // its Sync fails every flow: see Client
	}
	m := new(Mutex)
	c.initMutex(m, name, opts, c.leaseID(), new(uint64))
	m.wake = make(chan struct{}, 1)
	c.mu.Lock()
	c.mutexes[name] = append(c.mutexes[name], m)
	c.mu.Unlock()
	c.start(&m.gateQueue, m.run)
	return m
}

// initMutex makes m the Mutex name with the limits of opts, without a
// goroutine nor a wake channel: NewMutex adds its own, a KeyedMutex's key
// is served by the KeyedMutex's. record names the record of its last
// call, and calls numbers its calls (see Mutex.calls).
func (c *Client) initMutex(m *Mutex, name string, opts MutexOptions, record string, calls *uint64) {
	m.gateQueue = gateQueue{c: c, maxQueue: opts.MaxQueue, what: "Mutex"}
	m.name = name
	m.limit = max(opts.Max, 1)
	m.ttl = leaseTTL(opts.TTL)
	m.keys = c.mutexKeys(name, record)
	m.holds = make(map[any]*hold)
	m.held = make(map[*waiter]struct{})
	m.branches = make(map[*waiter]struct{})
	m.outerCount = make(map[any]int)
	m.calls = calls
	m.argv = []any{m.limit, m.ttl.Milliseconds(), 0, 0, c.notify, name, 0, int64(goneFor / time.Millisecond), 0,
		int64(fenceFor / time.Millisecond), m.waitingFor()}
}

// leaseTTL is the TTL of MutexOptions.TTL: ten seconds for 0, in whole
// milliseconds.
func leaseTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	return wholeMillis(ttl)
}

// mutexKeys returns the keys of a new Mutex name: see Mutex.keys. The
// record of its last call, named record, is the Mutex value's own, as a
// Throttle's is: two values of one name in a process number their calls
// each from 1.
func (c *Client) mutexKeys(name, record string) []string {
	return []string{c.key(name, "holders"), c.key(name, "fence"), c.key(name, "fence:server"), c.key(name, "gone"),
		c.key(name, "call:"+record), c.key(name, "waiting")}
}

// waitingFor returns how long, in ms of Redis's clock, a call that leaves
// some of m's flows waiting marks the Mutex as waited for (see
// mutexScript): twice the longest time between two calls of a process
// whose flows wait, each of which marks it again, for the slack of a
// loaded process. Such a process calls at least every Recheck (its
// re-check), and a round trip takes at most OpTimeout, two when it first
// gives owed leases back: Redis runs two of its calls at most Recheck +
// 2×OpTimeout apart. 0, for a Mutex that queues no flow, marks nothing:
// its flows never wait.
func (m *Mutex) waitingFor() int64 {
	if m.maxQueue == 0 {
		return 0
	}
	return (2 * (m.c.opts.Recheck + 2*m.c.opts.OpTimeout)).Milliseconds()
}

// wholeMillis rounds a lease's TTL up to whole milliseconds, Redis's
// unit: a lease of 0 ms would run out as it is taken, and a TTL under 3ns
// would make a renewal ticker of 0, which panics on run's goroutine. Within
// a millisecond of the largest Duration, it rounds down: rounding up would
// overflow into a negative TTL, and the same panic.
func wholeMillis(ttl time.Duration) time.Duration {
	if ttl > math.MaxInt64-time.Millisecond {
		return ttl.Truncate(time.Millisecond)
	}
	return (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Sync implements [asyncsteps.Syncer]: it adds to as the steps that wait
// for a lease, run f with onerror as its error handler, then give the
// lease back. The success args of f's step are the result of the steps
// added.
// With a nil f, the step it adds fails with InternalError, "Sync: nil step
// function", and asks Redis for nothing.
func (m *Mutex) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if m == nil || m.c.unmade() {
		refuseUnmade(as, "Mutex", onerror)
		return
	}
	syncSection(as, f, onerror, m)
}

// Token returns the fencing token of the lease the flow of as holds on m,
// and whether it holds one. Call it from a step inside the section, with
// the flow's AsyncSteps or a decorator that unwraps to it. A parallel
// branch reads the token of its own lease: it holds none of the flow it
// was started from. Once a renewal has found the lease gone from Redis (it
// ran out while the process could not renew it, or Redis lost it: see
// Faults in the package documentation), Token returns 0, false for the
// rest of the section, which runs on: another flow may hold the slot. So
// do the sections the flow nests in it (a Sync on m inside the section
// joins the flow's hold without asking Redis): they run without exclusion
// too. A renewal that fails does not tell: the lease may still be held
// until TTL after the last renewal that succeeded.
func (m *Mutex) Token(as asyncsteps.AsyncSteps) (int64, bool) {
	if m == nil {
		return 0, false
	}
	key := toolinfo.OwnerKey(as)
	if key == nil {
		return 0, false
	}
	m.mu.Lock()
	h := m.holds[key]
	m.mu.Unlock()
	if h != nil && !h.w.lost.Load() {
		return h.w.token, true
	}
	return 0, false
}

// enter implements gate. The holder is the flow or parallel branch that
// as runs in, as the in-process Mutex counts it: a State is shared by
// the branches of a flow, and a hold kept there let a branch in beside
// its sibling. A step the engine cannot reach (a decorator that does not
// unwrap) is a holder of its own.
func (m *Mutex) enter(as asyncsteps.AsyncSteps, w *waiter) {
	key := toolinfo.OwnerKey(as)
	if key == nil {
		key = w
	}
	if m.reenter(key, w) {
		return
	}
	w.key = key
	w.outer = toolinfo.OuterKeys(as)
	w.lease = m.c.leaseID()
	w.tool = probeable(as.Tool())
	w.as = as
	as.WaitExternal()
	m.requestUnless(w, func() *asyncsteps.Error { return m.vet(w) })
}

// reenter joins w to the hold of key, if key holds m: a nested section of
// the holder enters at once.
func (m *Mutex) reenter(key any, w *waiter) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.holds[key]
	if h == nil {
		return false
	}
	h.depth++
	w.hold = h
	return true
}

// vet refuses w, a flow about to wait, if it would wait forever (see
// deadlocked), and keeps a branch's w for the checks of later flows.
// Called with mu held, which it may release for a while (see
// deadlockedOnOpenLoops).
func (m *Mutex) vet(w *waiter) *asyncsteps.Error {
	if m.deadlocked(w.outer) && m.deadlockedOnOpenLoops(w.outer) {
		return &asyncsteps.Error{Code: asyncsteps.InternalError, Info: deadlockInfo}
	}
	if len(w.outer) > 0 {
		m.addBranch(w)
	}
	return nil
}

// deadlocked reports whether a waiter started from the flows and branches
// outer would complete a deadlock this process can see: every lease it
// may take is held by its own flows, and each of them waits for a branch
// that waits for m, the new one or one that waits already, so none can
// give its lease back before a waiter has got one. A queue with no room
// refuses the waiter as full instead, as the in-process Mutex does. A
// lease held by another process, or whose renewal found it gone, may come
// free: then no deadlock is certain. Called with mu held.
func (m *Mutex) deadlocked(outer []any) bool {
	if len(m.held) < m.limit || len(outer)+len(m.branches) == 0 ||
		(m.maxQueue >= 0 && m.queue.live >= m.maxQueue) {
		return false
	}
	// The counts may still count branches that no longer wait: a no is
	// sure, a yes is checked again on the branches that do.
	if !m.heldWaitForBranches(outer) {
		return false
	}
	m.pruneBranches()
	return m.heldWaitForBranches(outer)
}

// heldWaitForBranches reports whether every lease held here is held by a
// flow or branch that outer holds, or that a branch in branches was
// started from: one that waits for a branch waiting for m. Called with
// mu held.
func (m *Mutex) heldWaitForBranches(outer []any) bool {
	for h := range m.held {
		if m.outerCount[h.key] == 0 && !slices.Contains(outer, h.key) {
			return false
		}
	}
	return true
}

// deadlockedOnOpenLoops is deadlocked once the holders and waiters whose
// loop was closed are taken out, as the next renewal or re-check would
// take them out: such a flow stops without its cancel handlers, so a
// branch of it that waited, or its lease, would make a cycle of flows that
// are gone, and a live branch fail for a lease that is coming back. The
// loops are probed only when deadlocked says yes: rarely. Called with mu
// held, which it releases while it probes.
func (m *Mutex) deadlockedOnOpenLoops(outer []any) bool {
	released := len(m.releases)
	m.dropClosedLoops(true)
	if len(m.releases) > released {
		m.signal() // the round trip that gives the leases of the gone back
	}
	return m.deadlocked(outer)
}

// pruneBranches drops the branch waiters that no longer wait: admitted,
// refused, or gone with their loop. Called with mu held.
func (m *Mutex) pruneBranches() {
	for b := range m.branches {
		if b.state != wFresh && b.state != wQueued {
			m.removeBranch(b)
		}
	}
	m.prunedLen = len(m.branches)
}

// addBranch keeps w, a waiter from inside a parallel branch, for the
// deadlock check, pruning first when branches has doubled since the last
// prune. Called with mu held.
func (m *Mutex) addBranch(w *waiter) {
	if len(m.branches) > 2*m.prunedLen+64 {
		m.pruneBranches()
	}
	m.branches[w] = struct{}{}
	for _, k := range w.outer {
		m.outerCount[k]++
	}
}

// removeBranch drops w from branches and its keys from the counts, if it
// is there. Called with mu held.
func (m *Mutex) removeBranch(w *waiter) {
	if _, ok := m.branches[w]; !ok {
		return
	}
	delete(m.branches, w)
	for _, k := range w.outer {
		if m.outerCount[k]--; m.outerCount[k] == 0 {
			delete(m.outerCount, k)
		}
	}
}

// inside implements gate: an admitted holder's hold is kept by its key.
// Two entries of one key that both asked before either was in (a hidden
// flow of package cabi holds for another flow's key, and runs beside it)
// each got a lease: the later one shares the hold of the first, as a
// nested section does, and gives its own lease back. Replacing that hold
// would give the first one this one's token, and the first one's leave
// would remove this one's hold.
func (m *Mutex) inside(_ asyncsteps.AsyncSteps, w *waiter) {
	if w.hold != nil {
		return
	}
	m.mu.Lock()
	h := m.holds[w.key]
	if h == nil {
		w.hold = &hold{w: w, depth: 1}
		m.holds[w.key] = w.hold
		m.mu.Unlock()
		return
	}
	h.depth++
	w.hold = h
	m.mu.Unlock()
	m.giveBack(w)
}

// leave implements gate: the last section of a hold gives its lease back.
func (m *Mutex) leave(_ asyncsteps.AsyncSteps, w *waiter) {
	if h := w.hold; h != nil {
		w.hold = nil
		m.mu.Lock()
		h.depth--
		if h.depth > 0 {
			m.mu.Unlock()
			return
		}
		if m.holds[h.w.key] == h {
			delete(m.holds, h.w.key)
		}
		m.mu.Unlock()
		w = h.w
	}
	m.giveBack(w)
}

// giveBack takes w out of the queue or the holders; the lease it held, if
// any, goes back to Redis with the next round trip.
func (m *Mutex) giveBack(w *waiter) {
	m.mu.Lock()
	m.removeBranch(w)
	held := m.dequeue(w)
	if held {
		delete(m.held, w)
		m.releases = append(m.releases, w.lease)
	}
	m.mu.Unlock()
	if held {
		m.signal()
	}
}

// unused reports whether no flow holds or waits for m, and no lease of
// it is to be given back: a KeyedMutex's key may then be dropped (unless
// a round trip is under way for it, whose waiters are neither fresh nor
// queued until its answer). Called with mu held.
func (m *Mutex) unused() bool {
	return m.queue.live == 0 && len(m.holds) == 0 && len(m.held) == 0 &&
		len(m.releases) == 0 && len(m.owed) == 0 &&
		!slices.ContainsFunc(m.fresh, func(w *waiter) bool { return w.state == wFresh })
}

// run is the Mutex's goroutine: it makes every round trip of the Mutex.
func (m *Mutex) run() {
	renew := time.NewTicker(m.ttl / 3)
	defer renew.Stop()
	recheck := time.NewTicker(m.c.opts.Recheck)
	defer recheck.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var backoff time.Duration // the wait before the last retry of owed leases; 0: none owed
	for {
		renewing, holders := false, false
		select {
		case <-m.c.done:
		case <-m.wake:
		case <-expiry.C:
		case <-retry.C:
		case <-recheck.C:
			holders = true
		case <-renew.C:
			holders, renewing = true, true
		}
		if m.c.closing() {
			m.shutdown()
			return
		}
		if next, ok := m.round(renewing, holders); ok {
			expiry.Reset(next)
		}
		backoff = m.retryOwed(retry, backoff)
	}
}

// retryOwed sets retry for the next round trip that gives back the owed
// leases, if any, after the wait owedRetry returns; without owed leases,
// it stops retry. It returns the wait set, or 0.
func (m *Mutex) retryOwed(retry *time.Timer, last time.Duration) time.Duration {
	next := m.owedRetry(last)
	if next == 0 {
		retry.Stop()
		return 0
	}
	retry.Reset(next)
	return next
}

// owedRetry returns the wait before the next round trip that gives back
// the owed leases, or 0 if none are owed: a wait that doubles from one
// round trip that fails to the next (last is the one before), from 25 ms
// up to a tenth of the TTL or a second, whichever is shorter. Until one
// succeeds, each such lease may hold a slot for nobody.
func (m *Mutex) owedRetry(last time.Duration) time.Duration {
	m.mu.Lock()
	owing := len(m.owed) > 0
	m.mu.Unlock()
	if !owing {
		return 0
	}
	ceiling := max(min(time.Second, m.ttl/10), time.Millisecond)
	return min(max(2*last, 25*time.Millisecond), ceiling)
}

// roundTrip is the work of one round trip of a Mutex: the leases it gives
// back (released, and owed by round trips that failed), those it renews,
// and the waiters it tries.
type roundTrip struct {
	releases, owed  []string
	renewals, batch []*waiter
}

func (rt *roundTrip) empty() bool {
	return len(rt.releases)+len(rt.owed)+len(rt.renewals)+len(rt.batch) == 0
}

// round makes one round trip: it gives back the leases released and
// owed, renews the leases held (when renewing), and tries the waiters. It
// returns when the first lease in Redis runs out, if any waiter is left
// to try then. Before, it drops the waiters whose loop was closed, and,
// with holders (at a renewal or re-check), the holders too.
func (m *Mutex) round(renewing, holders bool) (time.Duration, bool) {
	rt := m.begin(renewing, holders)
	if !m.giveBackOwedFirst(&rt) || rt.empty() {
		return 0, false
	}
	res, err := m.call(rt.releases, rt.owed, rt.renewals, rt.batch)
	return m.end(rt, res, err)
}

// begin takes the work of a round trip (see round).
func (m *Mutex) begin(renewing, holders bool) roundTrip {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropClosedLoops(holders)
	rt := roundTrip{releases: m.releases, owed: m.owed}
	m.releases, m.owed = nil, nil
	if renewing {
		for w := range m.held {
			rt.renewals = append(rt.renewals, w)
		}
	}
	rt.batch = m.take(m.limit)
	return rt
}

// giveBackOwedFirst makes a round trip of its own that gives back the
// leases of rt, and renews, before rt tries its waiters, when leases are
// owed: a round trip that fails owes the leases it tried to take, so
// during an outage every round trip would add its waiters' leases to the
// list that each sends. This way only the first one that fails does. It
// reports whether rt is still to be made: false when that round trip
// failed, and its waiters with it.
func (m *Mutex) giveBackOwedFirst(rt *roundTrip) bool {
	if !rt.owesFirst() {
		return true
	}
	res, err := m.call(rt.releases, rt.owed, rt.renewals, nil)
	return m.endOwedFirst(rt, res, err)
}

// owesFirst reports whether rt gives back owed leases in a round trip of
// their own before it tries its waiters (see giveBackOwedFirst).
func (rt *roundTrip) owesFirst() bool { return len(rt.owed) > 0 && len(rt.batch) > 0 }

// owedFirst returns the round trip that giveBackOwedFirst makes first.
func (rt *roundTrip) owedFirst() roundTrip {
	return roundTrip{releases: rt.releases, owed: rt.owed, renewals: rt.renewals}
}

// endOwedFirst applies the outcome of the round trip that gave back rt's
// owed leases first, and reports what giveBackOwedFirst does.
func (m *Mutex) endOwedFirst(rt *roundTrip, res []any, err error) bool {
	if err != nil {
		m.fail(m.c.commError(err), rt.batch, slices.Concat(rt.owed, rt.releases))
		return false
	}
	m.settleRound(res, rt.renewals, nil)
	rt.releases, rt.owed, rt.renewals = nil, nil, nil
	return true
}

// end applies the outcome of rt's round trip, its reply res or its
// failure err, and returns what round does.
func (m *Mutex) end(rt roundTrip, res []any, err error) (time.Duration, bool) {
	if err != nil {
		m.fail(m.c.commError(err), rt.batch, slices.Concat(rt.owed, rt.releases, leases(rt.batch)))
		return 0, false
	}
	return m.settleRound(res, rt.renewals, rt.batch)
}

// call makes one round trip of the Mutex's script: see callArgs. Called
// from run's goroutine only: the calls it numbers follow one another.
func (m *Mutex) call(releases, owed []string, renewals, batch []*waiter) ([]any, error) {
	return m.c.call(mutexScript, m.keys, m.roundArgs(roundTrip{releases, owed, renewals, batch})...)
}

// roundArgs numbers a new call of m and returns its ARGV for rt: see
// callArgs.
func (m *Mutex) roundArgs(rt roundTrip) []any {
	*m.calls++
	return m.callArgs(rt.releases, rt.owed, leases(rt.renewals), leases(rt.batch))
}

// callArgs returns the ARGV of mutexScript for a round trip that gives
// back releases (leases held) and owed (leases of failed round trips,
// which Redis may or may not have given: each leaves a tombstone), renews
// renewals and tries to take take, numbered m.calls.
func (m *Mutex) callArgs(releases, owed, renewals, take []string) []any {
	args := make([]any, 0, len(m.argv)+len(releases)+len(owed)+len(renewals)+len(take))
	args = append(args, m.argv...)
	args[2], args[3], args[6], args[8] = len(releases)+len(owed), len(renewals), len(owed), *m.calls
	for _, list := range [][]string{releases, owed, renewals, take} {
		for _, l := range list {
			args = append(args, l)
		}
	}
	return args
}

// leases returns the leases of ws.
func leases(ws []*waiter) []string {
	ls := make([]string, len(ws))
	for i, w := range ws {
		ls[i] = w.lease
	}
	return ls
}

// settleRound applies the reply res of a round trip that renewed
// renewals and tried batch, and returns what round does.
func (m *Mutex) settleRound(res []any, renewals, batch []*waiter) (time.Duration, bool) {
	admitted, last, next := toInt(res[0]), toInt(res[1]), toInt(res[2])
	lost, _ := res[3].([]any)

	m.mu.Lock()
	for _, j := range lost {
		w := renewals[toInt(j)-1]
		w.lost.Store(true)
		delete(m.held, w) // not renewed again
	}
	first := last - admitted + 1
	done, orphans := m.settle(batch, int(admitted), func(i int, w *waiter) {
		w.token = first + int64(i)
		m.held[w] = struct{}{}
	})
	for _, w := range orphans {
		m.releases = append(m.releases, w.lease)
	}
	if int(admitted) < len(batch) && len(m.fresh) > 0 && len(m.releases) == 0 {
		// Full: the fresh waiters not tried would not have got in either.
		// Not so when a lease of this process is to be given back (a
		// holder left during the round trip, an orphan): the next round
		// trip frees its slot, and tries them.
		rest := m.fresh
		m.fresh = nil
		refused, _ := m.settle(rest, 0, nil)
		done = append(done, refused...)
	}
	more := len(m.fresh) > 0 || len(m.releases) > 0
	waiting := m.queue.live > 0
	m.mu.Unlock()
	complete(done)
	if more {
		m.signal()
	}
	if waiting && next >= 0 {
		// A lease of the longest TTL taken or renewed by this round trip
		// runs out a whole TTL away: plus the ms, beyond what a Duration
		// holds.
		return toDuration(min(next, math.MaxInt64-1)+1, time.Millisecond), true
	}
	return 0, false
}

// dropClosedLoops takes out the flows whose loop was closed: the waiters,
// and with holders the holders too. Such a flow stops without its cancel
// handlers, so it never leaves. A holder's lease goes back with the
// round trip to come. See gateQueue.dropClosedFlows for how the loops are
// probed.
func (m *Mutex) dropClosedLoops(holders bool) {
	var held loopSet
	if holders {
		for w := range m.held {
			held = held.add(w.tool)
		}
	}
	loops, closed := m.dropClosedFlows(held)
	if !closed {
		return
	}
	m.pruneBranches()
	for w := range m.held {
		if loops[w.tool] {
			delete(m.held, w)
			if h := m.holds[w.key]; h != nil && h.w == w {
				delete(m.holds, w.key)
			}
			w.state = wLeft
			m.releases = append(m.releases, w.lease)
		}
	}
}

// fail refuses every waiting flow with err (a Mutex fails closed), with
// those of batch, the round trip that failed, and owes owe: the leases
// that round trip gave back, and those it may have given to batch, if it
// tried. It may have run in Redis all the same (a timeout), or may still
// run there (Redis stalled: the call waits in its connection). Dropped,
// each would hold its slot for nobody until its TTL ran out.
func (m *Mutex) fail(err *asyncsteps.Error, batch []*waiter, owe []string) {
	m.mu.Lock()
	m.owed = append(owe, m.owed...)
	done := m.failAll(err, false, batch)
	m.mu.Unlock()
	complete(done)
}

// shutdown ends the Mutex with its Client: waiters fail, and every lease
// held, released or owed is given back in one last round trip. Sections
// still running lose their leases: see Client.Close. If that round trip
// fails, Close reports the leases it could not give back.
func (m *Mutex) shutdown() {
	rt := m.closeRound()
	if rt.empty() {
		return
	}
	if _, err := m.call(rt.releases, rt.owed, nil, nil); err != nil {
		m.c.closeFailed(m.closeError(len(rt.releases)+len(rt.owed), m.c.commError(err)))
	}
}

// closeRound fails the waiters of m, whose Client closes, and returns the
// round trip that gives back every lease held, released or owed.
func (m *Mutex) closeRound() roundTrip {
	m.mu.Lock()
	done := m.shut()
	rt := roundTrip{releases: m.releases, owed: m.owed}
	for w := range m.held {
		w.lost.Store(true) // its section may run on: Token says it holds nothing
		rt.releases = append(rt.releases, w.lease)
	}
	clear(m.held)
	m.releases, m.owed = nil, nil
	m.mu.Unlock()
	complete(done)
	return rt
}

// closeError is Close's error when its last round trip could not give
// back n leases of m.
func (m *Mutex) closeError(n int, err *asyncsteps.Error) error {
	return leasesLost(fmt.Sprintf("Mutex %q", m.name), n, "", err, m.ttl)
}

// leasesLost is Close's error when the last round trips of the Syncer
// named syncer could not give back n leases (of ofKeys, if not empty),
// for err, leases of TTL ttl.
func leasesLost(syncer string, n int, ofKeys string, err error, ttl time.Duration) error {
	lease, rest := "lease", "it runs out within one TTL, %v, of Redis's last call for it"
	if n != 1 {
		lease, rest = "leases", "they run out within one TTL, %v, of Redis's last call for them"
	}
	return fmt.Errorf("redissync: Close: %s: %d %s%s not given back (%w); "+rest, syncer, n, lease, ofKeys, err, ttl)
}

// mutexScript is a Mutex's round trip. KEYS: the holders (a sorted set of
// leases by expiry, in ms of Redis's clock), the fence counter, the run
// ID of the Redis server that last raised it to its clock, the
// tombstones (a sorted set of leases by the time they go), the record
// of the number of this Mutex's last call, and the mark that a process
// waits. ARGV: limit, TTL in ms, the
// number of leases to give back and to renew, the notification channel,
// the Mutex's name, how many of the leases to give back (the last ones)
// are owed, how long in ms their tombstones and the record last, the
// number of the call, how long in ms the fence keys are kept after
// the last lease, and how long in ms the mark lasts (0: this call marks
// nothing); then the leases to give back, to renew, and to
// take, in that order. It returns the number of leases taken, the token
// of the last (the others precede it), the ms until the first lease runs
// out (-1: none held), and the 1-based positions of the leases to renew
// that were found gone.
//
// An owed lease is one of a round trip that failed, which Redis may have
// run, or may still run: a stalled Redis runs the calls that wait in its
// connections when it resumes, and the give-back may reach it first, on
// another connection. Given back, an owed lease leaves a tombstone, and a
// call that would take a lease with a tombstone takes none of its leases:
// all of them are of a round trip that failed, whose flows are gone. So
// the give-back frees the slot whichever of the two Redis runs first.
//
// The holders key expires a second after the lease in it that runs out
// last: processes may give their leases different TTLs (a rolling change
// of the setting), and one that set the expiry from its own TTL would
// make the key, and every lease in it, vanish under a holder whose lease
// runs longer.
//
// A lease to take that is found held was taken by this very call, run
// again: go-redis sends a call again when its connection breaks before
// the reply, which may have been lost after Redis ran it. Such leases (the
// first ones, as the first run took them) are taken again, with new
// tokens, since nobody saw the first run's; counted as held by others,
// they made their own waiters queue behind them until they ran out.
//
// A call whose number is below the record's takes no lease: it reaches
// Redis after a later call of its Mutex, which is made only once this one
// has been answered, or given up. It is the first copy of a call that
// go-redis sent again on another connection, held back on the way (in a
// proxy, or a network that delays a connection's packets), or a call
// whose round trip failed; its leases were taken by the copy sent again,
// and given back since, or are owed. Taken again, they were held for
// nobody until their TTL ran out. The give-backs and renewals of such a
// call do no harm: a lease is given back for a flow that left, and
// renewed only while held.
//
// A call that frees slots (leases given back or run out) notifies the
// waiters of every process when it leaves one free by its own limit, or
// takes fewer new leases than it freed: a process of the same name with a
// larger Max (a rolling change of the setting) may have room then though
// this one has none, and its waiters would sleep until their next
// re-check. With one Max for all, the second case implies the first.
//
// It notifies only while the Mutex is marked as waited for: a call that
// takes fewer leases than it was asked for leaves flows of its process
// waiting, and marks it (the "waiting" key), for a little over twice the
// longest time such a process goes between two calls (see
// Mutex.waitingFor); a mark already there lasts the longer of the two, so
// a process with a short Recheck does not cut short the mark of one with a
// long one. Without the mark, every section's end sent a message to every
// process of the fleet, though none waited. It loses no wake-up: a
// process waits only after a call of its own that marked the Mutex, and
// Redis runs calls one at a time, so a call that frees a slot after it
// finds the mark, and one before it left the slot free for it to take. A
// waiter whose mark is gone (expired while its process stalled, evicted,
// or never set, by a process of a version without it) waits until its
// own next call, its re-check or the expiry of the first lease, as it
// does for a notification lost on the way: a mark changes how soon a
// waiter enters, never exclusion or progress. The mark is read before
// this call marks it: a call that frees slots and leaves its own flows
// waiting gave them the slots it could.
//
// The fence counter grows by one a lease while one Redis server runs.
// The first lease a server gives (a restart, a replica taking over: its
// run ID is new), and the first after the counter expired (a day without
// a lease, and the clock past the counter: see fenceFor), raise the
// counter to the server's clock in µs, above any token given before as
// long as fewer than a million leases a second were: the counter that
// server found may be an older one (a snapshot, a replica that lagged)
// that tokens given since have passed, or none (a restart without data).
// A user whom the ACL does not allow INFO gets the raise at every call
// that takes leases.
var mutexScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local nrel, nren = tonumber(ARGV[3]), tonumber(ARGV[4])
local nowed, gonefor = tonumber(ARGV[7]), tonumber(ARGV[8])
local call = tonumber(ARGV[9])
local waitfor = tonumber(ARGV[11])
local waited = redis.call('EXISTS', KEYS[6]) == 1
local i = 12
local freed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
for j = 1, nrel do
  freed = freed + redis.call('ZREM', KEYS[1], ARGV[i])
  if j > nrel - nowed then
    redis.call('ZADD', KEYS[4], now + gonefor, ARGV[i])
  end
  i = i + 1
end
if nowed > 0 then
  local latest = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[4], tonumber(latest[2]) - now + 1000)
end
local lost = {}
for j = 1, nren do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  else
    lost[#lost + 1] = j
  end
  i = i + 1
end
local want = #ARGV - i + 1
local asked = want
local lastcall = tonumber(redis.call('GET', KEYS[5]) or '0')
if call < lastcall then
  want = 0
else
  redis.call('SET', KEYS[5], ARGV[9], 'PX', gonefor)
end
local again = 0
for j = i, #ARGV do
  if redis.call('ZSCORE', KEYS[4], ARGV[j]) then want = 0 end
  if redis.call('ZSCORE', KEYS[1], ARGV[j]) then again = again + 1 end
end
local n = limit - redis.call('ZCARD', KEYS[1]) + again
if n < again then n = again end
if n > want then n = want end
local last = 0
if n > 0 then
  local ok, info = pcall(redis.call, 'INFO', 'server')
  local run = ok and string.match(info, 'run_id:(%x+)')
  local fence = redis.call('GET', KEYS[2])
  if not run or not fence or redis.call('GET', KEYS[3]) ~= run then
    local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if tonumber(fence or '0') < clock then
      redis.call('SET', KEYS[2], string.format('%d', clock))
    end
    if run then redis.call('SET', KEYS[3], run) end
  end
  last = redis.call('INCRBY', KEYS[2], n)
  local fenceat = string.format('%d', math.max(now, math.floor(last / 1000)) + tonumber(ARGV[10]))
  redis.call('PEXPIREAT', KEYS[2], fenceat)
  redis.call('PEXPIREAT', KEYS[3], fenceat)
  for j = 1, n do
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    i = i + 1
  end
else
  n = 0
end
local held = redis.call('ZCARD', KEYS[1])
if held > 0 then
  local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[1], tonumber(latest[2]) - now + 1000)
end
if n < asked and waitfor > 0 and redis.call('PTTL', KEYS[6]) < waitfor then
  redis.call('SET', KEYS[6], '1', 'PX', waitfor)
end
if waited and freed > 0 and (held < limit or n - again < freed) then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
local next = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then
  next = tonumber(first[2]) - now
end
return {n, last, next, lost}
`)

// toInt reads an integer of a script's reply.
func toInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
