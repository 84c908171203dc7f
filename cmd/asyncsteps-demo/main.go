// Command asyncsteps-demo is a quote gateway that serves every request as
// one flow: GET /quote?symbols=A,B,C fetches each symbol's price from an
// upstream service, all in parallel, each attempt with its own timeout and
// retried, under a request timeout and a limiter, and answers with JSON.
// /stats and /metrics (Prometheus) count the requests.
//
// With no -upstream, it starts its own upstream price service on a free
// loopback port, with seeded random latency and failures, so that it works
// on a machine with nothing else running. -serve-upstream runs only that
// service, on -addr; -impl=plain serves the same gateway written with
// goroutines, errgroup and contexts, the baseline of the benchmark.
//
// SIGINT or SIGTERM stops it: /readyz answers 503 and, after
// -shutdown-delay, it stops accepting, lets the requests in flight end
// within -grace, cancels the rest (logging how many), closes
// its loops and exits 0. In between, the flows gateway waits, at most a
// second, until no Await function of its loops still runs (an upstream
// request of a flow that ended without it), then logs how long that took,
// or warns that some still run and exits 0 all the same: the stop was
// asked for and every request answered, and a supervisor would take
// another status for a crash. The plain gateway has nothing to wait for:
// each handler waits for its errgroup's goroutines, and the server's
// shutdown for its handlers.
//
// Exit statuses:
//
//	0    stopped by SIGINT or SIGTERM (while starting too), or -h
//	1    failed to start (to listen, to reach Redis) or to serve
//	2    a bad flag, value or argument, refused before anything starts
//	130  a second SIGINT, which ends it at once
//	143  a second SIGTERM, which ends it at once
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// options are the command's flags.
type options struct {
	addr          string
	impl          string
	upstreamURL   string
	serveUpstream bool
	upstream      upstreamOptions
	grace         time.Duration
	shutdownDelay time.Duration
	cfg           config
	cluster       clusterOptions
	logLevel      string
	logFormat     string
	otlpEndpoint  string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		// Parsing stops at the first one, leaving the flags after it
		// unset; "-debug false" sets -debug and leaves "false".
		return o, fmt.Errorf("unexpected argument %q: the command takes flags only, and a boolean flag its value as -debug=false", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return o, o.refuseIgnored(given)
}

// newFlagSet returns the command's flags, setting o, which it sets to the
// defaults.
func newFlagSet(o *options) *flag.FlagSet {
	*o = options{cfg: defaultConfig()}
	fs := flag.NewFlagSet("asyncsteps-demo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage of asyncsteps-demo:\n", description)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.impl, "impl", "flows", "gateway implementation: flows (asyncsteps) or plain (goroutines, errgroup)")
	fs.StringVar(&o.upstreamURL, "upstream", "", "base URL of the upstream price service; empty: start the embedded one (-upstream-latency, -upstream-fail, -seed)")
	fs.BoolVar(&o.serveUpstream, "serve-upstream", false, "serve only the embedded upstream price service, on -addr, with -grace and its own flags; no gateway flag is accepted with it")
	fs.DurationVar(&o.upstream.Latency, "upstream-latency", 20*time.Millisecond, "embedded upstream: mean latency (uniform in [L/2, 3L/2)), at most 1h")
	fs.Float64Var(&o.upstream.FailRate, "upstream-fail", 0.05, "embedded upstream: share of requests answered 500, from 0 to 1")
	fs.Uint64Var(&o.upstream.Seed, "seed", 1, "embedded upstream: random seed")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, time for the requests in flight to end before they are cancelled")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "on SIGINT/SIGTERM, time to serve on with /readyz answering 503 before the shutdown begins, for a load balancer to stop sending requests")
	fs.DurationVar(&o.cfg.Timeout, "timeout", o.cfg.Timeout, "request timeout, answered 504; a client that has not taken its answer 2s after it loses its connection")
	fs.DurationVar(&o.cfg.AttemptTimeout, "attempt-timeout", o.cfg.AttemptTimeout, "timeout of one upstream request (the request's -timeout bounds it too)")
	fs.IntVar(&o.cfg.Retries, "retries", o.cfg.Retries, "upstream retries after the first attempt, on CommError, timeout or 5xx, at most 100")
	fs.DurationVar(&o.cfg.RetryBackoff, "retry-backoff", o.cfg.RetryBackoff, "the longest wait before the first retry, at most 1m; each retry waits a random time up to it, doubled at each retry; 0: retry at once")
	fs.IntVar(&o.cfg.MaxSymbols, "max-symbols", o.cfg.MaxSymbols, "symbols per request, at most 100")
	fs.IntVar(&o.cfg.Limits.Concurrent, "concurrent", o.cfg.Limits.Concurrent, "limiter: requests served at once")
	fs.IntVar(&o.cfg.Limits.Queue, "queue", o.cfg.Limits.Queue, "limiter: requests waiting for a slot; more are answered 503")
	fs.IntVar(&o.cfg.Limits.Rate, "rate", o.cfg.Limits.Rate, "limiter: requests per second; 0: no rate limit")
	fs.IntVar(&o.cfg.Limits.Burst, "burst", o.cfg.Limits.Burst, "limiter: requests waiting for the rate; more are answered 503; needs -rate")
	fs.DurationVar(&o.cfg.RetryAfter, "retry-after", o.cfg.RetryAfter, "the wait a 503 answer asks for, at most 24h; 0: 1s")
	fs.IntVar(&o.cfg.Loops, "loops", 0, "event loops of the flows gateway, at most 1024; 0: one per core")
	fs.BoolVar(&o.cfg.Debug, "debug", false, "serve /debug/memory (collects garbage, reports the memory in use) and /debug/pprof")
	fs.StringVar(&o.cluster.Addr, "redis", "", "Redis to share -concurrent and -rate through, with every instance using it and -redis-prefix: host:port, or redis://[user[:password]@]host[:port][/db] (rediss:// for TLS; unix://[user[:password]@]/path/to/redis.sock[?db=N] for a unix socket); the password may come from $REDIS_PASSWORD instead, which a URL's password overrides; empty: this instance alone")
	fs.StringVar(&o.cluster.Prefix, "redis-prefix", "asyncsteps-demo", "with -redis: the prefix of the Redis keys; instances with the same prefix share their limits")
	fs.DurationVar(&o.cluster.TTL, "redis-ttl", 10*time.Second, "with -redis: the lease of a concurrency slot, renewed while a request holds it; a killed instance's slots come back after it; from 100ms to 24h")
	fs.StringVar(&o.logLevel, "log-level", "info", "the least level logged: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "the log lines' format: text (key=value) or json (one object a line)")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "trace each request (gateway, flow, upstream calls) to the OTLP/HTTP collector at this URL, http://localhost:4318 say (/v1/traces is appended unless the path ends with it); service asyncsteps-demo unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it; empty: no tracing")
	return fs
}

// description is the first line of -h: what the command is.
const description = "asyncsteps-demo: a quote gateway that serves each GET /quote?symbols=A,B,C as one asyncsteps flow, fetching the prices from an upstream in parallel"

// upstreamFlags set the embedded upstream; serveUpstreamFlags are those
// that -serve-upstream uses (the log's too: it logs as the gateway does).
var (
	upstreamFlags      = []string{"seed", "upstream-fail", "upstream-latency"}
	serveUpstreamFlags = append([]string{"addr", "grace", "log-format", "log-level", "serve-upstream"}, upstreamFlags...)
)

// refuseIgnored rejects the flags given that would have no effect with
// the others, given naming the flags set on the command line: a user who
// passes one believes it took effect.
func (o *options) refuseIgnored(given map[string]bool) error {
	if o.serveUpstream {
		var gateway []string
		for name := range given {
			if !slices.Contains(serveUpstreamFlags, name) {
				gateway = append(gateway, name)
			}
		}
		return ignoredError(given, gateway, "-serve-upstream serves the embedded upstream alone, not the gateway")
	}
	if o.upstreamURL != "" {
		if err := ignoredError(given, upstreamFlags, "they set the embedded upstream, which -upstream replaces"); err != nil {
			return err
		}
	}
	if o.impl == "plain" {
		if err := ignoredError(given, []string{"loops"}, "the plain gateway has no event loops"); err != nil {
			return err
		}
	}
	if o.cfg.Retries == 0 {
		if err := ignoredError(given, []string{"retry-backoff"}, "-retries=0 makes no retry to wait before"); err != nil {
			return err
		}
	}
	if o.cluster.Addr == "" {
		return ignoredError(given, []string{"redis-prefix", "redis-ttl"}, "they set the limits shared through -redis, which is not given")
	}
	return nil
}

// ignoredError returns the error that names the flags of names given,
// which would have no effect, and why; nil if none was given.
func ignoredError(given map[string]bool, names []string, why string) error {
	var ignored []string
	for _, name := range names {
		if given[name] {
			ignored = append(ignored, "-"+name)
		}
	}
	if len(ignored) == 0 {
		return nil
	}
	slices.Sort(ignored)
	return fmt.Errorf("%s would have no effect: %s", strings.Join(ignored, ", "), why)
}

// validate rejects the flag values the command cannot work with, so that
// a typo is an error at start rather than a gateway that misbehaves. Its
// error names the one flag that is wrong, and its value.
func (o *options) validate() error {
	if o.impl != "flows" && o.impl != "plain" {
		return fmt.Errorf("-impl=%q: want flows or plain", o.impl)
	}
	if _, ok := logLevels[o.logLevel]; !ok {
		return fmt.Errorf("-log-level=%q: want debug, info, warn or error", o.logLevel)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("-log-format=%q: want text or json", o.logFormat)
	}
	for _, err := range []error{
		validateAddr(o.addr),
		intIn("concurrent", o.cfg.Limits.Concurrent, 1, math.MaxInt),
		intIn("queue", o.cfg.Limits.Queue, 0, math.MaxInt),
		intIn("rate", o.cfg.Limits.Rate, 0, math.MaxInt),
		intIn("burst", o.cfg.Limits.Burst, 0, math.MaxInt),
		intIn("max-symbols", o.cfg.MaxSymbols, 1, maxMaxSymbols),
		intIn("retries", o.cfg.Retries, 0, maxRetries),
		intIn("loops", o.cfg.Loops, 0, maxLoops),
		durationIn("timeout", o.cfg.Timeout, 1, math.MaxInt64),
		durationIn("attempt-timeout", o.cfg.AttemptTimeout, 1, math.MaxInt64),
		durationIn("retry-backoff", o.cfg.RetryBackoff, 0, maxRetryBackoff),
		durationIn("grace", o.grace, 0, math.MaxInt64),
		durationIn("shutdown-delay", o.shutdownDelay, 0, math.MaxInt64),
		durationIn("retry-after", o.cfg.RetryAfter, 0, maxRetryAfter),
		durationIn("upstream-latency", o.upstream.Latency, 0, maxUpstreamLatency),
		durationIn("redis-ttl", o.cluster.TTL, minRedisTTL, maxRedisTTL),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case o.cfg.Limits.Burst > 0 && o.cfg.Limits.Rate == 0:
		return errors.New("-burst needs -rate: with no rate limit nothing waits for one")
	case !(o.upstream.FailRate >= 0 && o.upstream.FailRate <= 1): // NaN too
		return fmt.Errorf("-upstream-fail=%v: want a share from 0 to 1", o.upstream.FailRate)
	case o.cluster.Addr != "" && o.impl != "flows":
		return errors.New("-redis works with -impl=flows only")
	}
	if o.cluster.Addr != "" {
		if _, err := o.cluster.target(); err != nil {
			return err
		}
	}
	if err := validateOTLPEndpoint(o.otlpEndpoint); err != nil {
		return err
	}
	return validateUpstreamURL(o.upstreamURL)
}

// intIn returns the error of the flag name whose value v is not from lo
// to hi (math.MaxInt: no upper bound), nil if it is.
func intIn(name string, v, lo, hi int) error {
	switch {
	case v >= lo && v <= hi:
		return nil
	case hi == math.MaxInt:
		return fmt.Errorf("-%s=%d: want at least %d", name, v, lo)
	}
	return fmt.Errorf("-%s=%d: want from %d to %d", name, v, lo, hi)
}

// durationIn is intIn for a duration flag; a lower bound of 1ns reads
// "positive".
func durationIn(name string, v, lo, hi time.Duration) error {
	switch {
	case v >= lo && v <= hi:
		return nil
	case lo == 1 && hi == math.MaxInt64:
		return fmt.Errorf("-%s=%v: want a positive duration", name, v)
	case hi == math.MaxInt64:
		return fmt.Errorf("-%s=%v: want at least %v", name, v, lo)
	}
	return fmt.Errorf("-%s=%v: want from %v to %v", name, v, lo, hi)
}

// validateAddr accepts a host:port whose port is a number from 0 (any
// free one) to 65535, or empty (0), as net.Listen takes it: a port out of
// range, or a name, is a bad value (exit 2) rather than a failure to
// listen (exit 1). The host is left to net.Listen.
func validateAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr=%q: want host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil && port != "" {
		return fmt.Errorf("-addr=%q: want a port from 0 to 65535", addr)
	}
	return nil
}

