package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// otlpReceiver is an OTLP/HTTP traces endpoint: it keeps the spans posted
// to /v1/traces.
type otlpReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []receivedSpan
	bad   []string // what was wrong with the requests it could not read
}

// receivedSpan is what the tests check of a span.
type receivedSpan struct {
	service             string            // its resource's service.name
	resource            map[string]string // its resource's attributes
	traceID, id, parent string
	name                string
	kind                tracepb.Span_SpanKind
	status              tracepb.Status_StatusCode
	statusMessage       string
	attrs               map[string]string
	events              []string // the names of its events
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var export coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &export)
	}
	if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.mu.Lock()
		r.bad = append(r.bad, fmt.Sprintf("%s %s %s: %v", req.Method, req.URL, req.Header.Get("Content-Type"), err))
		r.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.GetResourceSpans() {
		resource := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{
					service: resource["service.name"], resource: resource, traceID: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()),
					name: s.GetName(), kind: s.GetKind(),
					status: s.GetStatus().GetCode(), statusMessage: s.GetStatus().GetMessage(),
					attrs: attributes(s.GetAttributes()), events: eventNames(s.GetEvents()),
				})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out) //nolint:errcheck // the exporter may be gone
}

// attributes returns kvs as text, the way the tests compare them.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		default:
			m[kv.GetKey()] = fmt.Sprint(v)
		}
	}
	return m
}

// eventNames returns the names of events.
func eventNames(events []*tracepb.Span_Event) []string {
	var names []string
	for _, e := range events {
		names = append(names, e.GetName())
	}
	return names
}

// received returns the spans received so far, and fails t if a request
// could not be read.
func (r *otlpReceiver) received(t *testing.T) []receivedSpan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("requests the receiver could not read: %q", r.bad)
	}
	return slices.Clone(r.spans)
}

// tracedRun is the command run in process, as main runs it, with its
// flags and -otlp-endpoint naming r.
type tracedRun struct {
	url    string
	end    func() error // stops the command, returns run's error
	client *http.Client
}

// runTraced runs the command with args and -otlp-endpoint r's URL. The
// spans are exported only as it stops (see holdSpansUntilShutdown).
func runTraced(t *testing.T, r *otlpReceiver, args ...string) *tracedRun {
	t.Helper()
	return runInProcess(t, append([]string{"-otlp-endpoint", r.srv.URL}, args...)...)
}

// runInProcess runs the command with args in this process, as main does.
func runInProcess(t *testing.T, args ...string) *tracedRun {
	t.Helper()
	url, end := startRun(t, slog.New(slog.DiscardHandler), args...)
	return &tracedRun{url: url, end: end, client: &http.Client{}}
}

// get asks for path and returns the status of the answer.
func (g *tracedRun) get(t *testing.T, path string) int {
	t.Helper()
	resp, err := g.client.Get(g.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // read to reuse the connection
	return resp.StatusCode
}

// shutdown stops the command as SIGTERM does and waits for run to return.
func (g *tracedRun) shutdown(t *testing.T) {
	t.Helper()
	g.client.CloseIdleConnections()
	if err := g.end(); err != nil {
		t.Errorf("run: %v", err)
	}
}

// holdSpansUntilShutdown makes the batch span processor wait an hour
// before it exports what it holds: the spans a test receives are those
// its shutdown flushed.
func holdSpansUntilShutdown(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
}

// noGoroutinesLeft fails t unless the goroutines are back to before (the
// count at the test's start) within a few seconds: run, the receiver and
// the clients closed, nothing of the tracing may be left running.
func noGoroutinesLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines: %d, %d before the test:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// traceTree renders the spans of one trace as an indented tree, a span a
// line: its name, its kind and, for a client span, the symbol it asks
// for; siblings in the order of their lines. It fails t unless the spans
// are of one trace, with one root, every parent among them, all of the
// service asyncsteps-demo.
func traceTree(t *testing.T, spans []receivedSpan) string {
	t.Helper()
	children := map[string][]receivedSpan{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.id] = true
	}
	var roots int
	for _, s := range spans {
		if s.traceID != spans[0].traceID {
			t.Errorf("span %s of trace %s, want one trace, %s", s.name, s.traceID, spans[0].traceID)
		}
		if s.service != serviceName {
			t.Errorf("span %s of service %q, want %q", s.name, s.service, serviceName)
		}
		parent := s.parent
		if parent == "" {
			roots++
		} else if !ids[parent] {
			t.Errorf("span %s has a parent that is not in the trace", s.name)
		}
		children[parent] = append(children[parent], s)
	}
	if roots != 1 {
		t.Errorf("%d root spans, want 1", roots)
	}
	var render func(parent, indent string) []string
	render = func(parent, indent string) []string {
		var out []string
		for _, s := range children[parent] {
			line := indent + s.name + " " + strings.TrimPrefix(s.kind.String(), "SPAN_KIND_")
			if s.kind == tracepb.Span_SPAN_KIND_CLIENT {
				u, _ := url.Parse(s.attrs["url.full"])
				line += " " + u.Query().Get("symbol")
			}
			out = append(out, strings.Join(append([]string{line}, render(s.id, indent+"  ")...), "\n"))
		}
		slices.Sort(out)
		return out
	}
	return strings.Join(render("", ""), "\n")
}

