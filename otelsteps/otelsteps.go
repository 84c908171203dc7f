// Package otelsteps traces asyncsteps flows with OpenTelemetry: a span per
// flow and a span per Await call, a child of its flow's span.
//
// Set the hooks it returns on the tools that run the flows:
//
//	loop.SetHooks(otelsteps.Hooks(otelsteps.Config{}))
//
// A flow's span is a child of the span in the context given to
// [asyncsteps.Root.Run], if any (the server span of the request being
// handled, typically), and the context an Await function gets carries the
// Await's span, so that what the function traces (an outgoing HTTP call)
// is its child. The error a flow or an Await fails with sets its span's
// status to Error, with the error as description and its code in the
// attribute asyncsteps.error.code; each step error, also one that a
// handler recovers from, is an event of the flow's span. A cancelled flow
// is not an error: its span has the attribute asyncsteps.canceled, and so
// has the span of an Await cancelled with its step (its flow cancelled,
// its loop closed, a sibling branch failed), whatever its function
// returned then; the span of an Await whose step timed out is a Timeout,
// also when its function, ignoring its context, succeeded later.
//
// A flow whose span the tracer does not give back (its sampler or a span
// processor panics as the span starts) fails with an InternalError, as
// for any panic of a hook that starts a flow, and has no span: the span
// in its context, its caller's, is left alone.
package otelsteps

import (
	"context"
	"errors"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/asyncsteps/asyncsteps/otelsteps"

// Names of the spans, the event and the attributes this package writes.
const (
	FlowSpan       = "asyncsteps.flow"
	AwaitSpan      = "asyncsteps.await"
	StepErrorEvent = "asyncsteps.step_error"
	CodeKey        = attribute.Key("asyncsteps.error.code")
	InfoKey        = attribute.Key("asyncsteps.error.info")
	CanceledKey    = attribute.Key("asyncsteps.canceled")
)

// Config configures [Hooks]. The zero value traces with the global tracer
// provider.
type Config struct {
	// TracerProvider makes the tracer; nil, also a typed nil such as a
	// *sdktrace.TracerProvider never set, means otel.GetTracerProvider().
	// A provider whose Tracer returns nil traces nothing.
	TracerProvider trace.TracerProvider
}

// Hooks returns the hooks that trace flows and Await calls as the package
// doc says. They may be set on any number of tools at once.
func Hooks(c Config) *asyncsteps.Hooks {
	tp := c.TracerProvider
	if isNil(tp) {
		tp = otel.GetTracerProvider()
	}
	t := tracer{tp.Tracer(ScopeName)}
	if isNil(t.Tracer) {
		t.Tracer = noop.NewTracerProvider().Tracer(ScopeName)
	}
	return &asyncsteps.Hooks{
		FlowStart:  t.flowStart,
		FlowEnd:    flowEnd,
		StepError:  stepError,
		AwaitStart: t.awaitStart,
		AwaitEnd:   awaitEnd,
	}
}

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, func or channel: calling a method on it would likely dereference nil.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

type tracer struct{ trace.Tracer }

// flowSpanKey keys the span of a flow in the flow's context.
type flowSpanKey struct{}

func (t tracer) flowStart(ctx context.Context) context.Context {
	ctx, span := t.Start(ctx, FlowSpan)
	return context.WithValue(ctx, flowSpanKey{}, span)
}

// flowSpan returns the span of the flow whose context is ctx. ok is false
// when flowStart did not return (the tracer panicked, or a span processor
// called runtime.Goexit): the flow then has the context it began with,
// whose span is its caller's, or an outer flow's (an Await's function ran
// the flow), and neither is this flow's to fail or end.
func flowSpan(ctx context.Context) (span trace.Span, ok bool) {
	span = trace.SpanFromContext(ctx)
	own, _ := ctx.Value(flowSpanKey{}).(trace.Span)
	if own == nil {
		return nil, false
	}
	a, b := own.SpanContext(), span.SpanContext()
	return span, a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}

func (t tracer) awaitStart(ctx context.Context) context.Context {
	ctx, _ = t.Start(ctx, AwaitSpan)
	return ctx
}

func flowEnd(ctx context.Context, err error) {
	span, ok := flowSpan(ctx)
	if !ok {
		return
	}
	var e *asyncsteps.Error
	switch {
	case errors.As(err, &e):
		fail(span, e)
	case err != nil: // a cancel: not an error of the flow
		span.SetAttributes(CanceledKey.Bool(true))
	}
	span.End()
}

func awaitEnd(ctx context.Context, err *asyncsteps.Error) {
	span := trace.SpanFromContext(ctx)
	// A context ended before the function returned: the step was
	// cancelled or timed out, whatever the function returned then (often
	// ctx.Err(), which would read as an InternalError).
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		span.SetAttributes(CanceledKey.Bool(true))
	case cause != nil:
		fail(span, asyncsteps.ErrorFrom(cause))
	case err != nil:
		fail(span, err)
	}
	span.End()
}

func stepError(ctx context.Context, err *asyncsteps.Error) {
	if span, ok := flowSpan(ctx); ok {
		span.AddEvent(StepErrorEvent,
			trace.WithAttributes(CodeKey.String(err.Code), InfoKey.String(err.Info)))
	}
}

func fail(span trace.Span, err *asyncsteps.Error) {
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(CodeKey.String(err.Code))
}