// dialPortError returns the error of the flag name whose value, shown as
// it is logged, names an address the command dials on port, unless port
// is a number from 1 to 65535. url.Parse checks only that a port is
// digits; net.Dial would refuse the rest only once it dials, after the
// start: at each request, or as a Redis that does not answer.
func dialPortError(name, shown, port string) error {
	if n, err := strconv.ParseUint(port, 10, 16); err == nil && n > 0 {
		return nil
	}
	return fmt.Errorf("-%s=%q: want a port from 1 to 65535", name, shown)
}

// The bounds of the flags whose huge values would not be refused by the
// code that uses them, but would misbehave: a loop costs memory when it is
// made (a -loops of millions takes all the machine's before the program
// could listen), a Retry-After of centuries overflows, and so does the
// embedded upstream's random latency. Retries past a hundred only keep a
// request from its answer until -timeout (and one more than the largest
// int would wrap to no attempt at all). A request's symbols are as many
// upstream requests, and the duplicate check of its list costs up to
// -max-symbols comparisons an entry: at a million, one URL of 350 KB cost
// 14 s of CPU; at 100, a URL of a megabyte costs 0.2 s.
const (
	maxRetries         = 100
	maxMaxSymbols      = 100
	maxLoops           = 1024
	maxRetryAfter      = 24 * time.Hour
	maxRetryBackoff    = time.Minute
	maxUpstreamLatency = time.Hour
)