// flowsTrace is the trace of /quote?symbols=AAPL,MSFT served by the
// flows gateway, as traceTree renders it; plainTrace by the plain one.
const (
	flowsTrace = `GET /quote SERVER
  asyncsteps.flow INTERNAL
    asyncsteps.await INTERNAL
      HTTP GET CLIENT AAPL
        GET SERVER
    asyncsteps.await INTERNAL
      HTTP GET CLIENT MSFT
        GET SERVER`
	plainTrace = `GET /quote SERVER
  HTTP GET CLIENT AAPL
    GET SERVER
  HTTP GET CLIENT MSFT
    GET SERVER`
)

// The trace of one /quote request with two symbols: the gateway's server
// span; for the flows gateway, the flow's span under it and an Await span
// per symbol under that; the upstream request's client span, and the
// embedded upstream's server span, a child of it through the traceparent.
// The spans of the request answered before the command stops are all
// exported by its shutdown, and nothing is left running after it. The
// probes and scrapes made before it leave no trace.
func TestTracingGivesOneTracePerRequest(t *testing.T) {
	for _, c := range []struct{ impl, want string }{{"flows", flowsTrace}, {"plain", plainTrace}} {
		t.Run(c.impl, func(t *testing.T) {
			holdSpansUntilShutdown(t)
			before := runtime.NumGoroutine()
			r := startOTLPReceiver(t)
			g := runTraced(t, r, "-impl", c.impl, "-upstream-fail", "0", "-upstream-latency", "0")
			for _, probe := range []string{"/healthz", "/readyz", "/metrics", "/stats"} {
				if status := g.get(t, probe); status != http.StatusOK {
					t.Fatalf("%s: status %d, want 200", probe, status)
				}
			}
			if status := g.get(t, "/quote?symbols=AAPL,MSFT"); status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			if spans := r.received(t); len(spans) != 0 {
				t.Fatalf("%d spans exported before the shutdown, want them held", len(spans))
			}
			g.shutdown(t)
			if got := traceTree(t, r.received(t)); got != c.want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, c.want)
			}
			r.srv.Close()
			noGoroutinesLeft(t, before)
		})
	}
}

