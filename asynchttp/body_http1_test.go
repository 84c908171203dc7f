package asynchttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// net/http's HTTP/1 server decides what to do with a body the handler
// left unread (read the rest for the next request, or close the
// connection) from the Body of the request it gave the handler: its
// *expectContinueReader, its *body, or else a Body of the handler's,
// which it reads to the end. The Handler therefore gives its flow a copy
// of the request whose Body wraps the request's, and leaves the request
// itself as net/http made it. The tests of this file hold to that: with
// the request's Body replaced in place, net/http asks for, or waits for,
// a body it must not read, or parses the rest of one as the next request.

// dialHTTP1 opens a connection to srv, closed before srv is: srv.Close
// waits for the requests its connections are serving.
func dialHTTP1(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// http1Answer is an answer read from a connection: its status, its header
// without the Date (which changes from run to run) and Connection (which
// saidClose tells), its body, and whether it said "Connection: close".
type http1Answer struct {
	status       int
	header, body string
	saidClose    bool
}

// readHTTP1Answer reads the answer to the request sent on conn. The
// deadline only keeps a broken server from hanging the test: the answer
// is due at once.
func readHTTP1Answer(t *testing.T, conn net.Conn, r *bufio.Reader) http1Answer {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer cut short: %v", err)
	}
	resp.Header.Del("Date")
	return http1Answer{resp.StatusCode, fmt.Sprint(resp.Header), string(body), resp.Close}
}

// closedAfter reports whether the server closed conn after the answer
// read from r, with nothing more to read. The deadline bounds the wait
// for a server that keeps the connection.
func closedAfter(conn net.Conn, r *bufio.Reader) bool {
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.ReadByte()
	return errors.Is(err, io.EOF)
}

// A flow that answers without reading the body is answered at once, with
// "Connection: close", without waiting for the client: to a request that
// expects "100 Continue", net/http never asks for the body, and of a body
// larger than the 256 KiB net/http would read to keep the connection, it
// reads nothing and closes the connection. The client sends no more than
// it has here, so an answer that waited for it would not come.
func TestHandlerAnswersAnUnreadBodyAtOnce(t *testing.T) {
	loop := newLoop(t)
	cases := []struct {
		name, request string
		closed        bool // the server closes the connection after the answer
	}{
		// net/http closes the connection only once it has read the 10
		// bytes, to reuse its reader, as for any handler: the client,
		// answered without "100 Continue", closes it.
		{"Expect 100-continue", "POST / HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n", false},
		{"1 MiB announced, 2 bytes sent", "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 1048576\r\n\r\n01", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outs outcomes
			h := &asynchttp.Handler{
				Tool: func() asyncsteps.Tool { return loop }, Done: outs.done,
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("unread") },
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			conn := dialHTTP1(t, srv)
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(conn)
			want := http1Answer{200, "map[Content-Length:[9] Content-Type:[application/json]]", `"unread"` + "\n", true}
			if got := readHTTP1Answer(t, conn, r); got != want {
				t.Errorf("answer %+v, want %+v", got, want)
			}
			if c.closed && !closedAfter(conn, r) {
				t.Error("the connection was not closed after the answer")
			}
			waitFor(t, func() bool { return len(outs.get()) == 1 }, func() string { return "no Outcome" })
			if o := outs.get()[0]; o.Status != 200 || o.Code != "" || o.Cancelled || o.Err != nil {
				t.Errorf("Outcome %+v, want a 200 success", o)
			}
		})
	}
}

// noUnwrapWriter is a middleware's ResponseWriter without an Unwrap
// method: the Handler cannot set the connection's read deadline through
// it, and leaves a body the flow stopped reading to net/http.
type noUnwrapWriter struct{ http.ResponseWriter }

// A flow that reads 2 bytes of a body over 256 KiB and closes it, behind
// a ResponseWriter the Handler cannot set a read deadline through, is
// answered with "Connection: close", and the connection closed: net/http
// does not read the rest of a body closed so early, which must then not
// be parsed as the next request. The rest here is a request of its own,
// which no flow serves.
func TestHandlerClosesTheConnectionOfABodyClosedEarly(t *testing.T) {
	loop := newLoop(t)
	var mu sync.Mutex
	var paths []string
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			mu.Lock()
			paths = append(paths, req.URL.Path)
			mu.Unlock()
			as.Await(func(context.Context) (any, error) {
				b := make([]byte, 2)
				if _, err := io.ReadFull(req.Body, b); err != nil {
					return nil, err
				}
				return string(b), req.Body.Close()
			})
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(noUnwrapWriter{w}, req)
	}))
	t.Cleanup(srv.Close)
	conn := dialHTTP1(t, srv)
	rest := "GET /smuggled HTTP/1.1\r\nHost: test\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("x", 300000)
	body := "01" + rest
	written := make(chan error, 1)
	// The server reads no more than the 2 bytes: the write returns once
	// the connection is closed.
	go func() {
		_, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
		written <- err
	}()
	t.Cleanup(func() { conn.Close(); <-written })
	r := bufio.NewReader(conn)
	want := http1Answer{200, "map[Content-Length:[5] Content-Type:[application/json]]", `"01"` + "\n", true}
	if got := readHTTP1Answer(t, conn, r); got != want {
		t.Errorf("answer %+v, want %+v", got, want)
	}
	if !closedAfter(conn, r) {
		t.Error("the connection was not closed after the answer: what is left of the body is read as a request")
	}
	srv.Close() // waits for the connection's requests
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(paths) != "[/]" {
		t.Errorf("flows served %v, want [/]", paths)
	}
}