// The bounds of -redis-ttl. A lease is renewed every third of it: a lease
// of a millisecond would be renewed hundreds of times a second, and run
// out at the first slow round trip to Redis, letting more requests in than
// -concurrent; a killed instance's slots come back only after it, so a
// lease of years would keep them.
const (
	minRedisTTL = 100 * time.Millisecond
	maxRedisTTL = 24 * time.Hour
)

// validateUpstreamURL accepts an empty -upstream (the embedded one) or an
// absolute http or https URL with no query or fragment: the gateway
// appends /price?symbol=SYM to it, which a query or a fragment would
// swallow. Its error, which is logged, names s without a password.
func validateUpstreamURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-upstream=%q: want an http:// or https:// URL with a host", redactedUserinfo(s))
	}
	if u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#") { // "#" also for an empty fragment
		return fmt.Errorf("-upstream=%q: want a base URL with no query or fragment", redactedUserinfo(s))
	}
	if port := u.Port(); port != "" { // none: the scheme's
		return dialPortError("upstream", redactedUserinfo(s), port)
	}
	return nil
}

// logLevels are the values of -log-level. Their names are slog's, in
// lower case, so that a level reads as the lines it lets through do.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// newLogger returns the logger of -log-level and -log-format, writing to
// w; validate has accepted both.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[level]}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func main() {
	// Bad flags are logged as text at any level: the flags that would
	// say otherwise are what could not be read.
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(logger)
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		logger.Error("bad flags", "err", err)
		os.Exit(2)
	}
	logger = newLogger(os.Stderr, o.logLevel, o.logFormat)
	slog.SetDefault(logger)
	o.cluster.Password = os.Getenv(redisPasswordEnv)
	ctx := stopOnSignal(logger)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		logger.Error("listen", "err", err)
		os.Exit(1)
	}
	if err := run(ctx, o, ln, logger); err != nil {
		logger.Error("stopped", "err", err)
		os.Exit(1)
	}
}

