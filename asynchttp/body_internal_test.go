package asynchttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A read that gets the body's last bytes as the flow times out (forced by
// the hook: the read returns only once the Handler has ended it) makes
// net/http's HTTP/1 server read the connection, a read that the deadline
// fails: net/http then cancels the request's context, and that of every
// later request of the connection. The answer is still the flow's 504,
// not the 503 of a cancelled request, and the connection is closed after
// it, not reused with its context cancelled.
func TestAReadEndingAsTheBodyEndsKeepsTheAnswer(t *testing.T) {
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	var mu sync.Mutex
	var outcomes []Outcome
	var reqCtx context.Context
	h := &Handler{
		Tool: func() asyncsteps.Tool { return loop }, Timeout: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			mu.Lock()
			reqCtx = req.Context()
			mu.Unlock()
			as.Await(func(context.Context) (any, error) {
				b, err := io.ReadAll(req.Body)
				return len(b), err
			})
		},
		Done: func(_ *http.Request, o Outcome) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, o)
		},
	}
	var once sync.Once
	testHookBodyRead = func() {
		once.Do(func() {
			mu.Lock()
			ctx := reqCtx
			mu.Unlock()
			select {
			case <-ctx.Done(): // net/http's read of the connection failed on the deadline
			case <-time.After(5 * time.Second):
				t.Error("the request's context was not cancelled")
			}
		})
	}
	t.Cleanup(func() { testHookBodyRead = nil })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	answer := func(path string) (*http.Response, string, bool) {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n0123456789")
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		_, err = r.ReadByte()
		return resp, string(body), errors.Is(err, io.EOF)
	}
	resp, body, closed := answer("/")
	want := `{"error":"Timeout","info":"request timed out"}` + "\n"
	if resp.StatusCode != 504 || body != want || !resp.Close || !closed {
		t.Errorf("answered %d %q, closing %v, closed %v; want 504 %q, the connection closed", resp.StatusCode, body, resp.Close, closed, want)
	}
	mu.Lock()
	o := outcomes
	mu.Unlock()
	if len(o) != 1 || o[0].Status != 504 || o[0].Code != asyncsteps.Timeout || o[0].Cancelled {
		t.Errorf("Outcomes %+v, want one 504 Timeout not cancelled", o)
	}
}
