package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// runFlow runs steps as a flow on loop and returns its result.
func runFlow(loop *asyncsteps.Loop, steps func(as asyncsteps.AsyncSteps)) ([]any, error) {
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { steps(as) })
	return r.Run(context.Background())
}

// ends records what Client.Done reports, one line per request.
type ends struct {
	mu    sync.Mutex
	lines []string
}

func (e *ends) done(req *http.Request, status int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	kind := "nil"
	var ae *asyncsteps.Error
	switch {
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.As(err, &ae):
		kind = ae.Code
	case err != nil:
		kind = err.Error()
	}
	e.lines = append(e.lines, fmt.Sprintf("%s %d %s", req.URL.Path, status, kind))
}

func (e *ends) get() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "; ")
}

func TestClientGetSucceedsWithTheResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Path", req.URL.Path)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	var e ends
	c := &asynchttp.Client{HTTP: srv.Client(), Done: e.done}
	args, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL+"/a") })
	resp, ok := asyncsteps.Arg[*asynchttp.Response](args, 0)
	if err != nil || !ok || resp.StatusCode != 202 || string(resp.Body) != "hello" || resp.Header.Get("X-Path") != "/a" {
		t.Fatalf("got %v %v", args, err)
	}
	if got := e.get(); got != "/a 202 nil" {
		t.Errorf("Done: %q", got)
	}
}

// A body is read whole, up to MaxBody included, whether its length is known
// in advance or not; one of known length into a buffer of exactly its size.
// An answer to HEAD has no body, whatever its Content-Length says.
func TestClientReadsBodiesUpToMaxBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := len(req.URL.Path) - 1 // /xxxx: a body of 4 bytes
		if req.URL.Query().Has("chunked") {
			fmt.Fprint(w, strings.Repeat("y", n/2))
			w.(http.Flusher).Flush()
			fmt.Fprint(w, strings.Repeat("y", n-n/2))
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(n))
		fmt.Fprint(w, strings.Repeat("y", n))
	}))
	defer srv.Close()
	c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: 10}
	loop := newLoop(t)
	tests := []struct {
		name, method, path string
		body               string
		exactCap           bool
	}{
		{"known length", http.MethodGet, "/xxxx", "yyyy", true},
		{"known length, MaxBody", http.MethodGet, "/xxxxxxxxxx", "yyyyyyyyyy", true},
		{"empty", http.MethodGet, "/", "", true},
		{"chunked", http.MethodGet, "/xxxxxxxxxx?chunked", "yyyyyyyyyy", false},
		{"HEAD", http.MethodHead, "/xxxx", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			args, err := runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Do(as, req) })
			resp, ok := asyncsteps.Arg[*asynchttp.Response](args, 0)
			if err != nil || !ok || resp.StatusCode != 200 || string(resp.Body) != tc.body || resp.Body == nil {
				t.Fatalf("got %v %v, want 200 with body %q", args, err, tc.body)
			}
			if tc.exactCap && cap(resp.Body) != len(resp.Body) {
				t.Errorf("body of %d bytes in a buffer of %d", len(resp.Body), cap(resp.Body))
			}
		})
	}
}

// A MaxBody of the largest int64, "no limit", reads bodies whole: the one
// more byte that tells a longer body overflowed the limit, and every body
// not read into a buffer of its length (chunked, or over 64 KiB) was
// answered empty.
func TestClientMaxBodyOfTheLargestInt64ReadsBodiesWhole(t *testing.T) {
	big := strings.Repeat("z", 100<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/big" {
			fmt.Fprint(w, big)
			return
		}
		fmt.Fprint(w, "abc")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "def")
	}))
	defer srv.Close()
	c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: math.MaxInt64}
	loop := newLoop(t)
	for _, tc := range []struct{ path, body string }{{"/chunked", "abcdef"}, {"/big", big}} {
		args, err := runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL+tc.path) })
		var body []byte
		if resp, ok := asyncsteps.Arg[*asynchttp.Response](args, 0); ok && resp != nil {
			body = resp.Body
		}
		if err != nil || string(body) != tc.body {
			t.Errorf("%s: %v, %d bytes of body; want <nil>, %d bytes", tc.path, err, len(body), len(tc.body))
		}
	}
}