// stopOnSignal returns a context that SIGINT or SIGTERM ends; a second
// signal ends the process at once, grace or not, with the status a shell
// gives a process killed by it, 128 and its number (130 for SIGINT, 143
// for SIGTERM). The process exits itself rather than give the signals
// back their default action: a signal ignored when the process started
// (SIGINT of a command started with nohup or in the background of a
// shell script) would be ignored again, and the second one lost. A
// signal within sameStopRequest of the first is that one again, not a
// second (see secondSignal).
func stopOnSignal(logger *slog.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		first := time.Now() // before the stop begins, which a test waits for
		cancel()
		sig := secondSignal(signals, first, time.Now, logger)
		status := signalExitStatus(sig)
		logger.Warn("second signal: exiting at once", "signal", sig.String(), "status", status)
		os.Exit(status)
	}()
	return ctx
}

// sameStopRequest is how soon after the first signal another is taken
// for the same request to stop: timeout(1) signals its command and then
// the command's process group, which the command is in, and a supervisor
// may signal every process of a group the same way; a person pressing
// Ctrl-C twice takes longer.
const sameStopRequest = 100 * time.Millisecond

// secondSignal returns the first signal of signals that comes
// sameStopRequest or later after first, by now; one before is logged and
// dropped.
func secondSignal(signals <-chan os.Signal, first time.Time, now func() time.Time, logger *slog.Logger) os.Signal {
	for {
		sig := <-signals
		if now().Sub(first) >= sameStopRequest {
			return sig
		}
		logger.Info("signal again at once: the same request to stop", "signal", sig.String())
	}
}

