package redissync

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutProxy forwards connections to a Redis server. Armed, it lets the
// next script call through and then breaks its connection instead of
// forwarding the reply: Redis ran the call, the client never learns its
// result, and go-redis sends it again on a new connection.
type cutProxy struct {
	addr  string
	armed atomic.Bool
	cuts  atomic.Int64
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: l.Addr().String()}
	var mu sync.Mutex
	var conns []net.Conn
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			p.wg.Add(2)
			var cut atomic.Bool
			go p.pipe(s, c, func(b []byte) bool { // the calls
				if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) && p.armed.CompareAndSwap(true, false) {
					cut.Store(true)
				}
				return false
			})
			go p.pipe(c, s, func([]byte) bool { return cut.Load() }) // the replies
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// pipe copies from to dst until either end closes, or until drop says
// that what was read must not go on: then it breaks both connections.
func (p *cutProxy) pipe(dst, src net.Conn, drop func([]byte) bool) {
	defer p.wg.Done()
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
	// Loaded, the script is called once, by EVALSHA.
	if err := mutexScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	p.armed.Store(true)
	select {
	case res := <-enter(l, m, &tr, "A"):
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("A still waits, behind %v", rdb.ZRange(context.Background(), m.keys[0], 0, -1).Val())
	}
	if n := p.cuts.Load(); n != 1 {
		t.Fatalf("%d replies lost, want 1", n)
	}
	tr.check(t, "A in")
	waitFor(t, "no lease left", func() bool { return rdb.ZCard(context.Background(), m.keys[0]).Val() == 0 })
}
