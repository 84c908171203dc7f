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
// fetch every symbol in parallel, answer with the quotes gathered in State.
func (g *flowGateway) quote(as asyncsteps.AsyncSteps, req *http.Request) {
	symbols, bad := parseQuote(req, g.cfg.MaxSymbols)
	if bad != nil {
		as.Error(bad.Code, bad.Info)
	}
	g.limit.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
		fetches := make([]*fetch, len(symbols))
		p := as.Parallel()
		for i, symbol := range symbols {
			fetches[i] = newFetch(g, symbol)
			p.Add(fetches[i].stepsFn)
		}
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			reply := quoteReply{Quotes: make([]quote, len(fetches))}
			for i, f := range fetches {
				reply.Quotes[i], _ = as.State().Get(f.key).(quote)
			}
			as.Success(reply)
		})
	})
}

// fetch gets one symbol's price into State: attempts in the loop labelled
// "retry", each bounded by its own timeout; an attempt that fails in a way
// worth it goes on with the next iteration, at most cfg.Retries times. Its
// step functions are bound once per symbol, not made per attempt.
type fetch struct {
	g       *flowGateway
	symbol  string
	url     string
	key     string // the State entry of the price
	retries int    // attempts made after the first

	stepsFn   asyncsteps.StepFunc
	attemptFn asyncsteps.LoopFunc
	sendFn    asyncsteps.StepFunc
	onSendErr asyncsteps.ErrorFunc
	readFn    asyncsteps.StepFunc
}

func newFetch(g *flowGateway, symbol string) *fetch {
	f := &fetch{g: g, symbol: symbol, url: priceURL(g.cfg.Upstream, symbol), key: "quote:" + symbol}
	f.stepsFn, f.attemptFn = f.steps, f.attempt
	f.sendFn, f.onSendErr, f.readFn = f.send, f.sendFailed, f.read
	return f
}

// steps is the parallel branch of the symbol: the loop of attempts.
func (f *fetch) steps(as asyncsteps.AsyncSteps, _ ...any) { as.Loop(f.attemptFn, "retry") }

// attempt is one iteration: the upstream request, then its answer read.
func (f *fetch) attempt(as asyncsteps.AsyncSteps) {
	as.Add(f.sendFn, f.onSendErr)
	as.Add(f.readFn)
}

func (f *fetch) send(as asyncsteps.AsyncSteps, _ ...any) {
	as.SetTimeout(f.g.cfg.AttemptTimeout)
	f.g.client.Get(as, f.url)
}

// sendFailed retries a transport error or the attempt's own timeout;
// anything else goes on unwinding.
func (f *fetch) sendFailed(as asyncsteps.AsyncSteps, code string) {
	if retriable(code) {
		f.retry(as)
	}
}

// retry goes on with the next attempt, if retries are left.
func (f *fetch) retry(as asyncsteps.AsyncSteps) {
	if f.retries < f.g.cfg.Retries {
		f.retries++
		as.Continue("retry")
	}
}

// read checks the upstream answer, keeps the price in State and leaves
// the loop; a 5xx answer is retried.
func (f *fetch) read(as asyncsteps.AsyncSteps, args ...any) {
	resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
	if resp.StatusCode != http.StatusOK {
		err, again := answerError(f.symbol, resp.StatusCode)
		if again {
			f.retry(as)
		}
		as.Error(err.Code, err.Info)
	}
	q, err := f.g.cfg.decode(resp.Body)
	if err != nil {
		as.Error(asyncsteps.CommError, "upstream answer for "+f.symbol+": "+err.Error())
	}
	as.State().Set(f.key, q)
	as.Break("retry")
}
