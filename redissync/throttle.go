package redissync

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// ThrottleOptions configures a [Throttle]. The zero value lets 1 flow in
// per second and queues none.
type ThrottleOptions struct {
	// Rate is the number of entries per Period in the whole cluster; 0
	// means 1 (the core's NewThrottle(0, period) panics).
	Rate int
	// Period is 0 for one second.
	Period time.Duration
	// MaxQueue is the number of this process's flows that may wait; more
	// are refused with DefenseRejected. 0: none wait; negative: unlimited.
	// This differs from the core's: asyncsteps.NewThrottle(n, period)
	// queues without limit, ThrottleOptions{Rate: n} here queues none,
	// and refuses a flow that comes once the period's entries are taken;
	// MaxQueue: asyncsteps.Unlimited queues as the core's does.
	MaxQueue int
	// FailOpen lets flows in without a limit while Redis cannot be
	// reached, instead of failing them with CommError (fail closed, the
	// default). A Redis that answers with an error of the data or the
	// script (WRONGTYPE, or the script failing: a key of the Throttle
	// holding a foreign value), or that does not let the client in (a
	// password missing or wrong, an ACL without the scripts: NOAUTH,
	// WRONGPASS, NOPERM), or a Redis Cluster that refuses its keys
	// together (CROSSSLOT: a name that is empty or starts with "}"), fails
	// its flows closed all the same: that is no outage, and failing open
	// would lift the limit until someone repairs the key, the name or the
	// configuration. So does a go-redis client that the
	// program closed before the Client: it will not come back. A script
	// error that wraps a reply of Redis not serving now (READONLY, OOM,
	// LOADING and the like, as Redis before 7 reports them) counts as
	// Redis lost.
	FailOpen bool
}

// Throttle lets at most Rate flows of the whole cluster enter its critical
// sections per Period. It implements [asyncsteps.Syncer]: enter with
// [asyncsteps.AsyncSteps.Sync].
//
// The limit is the generic cell rate algorithm (GCRA), run by one Lua
// script in Redis on Redis's clock: entries are spaced Period/Rate apart
// on average (rounded up to the ns), and up to Rate may enter at once
// after an idle spell, as a new period of the in-process Throttle lets
// Rate in at once. Over any span of time d, at most Rate + d·Rate/Period
// flows enter. Like the
// in-process Throttle it counts entries, not flows, and nothing is given
// back when a section ends.
//
// A flow that cannot enter waits in this process's queue, first in, first
// out, until the time Redis names for the next entry; with the queue full
// (MaxQueue), it fails with [asyncsteps.DefenseRejected] and the info
// "Throttle queue limit", which the error handler given to Sync sees
// first. Every flow of the process that asks or waits is tried in one
// round trip, which admits as many as the rate allows: a thousand flows
// cost one round trip, not a thousand. Waiters of different processes are
// not served in a global order.
//
// When Redis cannot be reached, the flows that wait fail with
// [asyncsteps.CommError] (info "redis: timed out", say: see Faults in the
// package documentation), at most about
// OpTimeout after their round trip starts, or, with FailOpen, enter
// without a limit. Once Redis answers again (also after a restart that
// lost its data), the Throttle works again.
//
// A flow whose Loop is closed while it waits stops without its cancel
// handlers; it leaves the queue at the next round trip (another flow
// asking, the time of the next entry), before that round trip could admit
// it: it is never given an entry, and no longer counts against MaxQueue
// once a later flow asks. (A flow's first try is not checked while the
// queue is empty, to keep uncontended entries cheap: a flow whose loop
// closes as it first asks may use up an entry.)
//
// A Throttle is safe for concurrent use: flows on any loops may share it.
// Make it with [Client.NewThrottle]; a nil or zero Throttle, or one made by a
// zero Client, fails every flow that enters it with InternalError.
type Throttle struct {
	gateQueue
	keys     []string // the next entry's time, the record of this Throttle's last call, the hold's end
	interval string   // Period/Rate in µs: the script's emission interval
	slack    string   // Period - interval in µs: how far ahead entries may go
	keep     string   // how long Redis keeps the record of a call, in ms
	failOpen bool

	// calls numbers the round trips made: the Throttle's own count, or,
	// for a key of a KeyedThrottle, the count of every key's (see
	// Mutex.calls). Used by the goroutine that makes the round trips only.
	calls *uint64

	// held is the end of the latest Hold, on this process's clock; zero
	// before the first. holdDue is set until a round trip has given it to
	// Redis, or its end has passed. Both are guarded by mu.
	held    time.Time
	holdDue bool
}

