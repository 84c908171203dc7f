package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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
	if port := u.Port(); port != "" { // none: the scheme's
		return dialPortError("otlp-endpoint", s, port)
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
// spans of the gateway to the OTLP/HTTP collector at endpoint, and the
// function that flushes them and stops it (see stopTracing). It sets the
// W3C TraceContext propagator globally, which otelhttp reads: without it,
// no traceparent would be sent to the upstream nor read from the
// gateway's clients. The spans reach the exporter as valid UTF-8 (see
// utf8Exporter). The failures of the exporter (a collector down) and
// what the SDK cannot read of the environment are logged at Warn rather
// than by otel's default logger, in the format of the gateway's log.
// Nothing is connected to until the first export.
func startTracing(endpoint string, logger *slog.Logger) (*sdktrace.TracerProvider, func(), error) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing", "err", err)
	}))
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(tracesURL(endpoint)))
	if err != nil {
		return nil, nil, err
	}
	open := newOpenSpans()
	tp := sdktrace.NewTracerProvider(
		// The batcher first: a span's end reaches the processors in
		// this order, and once open forgets the span stopTracing may
		// shut the batcher down, which drops what it is given after.
		sdktrace.WithBatcher(utf8Exporter{exporter}),
		sdktrace.WithSpanProcessor(open),
		sdktrace.WithResource(tracingResource()),
	)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp, func() { stopTracing(tp, open, logger) }, nil
}

// utf8Exporter passes the spans on to the exporter it wraps with every
// string they hold valid UTF-8: OTLP's protobuf encoding refuses a string
// that is not, and with it the whole batch of spans. A client chooses the
// bytes of its request's path, User-Agent and X-Forwarded-For, which
// otelhttp records as they are: one request would lose the traces of all
// the requests exported with it. The resource, which every span holds,
// is the operator's: OTEL_RESOURCE_ATTRIBUTES is percent-decoded, and a
// byte decoded that is no UTF-8 (the é of Latin-1, %E9) would lose all
// the spans. Each run of bad bytes is made a U+FFFD. The instrumentation
// scopes are the program's (otelhttp's, otelsteps'), and left alone.
type utf8Exporter struct{ sdktrace.SpanExporter }

// ExportSpans exports spans, those that hold bad bytes fixed in a copy:
// the batch is the span processor's.
func (e utf8Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	var fixed []sdktrace.ReadOnlySpan
	var resources validResources
	for i, s := range spans {
		if v, ok := validSpanOf(s, &resources); ok {
			if fixed == nil {
				fixed = slices.Clone(spans)
			}
			fixed[i] = v
		}
	}
	if fixed != nil {
		spans = fixed
	}
	return e.SpanExporter.ExportSpans(ctx, spans)
}

// validResources makes the resources of spans valid UTF-8, and keeps the
// last it was asked about: the spans of a batch share the tracer
// provider's, which is read once.
type validResources struct {
	last, valid *resource.Resource
	fixed       bool
}

// of returns r made valid UTF-8, and true, if it is not.
func (m *validResources) of(r *resource.Resource) (*resource.Resource, bool) {
	if r != m.last {
		m.last = r
		m.valid, m.fixed = validResource(r)
	}
	return m.valid, m.fixed // the zero value's, for a nil r: nil, false
}

// validResource returns r made valid UTF-8, and true, if it is not: a
// copy, with the same schema URL.
func validResource(r *resource.Resource) (*resource.Resource, bool) {
	for it := r.Iter(); it.Next(); {
		kv := it.Attribute()
		_, badKey := validText(string(kv.Key))
		if _, badValue := validValue(kv.Value); badKey || badValue {
			attrs, _ := validAttributes(r.Attributes())
			return resource.NewWithAttributes(r.SchemaURL(), attrs...), true
		}
	}
	return r, false
}

// validSpan is a span whose name, attributes, events, links, status and
// resource are those of the span it embeds made valid UTF-8.
type validSpan struct {
	sdktrace.ReadOnlySpan
	res    *resource.Resource
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link
	status sdktrace.Status
}

func (s *validSpan) Name() string                     { return s.name }
func (s *validSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s *validSpan) Events() []sdktrace.Event         { return s.events }
func (s *validSpan) Links() []sdktrace.Link           { return s.links }
func (s *validSpan) Status() sdktrace.Status          { return s.status }
func (s *validSpan) Resource() *resource.Resource     { return s.res }

