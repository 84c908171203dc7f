package otelsteps_test

import (
	"runtime"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// A typed nil provider (a *sdktrace.TracerProvider variable never set)
// made Hooks panic with a nil dereference at set-up; it means the global
// provider, as an untyped nil does.
func TestTypedNilProviderIsTheGlobalOne(t *testing.T) {
	var tp *sdktrace.TracerProvider
	runsOneStep(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
}

// runsOneStep runs a flow of one step on a TestTool with hooks h, and
// checks that it succeeds.
func runsOneStep(t *testing.T, h *asyncsteps.Hooks) {
	t.Helper()
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(h)
	as := asyncsteps.New(asyncsteps.WithTool(tt))
	as.Add(func(as steps, _ ...any) { as.Success("ok") })
	p := as.Promise()
	tt.Run()
	if r := <-p; r.Err != nil || len(r.Args) != 1 || r.Args[0] != "ok" {
		t.Fatalf("result %+v, want Args [ok]", r)
	}
}

type nilTracerProvider struct{ embedded.TracerProvider }

func (nilTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return nil }

// A provider whose Tracer returns nil made every flow's start hook
// panic; such a provider traces nothing.
func TestNilTracerTracesNothing(t *testing.T) {
	runsOneStep(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: nilTracerProvider{}}))
}

// A step that panics or calls runtime.Goexit ends its flow with an
// InternalError: the flow's span ends with that status and the event.
func TestPanicAndGoexitEndTheirSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	l := asyncsteps.NewLoop() // a Goexit would end a TestTool's caller
	defer l.Close()
	l.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
	var ps []<-chan asyncsteps.Result
	for _, f := range []func(){func() { panic("boom") }, runtime.Goexit} {
		as := asyncsteps.New(asyncsteps.WithTool(l))
		as.Add(func(steps, ...any) { f() })
		ps = append(ps, as.Promise())
	}
	for i, p := range ps {
		if r := <-p; r.Err == nil || r.Err.(*asyncsteps.Error).Code != asyncsteps.InternalError {
			t.Errorf("flow %d: result %+v, want InternalError", i, r)
		}
	}
	got := describe(rec.Ended())
	if n := strings.Count(got, "asyncsteps.flow <- -: Error \"InternalError"); n != 2 {
		t.Errorf("spans:\n%s\nwant 2 flow spans with status Error InternalError", got)
	}
	if n := strings.Count(got, "event asyncsteps.step_error asyncsteps.error.code=InternalError"); n != 2 {
		t.Errorf("spans:\n%s\nwant 2 InternalError events", got)
	}
}