// NewThrottle returns the Throttle name (the key Redis shares between
// processes) with the limits of opts. It panics if Rate or Period is
// negative. Use one Throttle per name in a process.
func (c *Client) NewThrottle(name string, opts ThrottleOptions) *Throttle {
	refuseNegative("NewThrottle", countOption("Rate", opts.Rate), spanOption("Period", opts.Period))
	if c.unmade() {
		return new(Throttle) // its Sync fails every flow: see Client
	}
	t := new(Throttle)
	c.initThrottle(t, name, c.rateSpec(opts), c.leaseID(), new(uint64))
	t.wake = make(chan struct{}, 1)
	c.start(&t.gateQueue, t.run)
	return t
}

// rateSpec is what the Throttles of one set of options share: the
// script's arguments and the queue's limit.
type rateSpec struct {
	interval, slack, keep string // see Throttle
	maxQueue              int
	failOpen              bool
}

// rateSpec returns the spec of Throttles of opts, which are not negative.
func (c *Client) rateSpec(opts ThrottleOptions) rateSpec {
	rate, period := max(opts.Rate, 1), opts.Period
	if period == 0 {
		period = time.Second
	}
	interval, slack := gcraSpacing(rate, period)
	return rateSpec{
		interval: strconv.FormatFloat(interval, 'f', 3, 64),
		slack:    strconv.FormatFloat(slack, 'f', 3, 64),
		keep:     strconv.FormatInt(2*c.opts.OpTimeout.Milliseconds()+1, 10),
		maxQueue: opts.MaxQueue,
		failOpen: opts.FailOpen,
	}
}

// initThrottle makes t the Throttle name of spec, without a goroutine
// nor a wake channel: NewThrottle adds its own, a KeyedThrottle's key is
// served by the KeyedThrottle's. record names the record of its last
// call, and calls numbers its calls (see Throttle.calls).
func (c *Client) initThrottle(t *Throttle, name string, spec rateSpec, record string, calls *uint64) {
	t.gateQueue = gateQueue{c: c, maxQueue: spec.maxQueue, what: "Throttle"}
	t.keys = []string{c.key(name, "tat"), c.key(name, "call:"+record), c.key(name, "hold")}
	t.interval, t.slack, t.keep = spec.interval, spec.slack, spec.keep
	t.failOpen = spec.failOpen
	t.calls = calls
}

// gcraSpacing returns the script's emission interval and slack, in µs to
// the ns (the script's unit; in whole µs, a Period under 1µs made an
// interval of 0, which the script would divide by). The interval is
// rounded up to the ns, so that entries never come faster than Rate per
// Period; the slack is Rate-1 such intervals, so that Rate enter at once
// after an idle spell. Period less the interval, each rounded on its own,
// can hold a hair under Rate-1 intervals (Rate 60 per second: 983333.333
// µs against 16666.667), and the script would admit one entry fewer.
func gcraSpacing(rate int, period time.Duration) (interval, slack float64) {
	micros := float64(period.Nanoseconds()) / 1e3
	// The tolerance keeps a quotient whose float is a hair above a whole
	// ns (an exact division's rounding) from going up a ns.
	interval = max(math.Ceil(micros/float64(rate)*1e3-1e-6)/1e3, 0.001)
	return interval, float64(rate-1) * interval
}

