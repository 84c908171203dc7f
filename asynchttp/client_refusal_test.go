package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A URL that does not parse, or a request net/http will not send as it
// is (a URL of another scheme or none, without a host, a header it cannot
// write, a server's request), is the program's mistake: InternalError,
// which Retry does not retry, with an info naming the problem and the URL
// and the Go error as Cause. The refusal was a CommError, attempted again
// by every retry loop, then an InvalidRequest, as the unparsed URL was,
// which a Handler answers 400 without a log line. Done sees a refused
// request, as any request with no answer, and no URL that did not parse.
func TestClientRequestItCannotSendIsInternalError(t *testing.T) {
	get := func(url string) func(c *asynchttp.Client, as asyncsteps.AsyncSteps) {
		return func(c *asynchttp.Client, as asyncsteps.AsyncSteps) { c.Get(as, url) }
	}
	do := func(req *http.Request) func(c *asynchttp.Client, as asyncsteps.AsyncSteps) {
		return func(c *asynchttp.Client, as asyncsteps.AsyncSteps) { c.Do(as, req) }
	}
	badHeader, err := http.NewRequest(http.MethodGet, "http://example.invalid/h", nil)
	if err != nil {
		t.Fatal(err)
	}
	badHeader.Header.Set("X-Bad", "a\nb")
	badMethod := &http.Request{Method: "BAD METHOD", URL: badHeader.URL, Header: http.Header{}}
	tests := []struct {
		name string
		send func(c *asynchttp.Client, as asyncsteps.AsyncSteps)
		info string
		done string // what Done saw
	}{
		{"unparsed", get("http://[::1/p"), `parse "http://[::1/p": missing ']' in host`, ""},
		{"unparsed control byte", get("http://example.invalid/\x7f"), `parse "http://example.invalid/\x7f": net/url: invalid control character in URL`, ""},
		{"ftp", get("ftp://example.invalid/f"), `Get "ftp://example.invalid/f": URL scheme "ftp" not supported (http or https)`, "/f 0 InternalError"},
		{"no scheme", get("example.invalid/n"), `Get "example.invalid/n": URL without a scheme (http or https)`, "example.invalid/n 0 InternalError"},
		{"empty", get(""), `Get "": URL without a scheme (http or https)`, " 0 InternalError"},
		{"no host", get("http:///h"), `Get "http:///h": URL without a host`, "/h 0 InternalError"},
		{"password hidden", get("ftp://u:secret@example.invalid/p"), `Get "ftp://u:***@example.invalid/p": URL scheme "ftp" not supported (http or https)`, "/p 0 InternalError"},
		{"header", do(badHeader), `Get "http://example.invalid/h": net/http: invalid header field value for "X-Bad"`, "/h 0 InternalError"},
		{"method", do(badMethod), `Bad method "http://example.invalid/h": net/http: invalid method "BAD METHOD"`, "/h 0 InternalError"},
		{"server's request", do(httptest.NewRequest(http.MethodGet, "http://example.invalid/s", nil)),
			`Get "http://example.invalid/s": http: Request.RequestURI can't be set in client requests`, "/s 0 InternalError"},
	}
	loop := newLoop(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e ends
			c := &asynchttp.Client{Done: e.done}
			attempts := 0
			_, err := runFlow(loop, func(as asyncsteps.AsyncSteps) {
				asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3}, func(as asyncsteps.AsyncSteps, _ int) {
					attempts++
					tc.send(c, as)
				})
			})
			if got, want := flowError(err), "InternalError: asynchttp: "+tc.info; got != want {
				t.Errorf("flow error %q, want %q", got, want)
			}
			var cause *url.Error
			if !errors.As(err, &cause) {
				t.Errorf("flow error %#v, want one caused by a *url.Error", err)
			}
			if attempts != 1 {
				t.Errorf("%d attempts, want 1", attempts)
			}
			if got := e.get(); got != tc.done {
				t.Errorf("Done: %q, want %q", got, tc.done)
			}
		})
	}
}