// A Content-Length is the server's word, not bytes received: a body that
// claims MaxBody's 64 MiB and sends 3 bytes fails with CommError without
// the Client allocating the 64 MiB it announced.
func TestClientAllocatesNoMoreThanABodySends(t *testing.T) {
	const claimed = 64 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nabc", claimed)
			buf.Flush()
			conn.Close()
		}
	}))
	defer srv.Close()
	c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: claimed}
	loop := newLoop(t)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Do(as, req) })
	runtime.ReadMemStats(&after)
	if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.CommError}) {
		t.Errorf("got %v, want CommError", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= claimed/4 {
		t.Errorf("%d bytes allocated for a body of 3 bytes", n)
	}
}

// A failing parallel sibling cancels the request at once: the server sees
// its request's context end, and Done reports the cancel.
func TestClientRequestIsCancelledWithItsStep(t *testing.T) {
	arrived := make(chan struct{})
	serverSawCancel := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(arrived)
		<-req.Context().Done()
		close(serverSawCancel)
	}))
	defer srv.Close()
	var e ends
	c := &asynchttp.Client{HTTP: srv.Client(), Done: e.done}
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		p := as.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.Get(as, srv.URL+"/slow") })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			// the sibling fails once the request is at the server
			asyncsteps.AwaitChan(as, arrived)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "sibling") })
		})
	})
	if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.InvalidRequest}) {
		t.Fatalf("flow error %v, want the sibling's InvalidRequest", err)
	}
	select {
	case <-serverSawCancel:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's request was not cancelled")
	}
	waitFor(t, func() bool { return e.get() == "/slow 0 canceled" }, e.get)
}

func waitFor(t *testing.T, cond func() bool, got func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met; got %q", got())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestClientTransportErrorsHaveFutoInCodes(t *testing.T) {
	// A port nobody listens on: the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/x"
	ln.Close()

	// A server that drops the connection without an answer.
	dropping := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer dropping.Close()
	long := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 11))
	}))
	defer long.Close()
	// The same body chunked, of no length known in advance.
	longChunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 6))
		w.(http.Flusher).Flush()
		fmt.Fprint(w, strings.Repeat("x", 5))
	}))
	defer longChunked.Close()
	// A body shorter than its Content-Length: the connection breaks.
	cutShort := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			buf.Flush()
			conn.Close()
		}
	}))
	defer cutShort.Close()

	tests := []struct {
		name, url, code string
	}{
		{"refused", refused, asyncsteps.ConnectError},
		{"dropped", dropping.URL, asyncsteps.CommError},
		{"body too long", long.URL, asyncsteps.CommError},
		{"chunked body too long", longChunked.URL, asyncsteps.CommError},
		{"body cut short", cutShort.URL, asyncsteps.CommError},
		{"bad url", "http://[::1", asyncsteps.InternalError},
	}
	loop := newLoop(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &asynchttp.Client{MaxBody: 10}
			var handled string
			_, err := runFlow(loop, func(as asyncsteps.AsyncSteps) {
				c.Get(as, tc.url, func(as asyncsteps.AsyncSteps, code string) {
					handled = code
				})
			})
			if !errors.Is(err, &asyncsteps.Error{Code: tc.code}) || handled != tc.code {
				t.Errorf("got %v (handler saw %q), want %s", err, handled, tc.code)
			}
		})
	}
}

// A Guard bounds the requests in flight: with one slot and no queue, the
// second of two parallel requests is rejected while the first is held.
func TestClientGuardBoundsRequests(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, req.URL.Path)
	}))
	defer srv.Close()
	c := &asynchttp.Client{HTTP: srv.Client(), Guard: asyncsteps.NewMutex(1, 0)}
	var trace []string
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		p := as.Parallel()
		for _, path := range []string{"/1", "/2"} {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				c.Get(as, srv.URL+path, func(as asyncsteps.AsyncSteps, code string) {
					trace = append(trace, path+" "+code+" "+as.State().ErrorInfo)
					close(release)
					as.Success(nil)
				})
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					if r, ok := asyncsteps.Arg[*asynchttp.Response](args, 0); ok && r != nil {
						trace = append(trace, path+" "+string(r.Body))
					}
				})
			})
		}
	})
	got := strings.Join(trace, "; ")
	if err != nil || got != "/2 DefenseRejected Mutex queue limit; /1 /1" || len(arrived) != 1 {
		t.Errorf("got %q, %v, %d arrived", got, err, len(arrived))
	}
}