// Sync implements [asyncsteps.Syncer]: it adds to as the steps that wait
// for an entry, then run f with onerror as its error handler. The success
// args of f's step are the result of the steps added.
// With a nil f, the step it adds fails with InternalError, "Sync: nil step
// function", and asks Redis for nothing.
func (t *Throttle) Sync(as asyncsteps.AsyncSteps, f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) {
	if t == nil || t.c.unmade() {
		refuseUnmade(as, "Throttle", onerror)
		return
	}
	syncSection(as, f, onerror, t)
}

// Hold keeps every flow of the cluster out of the Throttle until the
// instant until, as [asyncsteps.Throttle.Hold] does for the flows of one
// process: so that an upstream's answer "429, Retry-After: 5", met by one
// process, pauses every process that shares the Throttle, not only the
// flow that got it. until is read on this process's clock: in a step of
// an [asyncsteps.Loop], as.Tool().Now().Add(wait), or time.Now().Add(wait)
// (an instant of a [asyncsteps.TestTool]'s virtual clock has long passed,
// and holds nothing).
//
// While the hold lasts, Redis admits no entry and names the hold's end as
// the time of the next one: the flows that wait, or come meanwhile, queue
// in their process, within MaxQueue (with none, a flow that comes is
// refused at once with DefenseRejected), and enter from the hold's end
// as the rate allows, Rate at once if the hold outlasted the entries made
// before it, as after an idle spell. Each process's waiters are woken
// then by the one timer of its Throttle, which makes one round trip for
// all of them: a hold's end costs a round trip per process, as any time
// Redis names for the next entry does. A process whose waiters went to
// sleep before the hold was made learns of it when they wake: one round
// trip more. A hold never shortens one made before, by any process: Redis
// keeps the later end, compared and written in one script. A hold whose
// instant has passed does nothing.
//
// Hold never waits for Redis, and returns no error: it hands the hold to
// the Throttle's goroutine, which gives it to Redis in its next round
// trip, at once, with the flows that ask then (a round trip under way as
// Hold is called may still admit the flows it asks for). The hold lasts
// on Redis's clock for as long as until was away when that round trip
// started, so that it does not depend on the clocks of the processes
// agreeing with Redis's: it ends later than until by the time the call
// took to reach Redis (at most OpTimeout), never earlier. It expires in
// Redis by itself (see Keys in the package documentation).
//
// Redis lost: the hold stays with this process's Throttle, and goes with
// each of its round trips until one succeeds or the hold's end passes:
// those of the flows that ask, and one each time the Client finds its
// notification connection broken or made again, about every second
// during an outage. Meanwhile the flows of this process fail with
// CommError, as in any outage; with FailOpen, they wait in the queue,
// within MaxQueue, until the end of this process's latest hold, then
// enter without a limit: failing open lifts the rate, not an upstream's
// request to wait. The holds of other processes, which only Redis knew,
// no longer keep them out. Processes of a version without Hold ignore
// holds and keep entering at the rate.
//
// Hold is safe for concurrent use, from a step of any loop or from
// another goroutine. On a nil or zero Throttle, or one whose Client is
// closed, it does nothing.
func (t *Throttle) Hold(until time.Time) {
	if t == nil || t.c.unmade() || !until.After(time.Now()) {
		return
	}
	t.mu.Lock()
	later := until.After(t.held)
	if later {
		t.held, t.holdDue = until, true
	}
	t.mu.Unlock()
	if later {
		t.signal()
	}
}

// enter implements gate.
func (t *Throttle) enter(as asyncsteps.AsyncSteps, w *waiter) {
	w.tool = probeable(as.Tool())
	w.as = as
	as.WaitExternal()
	t.request(w)
}

// inside implements gate: an entry holds nothing.
func (t *Throttle) inside(asyncsteps.AsyncSteps, *waiter) {}

// leave implements gate: a waiter leaves the queue; an entry made stays
// counted.
func (t *Throttle) leave(_ asyncsteps.AsyncSteps, w *waiter) {
	t.mu.Lock()
	t.dequeue(w)
	t.mu.Unlock()
}

