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
		p := as.Parallel()
		for _, symbol := range symbols {
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { g.fetch(as, symbol) })
		}
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			reply := quoteReply{Quotes: make([]quote, len(symbols))}
			for i, symbol := range symbols {
				reply.Quotes[i], _ = as.State().Get("quote:" + symbol).(quote)
			}
			as.Success(reply)
		})
	})
}

// fetch adds the steps that get symbol's price into State, each attempt
// bounded by its own timeout and retried, at most cfg.Retries times, in the
// loop labelled "retry".
func (g *flowGateway) fetch(as asyncsteps.AsyncSteps, symbol string) {
	url := priceURL(g.cfg.Upstream, symbol)
	retries := 0
	retry := func(as asyncsteps.AsyncSteps) {
		if retries < g.cfg.Retries {
			retries++
			as.Continue("retry")
		}
	}
	as.Loop(func(as asyncsteps.AsyncSteps) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(g.cfg.AttemptTimeout)
			g.client.Get(as, url)
		}, func(as asyncsteps.AsyncSteps, code string) {
			if retriable(code) {
				retry(as)
			}
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
			if resp.StatusCode != http.StatusOK {
				err, again := answerError(symbol, resp.StatusCode)
				if again {
					retry(as)
				}
				as.Error(err.Code, err.Info)
			}
			q, err := g.cfg.decode(resp.Body)
			if err != nil {
				as.Error(asyncsteps.CommError, "upstream answer for "+symbol+": "+err.Error())
			}
			as.State().Set("quote:"+symbol, q)
			as.Break("retry")
		})
	}, "retry")
}