// signalExitStatus is the exit status of a process ended by sig, as a
// shell reports it: 128 and the signal's number.
func signalExitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// run serves on ln until ctx ends, then shuts down gracefully.
func run(ctx context.Context, o options, ln net.Listener, logger *slog.Logger) error {
	if o.serveUpstream {
		logger.Info("serving the upstream price service", "addr", ln.Addr().String(),
			"latency", o.upstream.Latency, "fail", o.upstream.FailRate, "seed", o.upstream.Seed)
		return serve(ctx, ln, newUpstream(o.upstream), o.grace, logger, nil)
	}
	cfg := o.cfg
	cfg.Upstream = o.upstreamURL
	if o.otlpEndpoint != "" {
		tp, stopTraces, err := startTracing(o.otlpEndpoint, logger)
		if err != nil {
			return err
		}
		// Deferred first, so run last: once the server and the embedded
		// upstream have stopped, when the spans of their requests end.
		defer stopTraces()
		cfg.tracer = tp
		logger.Info("tracing", "endpoint", redacted(tracesURL(o.otlpEndpoint)))
	}
	if cfg.Upstream == "" {
		up, err := startUpstream(o.upstream, cfg.tracer)
		if err != nil {
			return err
		}
		defer up.Close()
		cfg.Upstream = up.URL
		logger.Info("embedded upstream started", "url", up.URL,
			"latency", o.upstream.Latency, "fail", o.upstream.FailRate, "seed", o.upstream.Seed)
	}
	if o.cluster.Addr != "" {
		target, _ := o.cluster.target() // validate accepted it
		if target.ignored {
			logger.Warn(redisPasswordEnv + " is ignored: the -redis URL has a password, which wins")
		}
		// Deferred before closeCluster: the client logs as it closes too.
		defer logRedisTo(logger)()
		c, closeCluster, err := connectCluster(ctx, o.cluster, logger)
		if err != nil {
			return stoppedOr(ctx, err, logger)
		}
		defer closeCluster()
		cfg.Limits.Cluster, cfg.Limits.TTL = c, o.cluster.TTL
		logger.Info("limits shared through Redis", "redis", target.shown, "prefix", o.cluster.Prefix, "ttl", o.cluster.TTL, "id", c.ID())
	}
	if cfg.AttemptTimeout >= cfg.Timeout {
		logger.Warn("-attempt-timeout is not shorter than -timeout: an upstream request is bounded by its request's timeout",
			"attempt_timeout", cfg.AttemptTimeout, "timeout", cfg.Timeout)
	}
	client := upstreamClient()
	if o.upstreamURL != "" {
		probeUpstream(ctx, client, cfg.Upstream, min(cfg.AttemptTimeout, maxProbeTimeout), logger)
	}
	gw, closeGateway := newGatewayWith(o.impl, cfg, logger, client)
	// Deferred last, so run first: the Await functions of the loops (the
	// upstream requests) have returned (see flowGateway.Close) before the
	// embedded upstream and the traces' exporter close under them.
	defer closeGateway()
	logger.Info("gateway serving", "addr", ln.Addr().String(), "impl", o.impl,
		"try", "curl 'http://"+ln.Addr().String()+"/quote?symbols=AAPL,MSFT,GOOG'")
	return serve(ctx, ln, gw.handler, o.grace, logger, &readiness{gw.stopping, o.shutdownDelay})
}