// run is the Throttle's goroutine: it makes every round trip of the
// Throttle.
func (t *Throttle) run() {
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	for {
		select {
		case <-t.c.done:
		case <-t.wake:
		case <-next.C:
		}
		if t.c.closing() {
			t.mu.Lock()
			done := t.shut()
			t.mu.Unlock()
			complete(done)
			return
		}
		if d, ok := t.round(); ok {
			next.Reset(d)
		}
	}
}

// round asks Redis for an entry for every waiter in one round trip. It
// returns when the next entry is possible, if waiters are left.
func (t *Throttle) round() (time.Duration, bool) {
	rt, ok := t.begin()
	if !ok {
		return 0, false
	}
	res, err := t.c.call(gcraScript, t.keys, t.roundArgs(rt)...)
	return t.end(rt, res, err)
}

// rateTrip is the work of one round trip of a Throttle: the waiters on
// their first try, how many entries it asks for, and the hold it gives
// to Redis (holdUs 0: none).
type rateTrip struct {
	fresh  []*waiter
	want   int
	held   time.Time
	holdUs int64
}

// begin takes the work of a round trip, and reports whether there is
// any. Before, it drops the waiters whose loop was closed: an entry given
// to one would be spent on a flow that is gone. The script needs only the
// number of waiters: the queue is walked only as far as the waiters
// admitted, so that a round trip with thousands queued costs what one
// with a few does.
func (t *Throttle) begin() (rateTrip, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropClosedFlows(nil)
	rt := rateTrip{fresh: t.takeFresh()}
	t.queue.tidy()
	rt.want = t.queue.live + len(rt.fresh)
	rt.held, rt.holdUs = t.dueHold()
	return rt, rt.want > 0 || rt.holdUs > 0
}

// roundArgs numbers a new call of t and returns its ARGV for rt. Called
// from the goroutine that makes the round trips only: the calls it
// numbers follow one another.
func (t *Throttle) roundArgs(rt rateTrip) []any {
	*t.calls++
	return []any{t.interval, t.slack, rt.want, *t.calls, t.keep, rt.holdUs}
}

// end applies the outcome of rt's round trip, its reply res or its
// failure err, and returns what round does.
func (t *Throttle) end(rt rateTrip, res []any, err error) (time.Duration, bool) {
	fresh := rt.fresh
	if err != nil {
		// A panic (InternalError) is a bug, no outage: it fails closed.
		e := t.c.commError(err)
		open := t.failOpen && e.Code == asyncsteps.CommError && !refusedByRedis(err) && !errors.Is(err, redis.ErrClosed)
		t.mu.Lock()
		if open {
			if done, rest, ok := t.holdWhileLost(fresh); ok {
				waiting := t.queue.live > 0
				t.mu.Unlock()
				complete(done)
				return rest, waiting
			}
		}
		done := t.failAll(e, open, fresh)
		t.mu.Unlock()
		complete(done)
		return 0, false
	}
	admitted, wait := int(toInt(res[0])), toInt(res[1])
	t.mu.Lock()
	if rt.holdUs > 0 && t.held.Equal(rt.held) {
		t.holdDue = false // Redis has it; a later Hold is due still
	}
	// The queued waiters first, in their order, then the fresh ones; an
	// entry of one that left during the round trip goes to the next.
	done := t.admitQueued(admitted)
	fresh = slices.DeleteFunc(fresh, func(w *waiter) bool { return w.state != wFresh })
	left := admitted - len(done)
	settled, _ := t.settle(fresh, left, func(int, *waiter) {})
	done = append(done, settled...)
	// Entries left over, of flows that all left, go to those that asked
	// meanwhile: Redis has counted them, and they would be spent on nobody.
	done = append(done, t.admitFresh(left-len(fresh))...)
	waiting := t.queue.live > 0
	more := len(t.fresh) > 0
	t.mu.Unlock()
	complete(done)
	if more {
		t.signal()
	}
	if waiting {
		// Redis names the next entry of a Period near the longest Duration a
		// µs or so beyond it (the interval is rounded up).
		return max(toDuration(wait, time.Microsecond), 100*time.Microsecond), true
	}
	return 0, false
}

