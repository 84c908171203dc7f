package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A client that sends requests and never reads their answers fills the
// socket's buffers, and the server's write of an answer then blocks. On
// every route but the profiles, the answer has -timeout plus writeMargin
// from its request's arrival to be written: then the server drops the
// connection, and the goroutines of both gateways come back to idle.
// There was no write deadline: the connection and its goroutine stayed
// for good.
func TestClientThatDoesNotReadIsDropped(t *testing.T) {
	for _, impl := range impls {
		for _, path := range []string{"/quote?symbols=AAPL,MSFT", "/stats", "/metrics", "/nowhere"} {
			t.Run(impl+path, func(t *testing.T) {
				cfg := writesConfig()
				s := startWritesServer(t, impl, cfg)
				idle := readMemory(t, s.url)
				start := time.Now()
				conn, sent := pipelineWithoutReading(t, s.addr, path)
				local := conn.LocalAddr().String()
				bound := cfg.writeTimeout()
				took := s.waitClosed(t, local, start, bound+10*time.Second)
				// The write that failed had its deadline set after start.
				if took < bound || took > bound+5*time.Second {
					t.Errorf("connection dropped after %v, want from %v to %v", took, bound, bound+5*time.Second)
				}
				n := <-sent // the writes fail once the server has dropped the connection
				t.Logf("dropped after %v, %d requests sent", took, n)
				conn.Close()
				// The requests the server has not read are in the kernel's
				// buffers, not in its heap.
				waitIdle(t, s.url, idle, 0)
			})
		}
	}
}

// A CPU profile is written after the seconds it is asked for, later than
// the write deadline of the other routes: it is not cut.
func TestProfilesHaveNoWriteDeadline(t *testing.T) {
	cfg := writesConfig()
	s := startWritesServer(t, "flows", cfg)
	if cfg.writeTimeout() >= time.Second {
		t.Fatalf("write timeout %v: want less than the profile's second", cfg.writeTimeout())
	}
	// Another route first, on the same connection: its deadline is not
	// left on it.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/stats", "/debug/pprof/profile?seconds=1"} {
		resp, err := client.Get(s.url + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("%s: status %d, %d bytes, %v; want 200 and a body", path, resp.StatusCode, len(body), err)
		}
	}
}

// writesConfig is the configuration of the tests of write deadlines: a
// write timeout of half a second.
func writesConfig() config {
	cfg := testConfig()
	cfg.Timeout = 200 * time.Millisecond
	cfg.AttemptTimeout = 200 * time.Millisecond
	cfg.writeMargin = 300 * time.Millisecond
	cfg.Debug = true
	return cfg
}

// writesServer is a gateway served by main's server (newServer), whose
// connections have a send buffer of a few KiB, so that a client that does
// not read fills it after a few answers.
type writesServer struct {
	url, addr string
	closed    chan string // the client address of each connection closed
}

func startWritesServer(t *testing.T, impl string, cfg config) *writesServer {
	t.Helper()
	up := httptest.NewServer(newFakeUpstream())
	t.Cleanup(up.Close)
	cfg.Upstream = up.URL
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, closeGateway := newGateway(impl, cfg, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &writesServer{url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), closed: make(chan string, 100)}
	srv := newServer(gw.handler, context.Background(), logger)
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		boundNetHTTPAnswers(c, state)
		if state == http.StateClosed {
			s.closed <- c.RemoteAddr().String()
		}
	}
	go srv.Serve(smallSendBuffers{ln}) //nolint:errcheck // ends with ErrServerClosed at Close
	t.Cleanup(func() { srv.Close(); closeGateway() })
	return s
}

// waitClosed waits, at most wait, until the server has closed the
// connection of the client at local, and returns how long after start.
func (s *writesServer) waitClosed(t *testing.T, local string, start time.Time, wait time.Duration) time.Duration {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case addr := <-s.closed:
			if addr == local {
				return time.Since(start)
			}
		case <-timeout:
			t.Fatalf("the connection of a client that does not read is still open after %v", wait)
		}
	}
}

// smallSendBuffers is a listener whose connections have a send buffer of
// a few KiB: the kernel's would take hundreds of answers before a write
// blocks.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.SetWriteBuffer(4096) //nolint:errcheck // a larger buffer only takes more requests to fill
	}
	return c, err
}

// pipelineWithoutReading connects to addr, and sends GET path requests on
// the connection, one after the other without waiting for the answers,
// until a write fails; it never reads. The channel receives how many
// requests were sent, once a write has failed.
func pipelineWithoutReading(t *testing.T, addr, path string) (net.Conn, <-chan int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096) //nolint:errcheck // as SetWriteBuffer above
	const batch = 64
	requests := []byte(strings.Repeat("GET "+path+" HTTP/1.1\r\nHost: gateway\r\n\r\n", batch))
	sent := make(chan int, 1)
	var n atomic.Int64
	go func() {
		for {
			if _, err := conn.Write(requests); err != nil {
				sent <- int(n.Load())
				return
			}
			n.Add(batch)
		}
	}()
	return conn, sent
}

// net/http answers a request it cannot read (400, 431, 501) itself,
// before any handler runs: that answer has a write deadline too. Its
// write blocks at once here, on a connection with no buffer (a pipe), as
// it does on a socket whose buffers the answers before it have filled
// (net/http clears a handler's deadline once its answer is written).
// With no deadline it held the connection, and its goroutine, for good.
// A handler starts with no deadline: the routes set their own.
func TestClientThatDoesNotReadNetHTTPAnswerIsDropped(t *testing.T) {
	for _, c := range []struct{ name, request string }{
		{"400", "NOT HTTP\r\n\r\n"},
		{"501", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(http.NotFoundHandler(), context.Background(), slog.New(slog.DiscardHandler))
			closed := make(chan struct{})
			hook := srv.ConnState
			srv.ConnState = func(conn net.Conn, state http.ConnState) {
				if hook != nil {
					hook(conn, state)
				}
				if state == http.StateClosed {
					close(closed)
				}
			}
			ln := newPipeListener()
			go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
			t.Cleanup(func() { srv.Close() })
			conn := ln.dial()
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			select {
			case <-closed:
			case <-time.After(errorWriteWait + 10*time.Second):
				t.Fatalf("the connection of a client that does not read net/http's %s is still open", c.name)
			}
			if took := time.Since(start); took < errorWriteWait || took > errorWriteWait+5*time.Second {
				t.Errorf("connection dropped after %v, want from %v to %v", took, errorWriteWait, errorWriteWait+5*time.Second)
			}
		})
	}
	// A handler's answer, written later than errorWriteWait after the
	// request was read, is not cut.
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(errorWriteWait + 200*time.Millisecond) // real time: a deadline of the socket
		io.WriteString(w, "late")
	}), context.Background(), slog.New(slog.DiscardHandler))
	ln := newPipeListener()
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
	t.Cleanup(func() { srv.Close() })
	conn := ln.dial()
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") //nolint:errcheck // checked by the read
	got, err := io.ReadAll(conn)
	if err != nil || !strings.HasSuffix(string(got), "\r\n\r\nlate") {
		t.Errorf("the late answer: %q, %v", got, err)
	}
}

// pipeListener is a listener whose connections are pipes: with no
// buffer, a server's write blocks until the client reads.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client's end of a new connection.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- server
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