// A request whose path, User-Agent or X-Forwarded-For is not UTF-8 (any
// client may send one) has its server span exported with each run of bad
// bytes in those attributes made a U+FFFD, and so have the spans it is
// exported with. OTLP's protobuf encoding refuses a string that is not
// UTF-8, and before, the exporter failed to encode the whole batch: the
// request lost the traces of every request exported with it, the one
// answered before it here.
func TestTracingExportsARequestThatIsNotUTF8(t *testing.T) {
	holdSpansUntilShutdown(t)
	r := startOTLPReceiver(t)
	g := runTraced(t, r, "-impl", "flows", "-upstream-fail", "0", "-upstream-latency", "0")
	if status := g.get(t, "/quote?symbols=AAPL,MSFT"); status != http.StatusOK {
		t.Fatalf("status %d, want 200", status)
	}
	req, err := http.NewRequest(http.MethodGet, g.url+"/quote%ff", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "probe/\xfe1")
	req.Header.Set("X-Forwarded-For", "\xff")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
	g.shutdown(t)
	var answered []receivedSpan
	bad := "none"
	for _, s := range r.received(t) {
		switch {
		case s.attrs["url.path"] == "/quote\uFFFD":
			bad = fmt.Sprintf("%s: user_agent.original=%q client.address=%q", s.name,
				s.attrs["user_agent.original"], s.attrs["client.address"])
		default:
			answered = append(answered, s)
		}
	}
	if want := "GET /: user_agent.original=\"probe/\uFFFD1\" client.address=\"\uFFFD\""; bad != want {
		t.Errorf("the server span of the request not UTF-8: %s, want %s", bad, want)
	}
	if got := traceTree(t, answered); got != flowsTrace {
		t.Errorf("the trace of the request answered before:\n%s\nwant:\n%s", got, flowsTrace)
	}
}

// validSpanOf fixes every text a span exports: its name, the keys and
// texts of its attributes (within slices and maps too), its events' names
// and attributes, its links' attributes, its status description and its
// resource's attributes; and leaves a span that is valid UTF-8 as it is.
func TestValidSpanOf(t *testing.T) {
	const bad, fixed = "a\xffb", "a\uFFFDb"
	badAttrs := []attribute.KeyValue{
		attribute.String("ok", "ok"), attribute.Int("n", 1), attribute.String(bad, bad),
		attribute.StringSlice("ss", []string{"ok", bad}),
		attribute.Slice("s", attribute.StringValue(bad), attribute.IntValue(2)),
		attribute.Map("m", attribute.String("k", bad)),
	}
	fixedAttrs := []attribute.KeyValue{
		attribute.String("ok", "ok"), attribute.Int("n", 1), attribute.String(fixed, fixed),
		attribute.StringSlice("ss", []string{"ok", fixed}),
		attribute.Slice("s", attribute.StringValue(fixed), attribute.IntValue(2)),
		attribute.Map("m", attribute.String("k", fixed)),
	}
	span := tracetest.SpanStub{
		Name:       bad,
		Attributes: badAttrs,
		Events:     []sdktrace.Event{{Name: "ok"}, {Name: bad, Attributes: badAttrs}},
		Links:      []sdktrace.Link{{Attributes: badAttrs}},
		Status:     sdktrace.Status{Code: codes.Error, Description: bad},
		Resource:   resource.NewSchemaless(attribute.String("env", bad)),
	}.Snapshot()
	v, ok := validSpanOf(span, &validResources{})
	summary := func(s sdktrace.ReadOnlySpan) string {
		return fmt.Sprint(s.Name(), s.Attributes(), s.Events()[1].Name, s.Events()[1].Attributes,
			s.Links()[0].Attributes, s.Status(), s.Resource().Attributes())
	}
	want := fmt.Sprint(fixed, fixedAttrs, fixed, fixedAttrs, fixedAttrs, sdktrace.Status{Code: codes.Error, Description: fixed},
		[]attribute.KeyValue{attribute.String("env", fixed)})
	if got := summary(v); !ok || got != want {
		t.Errorf("validSpanOf = %s, %v; want %s, true", got, ok, want)
	}
	if got := summary(span); got == want {
		t.Errorf("validSpanOf changed the span it was given")
	}
	valid := tracetest.SpanStub{Name: "ok", Attributes: fixedAttrs}.Snapshot()
	if _, ok := validSpanOf(valid, &validResources{}); ok {
		t.Errorf("validSpanOf fixed a span that is valid UTF-8")
	}
}

