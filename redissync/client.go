package redissync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// Options configures a [Client]. The zero value of each field is its
// default.
type Options struct {
	// Prefix starts every Redis key and the notification channel of the
	// Syncers made by the Client: instances that share a Redis and a
	// Prefix share their limits. "" means "asyncsteps". Given a
	// *redis.ClusterClient, New refuses a Prefix whose first "{" is
	// followed at once by "}" (see Keys in the package documentation).
	Prefix string
	// OpTimeout bounds one round trip to Redis. When Redis is lost, a
	// waiting flow fails with CommError (or passes a fail-open rate limit)
	// at most about OpTimeout after its next round trip starts. Redis
	// keeps the record of a Throttle's last call (see Keys in the package
	// documentation) for 2×OpTimeout: a call sent again within its round
	// trip is known for the same call. 0 means two seconds.
	OpTimeout time.Duration
	// Recheck is the interval of the fallback re-check of a Mutex's
	// waiting flows, which are otherwise woken by a notification. It bounds
	// how long a lost notification (a dropped connection) can delay a
	// waiter, and how long a waiter takes to notice that Redis is gone
	// while nobody else talks to it: about Recheck + OpTimeout. The
	// notification connection, when silent for Recheck, is pinged: one
	// that does not answer within OpTimeout (dropped on the way without a
	// word) is closed and made again. A section's end notifies the other
	// processes only within 2×(Recheck + 2×OpTimeout) of a round trip that
	// left a flow waiting (see Faults in the package documentation). 0
	// means five seconds.
	Recheck time.Duration
}

// Client makes the Syncers that share one Redis server: [Client.NewMutex],
// [Client.NewKeyedMutex], [Client.NewThrottle], [Client.NewKeyedThrottle],
// [Client.NewLimiter]. It holds one pub/sub connection, which wakes the
// waiters of all its Mutexes, and one goroutine per Syncer, which makes
// that Syncer's round trips for every flow of the process.
//
// A Syncer lives as long as its Client: none can be dropped, and each
// keeps its goroutine (a Mutex its timers too, which wake it every TTL/3
// and every Recheck, also while nobody uses it) until Close. Make the
// Syncers of names known in advance, once: one made per request leaks,
// and one per member of an open set (a Mutex per account, a Throttle per
// API key) grows with every member ever served. For such a set, use a
// [KeyedMutex] or a [KeyedThrottle]: one goroutine serves all its keys,
// and a key costs nothing in the process once no flow holds or waits for
// it.
//
// A Client is safe for concurrent use. Create it with [New]; the zero value
// (and a nil *Client) is not usable: the Syncers it makes fail every flow
// with InternalError, and its Close does nothing. Close it when done: its
// goroutines end and its leases are given back.
type Client struct {
	rdb    redis.UniversalClient // the round trips', bounded by OpTimeout
	owned  bool                  // rdb is a copy of the user's client: Close closes it
	opts   Options
	addr   string // for the causes of errors
	ps     *redis.PubSub
	notify string        // the notification channel
	idBase string        // a random prefix of this Client's lease names
	idSeq  atomic.Uint64 // the counter after it

	done      chan struct{}      // closed by Close
	stop      context.CancelFunc // called by Close: ends listen's context
	closeOnce sync.Once
	wg        sync.WaitGroup // the goroutines of the Client and its Syncers

	mu      sync.Mutex
	mutexes map[string][]*Mutex      // every value of each name, for notifications
	keyed   map[string][]*KeyedMutex // every value of each name, for notifications
	gates   []signaler               // every Syncer's, woken when the connection breaks
	// closed is set by Close before it waits for wg: a Syncer made after
	// that starts no goroutine, since wg.Add must not race wg.Wait.
	closed bool
	// closeErrs are the failures of the Syncers' last round trips, which
	// Close returns.
	closeErrs []error
}

