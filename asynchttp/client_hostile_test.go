package asynchttp_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// These tests run the Client against loopback servers that misbehave, and
// check that each request ends with its exact code, that its goroutine
// returns (Done is called at its end), that the server sees the
// connection end, and that no goroutine is left once the loop, the
// server and the client's idle connections are closed.

// hostileServer serves with answer, and closes ended when a request's
// connection has ended: its context is done (net/http's handler) or its
// hijacked connection reads EOF.
type hostileServer struct {
	*httptest.Server
	ended chan struct{}
}

func newHostileServer(t *testing.T, answer func(w http.ResponseWriter, req *http.Request)) *hostileServer {
	return newHostileServerOf(t, "HTTP/1.1", answer)
}

// newHostileServerOf is newHostileServer speaking proto: "HTTP/1.1" on
// plain TCP, or "HTTP/2.0" over TLS, as does its Client.
func newHostileServerOf(t *testing.T, proto string, answer func(w http.ResponseWriter, req *http.Request)) *hostileServer {
	s := &hostileServer{ended: make(chan struct{}, 16)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Proto != proto {
			t.Errorf("request in %s, want %s", req.Proto, proto)
		}
		answer(w, req)
		s.ended <- struct{}{}
	}))
	if proto == "HTTP/1.1" {
		s.Start()
		return s
	}
	s.EnableHTTP2 = true
	s.StartTLS()
	return s
}

// raw answers with the bytes of head, then waits for the client to close
// the connection if hold is set.
func raw(head string, hold bool) func(w http.ResponseWriter, req *http.Request) {
	return func(w http.ResponseWriter, req *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString(head) //nolint:errcheck // the client may have gone
		buf.Flush()           //nolint:errcheck
		if hold {
			io.Copy(io.Discard, conn) //nolint:errcheck // until the client closes
		}
	}
}

// stall sends the header and part of a body of 10 bytes, then holds the
// request until the client goes away.
func stall(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Length", "10")
	io.WriteString(w, "abc") //nolint:errcheck
	w.(http.Flusher).Flush()
	<-req.Context().Done()
}

// waitEnded waits for the server to see n requests' connections end,
// once client has closed its idle connections: a connection the Client
// neither closed nor gave back idle is not among them.
func (s *hostileServer) waitEnded(t *testing.T, client *http.Client, n int) {
	t.Helper()
	client.CloseIdleConnections()
	for range n {
		select {
		case <-s.ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not see the request's connection end")
		}
	}
}

// noGoroutineLeft closes the loop, the server and the client's idle
// connections, and waits until no more goroutines run than before.
func noGoroutineLeft(t *testing.T, before int, loop *asyncsteps.Loop, srv *hostileServer, client *http.Client) {
	t.Helper()
	loop.Close()
	srv.Close()
	client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// flowError returns "Code: Info" of err, or err's text if it is no
// *asyncsteps.Error, or "<nil>".
func flowError(err error) string {
	var e *asyncsteps.Error
	if errors.As(err, &e) {
		return e.Code + ": " + e.Info
	}
	return fmt.Sprint(err)
}

// A request held by the server past its step's timeout, before its
// header or in the middle of its body, ends with the timeout: a Timeout
// of the step, the request cut short (Done sees the deadline), and its
// connection closed.
func TestClientRequestPastItsStepTimeout(t *testing.T) {
	held := func(w http.ResponseWriter, req *http.Request) { <-req.Context().Done() }
	for _, tc := range []struct {
		name, proto string
		answer      func(w http.ResponseWriter, req *http.Request)
		done        string
	}{
		{"header", "HTTP/1.1", held, "/x 0 context deadline exceeded"},
		{"body", "HTTP/1.1", stall, "/x 200 context deadline exceeded"},
		{"header, HTTP/2", "HTTP/2.0", held, "/x 0 context deadline exceeded"},
		{"body, HTTP/2", "HTTP/2.0", stall, "/x 200 context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			srv := newHostileServerOf(t, tc.proto, func(w http.ResponseWriter, req *http.Request) {
				if req.URL.Path != "/warm" {
					tc.answer(w, req)
				}
			})
			// The connection is made first, so that the step's timeout
			// cannot expire in a slow TLS handshake, before the server
			// has the request.
			resp, err := srv.Client().Get(srv.URL + "/warm")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			<-srv.ended
			loop := asyncsteps.NewLoop()
			var e ends
			// The answer is handed over once the step's deadline has passed,
			// whenever its header came: the timeout always finds the body
			// to be read, however slow the machine.
			late := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := srv.Client().Transport.RoundTrip(req)
				if err == nil {
					<-req.Context().Done()
				}
				return resp, err
			})}
			c := &asynchttp.Client{HTTP: late, Done: e.done}
			_, err = runFlow(loop, func(as asyncsteps.AsyncSteps) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(500 * time.Millisecond)
					c.Get(as, srv.URL+"/x")
				})
			})
			if got := flowError(err); got != "Timeout: " {
				t.Errorf("flow error %q, want %q", got, "Timeout: ")
			}
			waitFor(t, func() bool { return e.get() == tc.done }, e.get)
			srv.waitEnded(t, srv.Client(), 1)
			noGoroutineLeft(t, before, loop, srv, srv.Client())
		})
	}
}

