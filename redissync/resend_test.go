package redissync

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdProxy forwards connections to a Redis server. Armed with a script,
// it holds back the next call of that script and breaks the client's
// side of its connection: go-redis reads EOF and sends the call again on
// another connection, which the proxy forwards. The held copy reaches
// Redis, on the connection the proxy keeps to it, only when the test
// lets it go: after the copy sent again, as a proxy or a network that
// delays a connection's packets may deliver it.
type holdProxy struct {
	*tcpProxy

	mu    sync.Mutex
	armed string     // the SHA1 of the script whose next call to hold
	held  []byte     // the call held back
	on    *proxyConn // its connection
}

// proxyConn is a client's connection c and the proxy's to Redis, s.
type proxyConn struct {
	c, s    net.Conn
	replied chan struct{} // closed when the forwarding of s's replies ends
}

// hold makes p hold back the next call of s, which must be loaded in
// Redis: it is then called by EVALSHA, which names it.
func (p *holdProxy) hold(s *redis.Script) {
	p.mu.Lock()
	p.armed = s.Hash()
	p.mu.Unlock()
}

func startHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	p := &holdProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(tp *tcpProxy, c, s net.Conn) {
		pc := &proxyConn{c: c, s: s, replied: make(chan struct{})}
		tp.wg.Go(func() { p.calls(pc) })
		tp.wg.Go(func() { p.replies(pc) })
	})
	return p
}

// calls forwards the client's calls to Redis, but the armed one: that it
// keeps, and it breaks the client's side of the connection, leaving the
// side of Redis open.
func (p *holdProxy) calls(pc *proxyConn) {
	defer pc.c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.c.Read(buf)
		if n > 0 && p.take(buf[:n], pc) {
			return
		}
		if n > 0 {
			if _, err := pc.s.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	pc.s.Close()
}

// take holds b back, with its connection, if it is the armed call.
func (p *holdProxy) take(b []byte, pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == "" || !bytes.Contains(b, []byte(p.armed)) {
		return false
	}
	p.armed, p.held, p.on = "", bytes.Clone(b), pc
	return true
}

// replies forwards Redis's replies until either side closes. The reply to
// a held call, once let go, finds the client's side closed.
func (p *holdProxy) replies(pc *proxyConn) {
	defer close(pc.replied)
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.s.Read(buf)
		if n > 0 {
			if _, err := pc.c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// release lets the held call go to Redis, and returns once Redis has run
// it: its reply has come.
func (p *holdProxy) release(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	held, pc := p.held, p.on
	p.held, p.on = nil, nil
	p.mu.Unlock()
	if pc == nil {
		t.Fatal("no call held back")
	}
	defer pc.s.Close()
	if _, err := pc.s.Write(held); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pc.replied:
	case <-time.After(5 * time.Second):
		t.Fatal("no reply to the held call")
	}
}

// TestMutexLateCopy: go-redis sends a round trip again after its
// connection broke, and the first copy, held back on the way, reaches
// Redis after the copy sent again admitted A: while A is inside, or
// after A left and gave its lease back. The late copy takes nothing for
// nobody: B enters once A has left, and no lease is left. Run after A
// left, the late copy took A's lease again, for nobody, until its TTL ran
// out: B was refused.
func TestMutexLateCopy(t *testing.T) {
	for _, late := range []string{"after the section", "during the section"} {
		t.Run(late, func(t *testing.T) {
			p := startHoldProxy(t, sharedRedis(t))
			c, rdb := newClient(t, p.addr, Options{})
			loadScripts(t, rdb)
			m := c.NewMutex("m", MutexOptions{TTL: time.Minute})
			l := newLoops(t, 1)[0]
			var tr tracer
			p.hold(mutexScript)
			leave := make(chan struct{})
			a := holdOpen(t, l, m, &tr, "A", leave)
			if late == "during the section" {
				p.release(t)
				wantHolders(t, rdb, m, 1)
			}
			close(leave)
			if res := <-a; res.Err != nil {
				t.Fatal(res.Err)
			}
			waitFor(t, "A's lease given back", func() bool { return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0 })
			if late == "after the section" {
				p.release(t)
			}
			wantHolders(t, rdb, m, 0)
			<-enter(l, m, &tr, "B")
			tr.check(t, "A in", "A out", "B in")
		})
	}
}

// wantHolders checks that Redis holds n leases of m.
func wantHolders(t *testing.T, rdb *redis.Client, m *Mutex, n int) {
	t.Helper()
	if held := rdb.ZRange(context.Background(), m.keys[0], 0, -1).Val(); len(held) != n {
		t.Fatalf("leases held: %q, want %d", held, n)
	}
}

// TestThrottleLateCopy: as TestMutexLateCopy, for a Throttle of a Rate
// of 3: the late copy of A's round trip reaches Redis right after the
// copy sent again, or after B's round trip. It counts no entry: B and C
// enter, D is refused.
func TestThrottleLateCopy(t *testing.T) {
	for _, late := range []string{"after A", "after B"} {
		t.Run(late, func(t *testing.T) {
			p := startHoldProxy(t, sharedRedis(t))
			c, rdb := newClient(t, p.addr, Options{})
			loadScripts(t, rdb)
			th := c.NewThrottle("th", ThrottleOptions{Rate: 3, Period: time.Hour})
			l := newLoops(t, 1)[0]
			var tr tracer
			p.hold(gcraScript)
			for _, name := range []string{"A", "B", "C", "D"} {
				<-enter(l, th, &tr, name)
				if late == "after "+name {
					p.release(t)
				}
			}
			tr.check(t, "A in", "B in", "C in", "D onerror DefenseRejected: Throttle queue limit")
		})
	}
}
