package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// An upstream request that failed is counted by what failed it, told by
// the error's type, not its text: a body over the limit is a bad answer
// wherever its *asynchttp.BodyTooLongError is in the chain, whatever the
// info above it says, and an info that reads like it, without one, is
// not.
func TestFailedOutcomeTellsABodyTooLongByItsCause(t *testing.T) {
	tooLong := &asynchttp.BodyTooLongError{StatusCode: http.StatusOK, Header: http.Header{}, Limit: maxUpstreamBody}
	clients := &asyncsteps.Error{Code: asyncsteps.CommError, Info: "asynchttp: response body longer than MaxBody", Cause: tooLong}
	for _, c := range []struct {
		name string
		err  error
		want upstreamOutcome
	}{
		{"the Client's error", clients, upstreamBadAnswer},
		{"the plain gateway's", bodyTooLong(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}}).Error, upstreamBadAnswer},
		{"under another info", &asyncsteps.Error{Code: asyncsteps.CommError, Info: "AAPL: upstream failed", Cause: clients}, upstreamBadAnswer},
		{"wrapped by a Go error", fmt.Errorf("fetch: %w", tooLong), upstreamBadAnswer},
		{"its info without its cause", &asyncsteps.Error{Code: asyncsteps.CommError, Info: "asynchttp: response body longer than MaxBody"}, upstreamConnectError},
		{"a connection reset", &asyncsteps.Error{Code: asyncsteps.CommError, Info: "asynchttp: GET: connection reset"}, upstreamConnectError},
		{"a deadline", context.DeadlineExceeded, upstreamTimeout},
		{"a cancel", context.Canceled, upstreamCancelled},
	} {
		if got := failedOutcome(c.err); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, upstreamOutcomeNames[got], upstreamOutcomeNames[c.want])
		}
	}
}
