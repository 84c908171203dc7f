package asynchttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A configured URL whose password has a character it should have
// percent-encoded ("/", "#", "?") does not parse, and url.Parse's error
// quotes the URL, password and all, or the part of it it read as a port
// ("invalid port \":pw\" after host"). That error was the info and the
// Cause of the InternalError, which the Handler logs whole: the password
// went to the log of every request. The user information is shown as
// "***", and the problem is that of the URL without it.
func TestClientHidesTheUserInfoOfAURLThatDoesNotParse(t *testing.T) {
	const secret = "pw" // in every password below, and nowhere else
	loop := newLoop(t)
	for _, tc := range []struct{ name, url, info string }{
		{"bad escape after", "http://ann:pw42@example.invalid/p%zz",
			`parse "http://***@example.invalid/p%zz": invalid URL escape "%zz"`},
		{"bad host after", "http://ann:pw42@[::1/p",
			`parse "http://***@[::1/p": missing ']' in host`},
		{"slash in password", "http://ann:pw/42@example.invalid/p",
			`parse "http://***@example.invalid/p": does not parse; the part before its last "@" is not shown (a password, say)`},
		{"hash in password", "http://ann:pw#42@example.invalid/p",
			`parse "http://***@example.invalid/p": does not parse; the part before its last "@" is not shown (a password, say)`},
		{"question mark in password", "http://ann:pw?42@example.invalid/p",
			`parse "http://***@example.invalid/p": does not parse; the part before its last "@" is not shown (a password, say)`},
		{"no scheme", "//ann:pw/42@example.invalid/p",
			`parse "//***@example.invalid/p": does not parse; the part before its last "@" is not shown (a password, say)`},
		{"no slashes", "ann:pw\x7f42@example.invalid/p",
			`parse "***@example.invalid/p": does not parse; the part before its last "@" is not shown (a password, say)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, flowErr, _ := getThroughHandler(t, loop, tc.url)
			if got, want := flowError(flowErr), "InternalError: asynchttp: "+tc.info; got != want {
				t.Errorf("flow error %q, want %q", got, want)
			}
			var cause *url.Error
			if !errors.As(flowErr, &cause) || cause.Error() != tc.info {
				t.Errorf("cause %v, want the *url.Error %q", cause, tc.info)
			}
			if want := urlFailureLog(tc.info, tc.info); got != want {
				t.Errorf("log\n%s\nwant\n%s", got, want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("the log shows the password: %s", got)
			}
		})
	}
}

// A URL that parses but that net/http will not send, and whose user
// information is not read as such ("ann:pw@host/p" forgot its scheme:
// url.Parse takes "ann" for the scheme and the rest for an opaque part),
// was quoted whole by net/http's error, which hides only a parsed user's
// password: the info and the Cause, which a Handler logs, showed the
// password, and the info named the user as the scheme. All before the
// last "@" is hidden, as in a URL that does not parse, and the URL is
// said to have no scheme.
func TestClientHidesTheUserInfoOfARefusedURLWithoutAHost(t *testing.T) {
	const secret = "pw" // in every password below, and nowhere else
	loop := newLoop(t)
	for _, tc := range []struct{ name, url, info, cause string }{
		{"no scheme", "ann:pw42@example.invalid/p",
			`Get "***@example.invalid/p": URL without a scheme (http or https)`,
			`Get "***@example.invalid/p": unsupported protocol scheme "ann"`},
		{"two colons", "ann:pw42:x@example.invalid:8080/p",
			`Get "***@example.invalid:8080/p": URL without a scheme (http or https)`,
			`Get "***@example.invalid:8080/p": unsupported protocol scheme "ann"`},
		{"http without slashes", "http:ann:pw42@example.invalid/p",
			`Get "***@example.invalid/p": URL without a host`,
			`Get "***@example.invalid/p": http: no Host in request URL`},
		{"? in the password", "ann:pw42?x@example.invalid/p",
			`Get "***@example.invalid/p": URL without a scheme (http or https)`,
			`Get "***@example.invalid/p": unsupported protocol scheme "ann"`},
		{"# in the password", "ann:pw42#x@example.invalid/p",
			`Get "***@example.invalid/p": URL without a scheme (http or https)`,
			`Get "***@example.invalid/p": unsupported protocol scheme "ann"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, flowErr, doneErr := getThroughHandler(t, loop, tc.url)
			if got, want := flowError(flowErr), "InternalError: asynchttp: "+tc.info; got != want {
				t.Errorf("flow error %q, want %q", got, want)
			}
			for _, err := range []error{flowErr, doneErr} {
				var cause *url.Error
				if !errors.As(err, &cause) || cause.Error() != tc.cause {
					t.Errorf("cause of %v: %v, want the *url.Error %q", err, cause, tc.cause)
				}
			}
			if want := urlFailureLog(tc.info, tc.cause); got != want {
				t.Errorf("log\n%s\nwant\n%s", got, want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("the log shows the password: %s", got)
			}
		})
	}
}

// getThroughHandler serves one request whose flow Gets rawURL with a
// Client, on loop, checks that it is answered 500, and returns the
// Handler's log, the flow's error and the error the Client's Done saw
// (nil if it was not called).
func getThroughHandler(t *testing.T, loop asyncsteps.Tool, rawURL string) (log string, flowErr, doneErr error) {
	t.Helper()
	logger, logs := loggedWithoutTime()
	c := asynchttp.Client{Done: func(_ *http.Request, _ int, err error) { doneErr = err }}
	h := &asynchttp.Handler{
		Tool:   func() asyncsteps.Tool { return loop },
		Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { c.Get(as, rawURL) },
		Logger: logger,
		Done:   func(_ *http.Request, o asynchttp.Outcome) { flowErr = o.Err },
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/quote", nil))
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != internalAnswer {
		t.Errorf("answer %d %q, want 500 %q", rec.Code, rec.Body.String(), internalAnswer)
	}
	return logs(), flowErr, doneErr
}

// urlFailureLog is the Handler's log line of a flow that failed with the
// InternalError of Client.Get whose info and cause are those given.
func urlFailureLog(info, cause string) string {
	return `level=ERROR msg="asynchttp: request failed" method=GET path=/quote status=500 code=InternalError ` +
		`info="asynchttp: ` + strings.ReplaceAll(info, `"`, `\"`) + `" ` +
		`cause="` + strings.ReplaceAll(cause, `"`, `\"`) + `" ` +
		`async_stack=[github.com/asyncsteps/asyncsteps/asynchttp.(*Client).Get.func1]` + "\n"
}