// New returns a Client on rdb, which it does not own: Close leaves rdb
// open. A round trip is bounded by OpTimeout only if the client honours
// the deadline of its context; when rdb is a *redis.Client,
// *redis.ClusterClient or *redis.Ring without ContextTimeoutEnabled, the
// Syncers' round trips go through a client of the Client's own, with
// rdb's settings (a "none" such as MaxRetries -1 included) and
// ContextTimeoutEnabled set (hooks added to rdb do not see them);
// otherwise rdb's ReadTimeout (3s by default, or none) would bound them
// instead. It checks that Redis answers and subscribes to the
// notification channel before it returns; if Redis cannot be reached
// within opts.OpTimeout (or ctx), it returns an [*asyncsteps.Error] with
// code CommError whose info names the kind of failure, as a flow's does
// (see Faults in the package documentation): not the address, which its
// Cause names.
func New(ctx context.Context, rdb redis.UniversalClient, opts Options) (*Client, error) {
	if nilClient(rdb) {
		return nil, errors.New("redissync: New: nil redis client")
	}
	if ctx == nil {
		return nil, errors.New("redissync: New: nil context")
	}
	if emptyHashTag(opts.Prefix) && onCluster(rdb) {
		return nil, fmt.Errorf("redissync: New: Prefix %q has an empty hash tag \"{}\", which would spread a Syncer's keys over the nodes of a Redis Cluster", opts.Prefix)
	}
	if opts.Prefix == "" {
		opts.Prefix = "asyncsteps"
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 2 * time.Second
	}
	if opts.Recheck <= 0 {
		opts.Recheck = 5 * time.Second
	}
	c := &Client{
		rdb:     timedClient(rdb),
		opts:    opts,
		addr:    addrOf(rdb),
		notify:  opts.Prefix + ":released",
		idBase:  randomID(),
		done:    make(chan struct{}),
		mutexes: make(map[string][]*Mutex),
	}
	c.owned = c.rdb != rdb
	ctx, cancel := context.WithTimeout(ctx, opts.OpTimeout)
	defer cancel()
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		c.closeOwned()
		return nil, c.commError(err)
	}
	c.ps = rdb.Subscribe(ctx, c.notify)
	// The confirmation: no notification sent from now on is missed.
	if _, err := c.ps.ReceiveTimeout(ctx, opts.OpTimeout); err != nil {
		_ = c.ps.Close()
		c.closeOwned()
		return nil, c.commError(err)
	}
	// listen's context is the Client's, cancelled by Close itself: a
	// goroutine that waited to cancel it would outlive Close.
	lctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.wg.Add(1)
	go c.listen(lctx)
	return c, nil
}

// ID returns the random name of this Client, unique in the cluster: the
// names of the leases its Mutexes take in Redis start with ID() + ":",
// as does the last part of the keys of its Mutexes' and Throttles' call
// records (see Keys in the package documentation).
func (c *Client) ID() string { return strings.TrimSuffix(c.idBase, ":") }

// Addr returns the address of the Redis server, as the causes of the
// Client's errors name it.
func (c *Client) Addr() string { return c.addr }

// Close stops the Client's Syncers: flows waiting to enter, and those that
// ask later, fail with CommError "redissync: client closed", leases held
// are given back (one last round trip, bounded by OpTimeout, after the
// one under way if any), and the Client's goroutines end before Close
// returns. Close is safe to call more than once.
//
// Close returns nil, or, when the last round trip of a Mutex could not
// give back the leases held or owed (see Faults in the package
// documentation: Redis stalled or lost within OpTimeout), an error that
// names the Mutex and the number of its leases left in Redis, which run
// out within its TTL of Redis's last call for them, and unwraps to the
// round trip's CommError; the errors of several Mutexes joined. Every
// call returns the same.
//
// Sections running go on to their end, but cluster-wide exclusion ends at
// Close: their leases are given back all the same, so flows of other
// processes may enter beside them, and [Mutex.Token] reports no token in
// them from then on. Where that matters, close the Client once the
// sections have ended (after an http.Server's Shutdown, say).
func (c *Client) Close() error {
	if c.unmade() {
		return nil
	}
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.done)
		c.stop()
		_ = c.ps.Close() // ends listen's receive
	})
	c.wg.Wait()
	c.closeOwned() // after the last round trips of the Syncers' shutdown
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.closeErrs...)
}

