package asynchttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// refusedAddr returns a loopback address that nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// dialing returns an HTTP client whose every dial fails with err.
func dialing(err error) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, err
	}}}
}

// quietTLSServer is an httptest TLS server that does not log the
// handshakes its clients fail.
func quietTLSServer(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// A request that gets no answer fails its step with an info that names
// the kind of failure in fixed words, and the method: never the URL, the
// host, the address or the Go error's text, which named them all and
// which a Handler answered to its client. The code is what it was, the
// error handler and Retry see that code and info, and the Go error stays
// the Cause, with every detail.
func TestClientInfoNamesTheFailureNotTheUpstream(t *testing.T) {
	refused := refusedAddr(t)
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.(*net.TCPConn).SetLinger(0) // a close that resets the connection
			conn.Close()
		}
	}))
	defer reset.Close()
	held := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }))
	defer held.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer plain.Close()
	secure := quietTLSServer(t)
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
	get := func(url string) func(c *asynchttp.Client, as asyncsteps.AsyncSteps) {
		return func(c *asynchttp.Client, as asyncsteps.AsyncSteps) { c.Get(as, url) }
	}
	put := func(url string) func(c *asynchttp.Client, as asyncsteps.AsyncSteps) {
		return func(c *asynchttp.Client, as asyncsteps.AsyncSteps) {
			req, err := http.NewRequest(http.MethodPut, url, strings.NewReader("price"))
			if err != nil {
				t.Fatal(err)
			}
			c.Do(as, req)
		}
	}
	for _, tc := range []struct {
		name  string
		http  *http.Client
		send  func(c *asynchttp.Client, as asyncsteps.AsyncSteps)
		want  string // code: info
		cause string // in the text of the Cause
	}{
		{"refused", nil, get("http://" + refused + "/price?symbol=AAPL"),
			"ConnectError: asynchttp: GET: connection refused", "dial tcp " + refused + ": connect: connection refused"},
		{"refused, PUT", nil, put("http://" + refused + "/price"),
			"ConnectError: asynchttp: PUT: connection refused", `Put "http://` + refused + `/price"`},
		{"name lookup", dialing(&net.DNSError{Err: "no such host", Name: "prices.internal", IsNotFound: true}), get("http://prices.internal:9000/p"),
			"ConnectError: asynchttp: GET: name lookup failed", "lookup prices.internal: no such host"},
		{"host unreachable", dialing(unreachable), get("http://10.0.0.7:9000/p"),
			"ConnectError: asynchttp: GET: host unreachable", "connect: no route to host"},
		{"another dial failure", dialing(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no port left")}), get("http://10.0.0.7:9000/p"),
			"ConnectError: asynchttp: GET: could not connect", "no port left"},
		{"reset", nil, get(reset.URL + "/p"),
			"CommError: asynchttp: GET: connection reset", "connection reset by peer"},
		{"the HTTP client's timeout", &http.Client{Timeout: 20 * time.Millisecond}, get(held.URL + "/p"),
			"CommError: asynchttp: GET: timed out", "Client.Timeout exceeded"},
		{"certificate refused", &http.Client{Transport: &http.Transport{}}, get(secure.URL + "/p"),
			"CommError: asynchttp: GET: TLS handshake failed", "x509: certificate signed by unknown authority"},
		{"HTTPS to a plain server", &http.Client{Transport: &http.Transport{}}, get("https://" + strings.TrimPrefix(plain.URL, "http://") + "/p"),
			"CommError: asynchttp: GET: TLS handshake failed", "server gave HTTP response to HTTPS client"},
		{"a RoundTripper's error", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("prices.internal:9000 is draining")
		})}, get("http://prices.internal:9000/p"),
			"CommError: asynchttp: GET: request failed", "prices.internal:9000 is draining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e ends
			c := &asynchttp.Client{HTTP: tc.http, Done: e.done}
			var seen []string
			_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
				asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, _ int) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tc.send(c, as) }, func(as asyncsteps.AsyncSteps, code string) {
						seen = append(seen, code+": "+as.State().ErrorInfo)
					})
				})
			})
			if got := flowError(err); got != tc.want {
				t.Errorf("flow error %q, want %q", got, tc.want)
			}
			if got := strings.Join(seen, "; "); got != tc.want+"; "+tc.want {
				t.Errorf("the error handler saw %q, want %q twice: two attempts", got, tc.want)
			}
			code, _, _ := strings.Cut(tc.want, ":")
			if got := e.get(); strings.Count(got, " 0 "+code) != 2 {
				t.Errorf("Done: %q, want two requests ending with %s", got, code)
			}
			var cause *url.Error // net/http's
			if !errors.As(err, &cause) || !strings.Contains(cause.Error(), tc.cause) {
				t.Errorf("flow error caused by %v, want net/http's error that says %q", cause, tc.cause)
			}
			for _, leak := range []string{"127.0.0.1", "10.0.0.7", "prices.internal", "/p"} {
				if strings.Contains(tc.want, leak) {
					t.Errorf("info %q names %q", tc.want, leak)
				}
			}
		})
	}
}