// stoppedOr returns err, a failure to start, unless ctx has ended: a
// signal asked the command to stop while it was starting (connecting to
// Redis, say), which is no failure: it exits 0, as once serving.
func stoppedOr(ctx context.Context, err error, logger *slog.Logger) error {
	if ctx.Err() == nil {
		return err
	}
	logger.Info("stopped before serving", "err", err)
	return nil
}

// gateway is a gateway with its counters.
type gateway struct {
	handler  http.Handler // /quote, /stats, /metrics, /healthz, /readyz
	stats    *stats
	stopping *atomic.Bool // set when the shutdown begins: /readyz answers 503
}

// newGateway builds the gateway impl names; the function returned closes
// it once its server has stopped (the flows gateway's loops, waiting for
// their Await functions: see flowGateway.Close).
func newGateway(impl string, cfg config, logger *slog.Logger) (*gateway, func()) {
	return newGatewayWith(impl, cfg, logger, upstreamClient())
}

// newGatewayWith is newGateway reaching the upstream with client.
func newGatewayWith(impl string, cfg config, logger *slog.Logger, client *http.Client) (*gateway, func()) {
	if cfg.decode == nil {
		cfg.decode = decodeQuote
	}
	var queueLen func() int64
	st := newStats(func() int64 { return queueLen() })
	var quotes http.Handler
	closeFn := client.CloseIdleConnections
	traced := tracedClient(client, cfg.tracer)
	if impl == "plain" {
		quotes, queueLen = newPlainGateway(cfg, st, traced, logger)
	} else {
		var fg *flowGateway
		fg, queueLen = newFlowGateway(cfg, st, traced, logger)
		quotes = fg
		closeFn = func() { fg.Close(); client.CloseIdleConnections() }
	}
	var memory http.Handler
	if cfg.Debug {
		memory = memoryHandler(client.CloseIdleConnections)
	}
	stopping := &atomic.Bool{}
	h := tracedHandler(routes(quotes, st, stopping, memory, errorWriter(cfg, logger), cfg.writeTimeout()), cfg.tracer)
	return &gateway{handler: h, stats: st, stopping: stopping}, closeFn
}

// upstreamClient returns the client both gateways reach the upstream
// with: enough idle connections kept for the load of a benchmark. It does
// not follow redirects: the upstream contract has none, and following
// them would send the gateway wherever the upstream points (a redirect
// loop cost ten requests per attempt); a 3xx is a broken upstream, 502.
// It reads no header longer than maxUpstreamHeader.
func upstreamClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	t.MaxResponseHeaderBytes = maxUpstreamHeader
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// maxUpstreamHeader bounds the header of an upstream answer, as
// maxUpstreamBody bounds its body: net/http's default, 10 MB, let a
// broken upstream make the gateway hold ten times more for a header than
// for a body, per symbol of each request. A longer one is a CommError,
// retried as a body too long is.
const maxUpstreamHeader = 64 << 10

// maxProbeTimeout bounds the wait of probeUpstream, whatever
// -attempt-timeout: an upstream that drops connections silently delays the
// start by no more.
const maxProbeTimeout = time.Second

