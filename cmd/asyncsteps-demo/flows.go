package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// flowGateway serves /quote with one flow per request, spread over the
// loops of a LoopGroup: the gateway this program demonstrates.
type flowGateway struct {
	cfg     config
	loops   *asyncsteps.LoopGroup
	limit   asyncsteps.Syncer
	client  *asynchttp.Client
	handler *asynchttp.Handler
}

// newFlowGateway returns the flows gateway and the count of requests
// waiting for its limit. Close it after its server has stopped.
func newFlowGateway(cfg config, st *stats, httpClient *http.Client, logger *slog.Logger) (*flowGateway, func() int64) {
	limit := &queueCounter{syncer: limitSyncer(cfg.Limits)}
	g := &flowGateway{cfg: cfg, loops: asyncsteps.NewLoopGroup(cfg.Loops), limit: limit}
	g.client = &asynchttp.Client{HTTP: httpClient, Done: func(_ *http.Request, _ int, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			st.upstreamCancelled.Add(1)
		}
	}}
	g.handler = &asynchttp.Handler{
		Flow:       g.quote,
		Tool:       func() asyncsteps.Tool { return g.loops.Next() },
		Timeout:    cfg.Timeout,
		Codes:      errorCodes,
		RetryAfter: cfg.RetryAfter,
		Logger:     logger,
		Done: func(_ *http.Request, o asynchttp.Outcome) {
			if o.Cancelled {
				st.cancel()
				return
			}
			st.finish(o.Code, o.Status, time.Since(o.Start))
		},
	}
	return g, limit.Waiting
}

func (g *flowGateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	g.handler.ServeHTTP(w, req)
}

// Close closes the loops.
func (g *flowGateway) Close() { g.loops.Close() }

// quote adds the steps of one /quote request: check it, enter the limit,
// fetch every symbol in parallel, answer with the quotes gathered.
func (g *flowGateway) quote(as asyncsteps.AsyncSteps, req *http.Request) {
	symbols, bad := parseQuote(req, g.cfg.MaxSymbols)
	if bad != nil {
		as.Error(bad.Code, bad.Info)
	}
	g.limit.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
		// Each branch writes its own entry, on the flow's loop: no lock.
		reply := &quoteReply{Quotes: make([]quote, len(symbols))}
		p := as.Parallel()
		for i, symbol := range symbols {
			f := newFetch(g, symbol, &reply.Quotes[i])
			p.Add(f.sendFn, f.retryFn)
		}
		as.SuccessStep(reply)
	})
}

// fetch gets one symbol's price into a quote: an attempt, bounded by its
// own timeout, and on a failure worth it another, at most cfg.Retries
// more. The step functions are bound once per symbol, not per attempt.
type fetch struct {
	g       *flowGateway
	symbol  string
	url     string
	into    *quote
	retries int  // attempts made after the first
	final   bool // the last attempt failed for good: an answer not worth another
	// send, retry and read bound once.
	sendFn  asyncsteps.StepFunc
	retryFn asyncsteps.ErrorFunc
	readFn  asyncsteps.StepFunc
}

func newFetch(g *flowGateway, symbol string, into *quote) *fetch {
	f := &fetch{g: g, symbol: symbol, url: priceURL(g.cfg.Upstream, symbol), into: into}
	f.sendFn, f.retryFn, f.readFn = f.send, f.retry, f.read
	return f
}

// send is one attempt: the upstream request, then its answer read.
func (f *fetch) send(as asyncsteps.AsyncSteps, _ ...any) {
	as.SetTimeout(f.g.cfg.AttemptTimeout)
	f.g.client.Get(as, f.url)
	as.Add(f.readFn)
}

// retry is the error handler of an attempt: a transport error, the
// attempt's timeout or a 5xx answer gets another attempt in its place
// while retries are left; anything else goes on unwinding.
func (f *fetch) retry(as asyncsteps.AsyncSteps, code string) {
	if f.final || !retriable(code) || f.retries >= f.g.cfg.Retries {
		return
	}
	f.retries++
	as.Add(f.sendFn, f.retryFn)
}

// read checks the upstream answer and keeps the price.
func (f *fetch) read(as asyncsteps.AsyncSteps, args ...any) {
	resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
	if resp.StatusCode != http.StatusOK {
		err, again := answerError(f.symbol, resp.StatusCode)
		f.final = !again
		as.Error(err.Code, err.Info)
	}
	q, err := f.g.cfg.decode(resp.Body)
	if err != nil {
		f.final = true
		as.Error(asyncsteps.CommError, "upstream answer for "+f.symbol+": "+err.Error())
	}
	*f.into = q
}
