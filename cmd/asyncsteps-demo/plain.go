package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"golang.org/x/sync/errgroup"
)

// plainGateway is the same gateway written in plain Go: a goroutine per
// request (net/http's) and one per symbol (errgroup), contexts for the
// timeouts and the cancellation, a semaphore and a fixed window (limits.go) for the
// limits. It answers exactly as the flows gateway does; it is the baseline
// of the side-by-side benchmark.
type plainGateway struct {
	cfg    config
	st     *stats
	limit  *plainLimit
	client *http.Client
	errs   errorAnswers
	logger *slog.Logger // logs what is wrong with a malformed upstream answer
}

// errorAnswers writes and logs error answers: asynchttp.Handler's
// WriteError and LogFailure, so that both gateways answer and log alike.
type errorAnswers interface {
	WriteError(w http.ResponseWriter, code, info string) int
	LogFailure(req *http.Request, e *asyncsteps.Error, status int)
}

func newPlainGateway(cfg config, st *stats, client *http.Client, logger *slog.Logger) (*plainGateway, func() int64) {
	g := &plainGateway{cfg: cfg, st: st, limit: newPlainLimit(cfg.Limits), client: client,
		errs: errorWriter(cfg, logger), logger: logger}
	return g, g.limit.Waiting
}

func (g *plainGateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	reply, err := g.quote(req.Context(), req)
	switch {
	case err == nil:
		body, _ := json.Marshal(reply)
		body = append(body, '\n')
		// Its length set, as asynchttp.Handler sets it: left to net/http,
		// an answer past 2 KiB (-max-symbols 100) went chunked, and its
		// HEAD with no length at all.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body) //nolint:errcheck // the client may be gone
		g.st.finish("", http.StatusOK, time.Since(start))
	case cancelled(req.Context()):
		g.errs.WriteError(w, asyncsteps.DefenseRejected, "request cancelled")
		g.st.cancel()
	default:
		var e *asyncsteps.Error
		if !errors.As(err, &e) {
			e = &asyncsteps.Error{Code: asyncsteps.InternalError, Info: err.Error(), Cause: err}
		}
		info := e.Info
		if e.Code == asyncsteps.InternalError {
			info = "internal error, see the server log"
		}
		status := g.errs.WriteError(w, e.Code, info)
		g.errs.LogFailure(req, e, status) // as the flows gateway's Handler logs its own
		g.st.finish(e.Code, status, time.Since(start))
	}
}

// quote serves one /quote request under parent (the request's context), or
// returns the error that answers it.
func (g *plainGateway) quote(parent context.Context, req *http.Request) (quoteReply, error) {
	symbols, bad := parseQuote(req, g.cfg.MaxSymbols)
	if bad != nil {
		return quoteReply{}, bad
	}
	ctx, cancel := context.WithTimeout(parent, g.cfg.Timeout)
	defer cancel()
	if err := g.limit.acquire(ctx); err != nil {
		return quoteReply{}, timeoutOr(parent, ctx, err)
	}
	defer g.limit.release()
	reply := quoteReply{Quotes: make([]quote, len(symbols))}
	group, gctx := errgroup.WithContext(ctx)
	for i, symbol := range symbols {
		group.Go(func() (err error) {
			defer recoverInto(&err)
			reply.Quotes[i], err = g.fetch(gctx, symbol)
			return err
		})
	}
	if err := group.Wait(); err != nil {
		return quoteReply{}, timeoutOr(parent, ctx, err)
	}
	return reply, nil
}

// cancelled reports whether ctx was cancelled: its client went away. A
// deadline it carries is a timeout of the request, as asynchttp.Handler
// takes it.
func cancelled(ctx context.Context) bool {
	err := ctx.Err()
	return err != nil && !errors.Is(err, context.DeadlineExceeded)
}

// timeoutOr returns the Timeout that ends the request if a deadline has
// passed, else err: that of parent, the request's context (a middleware's
// in front of the gateway), with the info and the cause the engine gives
// the deadline of a flow's context, as the flows gateway answers it; or
// that of ctx, the gateway's -timeout, with no info ("request timed
// out").
func timeoutOr(parent, ctx context.Context, err error) error {
	switch {
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return &asyncsteps.Error{Code: asyncsteps.Timeout, Info: requestDeadlineInfo, Cause: context.Cause(parent)}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &asyncsteps.Error{Code: asyncsteps.Timeout}
	}
	return err
}

// recoverInto turns a panic into an InternalError caused by an
// *asyncsteps.PanicError with the stack, as a flow does: LogFailure logs
// that stack.
func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = &asyncsteps.Error{Code: asyncsteps.InternalError, Info: fmt.Sprint(r),
			Cause: &asyncsteps.PanicError{Value: r, Stack: debug.Stack()}}
	}
}