// probeUpstream asks the upstream at base for a known symbol's price once,
// within timeout, as a request's attempt would, and logs a warning naming
// it if that fails: no answer, or a status that is neither a price nor an
// unknown symbol. The gateway serves anyway (the upstream may come up
// later), but says at start why its quotes fail, rather than leave it to
// the first request's 502 after its retries. An unknown symbol is warned
// about too: a wrong base URL (a path missing or too many) is answered
// 404 by most servers, and every request would then be a 400 unknown
// symbol, which the gateway does not log.
func probeUpstream(ctx context.Context, client *http.Client, base string, timeout time.Duration, logger *slog.Logger) {
	probeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status, err := probe(probeCtx, client, priceURL(base, knownSymbols[0]))
	switch {
	case ctx.Err() != nil:
	case err != nil:
		logger.Warn("upstream probe failed, serving anyway", "upstream", redacted(base), "err", err)
	case status == http.StatusNotFound:
		logger.Warn("upstream probe: "+knownSymbols[0]+" is an unknown symbol, serving anyway: check the base URL",
			"upstream", redacted(base))
	}
}

// redacted returns the URL s with the password of its user information,
// if it has one, replaced by "***", as net/http's errors give it: an
// -upstream may carry the credentials the gateway sends, which a log line
// must not. validateUpstreamURL has parsed s.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return redactedURL(u)
}

// redactedURL is redacted for a parsed URL.
func redactedURL(u *url.URL) string {
	if _, ok := u.User.Password(); !ok {
		return u.String()
	}
	return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
}

// probe makes the request of probeUpstream and returns the status of its
// answer, or the error of no answer or of a status that is neither a
// price nor an unknown symbol.
func probe(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, upstreamBody(resp, maxUpstreamBody)) //nolint:errcheck // read to reuse the connection
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return resp.StatusCode, fmt.Errorf("GET %s: status %d", redactedURL(req.URL), resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// startUpstream starts the embedded upstream on a free loopback port,
// traced with tp if not nil: its spans are those of the gateway's trace.
func startUpstream(o upstreamOptions, tp trace.TracerProvider) (*upstreamServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &upstreamServer{srv: &http.Server{Handler: tracedHandler(newUpstream(o), tp), ReadHeaderTimeout: 5 * time.Second}, URL: "http://" + ln.Addr().String()}
	go s.srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
	return s, nil
}

type upstreamServer struct {
	srv *http.Server
	URL string
}

func (s *upstreamServer) Close() { s.srv.Close() }

// errShutdown is the cause of the requests cancelled at shutdown.
var errShutdown = errors.New("server shutting down")

// serve serves h on ln until ctx ends; then it stops accepting, waits up
// to grace for the requests in flight, cancels those left (their flows are
// cancelled, and they are answered 503) and waits for them to end, at most
// closeDelay more before it closes their connections. With ready (not
// nil), it first marks the gateway not ready and serves on for its delay.
func serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger, ready *readiness) error {
	base, cancelAll := context.WithCancelCause(context.Background())
	defer cancelAll(nil)
	var inFlight atomic.Int64
	srv := newServer(counted(h, &inFlight), base, logger)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if err := ready.stop(served, logger); err != nil {
		return err
	}
	logger.Info("shutting down", "grace", grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(graceCtx); err == nil {
		logger.Info("all requests ended")
		return nil
	}
	logger.Warn("grace period over: cancelling the requests left", "n", inFlight.Load())
	cancelAll(errShutdown)
	// The cancelled requests are answered at once. A connection still
	// busy after closeDelay is one whose client does not read what it is
	// sent (a blocked write ignores the request's context): waiting for
	// it would never end, so it is closed.
	closeCtx, cancelClose := context.WithTimeout(context.Background(), closeDelay)
	defer cancelClose()
	if err := srv.Shutdown(closeCtx); err != nil {
		logger.Warn("closing the connections whose clients do not read their answers", "after", closeDelay)
		srv.Close() //nolint:errcheck // the listener is closed already
		return nil
	}
	logger.Info("all requests ended")
	return nil
}

// readiness is what serve does before its shutdown: the gateway's /readyz
// answers 503 once stopping is set, and it serves on for delay, so that a
// load balancer that polls the probe stops sending requests before they
// are refused. net/http closes a connection whose request it reads once
// its shutdown has begun without an answer: with no delay, the 503 reaches
// only the probes already in their handler.
type readiness struct {
	stopping *atomic.Bool
	delay    time.Duration
}

// stop marks the gateway stopping and waits for r's delay, or returns the
// error of a server that stopped serving meanwhile. A nil r does nothing.
func (r *readiness) stop(served <-chan error, logger *slog.Logger) error {
	if r == nil {
		return nil
	}
	r.stopping.Store(true)
	if r.delay <= 0 {
		return nil
	}
	logger.Info("not ready: serving on before the shutdown", "delay", r.delay)
	wait := time.NewTimer(r.delay)
	defer wait.Stop()
	select {
	case <-wait.C:
		return nil
	case err := <-served:
		return err
	}
}

// counted returns h keeping in n the number of its requests in flight:
// those the grace period leaves are logged with their number, which says
// how much a longer -grace would have saved.
func counted(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n.Add(1)
		defer n.Add(-1)
		h.ServeHTTP(w, req)
	})
}