// A batch of spans that are valid UTF-8, as nearly all are, goes to the
// exporter as it is, at the cost of reading their texts: no allocation.
// Before, the copy of each span that validSpanOf makes of a span with bad
// bytes was made for every span, and dropped.
func TestUTF8ExporterAllocatesNothingForValidSpans(t *testing.T) {
	attrs := []attribute.KeyValue{attribute.String("url.path", "/quote"), attribute.Int("http.response.status_code", 200)}
	res := tracingResource()
	batch := []sdktrace.ReadOnlySpan{
		tracetest.SpanStub{Name: "GET /quote", Attributes: attrs, Resource: res}.Snapshot(),
		tracetest.SpanStub{Name: "asyncsteps.flow", Events: []sdktrace.Event{{Name: "e", Attributes: attrs}}, Resource: res}.Snapshot(),
	}
	exp := utf8Exporter{tracetest.NewNoopExporter()}
	if n := testing.AllocsPerRun(100, func() { exp.ExportSpans(context.Background(), batch) }); n != 0 {
		t.Errorf("%v allocations for a batch of %d valid spans, want 0", n, len(batch))
	}
}

// A request that times out (504) fails its flow's span: status Error,
// with the code.
func TestTracingFailsTheFlowSpanOfA504(t *testing.T) {
	holdSpansUntilShutdown(t)
	before := runtime.NumGoroutine()
	r := startOTLPReceiver(t)
	g := runTraced(t, r, "-upstream-fail", "0", "-upstream-latency", "1h", "-timeout", "50ms", "-attempt-timeout", "1s", "-retries", "0")
	if status := g.get(t, "/quote?symbols=AAPL"); status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", status)
	}
	g.shutdown(t)
	var flows []receivedSpan
	var server receivedSpan
	for _, s := range r.received(t) {
		switch s.name {
		case otelsteps.FlowSpan:
			flows = append(flows, s)
		case "GET /quote":
			server = s
		}
	}
	if len(flows) != 1 {
		t.Fatalf("%d flow spans, want 1", len(flows))
	}
	f := flows[0]
	if f.status != tracepb.Status_STATUS_CODE_ERROR || f.statusMessage != "Timeout" ||
		f.attrs[string(otelsteps.CodeKey)] != "Timeout" || f.attrs["error.type"] != "Timeout" || f.parent != server.id {
		t.Errorf("flow span: %+v, want status Error \"Timeout\", code Timeout, a child of the server span %s", f, server.id)
	}
	if server.attrs["http.response.status_code"] != "504" {
		t.Errorf("server span: %+v, want status code 504", server)
	}
	r.srv.Close()
	noGoroutinesLeft(t, before)
}

// SIGTERM flushes the spans: those of a request answered just before it,
// which the batch span processor still holds, reach the collector before
// the command exits.
func TestTracingSIGTERMExportsTheSpansHeld(t *testing.T) {
	holdSpansUntilShutdown(t) // the child process inherits it
	r := startOTLPReceiver(t)
	p := startProgram(t, "-addr", "127.0.0.1:0", "-otlp-endpoint", r.srv.URL, "-upstream-fail", "0", "-upstream-latency", "0")
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Get(p.url + "/quote?symbols=AAPL,MSFT")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if spans := r.received(t); len(spans) != 0 {
		t.Fatalf("%d spans exported before SIGTERM, want them held", len(spans))
	}
	p.stop(t)
	if got := traceTree(t, r.received(t)); got != flowsTrace {
		t.Errorf("trace:\n%s\nwant:\n%s", got, flowsTrace)
	}
}

// The spans of the last requests are sent at shutdown also with a -grace
// of 0: the flush has its own bound, not the requests' grace.
func TestTracingFlushesWithNoGrace(t *testing.T) {
	holdSpansUntilShutdown(t)
	r := startOTLPReceiver(t)
	g := runTraced(t, r, "-grace", "0s", "-upstream-fail", "0", "-upstream-latency", "0")
	if status := g.get(t, "/quote?symbols=AAPL,MSFT"); status != http.StatusOK {
		t.Fatalf("status %d, want 200", status)
	}
	g.shutdown(t)
	if got := traceTree(t, r.received(t)); got != flowsTrace {
		t.Errorf("trace:\n%s\nwant:\n%s", got, flowsTrace)
	}
}