// A flow cancelled while its request's body is read (its Run's context
// cancelled, as a Handler's is when its client goes away) ends at once:
// the request is cut short, Done sees the cancel, and the connection is
// closed.
func TestClientRequestOfACancelledFlow(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) { testClientRequestOfACancelledFlow(t, proto) })
	}
}

func testClientRequestOfACancelledFlow(t *testing.T, proto string) {
	before := runtime.NumGoroutine()
	srv := newHostileServerOf(t, proto, stall)
	loop := asyncsteps.NewLoop()
	headers := make(chan struct{})
	inner := srv.Client()
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := inner.Transport.RoundTrip(req)
		close(headers) // the body is to be read now
		return resp, err
	})}
	var e ends
	c := &asynchttp.Client{HTTP: client, Done: e.done}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-headers
		cancel()
	}()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.Get(as, srv.URL+"/x") })
	_, err := r.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("flow error %v, want context.Canceled", err)
	}
	waitFor(t, func() bool { return e.get() == "/x 200 canceled" }, e.get)
	srv.waitEnded(t, inner, 1)
	noGoroutineLeft(t, before, loop, srv, inner)
}

// A server that breaks its answer, or sends one the transport refuses,
// fails the step with CommError, its info the kind of failure in fixed
// words, without the URL that the Go error's text names; the connection
// is closed. Informational answers before the final one are
// skipped; a 101 ends the exchange with no body.
func TestClientAnswersOfAHostileServer(t *testing.T) {
	bigHeader := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", 8<<10) + "\r\nContent-Length: 2\r\n\r\nok"
	endless1xx := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 1000)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, req *http.Request)
		result string // the flow's error, or the status and body got
		done   string
	}{
		{"closed mid-body, chunked", raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", false),
			"CommError: asynchttp: GET: answer cut short", "/x 200 CommError"},
		{"closed mid-body, of known length", raw("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false),
			"CommError: asynchttp: GET: answer cut short", "/x 200 CommError"},
		{"malformed chunk", raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n", true),
			"CommError: asynchttp: GET: answer malformed", "/x 200 CommError"},
		{"closed before the header", raw("", false),
			"CommError: asynchttp: GET: connection closed before the answer", "/x 0 CommError"},
		{"malformed status line", raw("HTTP/1.1 abc\r\n\r\n", true),
			"CommError: asynchttp: GET: answer malformed", "/x 0 CommError"},
		{"not HTTP", raw("SSH-2.0-OpenSSH_9.6\r\n\r\n", true),
			"CommError: asynchttp: GET: answer malformed", "/x 0 CommError"},
		{"header over the transport's limit", raw(bigHeader, true),
			"CommError: asynchttp: GET: answer header too long", "/x 0 CommError"},
		{"informational answers, then the answer", raw("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true),
			`200 "ok"`, "/x 200 nil"},
		{"informational answers without end", raw(endless1xx, true),
			"CommError: asynchttp: GET: answer header too long", "/x 0 CommError"},
		{"switching protocols", raw("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\nother protocol", true),
			`101 ""`, "/x 101 nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			srv := newHostileServer(t, tc.answer)
			srv.Client().Transport.(*http.Transport).MaxResponseHeaderBytes = 4096
			loop := asyncsteps.NewLoop()
			var e ends
			c := &asynchttp.Client{HTTP: srv.Client(), Done: e.done}
			args, err := runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL+"/x") })
			got := strings.ReplaceAll(flowError(err), srv.URL, "URL")
			if resp, ok := asyncsteps.Arg[*asynchttp.Response](args, 0); ok && resp != nil {
				got = fmt.Sprintf("%d %q", resp.StatusCode, resp.Body)
			}
			if got != tc.result {
				t.Errorf("got %s, want %s", got, tc.result)
			}
			if d := e.get(); d != tc.done {
				t.Errorf("Done: %q, want %q", d, tc.done)
			}
			srv.waitEnded(t, srv.Client(), 1)
			noGoroutineLeft(t, before, loop, srv, srv.Client())
		})
	}
}