// A flow whose Client is given a URL it cannot send fails with the
// program's mistake: the Handler answers 500 "see the server log" and
// logs the URL's problem at Error for the operator, with net/http's error
// as the cause and the step that sent it (the Client's), instead of a 400 that blamed the client and logged
// nothing.
func TestHandlerAnswersAClientsBadURLWith500(t *testing.T) {
	loop := newLoop(t)
	for _, tc := range []struct{ name, url, log string }{
		{"unparsed", "http://[::1/price",
			`level=ERROR msg="asynchttp: request failed" method=GET path=/quote status=500 code=InternalError ` +
				`info="asynchttp: parse \"http://[::1/price\": missing ']' in host" ` +
				`cause="parse \"http://[::1/price\": missing ']' in host" ` +
				`async_stack=[github.com/asyncsteps/asyncsteps/asynchttp.(*Client).Get.func1]` + "\n"},
		{"refused", "ftp://example.invalid/price",
			`level=ERROR msg="asynchttp: request failed" method=GET path=/quote status=500 code=InternalError ` +
				`info="asynchttp: Get \"ftp://example.invalid/price\": URL scheme \"ftp\" not supported (http or https)" ` +
				`cause="Get \"ftp://example.invalid/price\": unsupported protocol scheme \"ftp\"" ` +
				`async_stack=[github.com/asyncsteps/asyncsteps/asynchttp.(*Client).Get.func1]` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := loggedWithoutTime()
			var c asynchttp.Client
			h := &asynchttp.Handler{
				Tool:   func() asyncsteps.Tool { return loop },
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { c.Get(as, tc.url) },
				Logger: logger,
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/quote", nil))
			if rec.Code != http.StatusInternalServerError || rec.Body.String() != internalAnswer {
				t.Errorf("answer %d %q, want 500 %q", rec.Code, rec.Body.String(), internalAnswer)
			}
			if got := logs(); got != tc.log {
				t.Errorf("log\n%s\nwant\n%s", got, tc.log)
			}
		})
	}
}

// loggedWithoutTime is logged with no time in the lines, which a test
// can then compare whole.
func loggedWithoutTime() (*slog.Logger, func() string) {
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	return loggedWith(&slog.HandlerOptions{ReplaceAttr: noTime})
}

// The same refusal of a redirect's URL is the server's doing, not the
// caller's: a CommError, as any broken answer.
func TestClientRefusedRedirectIsCommError(t *testing.T) {
	for _, location := range []string{"ftp://example.invalid/f", "http:///h"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			http.Redirect(w, req, location, http.StatusFound)
		}))
		var e ends
		c := &asynchttp.Client{HTTP: srv.Client(), Done: e.done}
		_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL+"/r") })
		srv.Close()
		if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.CommError}) || e.get() != "/r 0 CommError" {
			t.Errorf("redirect to %s: %v, Done %q; want CommError", location, err, e.get())
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A scheme the HTTP client's transport was taught is sent as any other:
// only net/http's own refusal is the caller's mistake.
func TestClientSendsASchemeItsTransportSpeaks(t *testing.T) {
	tr := &http.Transport{}
	tr.RegisterProtocol("ftp", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/down" {
			return nil, errors.New("ftp: connection lost")
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}))
	c := &asynchttp.Client{HTTP: &http.Client{Transport: tr}}
	var got []string
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		for _, path := range []string{"/up", "/down"} {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				c.Get(as, "ftp://example.invalid"+path, func(as asyncsteps.AsyncSteps, code string) {
					got = append(got, path+" "+code)
					as.Success(nil)
				})
				as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					if r, ok := asyncsteps.Arg[*asynchttp.Response](args, 0); ok && r != nil {
						got = append(got, path+" "+http.StatusText(r.StatusCode))
					}
				})
			})
		}
	})
	if s := strings.Join(got, "; "); err != nil || s != "/up OK; /down CommError" {
		t.Errorf("got %q, %v; want %q", s, err, "/up OK; /down CommError")
	}
}

// quotaError is a client library's error that knows its FutoIn code.
type quotaError struct{}

func (quotaError) Error() string      { return "quota exhausted" }
func (quotaError) FutoInCode() string { return asyncsteps.DefenseRejected }

