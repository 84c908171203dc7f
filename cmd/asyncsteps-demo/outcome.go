package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// upstreamOutcome is how one upstream request (one attempt) ended, the
// label of gateway_upstream_requests_total: a bounded set, whatever the
// upstream answers.
type upstreamOutcome int

const (
	upstreamOK           upstreamOutcome = iota // 200 with a price of the symbol asked
	upstreamNotFound                            // 404: an unknown symbol
	upstreamServerError                         // 5xx, retried
	upstreamBadAnswer                           // outside the contract: a malformed 200, another status, a body over 1 MiB
	upstreamConnectError                        // no whole answer: the connection could not be made, or broke
	upstreamTimeout                             // cut short by a deadline, the attempt's or the request's
	upstreamCancelled                           // cut short by the end of its request: client gone, another symbol failed, shutdown
	upstreamOutcomes                            // the number of outcomes
)

// upstreamOutcomeNames are the outcomes' names in /stats and /metrics.
var upstreamOutcomeNames = [upstreamOutcomes]string{
	"ok", "not_found", "server_error", "bad_answer", "connect_error", "timeout", "cancelled",
}

// statusOutcome is the outcome of an upstream answer with status other
// than 200, whose body was read; a 200's outcome is that of its body
// (upstreamOK or upstreamBadAnswer), known once it is decoded.
func statusOutcome(status int) upstreamOutcome {
	switch {
	case status == http.StatusNotFound:
		return upstreamNotFound
	case isServerError(status):
		return upstreamServerError
	}
	return upstreamBadAnswer
}

// failedOutcome is the outcome of an upstream request that failed with
// err, the error of the context that cut it short if one did: both
// gateways report it so (asynchttp.Client's Done, transportError).
//
// A body over maxUpstreamBody is told by its *asynchttp.BodyTooLongError,
// the Cause that asynchttp.Client (and bodyTooLong) gives it, wherever it
// is in the chain: an info is text for people, which a copy of the error
// may change.
func failedOutcome(err error) upstreamOutcome {
	var tooLong *asynchttp.BodyTooLongError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return upstreamTimeout
	case errors.Is(err, context.Canceled):
		return upstreamCancelled
	case errors.As(err, &tooLong):
		return upstreamBadAnswer
	}
	return upstreamConnectError
}
