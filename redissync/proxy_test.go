package redissync

import (
	"net"
	"sync"
	"testing"
)

// tcpProxy is the scaffolding of the tests' proxies in front of a Redis
// server: it accepts connections on a loopback port, dials the server for
// each, and hands each pair to the proxy's own forwarding, whose
// goroutines it counts; the test's end closes every connection and waits
// for them.
type tcpProxy struct {
	addr string
	wg   sync.WaitGroup

	connsMu sync.Mutex
	conns   []net.Conn
}

// startTCPProxy starts a proxy to target that calls serve, on its accept
// goroutine, with each client connection c and its connection s to
// target. serve starts its forwarding with p.wg.Go.
func startTCPProxy(t *testing.T, target string, serve func(p *tcpProxy, c, s net.Conn)) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: l.Addr().String()}
	p.wg.Go(func() {
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
			p.connsMu.Lock()
			p.conns = append(p.conns, c, s)
			p.connsMu.Unlock()
			serve(p, c, s)
		}
	})
	t.Cleanup(func() {
		l.Close()
		p.connsMu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.connsMu.Unlock()
		p.wg.Wait()
	})
	return p
}