// validSpanOf returns s made valid UTF-8, and true, if it is not. A
// valid span, as nearly all are, costs no allocation: v stays on the
// stack, copied to the heap for a span that had bad bytes alone. Its
// resource is made valid by resources.
func validSpanOf(s sdktrace.ReadOnlySpan, resources *validResources) (sdktrace.ReadOnlySpan, bool) {
	v := validSpan{ReadOnlySpan: s, status: s.Status()}
	var fixedName, fixedAttrs, fixedDesc, fixedRes bool
	v.res, fixedRes = resources.of(s.Resource())
	v.name, fixedName = validText(s.Name())
	v.attrs, fixedAttrs = validAttributes(s.Attributes())
	v.status.Description, fixedDesc = validText(v.status.Description)
	fixedEvents, fixedLinks := false, false
	events := s.Events()
	for i, e := range events {
		name, n := validText(e.Name)
		attrs, a := validAttributes(e.Attributes)
		if n || a {
			if !fixedEvents {
				events, fixedEvents = slices.Clone(events), true
			}
			events[i].Name, events[i].Attributes = name, attrs
		}
	}
	links := s.Links()
	for i, l := range links {
		if attrs, a := validAttributes(l.Attributes); a {
			if !fixedLinks {
				links, fixedLinks = slices.Clone(links), true
			}
			links[i].Attributes = attrs
		}
	}
	if !fixedName && !fixedAttrs && !fixedDesc && !fixedEvents && !fixedLinks && !fixedRes {
		return s, false
	}
	v.events, v.links = events, links
	fixed := new(validSpan)
	*fixed = v
	return fixed, true
}

// validAttributes returns attrs with their keys and texts valid UTF-8, in
// a copy, and true, if any is not.
func validAttributes(attrs []attribute.KeyValue) ([]attribute.KeyValue, bool) {
	var fixed []attribute.KeyValue
	for i, kv := range attrs {
		key, k := validText(string(kv.Key))
		value, ok := validValue(kv.Value)
		if k || ok {
			if fixed == nil {
				fixed = slices.Clone(attrs)
			}
			fixed[i] = attribute.KeyValue{Key: attribute.Key(key), Value: value}
		}
	}
	if fixed == nil {
		return attrs, false
	}
	return fixed, true
}

// validValue returns v with its texts valid UTF-8, and true, if any is
// not: a string, those of a slice of strings, and those within a slice
// or a map of values.
func validValue(v attribute.Value) (attribute.Value, bool) {
	switch v.Type() {
	case attribute.STRING:
		if s, fixed := validText(v.AsString()); fixed {
			return attribute.StringValue(s), true
		}
	case attribute.STRINGSLICE:
		if ss := v.AsStringSlice(); validEach(ss, validText) {
			return attribute.StringSliceValue(ss), true
		}
	case attribute.SLICE:
		if vs := v.AsSlice(); validEach(vs, validValue) {
			return attribute.SliceValue(vs...), true
		}
	case attribute.MAP:
		if kvs, fixed := validAttributes(v.AsMap()); fixed {
			return attribute.MapValue(kvs...), true
		}
	}
	return v, false
}

// validEach makes each element of xs valid by valid, in place (xs is a
// copy: AsStringSlice and AsSlice return one), and reports whether any
// was not.
func validEach[T any](xs []T, valid func(T) (T, bool)) bool {
	fixed := false
	for i, x := range xs {
		var f bool
		xs[i], f = valid(x)
		fixed = fixed || f
	}
	return fixed
}

// validText returns s with each run of bytes that are not UTF-8 made a
// U+FFFD, and true, if s is not UTF-8.
func validText(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, false
	}
	return strings.ToValidUTF8(s, string(utf8.RuneError)), true
}