// net/http's default limit of the header, 10 MB, is the transport's, not
// MaxBody's: a zero Client's requests accept a header up to that size.
// Over it, the step fails with CommError.
func TestClientHeaderOverTheDefaultLimit(t *testing.T) {
	srv := newHostileServer(t, func(w http.ResponseWriter, req *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		out := bufio.NewWriter(conn)
		out.WriteString("HTTP/1.1 200 OK\r\n") //nolint:errcheck
		line := "X-Big: " + strings.Repeat("x", 1<<10) + "\r\n"
		for range 11 << 10 { // 11 MiB of header
			if _, err := out.WriteString(line); err != nil {
				return
			}
		}
		out.WriteString("\r\n") //nolint:errcheck
		out.Flush()             //nolint:errcheck
	})
	defer srv.Close()
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { (&asynchttp.Client{HTTP: srv.Client()}).Get(as, srv.URL) })
	if got, want := flowError(err), "CommError: asynchttp: GET: answer header too long"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var cause *url.Error // net/http's, with every detail
	if want := fmt.Sprintf("net/http: server response headers exceeded %d bytes", 10<<20); !errors.As(err, &cause) || !strings.Contains(cause.Error(), want) {
		t.Errorf("cause %v, want net/http's error that says %q", cause, want)
	}
}

// Redirects are followed as the http.Client's policy says: to another
// host (without the Authorization header, which net/http keeps for the
// host it was meant for), and not past ten, a CommError.
func TestClientRedirects(t *testing.T) {
	other := newHostileServer(t, func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprintf(w, "%s auth=%q", req.Host[:strings.IndexByte(req.Host, ':')], req.Header.Get("Authorization"))
	})
	defer other.Close()
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	srv := newHostileServer(t, func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/away":
			http.Redirect(w, req, "http://localhost:"+port+"/", http.StatusFound)
		default:
			http.Redirect(w, req, req.URL.Path, http.StatusFound)
		}
	})
	defer srv.Close()
	var e ends
	c := &asynchttp.Client{HTTP: srv.Client(), Done: e.done}
	away, err := http.NewRequest(http.MethodGet, srv.URL+"/away", nil)
	if err != nil {
		t.Fatal(err)
	}
	away.Header.Set("Authorization", "Bearer secret")
	var got []string
	_, err = runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		c.Do(as, away)
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
			got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, resp.Body))
			c.Get(as, srv.URL+"/loop", func(as asyncsteps.AsyncSteps, code string) {
				got = append(got, code+": "+as.State().ErrorInfo)
				as.Success()
			})
		})
	})
	want := `200 localhost auth=""; CommError: asynchttp: GET: too many redirects`
	if s := strings.Join(got, "; "); err != nil || s != want {
		t.Errorf("got %q, %v; want %q", s, err, want)
	}
	if d := e.get(); d != "/away 200 nil; /loop 0 CommError" {
		t.Errorf("Done: %q", d)
	}
}

// A body whose Content-Length is over MaxBody fails the step at once: the
// Client read MaxBody bytes and one more first, for as long as the server
// took to send them (here, until the step's timeout).
func TestClientBodyAnnouncedLongerThanMaxBody(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := newHostileServer(t, stall) // 10 bytes announced, 3 sent
	loop := asyncsteps.NewLoop()
	var e ends
	c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: 9, Done: e.done}
	_, err := runFlow(loop, func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Second)
			c.Get(as, srv.URL+"/x")
		})
	})
	if got, want := flowError(err), "CommError: asynchttp: response body longer than MaxBody"; got != want {
		t.Errorf("flow error %q, want %q", got, want)
	}
	if d := e.get(); d != "/x 200 CommError" {
		t.Errorf("Done: %q", d)
	}
	srv.waitEnded(t, srv.Client(), 1)
	noGoroutineLeft(t, before, loop, srv, srv.Client())
}

// A body that the transport decompresses (it asked for gzip) is bounded
// by MaxBody once decompressed: a small answer that inflates to 16 MiB
// fails with CommError, and the Client allocates about MaxBody for it,
// not what it inflates to.
func TestClientBoundsADecompressedBody(t *testing.T) {
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 16 {
		zw.Write(zeros) //nolint:errcheck // into memory
	}
	zw.Close()
	before := runtime.NumGoroutine()
	srv := newHostileServer(t, func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q, want gzip", req.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb.Bytes()) //nolint:errcheck // the client may stop reading
	})
	loop := asyncsteps.NewLoop()
	c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: 1 << 20}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL) })
	runtime.ReadMemStats(&m1)
	if got, want := flowError(err), "CommError: asynchttp: response body longer than MaxBody"; got != want {
		t.Errorf("flow error %q, want %q", got, want)
	}
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 8<<20 {
		t.Errorf("%d bytes allocated for a body bounded to 1 MiB", n)
	}
	srv.waitEnded(t, srv.Client(), 1)
	noGoroutineLeft(t, before, loop, srv, srv.Client())
}
