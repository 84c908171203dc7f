//go:build cgo

package cabi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A Go step given to C (Binary) that waits, in the flow of an
// asynchttp.Handler whose parallel branch reads the request's body, which
// the client sends 2 of 10 bytes of and then holds: the Handler and cabi
// both have the engine run a function as the flow ends. At the Handler's
// Timeout both run: the read of the body ends, so the 504 comes at once,
// and the pointer Binary gave is released. Before, the engine kept one
// function per execution, and cabi's, set after the Handler's, replaced
// it: the read went on, and the answer waited for the client (here the
// 5s the test waits for it).
func TestBinaryInAHandlersFlowReadingTheBody(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	var st *asyncsteps.State
	var given unsafe.Pointer
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop }, Timeout: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			p := as.Parallel()
			p.Await(func(context.Context) (any, error) {
				b, err := io.ReadAll(req.Body)
				return len(b), err
			})
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				st = as.State()
				as.WaitExternal()
				given = Binary(as)
			})
		},
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // before srv.Close, which waits for the request
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n01"); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken server from hanging the test: the
	// answer is due at the Timeout.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	want := `{"error":"Timeout","info":"request timed out"}` + "\n"
	if resp.StatusCode != 504 || string(body) != want {
		t.Errorf("answered %d %q, want 504 %q", resp.StatusCode, body, want)
	}
	afterLoopRan(loop) // after the release that the flow's end posted
	checkReleased(t, st, given)
}
