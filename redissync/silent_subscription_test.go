package redissync

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// silentProxy forwards connections to a Redis server. Once silenced, it
// stops forwarding, both ways, on every connection that subscribed until
// then, and keeps them open: the notification connection of a Client
// that a NAT or a load balancer dropped without a word (no FIN, no RST).
// Connections made afterwards are forwarded.
type silentProxy struct {
	*tcpProxy
	silenced     atomic.Bool
	subscribed   atomic.Int64 // connections that sent a SUBSCRIBE
	pings        atomic.Int64 // PINGs sent on them
	closedSilent atomic.Int64 // silenced connections the client closed
}

func startSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	p := &silentProxy{}
	p.tcpProxy = startTCPProxy(t, target, func(tp *tcpProxy, c, s net.Conn) {
		var sub, silent atomic.Bool
		tp.wg.Go(func() { // the calls
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if !sub.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
					sub.Store(true)
					p.subscribed.Add(1)
				} else if sub.Load() && bytes.Contains(bytes.ToLower(buf[:n]), []byte("ping")) {
					p.pings.Add(1)
				}
				if sub.Load() && p.silenced.Load() {
					silent.Store(true)
				} else if _, werr := s.Write(buf[:n]); werr != nil {
					return
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
				if !(sub.Load() && p.silenced.Load()) {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
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

// TestSilentSubscriptionIsMadeAgain: the notification connection stops
// answering without breaking (dropped by a NAT or a load balancer on the
// way). The Client, which pings it when it has been silent for Recheck
// (and keeps it while it answers), finds it dead within Recheck +
// OpTimeout, closes it and subscribes again; a waiter is then woken by
// the notification of another process's give-back. The Client only read that connection, with
// no deadline: nothing told it the connection was dead, and every
// notification was lost until the kernel's keepalive gave up on it, tens
// of minutes later, while the Client's waiters waited Recheck for each
// slot another process gave back, and lost it to the waiters of
// processes that heard.
func TestSilentSubscriptionIsMadeAgain(t *testing.T) {
	addr := sharedRedis(t)
	p := startSilentProxy(t, addr)
	opts := Options{OpTimeout: 200 * time.Millisecond, Recheck: 300 * time.Millisecond}
	other, _ := newClient(t, addr, opts)
	opts.Prefix = other.opts.Prefix
	rdb := redis.NewClient(&redis.Options{Addr: p.addr})
	defer rdb.Close()
	c, err := New(context.Background(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An idle connection that answers is pinged, and kept.
	waitFor(t, "two pings", func() bool { return p.pings.Load() >= 2 })
	if n := p.subscribed.Load(); n != 1 {
		t.Fatalf("%d subscribed connections before the silence, want 1", n)
	}
	p.silenced.Store(true)
	waitFor(t, "the Client to subscribe again", func() bool { return p.subscribed.Load() == 2 })
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
