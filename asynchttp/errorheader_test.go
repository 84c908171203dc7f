package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// authError is an application's own error that names the realm whose
// credentials a 401 asks for.
type authError struct{ realm string }

func (e *authError) Error() string      { return "no valid token for " + e.realm }
func (e *authError) FutoInCode() string { return asyncsteps.Unauthorized }

// headerCalls records the calls of a Handler's ErrorHeader.
type headerCalls struct {
	mu    sync.Mutex
	calls []string
}

func (c *headerCalls) add(e *asyncsteps.Error, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf("%s %q %d", e.Code, e.Info, status))
}

func (c *headerCalls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// ErrorHeader sets the header fields of an error answer that the Handler
// cannot know: the WWW-Authenticate challenge that RFC 9110 requires on
// a 401, told by the error's code, or by its Cause. It gets the flow's
// error and the status answered; the fields it sets replace the
// Handler's (a Retry-After), but for Content-Type and Content-Length,
// which frame the JSON body. A success is answered without it.
func TestHandlerErrorHeaderSetsTheFieldsOfAnErrorAnswer(t *testing.T) {
	loop := newLoop(t)
	calls := &headerCalls{}
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			switch req.URL.Path {
			case "/unauthorized":
				as.Error(asyncsteps.Unauthorized, "no token")
			case "/reauth":
				as.Error(asyncsteps.PleaseReauth, "token expired")
			case "/realm":
				as.Await(func(context.Context) (any, error) { return nil, &authError{realm: "billing"} })
			case "/busy":
				as.Error(asyncsteps.DefenseRejected, "full")
			case "/ok":
				as.Success("fine")
			}
		},
		ErrorHeader: func(header http.Header, e *asyncsteps.Error, status int) {
			calls.add(e, status)
			var auth *authError
			switch {
			case errors.As(e, &auth):
				header.Set("WWW-Authenticate", `Bearer realm="`+auth.realm+`"`)
			case e.Code == asyncsteps.PleaseReauth:
				header.Set("WWW-Authenticate", `Bearer realm="api", error="invalid_token"`)
			case status == http.StatusUnauthorized:
				header.Set("WWW-Authenticate", `Bearer realm="api"`)
			case status == http.StatusServiceUnavailable:
				header.Set("Retry-After", "30")
				header.Set("content-length", "1") // the Handler's own
				header.Set("Content-Type", "text/plain")
			}
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	type answer struct {
		status                                   int
		challenge, retryAfter, contentType, body string
	}
	for _, c := range []struct {
		path string
		want answer
	}{
		{"/unauthorized", answer{401, `Bearer realm="api"`, "", "application/json", `{"error":"Unauthorized","info":"no token"}` + "\n"}},
		{"/reauth", answer{401, `Bearer realm="api", error="invalid_token"`, "", "application/json", `{"error":"PleaseReauth","info":"token expired"}` + "\n"}},
		{"/realm", answer{401, `Bearer realm="billing"`, "", "application/json", `{"error":"Unauthorized","info":"no valid token for billing"}` + "\n"}},
		{"/busy", answer{503, "", "30", "application/json", `{"error":"DefenseRejected","info":"full"}` + "\n"}},
		{"/ok", answer{200, "", "", "application/json", `"fine"` + "\n"}},
	} {
		resp, body, err := getAll(t, srv.Client(), srv.URL+c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		got := answer{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body}
		if got != c.want {
			t.Errorf("%s answered %+v, want %+v", c.path, got, c.want)
		}
	}
	want := []string{
		`Unauthorized "no token" 401`,
		`PleaseReauth "token expired" 401`,
		`Unauthorized "no valid token for billing" 401`,
		`DefenseRejected "full" 503`,
	}
	if got := calls.get(); !slices.Equal(got, want) {
		t.Errorf("ErrorHeader called with %q, want %q", got, want)
	}
}

// WriteError calls ErrorHeader too, with an error of the code and the
// info given, so that a handler that does not run flows answers as a
// Handler does.
func TestWriteErrorCallsErrorHeader(t *testing.T) {
	calls := &headerCalls{}
	h := &asynchttp.Handler{ErrorHeader: func(header http.Header, e *asyncsteps.Error, status int) {
		calls.add(e, status)
		header.Set("WWW-Authenticate", `Basic realm="admin"`)
	}}
	w := httptest.NewRecorder()
	status := h.WriteError(w, asyncsteps.Unauthorized, "who are you?")
	if status != 401 || w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Basic realm="admin"` {
		t.Errorf("answered %d (written %d), WWW-Authenticate %q", status, w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if got, want := calls.get(), []string{`Unauthorized "who are you?" 401`}; !slices.Equal(got, want) {
		t.Errorf("ErrorHeader called with %q, want %q", got, want)
	}
}

// An ErrorHeader that panics loses its fields, not the answer: the
// request is answered with a 500 InternalError, without the fields it set
// before the panic, the panic is logged at Error with its stack, and Done
// sees the 500 as the Handler's InternalError caused by the panic. The
// server goes on serving.
func TestHandlerAnswersAnErrorHeaderPanicWith500(t *testing.T) {
	loop := newLoop(t)
	log, read := logged()
	done := &outcomes{}
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Logger: log,
		Done:   done.done,
		Flow:   fail(asyncsteps.Unauthorized, "no token"),
		ErrorHeader: func(header http.Header, _ *asyncsteps.Error, _ int) {
			header.Set("WWW-Authenticate", `Bearer realm="api"`)
			panic("challenge boom")
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 2 {
		resp, body, err := getAll(t, srv.Client(), srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 500 || body != internalAnswer || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("answered %d %q, WWW-Authenticate %q; want 500 %q and none", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"), internalAnswer)
		}
	}
	for _, o := range done.get() {
		var p *asyncsteps.PanicError
		if o.Status != 500 || o.Code != asyncsteps.InternalError || !errors.As(o.Err, &p) || p.Value != "challenge boom" {
			t.Errorf("Done saw %+v, want a 500 InternalError caused by the panic", o)
		}
	}
	if n := len(done.get()); n != 2 {
		t.Errorf("Done called %d times, want 2", n)
	}
	lines := read()
	panicked := `level=ERROR msg="asynchttp: Handler.ErrorHeader panicked" code=Unauthorized status=401 panic="challenge boom" stack=`
	failed := `level=ERROR msg="asynchttp: request failed" method=GET path=/ status=500 code=Unauthorized info="no token"`
	if strings.Count(lines, panicked) != 2 || strings.Count(lines, failed) != 2 || strings.Count(lines, "\n") != 4 {
		t.Errorf("logged\n%s\nwant twice each of\n%s\n%s", lines, panicked, failed)
	}
}

// The 500 that answers a request whose goroutine a callback ended with
// runtime.Goexit is written without ErrorHeader: the Goexit may be its
// own, and the goroutine is ending.
func TestHandlerErrorHeaderThatGoexits(t *testing.T) {
	loop := newLoop(t)
	calls := &headerCalls{}
	log, read := logged()
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Logger: log,
		Flow:   fail(asyncsteps.Unauthorized, "no token"),
		ErrorHeader: func(header http.Header, e *asyncsteps.Error, status int) {
			calls.add(e, status)
			header.Set("WWW-Authenticate", `Bearer realm="api"`)
			runtime.Goexit()
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, body, err := getAll(t, srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || body != internalAnswer || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("answered %d %q, WWW-Authenticate %q; want 500 %q and none", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"), internalAnswer)
	}
	if got, want := calls.get(), []string{`Unauthorized "no token" 401`}; !slices.Equal(got, want) {
		t.Errorf("ErrorHeader called with %q, want %q", got, want)
	}
	srv.Close() // waits for the handler, which logs after the answer is flushed
	if want := "asynchttp: the request's goroutine ended (runtime.Goexit) in a callback"; !strings.Contains(read(), want) {
		t.Errorf("logged %q, want %q", read(), want)
	}
}

// A cancelled request's answer, if anyone reads it, goes through
// ErrorHeader as any error answer does, with the DefenseRejected of the
// cancel.
func TestHandlerErrorHeaderOfACancelledRequest(t *testing.T) {
	loop := newLoop(t)
	calls := &headerCalls{}
	h := &asynchttp.Handler{
		Tool:        func() asyncsteps.Tool { return loop },
		Logger:      slog.New(slog.DiscardHandler),
		Flow:        func(as asyncsteps.AsyncSteps, _ *http.Request) { as.WaitExternal() },
		ErrorHeader: func(_ http.Header, e *asyncsteps.Error, status int) { calls.add(e, status) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	if got, want := calls.get(), []string{`DefenseRejected "request cancelled" 503`}; w.Code != 503 || !slices.Equal(got, want) {
		t.Errorf("answered %d, ErrorHeader called with %q; want 503, %q", w.Code, got, want)
	}
}

// An ErrorHeader that panics on the answer of a cancelled request loses
// its fields, not the cancel's answer: the request is answered with the
// 503 DefenseRejected of a cancel, and Done sees it Cancelled, as any
// cancelled request; the panic, the server's bug, is logged at Error
// with its stack. The cancel wins over a failure that comes after it, as
// it does over the flow's own InternalError. The answer was a 500
// InternalError, which Done saw Cancelled all the same.
func TestHandlerErrorHeaderPanicOnACancelKeepsThe503(t *testing.T) {
	loop := newLoop(t)
	log, read := logged()
	done := &outcomes{}
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Logger: log,
		Done:   done.done,
		Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.WaitExternal() },
		ErrorHeader: func(header http.Header, _ *asyncsteps.Error, _ int) {
			header.Set("X-Reason", "cancelled")
			panic("header boom")
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	body := `{"error":"DefenseRejected","info":"request cancelled"}` + "\n"
	header := "map[Content-Length:[55] Content-Type:[application/json] Retry-After:[1]]"
	if w.Code != 503 || w.Body.String() != body || fmt.Sprint(w.Header()) != header {
		t.Errorf("answered %d %q, header %v; want 503 %q, %s", w.Code, w.Body, w.Header(), body, header)
	}
	got := done.get()
	if len(got) != 1 {
		t.Fatalf("Done called %d times, want once", len(got))
	}
	if o := got[0]; o.Status != 503 || o.Code != asyncsteps.DefenseRejected || !o.Cancelled || !errors.Is(o.Err, context.Canceled) {
		t.Errorf("Done saw %+v, want a cancelled 503 DefenseRejected with the context's error", o)
	}
	lines := read()
	panicked := `level=ERROR msg="asynchttp: Handler.ErrorHeader panicked" code=DefenseRejected status=503 panic="header boom" stack=`
	if strings.Count(lines, "\n") != 1 || !strings.Contains(lines, panicked) {
		t.Errorf("logged\n%s\nwant one line with\n%s", lines, panicked)
	}
}

// The fields ErrorHeader sets go as a Reply's header does: over HTTP/2,
// without the connection-specific fields of HTTP/1, which a client takes
// for a malformed answer; over HTTP/1 as set (a 426 needs its Upgrade).
// ErrorHeader is not given the request, and cannot tell the protocol
// itself.
func TestHandlerErrorHeaderSendsNoConnectionFieldsOverHTTP2(t *testing.T) {
	loop := newLoop(t)
	h := &asynchttp.Handler{
		Tool:  func() asyncsteps.Tool { return loop },
		Codes: map[string]int{"UpgradeRequired": http.StatusUpgradeRequired},
		Flow:  fail("UpgradeRequired", "use TLS"),
		ErrorHeader: func(header http.Header, _ *asyncsteps.Error, _ int) {
			header["upgrade"] = []string{"TLS/1.2, HTTP/1.1"}
			header.Set("Keep-Alive", "timeout=5")
			header.Set("X-Id", "7")
		},
	}
	fields := func(resp *http.Response) string {
		return fmt.Sprint(map[string][]string{"Upgrade": resp.Header["Upgrade"], "Keep-Alive": resp.Header["Keep-Alive"], "X-Id": resp.Header["X-Id"]})
	}
	for _, c := range []struct{ proto, want string }{
		{"HTTP/1.1", "map[Keep-Alive:[timeout=5] Upgrade:[TLS/1.2, HTTP/1.1] X-Id:[7]]"},
		{"HTTP/2.0", "map[Keep-Alive:[] Upgrade:[] X-Id:[7]]"},
	} {
		srv, client, _ := serveProto(t, h, c.proto)
		resp, body, err := getAll(t, client, srv.URL)
		want := `{"error":"UpgradeRequired","info":"use TLS"}` + "\n"
		if resp.Proto != c.proto || err != nil || resp.StatusCode != 426 || body != want || fields(resp) != c.want {
			t.Errorf("%s: %d %q (%v), fields %s; want %s, 426 %q, %s", resp.Proto, resp.StatusCode, body, err, fields(resp), c.proto, want, c.want)
		}
	}
}
