package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// serviceName is the service.name of the spans -otlp-endpoint exports.
const serviceName = "asyncsteps-demo"

// tracesPath is the path of the OTLP/HTTP traces endpoint, which
// -otlp-endpoint appends to a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
// is read.
const tracesPath = "/v1/traces"

// validateOTLPEndpoint accepts an empty -otlp-endpoint (no tracing) or an
// absolute http or https URL with no query, fragment, user or password,
// which the exporter would drop: a collector that wants credentials would
// refuse every export, the spans lost with no sign at start. Credentials
// go in OTEL_EXPORTER_OTLP_HEADERS, which the exporter sends. Its error
// names s without a password.
func validateOTLPEndpoint(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-otlp-endpoint=%q: want an http:// or https:// URL with a host", redactedUserinfo(s))
	}
	if u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#") {
		return fmt.Errorf("-otlp-endpoint=%q: want a URL with no query or fragment", redactedUserinfo(s))
	}
	if u.User != nil {
		return fmt.Errorf("-otlp-endpoint=%q: want a URL with no user or password, which would not be sent: set OTEL_EXPORTER_OTLP_HEADERS", redactedUserinfo(s))
	}
	return nil
}

// tracesURL returns the URL the spans are posted to: endpoint itself if
// its path ends with /v1/traces, else endpoint with /v1/traces appended,
// so that a collector's base URL (http://localhost:4318) and its traces
// URL both work. validateOTLPEndpoint has accepted endpoint.
func tracesURL(endpoint string) string {
	u, _ := url.Parse(endpoint)
	if !strings.HasSuffix(u.Path, tracesPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String()
}

// startTracing returns the tracer provider that exports, in batches, the
// spans of the gateway to the OTLP/HTTP collector at endpoint, and sets
// the W3C TraceContext propagator globally, which otelhttp reads: without
// it, no traceparent would be sent to the upstream nor read from the
// gateway's clients. The exporter's failures (a collector down) are
// logged at Warn rather than by otel's default logger, in the format of
// the gateway's log. Nothing is connected to until the first export.
func startTracing(endpoint string, logger *slog.Logger) (*sdktrace.TracerProvider, error) {
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(tracesURL(endpoint)))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(serviceName))),
	)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing", "err", err)
	}))
	return tp, nil
}

// traceFlushTimeout bounds how long stopTracing waits for the collector
// to take the spans left: long enough for a collector that answers, short
// enough that one that hangs does not hold the exit for long. It is not
// -grace, the time the requests in flight have to end: a -grace of 0,
// for a quick restart, would send none of the spans of the last requests.
// A variable for the tests.
var traceFlushTimeout = 5 * time.Second

// stopTracing exports the spans left and stops tp, within
// traceFlushTimeout: it is called once the server has stopped, when
// every request's spans have ended, so that those of the last requests
// are not lost.
func stopTracing(tp *sdktrace.TracerProvider, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: the spans left were not all exported", "err", err)
	}
}

// tracedHandler returns h with a server span per request, a child of the
// span its traceparent names, if any; h itself without tracing (tp nil).
// The requests of probes, scrapes and profiles get no span (see
// tracedRequest).
func tracedHandler(h http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	return otelhttp.NewHandler(h, serviceName, otelhttp.WithTracerProvider(tp), otelhttp.WithFilter(tracedRequest))
}

// tracedRequest reports whether a request gets a trace: not those of
// health probes, metrics scrapes, /stats and the debug endpoints, which
// come every few seconds from machines and would bury the traces of the
// requests served.
func tracedRequest(req *http.Request) bool {
	switch p := req.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics", p == "/stats", strings.HasPrefix(p, "/debug/"):
		return false
	}
	return true
}

// tracedClient returns client making a client span per request, a child
// of the span in the request's context, and sending it as the traceparent;
// client itself without tracing (tp nil). The client returned does not
// close client's idle connections (otelhttp's transport does not pass
// CloseIdleConnections on): close them on client.
func tracedClient(client *http.Client, tp trace.TracerProvider) *http.Client {
	if tp == nil {
		return client
	}
	traced := *client
	traced.Transport = otelhttp.NewTransport(client.Transport, otelhttp.WithTracerProvider(tp))
	return &traced
}

// traceFlows sets on every loop of loops the hooks that give each flow a
// span, a child of its request's server span, and each Await (an upstream
// request) a span of its own, the parent of its client span; nothing
// without tracing (tp nil): the flows then run with no hooks at all.
func traceFlows(loops *asyncsteps.LoopGroup, tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	hooks := otelsteps.Hooks(otelsteps.Config{TracerProvider: tp})
	for _, loop := range loops.Loops() {
		loop.SetHooks(hooks)
	}
}
