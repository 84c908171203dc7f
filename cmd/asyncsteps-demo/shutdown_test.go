package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that sends requests and never reads the answers blocks its
// connection's write, which no context ends: the shutdown still ends, by
// closing that connection closeDelay after the grace period, and serve
// returns nil.
func TestShutdownClosesConnectionsNotRead(t *testing.T) {
	entered := make(chan struct{}, 1)
	chunk := make([]byte, 64<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		for range 1024 { // 64 MiB: far more than the sockets buffer
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	logs := &syncBuffer{}
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, h, 50*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil))) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-entered
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(closeDelay + 10*time.Second):
		t.Fatal("serve did not return: the shutdown waits for a client that does not read")
	}
	if !strings.Contains(logs.String(), `msg="closing the connections whose clients do not read their answers" after=1s`) {
		t.Errorf("log:\n%s", logs)
	}
}

// The server closes idle keep-alive connections and bounds the wait for
// a request's headers; it does not bound a request's reading (net/http
// would cancel requests served longer than that).
func TestServerBoundsIdleConnections(t *testing.T) {
	srv := newServer(http.NotFoundHandler(), context.Background(), slog.New(slog.DiscardHandler))
	if srv.IdleTimeout != 2*time.Minute || srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("IdleTimeout %v, ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v; want 2m, 5s, 0, 0",
			srv.IdleTimeout, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
}