// dueHold returns the latest Hold and its rest in µs, rounded up, if no
// round trip has given it to Redis yet, or 0. The rest is read as the
// round trip starts: a hold that waited for the one under way is no
// longer in Redis for it. A hold whose end has passed is due no more.
// Called with mu held.
func (t *Throttle) dueHold() (time.Time, int64) {
	if !t.holdDue {
		return time.Time{}, 0
	}
	rest := time.Until(t.held)
	if rest <= 0 {
		t.holdDue = false
		return time.Time{}, 0
	}
	us := int64(rest / time.Microsecond)
	if rest%time.Microsecond != 0 {
		us++ // never a µs short
	}
	return t.held, us
}

// unused reports whether no flow of the process asks or waits for t,
// and no hold of this process keeps it (see holdKept): a KeyedThrottle's
// key may then be dropped (unless a round trip is under way for it, whose
// fresh waiters are neither fresh nor queued until its answer). Called
// with mu held.
func (t *Throttle) unused() bool {
	return t.queue.live == 0 && !t.holdKept(time.Now()) &&
		!slices.ContainsFunc(t.fresh, func(w *waiter) bool { return w.state == wFresh })
}

// holdKept reports whether the latest Hold must be kept at now: it has
// not ended, and it is still to be given to Redis, or, with FailOpen,
// would keep this process's flows out while Redis is lost (see
// holdWhileLost). Called with mu held.
func (t *Throttle) holdKept(now time.Time) bool {
	return t.held.After(now) && (t.holdDue || t.failOpen)
}

// holdWhileLost keeps this process's flows out of a FailOpen Throttle
// whose round trip found Redis lost, until the end of this process's
// latest Hold, if it has not passed: the flows of the round trip and
// those that asked meanwhile queue, within MaxQueue, as a hold in Redis
// would queue them, and the next round trip is due at the hold's end.
// It returns the flows refused, for a full queue, and the hold's rest.
// Failing open lifts the rate, not an upstream's request to wait. Called
// with mu held.
func (t *Throttle) holdWhileLost(fresh []*waiter) (done []*waiter, rest time.Duration, ok bool) {
	rest = time.Until(t.held)
	if rest <= 0 {
		return nil, 0, false
	}
	done, _ = t.settle(append(fresh, t.takeFresh()...), 0, func(int, *waiter) {})
	return done, rest, true
}

// refusedByRedis reports whether err is an error reply that says the
// Throttle's key or script is wrong, or that Redis does not let its client
// in, not that Redis is unavailable: it lasts until someone repairs the
// key or the configuration, so failing open would lift the limit for good.
func refusedByRedis(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	if unauthenticatedReply(msg) {
		return true // NOAUTH
	}
	for _, code := range refusedCodes {
		if strings.HasPrefix(msg, code+" ") {
			return true
		}
	}
	return strings.HasPrefix(msg, "ERR ") && strings.Contains(msg, "script") && !wrapsUnavailable(msg)
}