// closeFailed records err, the failure of a Syncer's last round trip, for
// Close to return.
func (c *Client) closeFailed(err error) {
	c.mu.Lock()
	c.closeErrs = append(c.closeErrs, err)
	c.mu.Unlock()
}

// closing reports whether Close has begun. A Syncer's goroutine asks it
// after its select, which takes any case that is due as likely as the
// Client's done: a round trip more, with Redis slow or gone, would cost
// Close up to OpTimeout each time.
func (c *Client) closing() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// closeOwned closes the round trips' client if it is the Client's own.
func (c *Client) closeOwned() {
	if c.owned {
		_ = c.rdb.Close()
	}
}

// listen receives the notifications of released Mutex slots and wakes the
// local Mutex named in each. A broken connection wakes every Syncer, so
// that its waiters find out at once whether Redis is still there (and
// fail if not); go-redis reconnects and subscribes again, and the new
// subscription wakes every Syncer again, since notifications sent while
// the connection was down are lost.
//
// A connection silent for Recheck is pinged, and one that does not answer
// within OpTimeout is taken for broken: a NAT or a load balancer may drop
// an idle connection without a word (no FIN, no RST), and a read without
// a deadline would wait on it, every notification lost, until the
// kernel's keepalive gave up on it, tens of minutes later.
func (c *Client) listen(ctx context.Context) {
	defer c.wg.Done()
	backoff := 10 * time.Millisecond
	pinged := false
	for {
		msg, err := c.receive(ctx, pinged)
		select {
		case <-c.done:
			return
		default:
		}
		wasPinged := pinged
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			c.wake(m.Payload)
			backoff = 10 * time.Millisecond
			continue
		case *redis.Subscription:
			c.wakeAll()
			continue
		}
		if err == nil {
			continue // a pong
		}
		if !wasPinged && timedOut(err) {
			if err = c.ps.Ping(ctx); err == nil {
				pinged = true
				continue
			}
		}
		c.wakeAll()
		select {
		case <-c.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// receive returns the next message of the notification connection: within
// Recheck, or, after a ping, within OpTimeout. The latter read has no
// timeout of its own, only its context's deadline: go-redis takes a read
// that hits it for a broken connection, closes it, and subscribes again
// on a new one at the next read.
func (c *Client) receive(ctx context.Context, pinged bool) (any, error) {
	if !pinged {
		return c.ps.ReceiveTimeout(ctx, c.opts.Recheck)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	return c.ps.ReceiveTimeout(ctx, 0)
}

// timedOut reports whether err is a read that timed out: not a dial,
// which tells that the connection is gone already.
func timedOut(err error) bool {
	var ne net.Error
	var op *net.OpError
	return errors.As(err, &ne) && ne.Timeout() && !(errors.As(err, &op) && op.Op == "dial")
}

// wake makes every Mutex named name try its waiters again, and the key
// of every KeyedMutex whose Mutex has that name (see KeyedMutex.MutexName).
// signal never blocks: it is called under mu, as wakeAll's is.
func (c *Client) wake(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.mutexes[name] {
		m.signal()
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 && len(c.keyed) > 0 {
		for _, km := range c.keyed[name[:i]] {
			km.kc.wakeKey(name[i+1:])
		}
	}
}

// signaler is a Syncer's part that wakeAll wakes: a gate's queue, or a
// KeyedMutex, which wakes every key in use.
type signaler interface{ signal() }

func (c *Client) wakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.gates {
		q.signal()
	}
}

// key returns the Redis key of part of the Syncer name. The name is a
// hash tag, so that a Syncer's keys live on one node of a cluster.
func (c *Client) key(name, part string) string {
	return c.opts.Prefix + ":{" + name + "}:" + part
}

// emptyHashTag reports whether the first "{" of prefix is followed at
// once by "}". Redis Cluster takes a key's hash tag from its first "{" to
// the next "}", but hashes the whole key when that tag is empty: the
// brace after the prefix, which makes a Syncer's name its keys' tag, would
// then count for nothing, and the keys of one Syncer, whose scripts take
// them together, would land on different nodes. Any other prefix keeps a
// Syncer's keys on one node: a tag within it puts every Syncer of the
// Client on that tag's node, and an unclosed "{" makes a tag that runs
// into the Syncer's name.
func emptyHashTag(prefix string) bool {
	i := strings.IndexByte(prefix, '{')
	return i >= 0 && strings.HasPrefix(prefix[i+1:], "}")
}

// onCluster reports whether rdb talks to a Redis Cluster, which refuses a
// script whose keys are in different slots. A single Redis, or a Ring of
// them, runs a Syncer's scripts on one server whatever its keys hash to:
// there a Prefix with an empty hash tag works, as it did before New
// refused it, and a refusal would make processes that share limits under
// it move to another Prefix all at once.
func onCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// call runs one round trip with the Client's timeout. A panic in it, of
// a hook of the user's redis client, is returned as an
// [*asyncsteps.PanicError]: on a Syncer's goroutine, nobody else could
// recover it, and it would end the process.
func (c *Client) call(s *redis.Script, keys []string, args ...any) (res []any, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.OpTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, &asyncsteps.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return s.Run(ctx, c.rdb, keys, args...).Slice()
}

// errClosed is the refusal of a flow waiting when its Client closes.
var errClosed = errors.New("redissync: client closed")

// closedError is the error of a flow that waits when the Client closes.
func closedError() *asyncsteps.Error {
	return &asyncsteps.Error{Code: asyncsteps.CommError, Info: errClosed.Error(), Cause: errClosed}
}

// start registers the queue of a new Syncer and runs its goroutine f. On
// a closed Client, the queue refuses every flow at once and no goroutine
// starts. The goroutine is counted under mu, so that the count never goes
// up while Close waits for it to reach zero.
func (c *Client) start(q *gateQueue, f func()) {
	c.startSyncer(q, func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
	}, f)
}

// startSyncer registers s, woken when the notification connection
// breaks, and runs its goroutine f; on a closed Client, it calls refuse
// instead, which makes the Syncer refuse every flow at once.
func (c *Client) startSyncer(s signaler, refuse, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		refuse()
		return
	}
	c.gates = append(c.gates, s)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// nilClient reports whether rdb is nil, also as a nil pointer of one of
// go-redis's clients.
func nilClient(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// unmade reports whether c was not made by New: nil or the zero Client.
func (c *Client) unmade() bool { return c == nil || c.done == nil }

// refuseUnmade adds to as a step that fails, with onerror as its error
// handler, because a Syncer named what was not made by a Client from New.
func refuseUnmade(as asyncsteps.AsyncSteps, what string, onerror []asyncsteps.ErrorFunc) {
	refuse(as, "redissync: the "+what+" was not made by a Client from New", onerror)
}

// refuse adds to as a step that fails with InternalError, info, with
// onerror as its error handler. Given more than one, it adds the step
// with none, as the refusal of more than one does: passed on, they made
// Add refuse them instead, and the info named Add, which the user did not
// call, and not the fault found first.
func refuse(as asyncsteps.AsyncSteps, info string, onerror []asyncsteps.ErrorFunc) {
	if len(onerror) > 1 {
		onerror = nil
	}
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InternalError, info) }, onerror...)
}