// A code that the HTTP client's own code gives its error (a RoundTripper
// that sheds load, a CheckRedirect that refuses a redirect) stays the
// step's code, as Await keeps it: it was a CommError, which Retry
// attempted again.
func TestClientKeepsTheCodeOfItsHTTPClientsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	refuse := func(*http.Request, []*http.Request) error {
		return &asyncsteps.Error{Code: asyncsteps.SecurityError, Info: "no redirect"}
	}
	shed := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, quotaError{} })
	for _, tc := range []struct {
		name, want string
		http       *http.Client
	}{
		{"CheckRedirect", "SecurityError: no redirect", &http.Client{Transport: srv.Client().Transport, CheckRedirect: refuse}},
		{"RoundTripper", "DefenseRejected: quota exhausted", &http.Client{Transport: shed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e ends
			c := &asynchttp.Client{HTTP: tc.http, Done: e.done}
			_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
				asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 3}, func(as asyncsteps.AsyncSteps, _ int) { c.Get(as, srv.URL+"/x") })
			})
			if got := flowError(err); got != tc.want {
				t.Errorf("flow error %q, want %q", got, tc.want)
			}
			if got, want := e.get(), "/x 0 "+tc.want[:strings.IndexByte(tc.want, ':')]; got != want {
				t.Errorf("Done: %q, want %q", got, want)
			}
		})
	}
}

// noCode is an error whose FutoInCode gives no code.
type noCode struct{}

func (noCode) Error() string      { return "no code" }
func (noCode) FutoInCode() string { return "" }

// A FutoInCoder of the HTTP client's own code that gives no code leaves
// the error to the transport's mapping, as ErrorFrom leaves it to its
// other rules: a CommError, also when the error wraps a deadline of the
// RoundTripper's own (the step's context has none).
func TestClientMapsAnErrorWithoutACodeAsATransportError(t *testing.T) {
	shed := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("%w: %w", noCode{}, context.DeadlineExceeded)
	})
	c := &asynchttp.Client{HTTP: &http.Client{Transport: shed}}
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Get(as, "http://example.invalid/x") })
	want := "CommError: asynchttp: GET: timed out"
	if got := flowError(err); got != want {
		t.Errorf("flow error %q, want %q", got, want)
	}
}

// brokenCoder's FutoInCode panics on a nil pointer.
type brokenCoder struct{ code string }

func (b *brokenCoder) Error() string      { return "broken" }
func (b *brokenCoder) FutoInCode() string { return b.code }

// A FutoInCoder whose FutoInCode panics (a nil pointer returned as an
// error) is an InternalError that ErrorFrom names, and the request still
// ends with Done.
func TestClientErrorWhoseCodePanics(t *testing.T) {
	broken := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, (*brokenCoder)(nil) })
	var e ends
	c := &asynchttp.Client{HTTP: &http.Client{Transport: broken}, Done: e.done}
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Get(as, "http://example.invalid/x") })
	want := "InternalError: a nil *asynchttp_test.brokenCoder was given as an error"
	if got := flowError(err); got != want {
		t.Errorf("flow error %q, want %q", got, want)
	}
	if got := e.get(); got != "/x 0 InternalError" {
		t.Errorf("Done: %q, want %q", got, "/x 0 InternalError")
	}
}

// nilError's Error panics on a nil pointer.
type nilError struct{ text string }

func (e *nilError) Error() string { return e.text }

// An error of the HTTP client's own code whose Error panics (a nil
// pointer returned as an error) is an InternalError that names it, and
// the request still ends with Done: the panic ended the request's
// goroutine before Done.
func TestClientErrorWhoseTextPanics(t *testing.T) {
	broken := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, (*nilError)(nil) })
	var e ends
	c := &asynchttp.Client{HTTP: &http.Client{Transport: broken}, Done: e.done}
	_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Get(as, "http://example.invalid/x") })
	want := "InternalError: asynchttp: reading the *asynchttp_test.nilError given as an error panicked: runtime error: invalid memory address or nil pointer dereference"
	if got := flowError(err); got != want {
		t.Errorf("flow error %q, want %q", got, want)
	}
	if got := e.get(); got != "/x 0 InternalError" {
		t.Errorf("Done: %q, want %q", got, "/x 0 InternalError")
	}
}