// refusedCodes are the error codes by which Redis refuses a call until
// someone repairs a key or the configuration: a key of the wrong type,
// a client that Redis does not let in (NOAUTH: no password given;
// WRONGPASS: a wrong one, met when a connection is made; NOPERM: an ACL
// that does not allow the scripts), and keys that a Redis Cluster does
// not take together (CROSSSLOT: a Syncer named "" or "}...", whose keys
// have an empty hash tag, see Keys in the package documentation).
var refusedCodes = []string{"WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "CROSSSLOT"}

// unavailableCodes are the error codes by which Redis says it cannot serve
// now (a failover, a load, a full memory), not that a key is wrong.
var unavailableCodes = []string{"READONLY", "MASTERDOWN", "LOADING", "BUSY", "OOM", "CLUSTERDOWN", "TRYAGAIN"}

// wrapsUnavailable reports whether msg, an "ERR" reply to a script, wraps
// one of unavailableCodes: before Redis 7 an error of a command the script
// called comes as "ERR Error running script ... -READONLY ...", and a
// FailOpen Throttle must still fail open on it.
func wrapsUnavailable(msg string) bool {
	for _, code := range unavailableCodes {
		if strings.Contains(msg, "-"+code+" ") || strings.Contains(msg, ": "+code+" ") {
			return true
		}
	}
	return false
}

// gcraScript admits up to ARGV[3] entries on the key KEYS[1], the
// theoretical arrival time (TAT) of the next entry in µs of Redis's clock.
// An entry may enter while TAT - now <= slack, and moves TAT on by
// interval. It returns the number admitted and the µs until the next
// entry may enter.
//
// It reckons with TAT - now, "ahead", and reads and writes TAT's whole µs
// and its ns apart: a µs count of Redis's clock (about 2^50) keeps only
// quarters of a µs in a double, so TAT + interval would lose up to 0.125
// µs at each entry (an interval of 333.333 µs would space entries 333.25
// µs apart, more than Rate per Period), and now + slack would round the
// burst after an idle spell down by one.
//
// ARGV[4] numbers the call among those of one Throttle, whose record
// KEYS[2] keeps the number of the last call and the entries it admitted,
// for ARGV[5] ms. A call whose number is not above the record's is this
// very call, run again: go-redis sends a call again when its connection
// breaks before the reply, which may have been lost after Redis ran it.
// It admits what the first run admitted, without counting it again;
// counted twice, an entry of a Rate of 2 per Period was used up for
// nobody. A call below the record's reaches Redis after its Throttle gave
// it up (a timeout) and made the next: it admits nothing.
//
// KEYS[3] holds the end of a hold (see [Throttle.Hold]) in µs of Redis's
// clock, and expires by itself just after it. ARGV[6], if above 0, holds
// for that many µs from now, unless a hold that ends later lives: the
// later end stays, compared and written in this one script, so that two
// processes holding at once never shorten each other's hold. While a
// hold lives, the script admits nothing and names the later of the hold's
// end and the next entry's time as the wait. A call run again, or one
// below the record's, moves no hold: its own run, or the later call,
// made it already, from an earlier now.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, slack, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local call = tonumber(ARGV[4])
local hold = tonumber(ARGV[6]) or 0
local ahead = 0
local tat = redis.call('GET', KEYS[1])
if tat then
  local whole, ns = string.match(tat, '^(%d+)%.?(%d*)$')
  ahead = (tonumber(whole) - now) + tonumber('0.' .. ns)
  if ahead < 0 then ahead = 0 end
end
local last, admitted = string.match(redis.call('GET', KEYS[2]) or '', '^(%d+) (%d+)$')
local again = last and tonumber(last) >= call
local ends = tonumber(redis.call('GET', KEYS[3]) or '0')
if not again and hold > 0 and now + hold > ends then
  ends = now + hold
  redis.call('SET', KEYS[3], string.format('%d', ends), 'PX', math.ceil(hold / 1000) + 1)
end
local held = ends - now
if held < 0 then held = 0 end
local n
if again then
  n = 0
  if tonumber(last) == call then n = tonumber(admitted) end
else
  n = math.floor((slack - ahead) / interval + 1e-6) + 1
  if n > want then n = want end
  if n < 0 or held > 0 then n = 0 end
  if n > 0 then
    ahead = ahead + n * interval
    local ns = math.floor(ahead * 1000 + 0.5)
    redis.call('SET', KEYS[1], string.format('%d.%03d', now + math.floor(ns / 1000), ns % 1000),
      'PX', math.ceil(ahead / 1000) + 1)
  end
  redis.call('SET', KEYS[2], ARGV[4] .. ' ' .. n, 'PX', ARGV[5])
end
local wait = ahead - slack
if wait < held then wait = held end
if wait < 0 then wait = 0 end
return {n, math.ceil(wait)}
`)