// A collector that never answers holds the exit for traceFlushTimeout at
// most, and what could not be sent is logged, not returned as the
// command's error.
func TestTracingHungCollectorDelaysTheExitBoundedly(t *testing.T) {
	holdSpansUntilShutdown(t)
	prev := traceFlushTimeout
	traceFlushTimeout = 300 * time.Millisecond
	t.Cleanup(func() { traceFlushTimeout = prev })
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	g := runInProcess(t, "-otlp-endpoint", hung.URL, "-grace", "0s", "-upstream-fail", "0", "-upstream-latency", "0")
	if status := g.get(t, "/quote?symbols=AAPL"); status != http.StatusOK {
		t.Fatalf("status %d, want 200", status)
	}
	start := time.Now()
	g.shutdown(t)
	if took := time.Since(start); took < traceFlushTimeout || took > traceFlushTimeout+5*time.Second {
		t.Errorf("shutdown took %v, want about the flush bound, %v", took, traceFlushTimeout)
	}
}

// Without -otlp-endpoint nothing traces: no otelhttp handler or
// transport, no otelsteps hooks, which would all trace with the global
// tracer provider, set here to one that records. A request that names a
// parent span in its traceparent leaves no span either.
func TestNoOTLPEndpointTracesNothing(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(previous); tp.Shutdown(context.Background()) })
	for _, impl := range []string{"flows", "plain"} {
		g := runInProcess(t, "-impl", impl, "-upstream-fail", "0", "-upstream-latency", "0")
		req, _ := http.NewRequest(http.MethodGet, g.url+"/quote?symbols=AAPL,MSFT", nil)
		req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, want 200", impl, resp.StatusCode)
		}
		g.shutdown(t)
	}
	if started, ended := len(recorder.Started()), len(recorder.Ended()); started+ended != 0 {
		t.Errorf("%d spans started, %d ended, want none", started, ended)
	}
}

// A collector's credentials, which -otlp-endpoint refuses in its URL, are
// sent from OTEL_EXPORTER_OTLP_HEADERS with every export.
func TestTracingSendsTheHeadersOfTheEnvironment(t *testing.T) {
	holdSpansUntilShutdown(t)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic YWxpY2U6aHVudGVyMg==")
	var mu sync.Mutex
	var seen []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.URL.Path+" "+req.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer collector.Close()
	g := runInProcess(t, "-otlp-endpoint", collector.URL, "-upstream-fail", "0", "-upstream-latency", "0")
	if status := g.get(t, "/quote?symbols=AAPL"); status != http.StatusOK {
		t.Fatalf("status %d, want 200", status)
	}
	g.shutdown(t)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/v1/traces Basic YWxpY2U6aHVudGVyMg=="}; !slices.Equal(seen, want) {
		t.Errorf("exports: %q, want %q", seen, want)
	}
}

// flowsTraceAAPL is the trace of /quote?symbols=AAPL served by the flows
// gateway, as traceTree renders it.
const flowsTraceAAPL = `GET /quote SERVER
  asyncsteps.flow INTERNAL
    asyncsteps.await INTERNAL
      HTTP GET CLIENT AAPL
        GET SERVER`

// SIGTERM with two requests in flight at the embedded upstream: the
// gateway's, for a /quote request, and one a client sent the upstream
// itself, in the trace its traceparent names. Once -grace is over the
// gateway's request is cancelled and answered 503; the upstream answers
// its requests 503 as its connections close, the client's only once the
// gateway has stopped. The spans of both, those that end after the
// gateway has stopped too, are exported: the whole trace of the /quote
// request, and the upstream's server span of the client's request, a
// child of the client's span, answered 503.
func TestTracingSIGTERMExportsTheUpstreamSpansInFlight(t *testing.T) {
	holdSpansUntilShutdown(t) // the child process inherits it
	r := startOTLPReceiver(t)
	p := startProgram(t, "-addr", "127.0.0.1:0", "-otlp-endpoint", r.srv.URL, "-grace", "0s",
		"-upstream-fail", "0", "-upstream-latency", "1h", "-retries", "0")
	upstream := embeddedUpstreamURL(t, p)
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	quote := goGetStatus(t, p.url+"/quote?symbols=AAPL", "")
	direct := goGetStatus(t, upstream+"/price?symbol=MSFT", "00-"+clientTrace+"-"+clientSpan+"-01")
	waitUpstreamInFlight(t, upstream, 2)
	p.stop(t)
	if status := <-quote; status != http.StatusServiceUnavailable {
		t.Errorf("/quote: status %d, want 503", status)
	}
	if status := <-direct; status != 0 && status != http.StatusServiceUnavailable {
		t.Errorf("/price: status %d, want 503 or the connection closed", status)
	}
	byTrace := map[string][]receivedSpan{}
	for _, s := range r.received(t) {
		byTrace[s.traceID] = append(byTrace[s.traceID], s)
	}
	const want = "GET SERVER of asyncsteps-demo, parent " + clientSpan + ", /price answered 503, status ERROR"
	if got := byTrace[clientTrace]; len(got) != 1 || serverSpanLine(got[0]) != want {
		t.Errorf("the client's trace: %+v, want one span: %s", got, want)
	}
	delete(byTrace, clientTrace)
	if len(byTrace) != 1 {
		t.Fatalf("%d traces besides the client's, want 1: %+v", len(byTrace), byTrace)
	}
	for _, spans := range byTrace {
		if got := traceTree(t, spans); got != flowsTraceAAPL {
			t.Errorf("trace:\n%s\nwant:\n%s", got, flowsTraceAAPL)
		}
	}
}

