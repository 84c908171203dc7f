package redissync

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// cutProxy forwards connections to a Redis server. Armed with a script,
// it lets the next call of that script through and then breaks its
// connection instead of forwarding the reply: Redis ran the call, the
// client never learns its result, and go-redis sends it again on a new
// connection.
type cutProxy struct {
	*tcpProxy
	armed atomic.Pointer[string] // the SHA1 of the script whose next call to cut
	cuts  atomic.Int64
}

// arm makes p cut the reply to the next call of s, which must be loaded
// in Redis: it is then called by EVALSHA, which names it.
func (p *cutProxy) arm(s *redis.Script) {
	sha := s.Hash()
	p.armed.Store(&sha)
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(tp *tcpProxy, c, s net.Conn) {
		var cut atomic.Bool
		tp.wg.Go(func() {
			p.pipe(s, c, func(b []byte) bool { // the calls
				sha := p.armed.Load()
				if sha != nil && bytes.Contains(b, []byte(*sha)) && p.armed.CompareAndSwap(sha, nil) {
					cut.Store(true)
				}
				return false
			})
		})
		tp.wg.Go(func() { p.pipe(c, s, func([]byte) bool { return cut.Load() }) }) // the replies
	})
	return p
}

// pipe copies from to dst until either end closes, or until drop says
// that what was read must not go on: then it breaks both connections.
func (p *cutProxy) pipe(dst, src net.Conn, drop func([]byte) bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if drop(buf[:n]) {
				p.cuts.Add(1)
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestMutexReplyLost: Redis runs a round trip that admits a flow, its
// reply is lost with the connection, and go-redis sends the call again.
// The flow enters at once, with a token. The call run again found the
// flow's lease held (by the first run) and the Mutex full: the flow
// queued behind its own lease, which nobody renewed or gave back, and
// waited, with the cluster's slot, until the lease ran out a TTL later.
func TestMutexReplyLost(t *testing.T) {
	p := startCutProxy(t, sharedRedis(t))
	c, rdb := newClient(t, p.addr, Options{})
	loadScripts(t, rdb)
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	p.arm(mutexScript)
	select {
	case res := <-enter(l, m, &tr, "A"):
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("A still waits, behind %v", rdb.ZRange(context.Background(), m.keys[0], 0, -1).Val())
	}
	wantCuts(t, p, 1)
	tr.check(t, "A in")
	waitFor(t, "no lease left", func() bool { return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0 })
}

// loadScripts loads the Syncers' scripts into Redis: each is then called
// once per round trip, by EVALSHA, which a cutProxy can tell apart.
func loadScripts(t *testing.T, rdb *redis.Client) {
	t.Helper()
	for _, s := range []*redis.Script{mutexScript, gcraScript} {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// wantCuts checks that p cut want replies.
func wantCuts(t *testing.T, p *cutProxy, want int64) {
	t.Helper()
	if n := p.cuts.Load(); n != want {
		t.Fatalf("%d replies lost, want %d", n, want)
	}
}

// TestThrottleReplyLost: Redis runs a round trip that admits a flow, its
// reply is lost with the connection, and go-redis sends the call again.
// The entry counts once: with a Rate of 2, B enters after A, and C is
// refused. The call run again counted a second entry, for nobody: B was
// refused.
func TestThrottleReplyLost(t *testing.T) {
	p := startCutProxy(t, sharedRedis(t))
	c, rdb := newClient(t, p.addr, Options{})
	loadScripts(t, rdb)
	th := c.NewThrottle("th", ThrottleOptions{Rate: 2, Period: time.Hour})
	l := newLoops(t, 1)[0]
	var tr tracer
	p.arm(gcraScript)
	for _, name := range []string{"A", "B", "C"} {
		<-enter(l, th, &tr, name)
	}
	wantCuts(t, p, 1)
	tr.check(t, "A in", "B in", "C onerror DefenseRejected: Throttle queue limit")
}

// TestLimiterAcquireReplyLost: the reply to either round trip of a flow
// entering a Limiter, its slot's or its entry's, is lost and the call
// sent again. The flow enters once: the slot is taken once and given
// back when it leaves, and the entry counts once, so that of a Rate of
// 2, B gets the second and C is refused. With the entry's reply lost, the
// entry counted twice and B was refused.
func TestLimiterAcquireReplyLost(t *testing.T) {
	for _, cut := range []struct {
		name   string
		script *redis.Script
	}{{"slot", mutexScript}, {"entry", gcraScript}} {
		t.Run(cut.name, func(t *testing.T) {
			p := startCutProxy(t, sharedRedis(t))
			c, rdb := newClient(t, p.addr, Options{})
			loadScripts(t, rdb)
			lim := c.NewLimiter("lim", LimiterOptions{Rate: 2, Period: time.Hour, TTL: time.Minute})
			l := newLoops(t, 1)[0]
			var tr tracer
			p.arm(cut.script)
			for _, name := range []string{"A", "B", "C"} {
				<-enter(l, lim, &tr, name)
			}
			wantCuts(t, p, 1)
			tr.check(t, "A in", "B in", "C onerror DefenseRejected: Throttle queue limit")
			waitFor(t, "no slot held", func() bool {
				return rdb.ZCard(context.Background(), lim.mutex.keys[0]).Val() == 0
			})
		})
	}
}

// TestLimiterReleaseReplyLost: the reply to the round trip that gives A's
// slot back, and in the same call gives it to B, which waits for it, is
// lost and the call sent again. A's slot is given back once and B gets
// it: the call run again finds A's slot gone and B's lease taken, by its
// first run, and counts it as B's.
func TestLimiterReleaseReplyLost(t *testing.T) {
	p := startCutProxy(t, sharedRedis(t))
	c, rdb := newClient(t, p.addr, Options{})
	loadScripts(t, rdb)
	lim := c.NewLimiter("lim", LimiterOptions{MaxQueue: 1, Rate: 2, Period: time.Hour, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	a := holdOpen(t, l, lim, &tr, "A", release)
	b := enter(l, lim, &tr, "B")
	waitFor(t, "B to queue", func() bool { return queued(&lim.mutex.gateQueue) == 1 })
	p.arm(mutexScript)
	close(release)
	for _, res := range []asyncsteps.Result{<-a, <-b} {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	wantCuts(t, p, 1)
	tr.check(t, "A in", "A out", "B in")
	waitFor(t, "no slot held", func() bool {
		return rdb.ZCard(context.Background(), lim.mutex.keys[0]).Val() == 0
	})
}

// TestThrottleCallRecord: what makes a Throttle's call safe to run again
// costs no round trip and little memory: each entry is one script call,
// and Redis holds two keys per Throttle of a process, whatever the number
// of entries, both of which expire: the next entry's time, once it has
// passed, and the record of the last call, 2×OpTimeout after it. The
// OpTimeout is long, so that the record is still there to be read on a
// machine that stalls the test for seconds.
func TestThrottleCallRecord(t *testing.T) {
	srv := startRedis(t)
	c, rdb := newClient(t, srv.addr, Options{OpTimeout: 10 * time.Second})
	loadScripts(t, rdb)
	th := c.NewThrottle("th", ThrottleOptions{Rate: 3, Period: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	before := scriptCalls(t, rdb)
	for _, name := range []string{"A", "B", "C"} {
		<-enter(l, th, &tr, name)
	}
	tr.check(t, "A in", "B in", "C in")
	if n := scriptCalls(t, rdb) - before; n != 3 {
		t.Errorf("%d script calls for 3 entries, want 3", n)
	}
	ctx := context.Background()
	keys := rdb.Keys(ctx, c.opts.Prefix+":*").Val()
	slices.Sort(keys)
	if want := []string{th.keys[1], th.keys[0]}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if got := rdb.Get(ctx, th.keys[1]).Val(); got != "3 1" {
		t.Errorf("record %q, want %q: the third call, one entry", got, "3 1")
	}
	for key, most := range map[string]time.Duration{th.keys[0]: time.Minute + time.Millisecond, th.keys[1]: 20001 * time.Millisecond} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > most {
			t.Errorf("%s expires in %v, want in (0, %v]", key, ttl, most)
		}
	}
}
