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
	queue   queueCounter // the flows waiting to enter limit
	client  *asynchttp.Client
	handler *asynchttp.Handler
	logger  *slog.Logger              // logs what is wrong with a malformed upstream answer
	st      *stats                    // counts the 200s of the upstream as read judges them
	backoff func(n int) time.Duration // cfg.backoff, bound once; nil without -retry-backoff
}

// newFlowGateway returns the flows gateway and the count of requests
// waiting for its limit. Close it after its server has stopped.
func newFlowGateway(cfg config, st *stats, httpClient *http.Client, logger *slog.Logger) (*flowGateway, func() int64) {
	g := &flowGateway{cfg: cfg, loops: asyncsteps.NewLoopGroup(cfg.Loops), limit: limitSyncer(cfg.Limits), logger: logger, st: st}
	if cfg.RetryBackoff > 0 {
		g.backoff = g.cfg.backoff
	}
	traceFlows(g.loops, cfg.tracer)
	g.client = &asynchttp.Client{HTTP: httpClient, Done: func(_ *http.Request, status int, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			st.upstreamCancelled.Add(1)
		}
		switch {
		case err != nil:
			st.countUpstream(failedOutcome(err))
		case status != http.StatusOK: // a 200 is counted once read judges it
			st.countUpstream(statusOutcome(status))
		}
	}}
	g.handler = &asynchttp.Handler{
		Flow:       g.quote,
		Tool:       func() asyncsteps.Tool { return g.loops.Next() },
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
	return g, g.queue.Waiting
}

func (g *flowGateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	g.handler.ServeHTTP(w, req)
}

// Close closes the loops, then waits, at most loopsWait, until no Await
// function of their flows still runs, and logs how long that took, or,
// at the bound, that some still run. Those are the upstream requests of
// flows that ended without them: cancelled (their client left, their
// request timed out, the shutdown), or failed by another symbol. Close
// has cancelled their contexts, but a flow does not wait for the
// functions it cancels: without the wait, the process could close what
// they use under them (the HTTP client's connections, the embedded
// upstream, the traces' exporter that sends their spans) and exit before
// they have counted their outcome. Close returns either way: a function
// that ignores its context must not hold the exit.
func (g *flowGateway) Close() {
	g.loops.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), loopsWait)
	defer cancel()
	if err := g.loops.Wait(ctx); err != nil {
		g.logger.Warn("loops closed: Await functions still running, exiting without them", "after", loopsWait, "err", err)
		return
	}
	g.logger.Info("loops closed: every Await function has returned", "took", time.Since(start))
}

// loopsWait bounds Close's wait for the Await functions of the loops.
// Close has cancelled them all by then, and one that heeds its context
// returns at once (net/http aborts a request whose context ends): the
// wait is for functions that ignore theirs, which more time would not
// cure. A fixed bound, rather than what remains of -grace (nothing, when
// the grace period ran out and cancelled the requests left), keeps the
// exit within -grace, the second that serve gives the connections of
// clients that do not read, and this.
const loopsWait = time.Second

// quote adds the steps of one /quote request: check it, enter the limit,
// fetch every symbol in parallel, answer with the quotes gathered in State.
// It runs as the flow's first step, which also bounds the request (504):
// the timeout is set here rather than by the Handler, which would wrap
// this step in one more.
func (g *flowGateway) quote(as asyncsteps.AsyncSteps, req *http.Request) {
	if g.cfg.Timeout > 0 {
		as.SetTimeout(g.cfg.Timeout)
	}
	symbols, bad := parseQuote(req, g.cfg.MaxSymbols)
	if bad != nil {
		as.Error(bad.Code, bad.Info)
	}
	job := g.newJob(symbols)
	job.ctx = req.Context()
	// Counted as waiting from now, when the section's step, added next, is
	// the flow's next step, until it is inside, rejected or cancelled. The
	// cancel handler of this step runs both when the flow is cancelled
	// (its client left, or the request timed out) and when an error, such
	// as the rejection of a full queue, unwinds through it
	// (docs/DESIGN.md#cancel-handlers).
	job.waiting = true
	g.queue.waiting.Add(1)
	as.SetCancel(job.leftQueueFn)
	g.limit.Sync(as, job.fetchAllFn, job.upstreamTimedOutFn)
}

// quoteJob is the flow of one /quote request: its fetches, and the step
// functions common to the request, bound once.
type quoteJob struct {
	g       *flowGateway
	fetches []fetch
	ctx     context.Context // the request's: its deadline is a timeout of the request
	waiting bool            // counted in g.queue; read and written on the flow's loop only
	reply   quoteReply

	leftQueueFn        asyncsteps.CancelFunc
	fetchAllFn         asyncsteps.StepFunc
	answerFn           asyncsteps.StepFunc
	upstreamTimedOutFn asyncsteps.ErrorFunc
}

