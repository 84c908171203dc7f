// Package redissync gives the asyncsteps Syncers — [Mutex], [KeyedMutex],
// [Throttle], [KeyedThrottle] and [Limiter] — limits shared by every
// process of a cluster through one Redis server
// (github.com/redis/go-redis/v9), with the behaviour the in-process
// ones have on one loop: a local queue with a limit whose overflow fails
// with DefenseRejected, and a slot given back however the critical
// section ends (success, error, panic, timeout, cancel). One difference:
// a section that ends by a timeout or a cancel gives its slot back at
// once, even while an [asyncsteps.AsyncSteps.Await] function started in
// it still runs; the in-process Syncers keep the slot until such a
// function returns, which the engine counts for them alone.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: "myapp"})
//	if err != nil { ... } // CommError: "redis: timed out"; errors.Unwrap(err) names the address
//	defer c.Close()
//	db := c.NewMutex("db", redissync.MutexOptions{Max: 4, MaxQueue: 100})
//	root.Sync(db, func(as asyncsteps.AsyncSteps, _ ...any) {
//		token, _ := db.Token(as) // the fencing token of the lease
//		...
//	})
//	accounts := c.NewKeyedMutex("accounts", redissync.MutexOptions{MaxQueue: 100})
//	root.Sync(accounts.Key(accountID), chargeStep) // one order of an account at a time, fleet-wide
//	perKey := c.NewKeyedThrottle("api", redissync.ThrottleOptions{Rate: 100, MaxQueue: 100})
//	root.Sync(perKey.Key(apiKey), serveStep) // 100 requests per second per API key, fleet-wide
//
// [Throttle.Hold] and [Limiter.Hold] keep every flow of the cluster out
// of a rate limit until an instant, as their in-process counterparts do
// in one process: an upstream's 429 with a Retry-After, met by one
// process, pauses them all.
//
// # Zero values differ from the core's
//
// An option left at zero does not mean here what it means for the
// in-process Syncers of package asyncsteps: a zero limit is 1, the FutoIn
// spec's default, where the core's [asyncsteps.LimiterOptions] takes it
// for no limit; and a zero queue limit queues none, where the core's
// NewMutex and NewThrottle queue without limit when none is given. Moving
// a limit from one process to the cluster means setting every field:
//
//	left at zero                core (package asyncsteps)       redissync
//	Limiter's Concurrent        no concurrency limit            1 flow inside at a time
//	Limiter's Rate              no rate limit                   1 entry per Period
//	Limiter's MaxQueue, Burst   none wait                       none wait (the same)
//	a Mutex's max               NewMutex(0) panics              MutexOptions.Max 0 means 1
//	a Mutex's queue             NewMutex(n): unlimited          MutexOptions{Max: n}: none wait
//	a Throttle's rate           NewThrottle(0, p) panics        ThrottleOptions.Rate 0 means 1
//	a Throttle's queue          NewThrottle(n, p): unlimited    ThrottleOptions{Rate: n}: none wait
//
// A negative MaxQueue or Burst is unlimited in both, as
// [asyncsteps.Unlimited] is: MutexOptions{Max: n, MaxQueue:
// asyncsteps.Unlimited} queues as NewMutex(n) does.
//
// # No loop waits for Redis
//
// A flow that syncs makes its step wait (as [asyncsteps.AsyncSteps.Await]
// does) and hands its request to the Syncer's own goroutine, which makes
// the round trip and completes the step from there, through the engine's
// external completion. A Redis call never runs on a loop's goroutine.
// Every flow of the process that waits for one Syncer is served by the
// same round trip: requests that come while one is under way go together
// in the next, one Lua script call each, so the number of round trips
// depends on time, not on the number of waiting flows.
//
// # Faults
//
//   - Redis not reachable when the [Client] is made: [New] fails within
//     Options.OpTimeout with an [*asyncsteps.Error] of code CommError, its
//     info as below.
//   - Redis lost while flows wait: they fail with CommError (fail closed),
//     or, for a rate limit with FailOpen, enter without a limit; within
//     about OpTimeout after the next round trip starts: at once when the
//     connection breaks, else, for a Mutex, at worst Options.Recheck +
//     OpTimeout, and for a Throttle at the time Redis named for its next
//     entry. Nothing hangs: every round trip is bounded by OpTimeout.
//   - The notification connection dropped on the way without a word (a
//     NAT or a load balancer that forgets an idle connection, sending
//     neither FIN nor RST): the Client pings it when it has been silent
//     for Options.Recheck, and one that does not answer within OpTimeout
//     is closed and made again, which wakes every waiter; meanwhile the
//     re-checks wake them.
//   - Redis lost as a hold is made ([Throttle.Hold]): the hold goes with
//     each round trip of its Throttle until Redis takes it or its end
//     passes; meanwhile a FailOpen Throttle keeps this process's flows
//     out until the end of this process's own hold, not another's.
//   - Redis lost while flows hold a Mutex: their sections run on; their
//     leases are not renewed and run out TTL after the last renewal.
//   - Redis stalled (paused, or blocked by a slow command or a fork)
//     while flows wait: their round trips time out and the flows fail,
//     but a call written to its connection stays there, and Redis runs it
//     when it resumes, taking leases for flows that are gone. The Client
//     owes every lease of a round trip that failed, and gives it back
//     again, with a wait that doubles from 25 ms up to a tenth of the TTL
//     or a second (the shorter), until a round trip of it succeeds, however
//     long the stall. Such a give-back leaves a tombstone of the lease,
//     for two minutes of Redis's clock, and Redis takes none of the leases
//     of a call that has one: whichever of the two calls Redis runs first,
//     the slot is free once the give-back has run, within about that wait
//     after Redis resumed. A call that reaches Redis after a later call of
//     its Mutex takes none of its leases either (see a reply lost, below).
//     A call held back in the network until more than two minutes after
//     both the give-back and its Mutex's last call takes its leases for
//     nobody, until they run out a TTL later. While leases are owed, the
//     flows that ask are tried in a round trip of their own, once a round
//     trip has given those back: one more round trip, and if it fails
//     they fail with its CommError.
//     A Close whose last round trip cannot give back the leases held and
//     owed (Redis unreachable within OpTimeout) returns an error that says
//     how many: they run out within a TTL of Redis's last call for them.
//     During a rolling upgrade from a version without tombstones,
//     processes of both versions share the limits as before, each with its
//     own behaviour for its own leases: the older ones leave a stall's
//     leases to run out, up to a TTL after Redis resumed. A rate limit's
//     call that Redis runs after the stall counts its entries for flows
//     that are gone, unless a later call of its Throttle ran before it
//     (see a reply lost, below): the rate lets fewer flows in for a
//     while, never more.
//   - A process killed while it holds a lease: nothing is given back; the
//     lease runs out TTL after its last renewal (so between 2/3 TTL and
//     TTL after the kill) and its slot is free again, and the waiters of
//     other processes are woken at that time.
//   - A process that hangs without dying keeps its leases: its Client
//     renews them until their sections end, whatever the sections do, as
//     an in-process Mutex keeps its slot for a flow that never leaves. A
//     section that waits for an answer that never comes holds its slot in
//     the whole cluster for good: give such flows a step timeout
//     ([asyncsteps.AsyncSteps.SetTimeout], or the deadline of Run's
//     context), which ends the section and gives the lease back. A loop
//     blocked in a callback cannot time out: its leases are renewed until
//     the process is killed. A process frozen whole (SIGSTOP, a paused
//     VM) renews nothing: its leases run out as a killed one's, and once
//     it resumes, its sections run on without them ([Mutex.Token] reports
//     no token from the renewal that finds them gone).
//   - A reply lost with its connection after Redis ran the call: go-redis
//     sends the call again, and its script knows it for the same call run
//     again. A Mutex's leases are taken once and given back once, and a
//     Throttle's entries count once. So they are when go-redis sent the
//     call again after its connection broke before the call reached Redis,
//     and that first copy, held back on the way (in a proxy, or a network
//     that delays a connection's packets), reaches Redis after the copy
//     sent again, even after the flow it admitted has left: a Syncer
//     numbers its calls, and Redis keeps the number of its last call (see
//     Keys); a copy of a call Redis ran already, or of one older than
//     that last call, takes no lease and counts no entry. A copy held back
//     for longer than the record lasts, two minutes after a Mutex's last
//     call and 2×OpTimeout after a Throttle's, takes its leases for
//     nobody, until they run out a TTL later, or counts its entries for
//     nobody: the rate then lets fewer flows in for a while, never more.
//   - A round trip that panics (a hook of the redis client given to
//     [New], when the round trips go through that client: see New): its
//     flows fail with InternalError, info "redis: panic: ...", also
//     those of a FailOpen rate limit; the process goes on.
//   - Redis restarted: go-redis reconnects and the Syncers work again, with
//     no restart of the service; the scripts are loaded again when Redis
//     has lost them, and fencing tokens still grow (see [Mutex]), also
//     when it comes back with older data. A restart that loses Redis's
//     data loses the leases held too, as does a failover to a replica
//     that had not received them (replication is asynchronous, and the
//     Syncers do not wait for it), a FLUSHALL, and keys evicted
//     under maxmemory (by any maxmemory-policy but noeviction: "holders"
//     and "tat" expire, so the volatile-* ones evict them too): until
//     their sections end, other flows may enter beside them, up to the
//     limit again (a renewal does not put a lost lease back, and from
//     the renewal that finds it gone, [Mutex.Token] in such a section
//     reports no token), and a Throttle lets a whole Period's entries in
//     at once. Where that
//     matters, run Redis with persistence and noeviction, or check the
//     fencing token where the section writes.
//   - Redis out of memory under maxmemory with noeviction: a Throttle's
//     round trips, and a Limiter's, fail with CommError, info "redis:
//     error reply OOM" (or, for a rate limit with FailOpen, enter without
//     a limit);
//     a busy Mutex's round trips may still succeed, since Redis refuses a
//     script for memory only before its first write, and a Mutex's script
//     first removes expired and given-back leases. All work again as soon
//     as Redis has memory.
//   - A waiter not notified: a section's end notifies the processes
//     (Redis pub/sub) only while a Mutex is marked as waited for, a mark
//     that each round trip leaving a flow waiting sets again, for
//     2×(Options.Recheck + 2×OpTimeout), twice the longest a waiting
//     process goes without one; uncontended sections send nothing. A
//     waiter whose mark is gone (its process stalled past it, the key
//     evicted or lost with Redis's data) is not notified, and enters at
//     its own next round trip (its re-check, or the expiry of the first
//     lease), as when a notification is lost on the way: a later entry,
//     never two holders too many nor a waiter left for good. During a
//     rolling upgrade from a version without the mark, its processes
//     notify at every section's end as before, and their waiters, which
//     mark nothing, are not notified of the sections that processes of
//     this version end while no one of this version waits: they enter at
//     their re-check.
//   - Processes that share a Prefix but not a database (a different DB
//     number in their redis options): nothing fails, and each database
//     keeps a limit of its own. Every process of one limit must use the
//     same Redis server, database and Prefix.
//
// The info of such a CommError, New's included, is "redis: " and the kind
// of failure in fixed words, told by the type of go-redis's error: "timed
// out" (the usual one when Redis is gone: go-redis's own retries of a
// refused dial outlast OpTimeout), "connection refused", "connection
// reset", "connection closed", "host unreachable", "name lookup failed",
// "TLS handshake failed", "client closed" (the go-redis client was
// closed), "connection pool timed out", "connection pool exhausted",
// "cancelled" (New's context), "error reply" and the error code of the
// reply Redis refused the call with ("error reply WRONGTYPE"; "error reply
// NOAUTH" also for the protocol error by which Redis refuses a Mutex's
// round trip, of more than ten arguments, to a client that has not
// authenticated), or else "request failed". It never names the server's address, which the text
// of go-redis's error does: an asynchttp.Handler guarded by a Syncer
// answers the info to its client, in a 502, and that client must not
// learn where the server's Redis is. The error's Cause has it, for the
// log (the Handler logs it): its text is "redis ADDR: " and go-redis's
// error, which it unwraps to, so that errors.Is and errors.As find that
// error (syscall.ECONNREFUSED, a *net.OpError) in the flow's error.
//
// # Keys
//
// A Syncer named N of a Client with prefix P uses the keys "P:{N}:holders",
// "P:{N}:fence", "P:{N}:fence:server", "P:{N}:gone", "P:{N}:waiting" and
// "P:{N}:call:ID:K" (Mutex; the third names the Redis server that raised
// the counter, see [Mutex]; the fourth holds the tombstones of leases
// given back after a round trip that failed, see Faults; the fifth marks
// it as waited for, see a waiter not notified in Faults) or "P:{N}:tat",
// "P:{N}:hold" and "P:{N}:call:ID:K" (Throttle; the second holds the end
// of a hold, see [Throttle.Hold]), and the channel "P:released". A
// "call:ID:K" key records the last call of one Syncer of one process (see
// Faults): ID is its Client's [Client.ID], K a number the Client gives
// the Syncer. A [Limiter] named N is a Mutex named "N/concurrent" and a
// Throttle named "N/rate". The braces keep a Syncer's keys on one node of
// a Redis Cluster; there, N must not be empty nor start with "}", since
// Redis Cluster does not take an empty "{}" for a hash tag, and the keys
// of a Syncer could then land on different nodes: Redis refuses every
// call of such a Syncer (CommError "redis: error reply CROSSSLOT"), also
// of a FailOpen rate limit, which fails closed on it. For the same reason
// [New], given a *redis.ClusterClient, refuses a Prefix whose first "{"
// is followed at once by "}", as in "{}app"; on a single Redis or a
// *redis.Ring, which run each script on one server, it takes it. A Prefix
// with a tag of its own, such as "{app}", puts every Syncer of its
// Clients on that tag's node.
//
// The key K of a [KeyedMutex] named N is a Mutex named N/E, E being K
// with "%", "/", "{" and "}" escaped (see [KeyedMutex.MutexName]): its
// keys are that Mutex's, "P:{N/E}:holders" and so on, and the record of
// its last call, "P:{N/E}:call:ID:K", is one per key and KeyedMutex
// value, K a number the Client gives the KeyedMutex. On a Redis Cluster,
// the keys of each key of a KeyedMutex are on the node of their own tag
// N/E. So it is for a [KeyedThrottle]: its key K is a Throttle named N/E
// (see [KeyedThrottle.ThrottleName]), whose keys are "P:{N/E}:tat",
// "P:{N/E}:hold" and "P:{N/E}:call:ID:K", the last one per key and
// KeyedThrottle value.
//
// A Throttle's keys, and so a KeyedThrottle's, expire by themselves:
// "tat" once the time it holds has passed, "hold" a ms or two after the
// hold's end, a call record
// 2×OpTimeout after its call. A Mutex's "holders" goes when its last
// lease is given back, or expires a second after the lease in it that
// runs out last (whatever TTL each process gives its leases), "gone" a
// second after its last tombstone, "waiting" 2×(Recheck + 2×OpTimeout)
// after the last round trip that left a flow waiting (the longest of the
// processes' settings), and a call
// record two minutes after its call, and its "fence" keys a day after
// its last lease (or, for a counter ahead of Redis's clock, a day after
// the clock has caught up with it): tokens keep growing all the same,
// since the next lease raises the counter to Redis's clock, as after a
// restart (see [Mutex]). So no key of a Mutex stays in Redis once it has
// been unused for a day, unless its counter was raised by a clock that
// was ahead.
//
// # Time
//
// Leases, periods and waits are timed on Redis's clock and the process's
// real clock: an [asyncsteps.TestTool]'s virtual time does not move them.
// Test flows that use these Syncers on an [asyncsteps.Loop].
package redissync