// addrOf names the server(s) of rdb for errors.
func addrOf(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(r.Options().Addrs, ",")
	case *redis.Ring:
		var addrs []string
		for _, a := range r.Options().Addrs {
			addrs = append(addrs, a)
		}
		return strings.Join(addrs, ",")
	}
	return "(unknown address)"
}

// randomID is a prefix that makes lease names unique across processes.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}

// leaseID returns a name for a new lease, unique in the cluster.
func (c *Client) leaseID() string {
	return c.idBase + strconv.FormatUint(c.idSeq.Add(1), 10)
}

// scriptCall is one call of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// scriptReply is the outcome of a scriptCall.
type scriptReply struct {
	res []any
	err error
}

// callAll makes calls of s, in pipelines of at most pipelineMax calls,
// each bounded by OpTimeout, and returns their outcomes in order. A
// single call is made as call makes it. The pipelines go at once, each
// on a goroutine and a connection of its own: one after the other, a
// Redis that stalls would make the last wait for each one before it to
// time out, and the round of thousands of keys take that many
// OpTimeouts, in which their goroutine serves no other key.
func (c *Client) callAll(s *redis.Script, calls []scriptCall) []scriptReply {
	out := make([]scriptReply, len(calls))
	var wg sync.WaitGroup
	for i := pipelineMax; i < len(calls); i += pipelineMax {
		j := min(i+pipelineMax, len(calls))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.pipeline(s, calls[i:j], out[i:j])
		}()
	}
	first := min(pipelineMax, len(calls))
	c.pipeline(s, calls[:first], out[:first])
	wg.Wait()
	return out
}

