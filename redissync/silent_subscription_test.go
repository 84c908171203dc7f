package redissync

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// silentProxy forwards connections to a Redis server, and counts the
// subscriptions made through it and the PINGs sent on them. If made with
// silence, the first connection that subscribes stops forwarding, both
// ways, once the confirmation of its subscription has reached the client,
// and is kept open: the notification connection of a Client that a NAT or
// a load balancer dropped without a word (no FIN, no RST). Every other
// connection is forwarded. The silence hangs on the connection, not on
// the test's timing: a Client that made its subscription again before the
// test got to silence it (a pong late under load) cannot escape it.
type silentProxy struct {
	*tcpProxy
	subscribed   atomic.Int64 // connections that sent a SUBSCRIBE
	pings        atomic.Int64 // PINGs sent on them
	closedSilent atomic.Int64 // silenced connections the client closed
}

func startSilentProxy(t *testing.T, target string, silence bool) *silentProxy {
	t.Helper()
	p := &silentProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(tp *tcpProxy, c, s net.Conn) {
		var sub, doomed, silent atomic.Bool
		tp.wg.Go(func() { // the calls
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if !sub.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
					sub.Store(true)
					// Before the SUBSCRIBE goes on: its confirmation
					// must find the connection doomed.
					doomed.Store(p.subscribed.Add(1) == 1 && silence)
				} else if sub.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("ping")) {
					p.pings.Add(1)
				}
				if !silent.Load() {
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if silent.Load() {
						p.closedSilent.Add(1)
					}
					return
				}
			}
		})
		tp.wg.Go(func() { // the replies and the notifications
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if !silent.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
					if doomed.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
						silent.Store(true) // the confirmation went through
					}
				}
				if err != nil {
					return
				}
			}
		})
	})
	return p
}

// newProxiedClient returns a Client that reaches Redis through p, closed
// at the end of the test.
func newProxiedClient(t *testing.T, p *silentProxy, opts Options) *Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: p.addr})
	c, err := New(context.Background(), rdb, opts)
	if err != nil {
		rdb.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// TestAnsweringSubscriptionIsKept: the notification connection of an idle
// Client, pinged each time it has been silent for Recheck, is kept while
// it answers. OpTimeout is long: a pong late under load would rightly
// make the Client subscribe again, which this test does not check.
func TestAnsweringSubscriptionIsKept(t *testing.T) {
	p := startSilentProxy(t, sharedRedis(t), false)
	newProxiedClient(t, p, Options{
		Prefix:    fmt.Sprintf("t%d-%d", os.Getpid(), prefixSeq.Add(1)),
		OpTimeout: time.Minute, Recheck: 100 * time.Millisecond,
	})
	waitFor(t, "two pings", func() bool { return p.pings.Load() >= 2 })
	if n := p.subscribed.Load(); n != 1 {
		t.Fatalf("%d subscribed connections after two pings, want 1", n)
	}
}

// TestSilentSubscriptionIsMadeAgain: the notification connection stops
// answering without breaking (dropped by a NAT or a load balancer on the
// way). The Client, which pings it when it has been silent for Recheck,
// finds it dead within Recheck + OpTimeout, closes it and subscribes
// again; a waiter is then woken by the notification of another process's
// give-back. The Client only read that connection, with no deadline:
// nothing told it the connection was dead, and every notification was
// lost until the kernel's keepalive gave up on it, tens of minutes later,
// while the Client's waiters waited Recheck for each slot another process
// gave back, and lost it to the waiters of processes that heard.
func TestSilentSubscriptionIsMadeAgain(t *testing.T) {
	addr := sharedRedis(t)
	p := startSilentProxy(t, addr, true)
	opts := Options{OpTimeout: 200 * time.Millisecond, Recheck: 300 * time.Millisecond}
	other, _ := newClient(t, addr, opts)
	opts.Prefix = other.opts.Prefix
	c := newProxiedClient(t, p, opts)
	// More than 2 if a pong on the new connection came late under load.
	waitFor(t, "the Client to subscribe again", func() bool { return p.subscribed.Load() >= 2 })
	waitFor(t, "the Client to close the silent connection", func() bool { return p.closedSilent.Load() == 1 })

	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	holder := holdOpen(t, l, other.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: time.Minute}), &tr, "holder", release)
	m := c.NewMutex("m", MutexOptions{MaxQueue: -1, TTL: time.Minute})
	waiter := enter(l, m, &tr, "waiter")
	waitFor(t, "the waiter to queue", func() bool { return queued(&m.gateQueue) == 1 })
	close(release)
	for _, res := range []<-chan asyncsteps.Result{holder, waiter} {
		if r := <-res; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	tr.check(t, "holder in", "holder out", "waiter in")
}