// newJob makes the job of a request for symbols, with its fetches in one
// block.
func (g *flowGateway) newJob(symbols []string) *quoteJob {
	job := &quoteJob{g: g, fetches: make([]fetch, len(symbols))}
	job.leftQueueFn, job.fetchAllFn, job.answerFn = job.leftQueue, job.fetchAll, job.answer
	job.upstreamTimedOutFn = job.upstreamTimedOut
	for i, symbol := range symbols {
		f := &job.fetches[i]
		f.job, f.symbol, f.url = job, symbol, priceURL(g.cfg.Upstream, symbol)
		f.attemptFn, f.readFn, f.retryableFn = f.attempt, f.read, f.retryable
	}
	return job
}

// leaveQueue stops counting the job's flow as waiting for the limit; it is
// called when the flow enters, is rejected or is cancelled, whichever comes
// first.
func (job *quoteJob) leaveQueue() {
	if job.waiting {
		job.waiting = false
		job.g.queue.waiting.Add(-1)
	}
}

// leftQueue is the cancel handler of the step that asks for the limit.
func (job *quoteJob) leftQueue(asyncsteps.AsyncSteps) { job.leaveQueue() }

// fetchAll runs inside the limit: one parallel branch per symbol, each the
// Retry of its attempts, then the answer.
func (job *quoteJob) fetchAll(as asyncsteps.AsyncSteps, _ ...any) {
	job.leaveQueue()
	p := as.Parallel()
	cfg := &job.g.cfg
	for i := range job.fetches {
		f := &job.fetches[i]
		asyncsteps.Retry(p, asyncsteps.RetryOptions{
			Attempts: 1 + cfg.Retries, Timeout: cfg.AttemptTimeout, Backoff: job.g.backoff,
			Retryable: f.retryableFn, Label: retry,
		}, f.attemptFn)
	}
	as.Add(job.answerFn)
}

// upstreamTimedOut is the error handler of the fetches: a Timeout that
// reaches it before the request's context has ended is a symbol's last
// attempt's own (the upstream too slow), answered with an info of its
// own. The request's timeout cancels the fetches rather than fail them
// (docs/DESIGN.md#cancel-handlers); the deadline of its context fails
// them with a Timeout, once that context has ended.
func (job *quoteJob) upstreamTimedOut(as asyncsteps.AsyncSteps, code string) {
	if code == asyncsteps.Timeout && job.ctx.Err() == nil {
		as.Error(asyncsteps.Timeout, upstreamTimeoutInfo)
	}
}

// answer gathers the prices from State, in the order asked.
func (job *quoteJob) answer(as asyncsteps.AsyncSteps, _ ...any) {
	job.reply.Quotes = make([]quote, len(job.fetches))
	for i, f := range job.fetches {
		if q, ok := as.State().Get(f.symbol).(*quote); ok {
			job.reply.Quotes[i] = *q
		}
	}
	as.Success(&job.reply)
}

// retry labels the loop of a symbol's attempts.
const retry = "retry"

// fetch gets one symbol's price into State: attempts in the Retry labelled
// "retry", each bounded by its own timeout; an attempt that fails in a way
// worth it is made again, at most cfg.Retries times. Its functions are
// bound once per symbol, not made per attempt.
type fetch struct {
	job    *quoteJob
	symbol string
	url    string
	final  bool  // the last attempt failed in a way not worth a retry
	price  quote // the answer, in State under the symbol

	attemptFn   asyncsteps.RepeatFunc
	readFn      asyncsteps.StepFunc
	retryableFn func(code string) bool
}

// attempt is one attempt: the upstream request, then its answer read.
func (f *fetch) attempt(as asyncsteps.AsyncSteps, _ int) {
	f.job.g.client.Get(as, f.url)
	as.Add(f.readFn)
}

// retryable reports whether the attempt that failed with code is made
// again: a transport error, its own timeout or a 5xx answer, not an
// answer that is broken.
func (f *fetch) retryable(code string) bool { return !f.final && retriable(code) }

// read checks the upstream answer and keeps the price in State, which ends
// the Retry; a 5xx answer is retried.
func (f *fetch) read(as asyncsteps.AsyncSteps, args ...any) {
	resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
	if resp.StatusCode != http.StatusOK {
		err, again := answerError(f.symbol, resp.StatusCode)
		f.final = !again
		as.Error(err.Code, err.Info)
	}
	f.final = true // whatever fails from here on is the upstream's answer
	q, detail := f.job.g.cfg.judge(f.symbol, resp.Body)
	if detail != "" {
		f.job.g.st.countUpstream(upstreamBadAnswer)
		bad := malformed(f.job.g.logger, f.symbol, detail)
		as.Error(bad.Code, bad.Info)
	}
	f.job.g.st.countUpstream(upstreamOK)
	f.price = q
	as.State().Set(f.symbol, &f.price)
}