// pipeline makes calls of s in one pipeline, their outcomes in out. A
// pipeline runs a script by its hash alone: when Redis has lost it (a
// restart), every call is refused with NOSCRIPT, and runs nothing. Then
// the first is made as call makes it, which loads the script, and the
// others go again in a pipeline; any still refused (on another node of a
// cluster) are made one by one.
func (c *Client) pipeline(s *redis.Script, calls []scriptCall, out []scriptReply) {
	if len(calls) == 1 {
		out[0].res, out[0].err = c.call(s, calls[0].keys, calls[0].args...)
		return
	}
	c.pipelineOnce(s, calls, out)
	var again []int
	for i := range out {
		if redis.HasErrorPrefix(out[i].err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return
	}
	out[again[0]].res, out[again[0]].err = c.call(s, calls[again[0]].keys, calls[again[0]].args...)
	again = again[1:]
	rest := make([]scriptCall, len(again))
	restOut := make([]scriptReply, len(again))
	for j, i := range again {
		rest[j] = calls[i]
	}
	c.pipelineOnce(s, rest, restOut)
	for j, i := range again {
		out[i] = restOut[j]
		if redis.HasErrorPrefix(out[i].err, "NOSCRIPT") {
			out[i].res, out[i].err = c.call(s, calls[i].keys, calls[i].args...)
		}
	}
}

// pipelineOnce sends calls of s by the script's hash in one pipeline,
// bounded by OpTimeout, their outcomes in out. A panic in it, of a hook
// of the user's redis client, fails every call with an
// [*asyncsteps.PanicError], as in call.
func (c *Client) pipelineOnce(s *redis.Script, calls []scriptCall, out []scriptReply) {
	if len(calls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.OpTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err := &asyncsteps.PanicError{Value: r, Stack: debug.Stack()}
			for i := range out {
				out[i] = scriptReply{err: err}
			}
		}
	}()
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, call := range calls {
			cmds[i] = s.EvalSha(ctx, p, call.keys, call.args...)
		}
		return nil
	})
	for i, cmd := range cmds {
		out[i].res, out[i].err = cmd.Slice()
	}
}

// option is a numeric option of a constructor, named for its panic.
type option struct {
	name  string
	value string // as the panic shows it
	neg   bool
}

func countOption(name string, n int) option { return option{name, strconv.Itoa(n), n < 0} }

func spanOption(name string, d time.Duration) option { return option{name, d.String(), d < 0} }

// refuseNegative panics if an option of the constructor ctor is negative,
// naming the first such option and its value, as the core's constructors
// do: "redissync: NewMutex: negative TTL -1s".
func refuseNegative(ctor string, opts ...option) {
	for _, o := range opts {
		if o.neg {
			panic("redissync: " + ctor + ": negative " + o.name + " " + o.value)
		}
	}
}
