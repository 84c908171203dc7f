package otelsteps_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// traceContext is the propagator an application sets globally, for
// otelhttp's handler and transport to use.
var traceContext = propagation.TraceContext{}

// injecting is a transport that writes the trace context of each
// request's context into its header, as an otelhttp transport does.
type injecting struct{ next http.RoundTripper }

func (t injecting) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	traceContext.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.next.RoundTrip(req)
}

// serverSpans serves each request in a span that continues the trace of
// its header, as an otelhttp handler does.
func serverSpans(tracer trace.Tracer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := traceContext.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracer.Start(ctx, "server")
		defer span.End()
		next.ServeHTTP(w, req.WithContext(ctx))
	})
}

// A trace goes through a gateway of asynchttp.Handler and asynchttp.Client
// with otelhttp's handler and transport around them, in and out: the
// flow's span is a child of the server span of the request it serves,
// the Await's span a child of the flow's, and the upstream request,
// made with the Await's context (by Get, or by Do, whose request's own
// context gives way), carries the Await's span as its parent, in the
// caller's trace.
func TestTraceContextReachesTheUpstream(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		parent := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.HeaderCarrier(req.Header)))
		w.Write([]byte(parent.TraceID().String() + " " + parent.SpanID().String()))
	}))
	defer upstream.Close()
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	client := &asynchttp.Client{HTTP: &http.Client{Transport: injecting{transport}}}
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0x11},
		SpanID:     trace.SpanID{0x0b, 0x22},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})

	for _, c := range []struct {
		name string
		call func(as steps)
	}{
		{"Get", func(as steps) { client.Get(as, upstream.URL) }},
		{"Do", func(as steps) {
			// A request made under another span: the step's context is
			// the one sent.
			ctx, stale := sdktrace.NewTracerProvider().Tracer("stale").Start(context.Background(), "stale")
			stale.End()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
			client.Do(as, req)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
			gateway := serverSpans(tp.Tracer("server"), &asynchttp.Handler{
				Tool: func() asyncsteps.Tool { return loop },
				Flow: func(as steps, _ *http.Request) {
					c.call(as)
					as.Add(func(as steps, args ...any) {
						as.Success(asynchttp.Reply{Body: args[0].(*asynchttp.Response).Body})
					})
				},
			})
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			traceContext.Inject(trace.ContextWithRemoteSpanContext(context.Background(), caller),
				propagation.HeaderCarrier(req.Header))
			w := httptest.NewRecorder()
			gateway.ServeHTTP(w, req)

			want := strings.Join([]string{
				`asyncsteps.await <- asyncsteps.flow: Unset ""`,
				`asyncsteps.flow <- server: Unset ""`,
				`server <- ?: Unset ""`, // the caller's, in another process
			}, "\n")
			if got := describe(rec.Ended()); got != want {
				t.Errorf("spans:\n%s\nwant:\n%s", got, want)
			}
			var await trace.SpanContext
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID() != caller.TraceID() {
					t.Errorf("span %s in trace %s, want the caller's %s", s.Name(), s.SpanContext().TraceID(), caller.TraceID())
				}
				if s.Name() == otelsteps.AwaitSpan {
					await = s.SpanContext()
				}
			}
			if got, want := w.Body.String(), caller.TraceID().String()+" "+await.SpanID().String(); w.Code != http.StatusOK || got != want {
				t.Errorf("the upstream saw the parent %q (answer %d), want the Await's span %q", got, w.Code, want)
			}
		})
	}
}