// newServer returns the server of serve: requests get base as their
// context. A client has ReadHeaderTimeout to send its request's headers,
// and a keep-alive connection left idle is closed after IdleTimeout:
// without it, clients that leave connections open would hold a file
// descriptor each until the process runs out of them. A request's body
// has bodyWait (see boundBodyWait). (No ReadTimeout: net/http would
// cancel a request still served when it passed. No WriteTimeout: it would
// cut the profiles of -debug; the gateway's routes bound their writes,
// see boundWrites, and net/http's own answers have errorWriteWait, see
// boundNetHTTPAnswers.)
func newServer(h http.Handler, base context.Context, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handlerWrites(boundBodyWait(h)),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnState:         boundNetHTTPAnswers,
	}
}

// boundNetHTTPAnswers gives a connection a write deadline, errorWriteWait
// away, as net/http starts reading a request on it. net/http answers
// itself a request it cannot read (400, 431 Request Header Fields Too
// Large, 501), with no handler, so no route bounds that write: a client
// that does not read, whose socket the answers before were enough to
// fill, held the connection and its goroutine for good. (net/http clears
// a handler's deadline once its answer is written.) A handler starts with
// none, see handlerWrites.
func boundNetHTTPAnswers(c net.Conn, state http.ConnState) {
	if state == http.StateActive {
		c.SetWriteDeadline(time.Now().Add(errorWriteWait)) //nolint:errcheck // a closed connection has nothing to bound
	}
}

// handlerWrites returns h with no write deadline when it starts (see
// boundNetHTTPAnswers): its answer has what the handler sets, boundWrites
// for the gateway's routes, none for the upstream's, which answers after
// its latency.
func handlerWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) // refused only by a writer that cannot
		h.ServeHTTP(w, req)
	})
}

// errorWriteWait is how long net/http's own answer to a request it cannot
// read, a line of text written as soon as the request is read, has to be
// written (see boundNetHTTPAnswers).
const errorWriteWait = time.Second

// boundBodyWait returns h with a read deadline, bodyWait away, on each
// request that announces a body. No handler of the command reads one, but
// net/http reads what is left of it once the handler has answered (to
// find the next request, or to close the connection cleanly), before it
// sends the answer, or after when the client asked to be told to send it
// (Expect: 100-continue): with no read timeout (see newServer), a client
// that announced a body it never sends would hold its connection, and get
// no answer, for ever. Past the deadline the answer is sent and the
// connection closed. Nothing else reads the connection while the
// handler runs, so the deadline cancels no request: net/http reads the
// next request only once the body is read.
func boundBodyWait(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.ContentLength != 0 { // -1: chunked
			// Refused only by a writer that cannot: nothing to bound then.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyWait))
		}
		h.ServeHTTP(w, req)
	})
}

// bodyWait is how long, from its headers, the server waits for a
// request's body, which no handler reads (see boundBodyWait).
const bodyWait = time.Second

// closeDelay is how long serve waits, once it has cancelled the requests
// left at the end of the grace period, before it closes the connections
// still busy.
const closeDelay = time.Second