// tracingResource returns the resource of the spans: service.name
// asyncsteps-demo unless the standard environment variables name the
// service, OTEL_SERVICE_NAME first, then OTEL_RESOURCE_ATTRIBUTES, which
// adds its other attributes too (sdktrace.WithResource adds them under
// what it is given), as every OpenTelemetry SDK reads them.
func tracingResource() *resource.Resource {
	// The error is of a pair of OTEL_RESOURCE_ATTRIBUTES with no "=",
	// left out, the others applied: a typo costs an attribute, not the
	// traces. WithResource reads the environment again and reports it
	// through otel.Handle, to the log: once is enough.
	res, _ := resource.New(context.Background(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithFromEnv(),
	)
	return res
}

// traceFlushTimeout bounds how long stopTracing takes: long enough for a
// collector that answers, short enough that one that hangs does not hold
// the exit for long. It is not -grace, the time the requests in flight
// have to end: a -grace of 0, for a quick restart, would send none of the
// spans of the last requests. A variable for the tests.
var traceFlushTimeout = 5 * time.Second

// openAtExitEvent is the event of a span that stopTracing ended because it
// was still open: its end is the exit's, not that of what it measured.
const openAtExitEvent = "ended at exit, still open"

// stopTracing exports the spans left and stops tp, within
// traceFlushTimeout. It is called once the server and the embedded
// upstream have stopped; the spans still open then, those of the
// upstream's requests that end as it closes their connections say, are
// given a fifth of the bound to end, then ended by it, with the event
// openAtExitEvent, so that they are exported rather than dropped (the
// batch span processor drops a span that ends once it has shut down).
func stopTracing(tp *sdktrace.TracerProvider, open *openSpans, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	open.wait(traceFlushTimeout / 5)
	if n := open.endAll(); n > 0 {
		logger.Warn("tracing: spans still open at exit, ended now", "n", n)
	}
	if err := tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: the spans left were not all exported", "err", err)
	}
}

// openSpans is a span processor that keeps the spans started and not yet
// ended, for stopTracing. It comes after the batch span processor, so that
// a span it no longer keeps is one the batcher holds.
type openSpans struct {
	mu    sync.Mutex
	spans map[spanKey]sdktrace.ReadWriteSpan
	ended chan struct{} // closed when the last span open ends; nil unless wait waits
}

// spanKey identifies a span: OnEnd is given a copy of it, not the span.
type spanKey struct {
	trace trace.TraceID
	span  trace.SpanID
}

func newOpenSpans() *openSpans {
	return &openSpans{spans: map[spanKey]sdktrace.ReadWriteSpan{}}
}

func keyOf(sc trace.SpanContext) spanKey { return spanKey{sc.TraceID(), sc.SpanID()} }

// OnStart keeps s.
func (o *openSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans[keyOf(s.SpanContext())] = s
}

// openSpanForgotten, if not nil, is called by openSpans.OnEnd once it has
// forgotten a span: a test hook, which holds there the goroutine that
// ended the span while the tracing stops.
var openSpanForgotten func()

// OnEnd forgets s, and wakes wait if s was the last span open.
func (o *openSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	o.forget(s)
	if openSpanForgotten != nil {
		openSpanForgotten()
	}
}

// forget is OnEnd without its test hook.
func (o *openSpans) forget(s sdktrace.ReadOnlySpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.spans, keyOf(s.SpanContext()))
	if len(o.spans) == 0 && o.ended != nil {
		close(o.ended)
		o.ended = nil
	}
}

// Shutdown does nothing: stopTracing ends the spans left before tp's
// shutdown.
func (o *openSpans) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing: o exports nothing.
func (o *openSpans) ForceFlush(context.Context) error { return nil }

// wait returns once no span is open, or after d.
func (o *openSpans) wait(d time.Duration) {
	o.mu.Lock()
	if len(o.spans) == 0 {
		o.mu.Unlock()
		return
	}
	if o.ended == nil {
		o.ended = make(chan struct{})
	}
	ended := o.ended
	o.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
	}
}

// endAll ends the spans open, with the event openAtExitEvent, and returns
// how many.
func (o *openSpans) endAll() int {
	o.mu.Lock()
	left := make([]sdktrace.ReadWriteSpan, 0, len(o.spans))
	for _, s := range o.spans {
		left = append(left, s)
	}
	o.mu.Unlock()
	// Outside the lock: End calls OnEnd. A span its owner ends meanwhile
	// is ended once only: End does nothing to a span ended.
	for _, s := range left {
		s.AddEvent(openAtExitEvent)
		s.End()
	}
	return len(left)
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
// health probes, metrics scrapes, /stats, the embedded upstream's
// /counters and the debug endpoints, which
// come every few seconds from machines and would bury the traces of the
// requests served.
func tracedRequest(req *http.Request) bool {
	switch p := req.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics", p == "/stats", p == "/counters", strings.HasPrefix(p, "/debug/"):
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