// RequestError maps the error of a request that a handler sent itself
// exactly as a Client maps it; nil is nil.
func TestRequestErrorMapsAsAClientDoes(t *testing.T) {
	addr := refusedAddr(t)
	req, err := http.NewRequest(http.MethodDelete, "http://"+addr+"/quote/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sendErr := http.DefaultClient.Do(req)
	e := asynchttp.RequestError(req, sendErr)
	if e.Code != asyncsteps.ConnectError || e.Info != "asynchttp: DELETE: connection refused" || e.Cause != sendErr {
		t.Errorf("RequestError = %#v, want ConnectError %q caused by %v", e, "asynchttp: DELETE: connection refused", sendErr)
	}
	if body := asynchttp.RequestError(req, io.ErrUnexpectedEOF); body.Code != asyncsteps.CommError || body.Info != "asynchttp: DELETE: answer cut short" {
		t.Errorf("a body cut short: %#v", body)
	}
	if got := asynchttp.RequestError(req, nil); got != nil {
		t.Errorf("RequestError(req, nil) = %#v, want nil", got)
	}
}

// RequestError names the end of a connection in the words redissync uses
// for it too: a write that fails with EPIPE (the server's reset had come)
// is "connection reset", as ECONNRESET is; a connection closed under the
// request is closed, before the answer or in its body. EPIPE was
// "connection closed before the answer" here and "connection reset" in
// redissync; net.ErrClosed was "request failed".
func TestRequestErrorNamesTheConnectionsEnd(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://10.0.0.7:9000/orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	sending := func(err error) error { return &url.Error{Op: "Post", URL: req.URL.String(), Err: err} }
	op := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: &os.SyscallError{Syscall: op, Err: err}}
	}
	for _, tc := range []struct {
		name string
		err  error
		info string
	}{
		{"EPIPE sending", sending(op("write", syscall.EPIPE)), "connection reset"},
		{"ECONNRESET sending", sending(op("read", syscall.ECONNRESET)), "connection reset"},
		{"EPIPE in the body", op("write", syscall.EPIPE), "connection reset"},
		{"closed sending", sending(&net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}), "connection closed before the answer"},
		{"closed in the body", &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}, "answer cut short"},
		{"EOF sending", sending(io.EOF), "connection closed before the answer"},
		{"untyped TLS failure", sending(errors.New("tls: server selected unsupported protocol version 300")), "TLS handshake failed"},
	} {
		e := asynchttp.RequestError(req, tc.err)
		if want := "asynchttp: POST: " + tc.info; e.Code != asyncsteps.CommError || e.Info != want {
			t.Errorf("%s: %s: %q, want CommError: %q", tc.name, e.Code, e.Info, want)
		}
	}
}

// A Handler whose flow's upstream request fails answers its client with
// the code and the Client's info, and nothing of where the upstream is;
// the log line has it all, the Go error as cause.
func TestHandlerAnswersAnUpstreamFailureWithoutItsAddress(t *testing.T) {
	addr := refusedAddr(t)
	upstream := "http://" + addr + "/price?symbol=AAPL"
	logger, logs := loggedWithoutTime()
	var c asynchttp.Client
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return newLoop(t) },
		Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { c.Get(as, upstream) },
		Logger: logger,
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/quote?symbols=AAPL", nil))
	want := `{"error":"ConnectError","info":"asynchttp: GET: connection refused"}` + "\n"
	if rec.Code != http.StatusBadGateway || rec.Body.String() != want {
		t.Errorf("answer %d %q, want 502 %q", rec.Code, rec.Body.String(), want)
	}
	wantLog := `level=WARN msg="asynchttp: request failed" method=GET path=/quote status=502 code=ConnectError ` +
		`info="asynchttp: GET: connection refused" ` +
		`cause="Get \"` + upstream + `\": dial tcp ` + addr + `: connect: connection refused"` + "\n"
	if got := logs(); got != wantLog {
		t.Errorf("log\n%s\nwant\n%s", got, wantLog)
	}
}
