package asynchttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// transportError maps by itself, whatever Await does with Go errors: a
// passed deadline of the step's context is a Timeout, a cancelled step
// gets the context's error (nobody reads it), a failed dial is a
// ConnectError, anything else a CommError; the info names the kind of
// failure, not the Go error's text.
func TestTransportErrorMapping(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, stop := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer stop()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		code string // "" for a plain context error
		info string
	}{
		{"deadline passed", expired, context.DeadlineExceeded, asyncsteps.Timeout, ""},
		{"cancelled", cancelled, context.Canceled, "", ""},
		{"dial", live, dial, asyncsteps.ConnectError, "asynchttp: POST: could not connect"},
		{"lookup", live, &net.DNSError{Err: "no such host", Name: "x.invalid"}, asyncsteps.ConnectError, "asynchttp: POST: name lookup failed"},
		{"broken", live, io.ErrUnexpectedEOF, asyncsteps.CommError, "asynchttp: POST: answer cut short"},
	}
	req := httptest.NewRequest(http.MethodPost, "http://upstream.internal:9000/x?secret=1", nil)
	req.RequestURI = ""
	for _, tc := range tests {
		got := transportError(tc.ctx, req, tc.err)
		var e *asyncsteps.Error
		switch {
		case tc.code == "" && got != context.Canceled:
			t.Errorf("%s: %v, want context.Canceled", tc.name, got)
		case tc.code != "" && (!errors.As(got, &e) || e.Code != tc.code || e.Info != tc.info || !errors.Is(got, tc.err)):
			t.Errorf("%s: %v, want %s %q wrapping %v", tc.name, got, tc.code, tc.info, tc.err)
		}
	}
}

// A request to a URL with no host whose step's deadline has passed as
// net/http refuses it fails with Timeout: its Cause hides all before the
// last "@" ("ann:pw@host/p" forgot its scheme), as RequestError's Cause
// does. It kept net/http's error, which quotes such a URL whole, password
// included, for the hooks that see the error of an Await function.
func TestTransportErrorTimeoutHidesTheUserOfAURLWithoutAHost(t *testing.T) {
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	req, err := http.NewRequestWithContext(expired, http.MethodGet, "ann:pw42@example.invalid/p", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sendErr := http.DefaultClient.Do(req)
	got := transportError(expired, req, sendErr)
	var e *asyncsteps.Error
	if !errors.As(got, &e) || e.Code != asyncsteps.Timeout || e.Info != "" {
		t.Fatalf("%v, want a Timeout with no info", got)
	}
	const want = `Get "***@example.invalid/p": unsupported protocol scheme "ann"`
	if e.Cause == nil || e.Cause.Error() != want {
		t.Errorf("cause %v, want %q", e.Cause, want)
	}
}
