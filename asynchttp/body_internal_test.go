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

// A read that gets the body's last bytes as the flow ends (forced by the
// hook: the read returns only once the Handler has ended it) makes
// net/http's HTTP/1 server read the connection, a read that the deadline
// fails: net/http then cancels the request's context, and that of every
// later request of the connection. The answer is still the flow's (a 504
// at its Timeout), not the 503 of a cancelled request, and the connection
// is closed after it, not reused with its context cancelled. That close
// is the Handler's alone to ask for, net/http's discard of the body
// having nothing left to fail: a Connection field of ErrorHeader's, or of
// a Reply (an HTTP/1 upstream's "keep-alive", forwarded), must not
// replace it.
func TestAReadEndingAsTheBodyEndsKeepsTheAnswer(t *testing.T) {
	keepAlive := func(header http.Header, _ *asyncsteps.Error, _ int) { header.Set("Connection", "keep-alive") }
	timedOut := `{"error":"Timeout","info":"request timed out"}` + "\n"
	cases := []struct {
		name        string
		timeout     time.Duration
		errorHeader func(http.Header, *asyncsteps.Error, int)
		reply       bool // the flow answers a Reply once a sibling fails, else it times out
		status      int
		body, code  string
	}{
		{"timeout", 50 * time.Millisecond, nil, false, 504, timedOut, asyncsteps.Timeout},
		{"ErrorHeader keep-alive", 50 * time.Millisecond, keepAlive, false, 504, timedOut, asyncsteps.Timeout},
		{"Reply keep-alive", time.Minute, keepAlive, true, 200, "partial", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body, closed, o := answerAReadEndingAsTheBodyEnds(t, c.timeout, c.errorHeader, c.reply)
			if resp.StatusCode != c.status || body != c.body || !resp.Close || !closed {
				t.Errorf("answered %d %q, Connection %q, closed %v; want %d %q, the connection closed",
					resp.StatusCode, body, resp.Header.Get("Connection"), closed, c.status, c.body)
			}
			if len(o) != 1 || o[0].Status != c.status || o[0].Code != c.code || o[0].Cancelled {
				t.Errorf("Outcomes %+v, want one %d %q not cancelled", o, c.status, c.code)
			}
		})
	}
}

// answerAReadEndingAsTheBodyEnds serves a request whose body a flow reads
// whole, the read returning only once the Handler has ended it, and
// returns the answer, its body, whether the server closed the connection
// after it, and the outcomes Done saw. The flow times out, or with reply
// answers a Reply with "Connection: keep-alive" once a sibling fails.
func answerAReadEndingAsTheBodyEnds(t *testing.T, timeout time.Duration, errorHeader func(http.Header, *asyncsteps.Error, int), reply bool) (*http.Response, string, bool, []Outcome) {
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	var mu sync.Mutex
	var outcomes []Outcome
	var reqCtx context.Context
	inRead := make(chan struct{})
	h := &Handler{
		Tool: func() asyncsteps.Tool { return loop }, Timeout: timeout,
		Logger: slog.New(slog.DiscardHandler), ErrorHeader: errorHeader,
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			mu.Lock()
			reqCtx = req.Context()
			mu.Unlock()
			p := as.Parallel(func(as asyncsteps.AsyncSteps, _ string) {
				as.Success(&Reply{Status: 200, Header: http.Header{"Connection": {"keep-alive"}}, Body: []byte("partial")})
			})
			p.Await(func(context.Context) (any, error) {
				b, err := io.ReadAll(req.Body)
				return len(b), err
			})
			if reply {
				p.Await(func(context.Context) (any, error) {
					<-inRead
					return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream down"}
				})
			}
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
			close(inRead)
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
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n0123456789")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_, err = r.ReadByte()
	mu.Lock()
	defer mu.Unlock()
	return resp, string(body), errors.Is(err, io.EOF), outcomes
}