// serverSpanLine renders what a test checks of a server span.
func serverSpanLine(s receivedSpan) string {
	return fmt.Sprintf("%s %s of %s, parent %s, %s answered %s, status %s", s.name, strings.TrimPrefix(s.kind.String(), "SPAN_KIND_"),
		s.service, s.parent, s.attrs["url.path"], s.attrs["http.response.status_code"], strings.TrimPrefix(s.status.String(), "STATUS_CODE_"))
}

// goGetStatus sends GET url, with traceparent unless empty, on a goroutine
// of its own; the channel returned gets the answer's status, 0 if none
// came.
func goGetStatus(t *testing.T, url, traceparent string) <-chan int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	status := make(chan int, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	return status
}

// embeddedUpstreamURL returns the URL of p's embedded upstream, which its
// log names before it serves.
func embeddedUpstreamURL(t *testing.T, p *program) string {
	t.Helper()
	_, rest, ok := strings.Cut(p.logs.String(), `msg="embedded upstream started" url=`)
	if !ok {
		t.Fatalf("no embedded upstream in the log:\n%s", p.logs)
	}
	url, _, _ := strings.Cut(rest, " ")
	return url
}

// waitUpstreamInFlight waits until the embedded upstream at url serves n
// price requests, as its /counters says.
func waitUpstreamInFlight(t *testing.T, url string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var c upstreamCounters
		getJSON(t, url+"/counters", &c)
		if c.InFlight == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream counters %+v, want %d in flight", c, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A span still open when the tracing stops, past the fifth of the flush
// bound it is given to end, is ended then, with the event
// openAtExitEvent, and exported rather than dropped; the stop logs how
// many it ended. A span ended before is exported as it was.
func TestTracingEndsAndExportsTheSpansStillOpenAtExit(t *testing.T) {
	holdSpansUntilShutdown(t)
	prev := traceFlushTimeout
	// The open span waits a fifth of it, half a second; the export to the
	// receiver on loopback has the rest, ample under a loaded race run.
	traceFlushTimeout = 2500 * time.Millisecond
	t.Cleanup(func() { traceFlushTimeout = prev })
	r := startOTLPReceiver(t)
	var logs syncBuffer
	tp, stop, err := startTracing(r.srv.URL, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tracer := tp.Tracer("test")
	_, ended := tracer.Start(context.Background(), "ended")
	ended.End()
	_, open := tracer.Start(context.Background(), "open")
	defer open.End() // does nothing: the stop ended it
	stop()
	var got []string
	for _, s := range r.received(t) {
		got = append(got, fmt.Sprintf("%s %q", s.name, s.events))
	}
	slices.Sort(got)
	if want := []string{`ended []`, `open ["` + openAtExitEvent + `"]`}; !slices.Equal(got, want) {
		t.Errorf("spans exported: %q, want %q", got, want)
	}
	if want := `level=WARN msg="tracing: spans still open at exit, ended now" n=1`; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %s", logs.String(), want)
	}
}

// A span its owner ends as the tracing stops is exported: stopTracing,
// woken by the end of the last span open, may not shut the batch span
// processor down before the span has reached it, which would drop it.
// The hook holds the owner's goroutine once the span is forgotten as
// open, until the tracing has stopped.
func TestTracingExportsTheSpanEndedAsItStops(t *testing.T) {
	holdSpansUntilShutdown(t)
	r := startOTLPReceiver(t)
	tp, stop, err := startTracing(r.srv.URL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	forgotten, release := make(chan struct{}), make(chan struct{})
	openSpanForgotten = func() {
		close(forgotten)
		<-release
	}
	t.Cleanup(func() { openSpanForgotten = nil })
	_, span := tp.Tracer("test").Start(context.Background(), "last")
	ended := make(chan struct{})
	go func() {
		span.End()
		close(ended)
	}()
	<-forgotten
	stop()
	close(release)
	<-ended
	var got []string
	for _, s := range r.received(t) {
		got = append(got, s.name)
	}
	if want := []string{"last"}; !slices.Equal(got, want) {
		t.Errorf("spans exported: %q, want %q", got, want)
	}
}

// The standard environment variables name the service and add resource
// attributes: OTEL_SERVICE_NAME over the service.name of
// OTEL_RESOURCE_ATTRIBUTES, over asyncsteps-demo. A pair of
// OTEL_RESOURCE_ATTRIBUTES with no "=" is left out, with a warning; the
// others apply. A value that is not UTF-8 once percent-decoded is sent
// with each run of bad bytes made a U+FFFD: before, the OTLP exporter
// refused every batch, as the resource is in each.
func TestTracingResourceFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		name, service, attributes string
		want                      map[string]string
		warnings                  int // of the pair "broken"
	}{
		{name: "OTEL_SERVICE_NAME wins", service: "quotes-eu", attributes: "service.name=other,deployment.environment.name=staging",
			want: map[string]string{"service.name": "quotes-eu", "deployment.environment.name": "staging"}},
		{name: "OTEL_RESOURCE_ATTRIBUTES with a bad pair", attributes: "service.name=quotes-us,broken,deployment.environment.name=prod",
			want: map[string]string{"service.name": "quotes-us", "deployment.environment.name": "prod"}, warnings: 1},
		{name: "OTEL_RESOURCE_ATTRIBUTES with no service.name", attributes: "deployment.environment.name=prod",
			want: map[string]string{"service.name": serviceName, "deployment.environment.name": "prod"}},
		// Percent-decoded, as the SDK reads it: "%E9" is the é of
		// Latin-1, no UTF-8, which OTLP refused with every batch.
		{name: "OTEL_RESOURCE_ATTRIBUTES not UTF-8", attributes: "deployment.environment.name=pr%E9-prod",
			want: map[string]string{"service.name": serviceName, "deployment.environment.name": "pr\uFFFD-prod"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			holdSpansUntilShutdown(t)
			t.Setenv("OTEL_SERVICE_NAME", c.service)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", c.attributes)
			r := startOTLPReceiver(t)
			var logs syncBuffer
			url, end := startRun(t, slog.New(slog.NewTextHandler(&logs, nil)),
				"-otlp-endpoint", r.srv.URL, "-upstream-fail", "0", "-upstream-latency", "0")
			g := &tracedRun{url: url, end: end, client: &http.Client{}}
			if status := g.get(t, "/quote?symbols=AAPL"); status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			g.shutdown(t)
			spans := r.received(t)
			if len(spans) != 5 {
				t.Errorf("%d spans, want 5", len(spans))
			}
			for _, s := range spans {
				if !maps.Equal(s.resource, c.want) {
					t.Errorf("span %s: resource %q, want %q", s.name, s.resource, c.want)
				}
			}
			warning := `level=WARN msg=tracing err="partial resource: missing value: [broken]"`
			if n := strings.Count(logs.String(), warning); n != c.warnings {
				t.Errorf("log:\n%s\nwant %d lines with %s", logs.String(), c.warnings, warning)
			}
		})
	}
}