// fetch gets symbol's price, each attempt bounded by its own timeout and
// retried at most cfg.Retries times.
func (g *plainGateway) fetch(ctx context.Context, symbol string) (quote, error) {
	url := priceURL(g.cfg.Upstream, symbol)
	for attempt := 0; ; attempt++ {
		q, err := g.attempt(ctx, url, symbol)
		if err == nil {
			return q, nil
		}
		if ctx.Err() != nil {
			return quote{}, ctx.Err()
		}
		if !err.retry || attempt == g.cfg.Retries {
			if err.Code == asyncsteps.Timeout { // the attempt's own: ctx has not ended
				return quote{}, &asyncsteps.Error{Code: asyncsteps.Timeout, Info: upstreamTimeoutInfo}
			}
			return quote{}, err.Error
		}
		if err := waitBackoff(ctx, g.cfg.backoff(attempt+1)); err != nil {
			return quote{}, err
		}
	}
}

// waitBackoff waits d, unless ctx ends first: then it returns ctx's error.
func waitBackoff(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// maxUpstreamBody is the longest upstream body read, asynchttp.Client's
// default MaxBody.
const maxUpstreamBody = 1 << 20

// attemptError is an attempt's failure, and whether it is worth another.
type attemptError struct {
	*asyncsteps.Error
	retry bool
}

// bodyTooLongInfo is the info of the CommError of an upstream body over
// maxUpstreamBody, asynchttp.Client's own.
const bodyTooLongInfo = "asynchttp: response body longer than MaxBody"

// bodyTooLong is the failure of resp, whose upstream body is longer than
// maxUpstreamBody: as asynchttp.Client fails it in the flows gateway, a
// CommError, retried, caused by an *asynchttp.BodyTooLongError.
func bodyTooLong(resp *http.Response) *attemptError {
	cause := &asynchttp.BodyTooLongError{StatusCode: resp.StatusCode, Header: resp.Header, Limit: maxUpstreamBody}
	return &attemptError{Error: &asyncsteps.Error{Code: asyncsteps.CommError, Info: bodyTooLongInfo, Cause: cause}, retry: true}
}

// attempt makes one upstream request.
func (g *plainGateway) attempt(parent context.Context, url, symbol string) (quote, *attemptError) {
	ctx, cancel := context.WithTimeout(parent, g.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		// The program's mistake (main validates -upstream), as
		// asynchttp.Client.Get makes it: an InternalError, whose info,
		// which names the URL, the client does not read.
		return quote{}, &attemptError{Error: &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: " + err.Error(), Cause: err}}
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return quote{}, g.transportError(parent, ctx, req, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxUpstreamBody {
		// Announced too long: failed before its bytes come, as
		// asynchttp.Client fails it in the flows gateway.
		g.st.countUpstream(upstreamBadAnswer)
		return quote{}, bodyTooLong(resp)
	}
	body, err := readUpstreamBody(resp)
	if err != nil {
		return quote{}, g.transportError(parent, ctx, req, err)
	}
	if len(body) > maxUpstreamBody {
		g.st.countUpstream(upstreamBadAnswer)
		return quote{}, bodyTooLong(resp)
	}
	if resp.StatusCode != http.StatusOK {
		g.st.countUpstream(statusOutcome(resp.StatusCode))
		e, again := answerError(symbol, resp.StatusCode)
		return quote{}, &attemptError{Error: e, retry: again}
	}
	q, detail := g.cfg.judge(symbol, body)
	if detail != "" {
		g.st.countUpstream(upstreamBadAnswer)
		return quote{}, &attemptError{Error: malformed(g.logger, symbol, detail)}
	}
	g.st.countUpstream(upstreamOK)
	return q, nil
}

// readUpstreamBody reads the body of resp, up to maxUpstreamBody bytes and
// one more, which tells a longer body (see upstreamBody).
func readUpstreamBody(resp *http.Response) ([]byte, error) {
	return io.ReadAll(upstreamBody(resp, maxUpstreamBody+1))
}

// upstreamBody returns the body of resp, up to limit bytes and, as
// asynchttp.Client reads it, no more than its Content-Length. net/http
// ends a body at its length, but for a 101 Switching Protocols, which the
// gateway never asks for: its body is the connection itself, of length
// 0, which no context closes. Read to its end, it would hold the request
// until the upstream closed it, past every timeout.
func upstreamBody(resp *http.Response, limit int64) io.Reader {
	if resp.ContentLength >= 0 {
		limit = min(limit, resp.ContentLength)
	}
	return io.LimitReader(resp.Body, limit)
}

// transportError maps the failure of req with asynchttp.RequestError, as
// asynchttp.Client does: its info names the kind of failure, not the
// upstream's URL or address, which the Go error's text names and the
// client must not read; the Go error is its Cause, logged. A transport
// error is retried, as the flows gateway's Retry does; the attempt's own
// timeout is a Timeout, retried too. A request cut short by a context
// counts as cancelled, as in the flows gateway, whatever ended the
// context.
func (g *plainGateway) transportError(parent, ctx context.Context, req *http.Request, err error) *attemptError {
	if ctx.Err() != nil {
		g.st.upstreamCancelled.Add(1)
		g.st.countUpstream(failedOutcome(ctx.Err()))
		if parent.Err() != nil {
			return &attemptError{Error: &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "cancelled"}}
		}
		return &attemptError{Error: &asyncsteps.Error{Code: asyncsteps.Timeout}, retry: true}
	}
	e := asynchttp.RequestError(req, err)
	g.st.countUpstream(failedOutcome(e))
	return &attemptError{Error: e, retry: retriable(e.Code)}
}
