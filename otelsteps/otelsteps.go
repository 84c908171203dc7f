// Package otelsteps traces asyncsteps flows with OpenTelemetry: a span per
// flow and a span per Await call, a child of its flow's span; and, if
// asked to, measures them.
//
// Set the hooks it returns on the tools that run the flows:
//
//	loop.SetHooks(otelsteps.Hooks(otelsteps.Config{}))
//
// They are [asyncsteps.Hooks]: what each one receives, when it runs, and
// what becomes of a hook that panics are in the repository's
// docs/DESIGN.md#hooks.
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
// returned then; the span of an Await whose step timed out (its
// SetTimeout, or Run's deadline) is a Timeout as its flow's span is,
// described "Timeout" with no info, the error the step's handlers see,
// also when its function, ignoring its context, succeeded later.
//
// A flow whose span the tracer does not give back (its sampler or a span
// processor panics as the span starts) fails with an InternalError, as
// for any panic of a hook that starts a flow, and has no span: the span
// in its context, its caller's, is left alone, and so is an outer flow's
// when an Await function runs the flow.
//
// # Composing hooks
//
// An application with hooks of its own wraps those [Hooks] returns: its
// FlowStart calls theirs first and derives the flow's context from the
// one returned, to add attributes to the flow's span (the span in that
// context) or to put a span of its own on top, a child of the flow's,
// which the flow's Await spans are then children of; its other hooks
// call theirs, each once, with the context they were given. The flow's
// span then ends once, at the flow's end, with the flow's outcome, and
// has the step errors as events, whatever the context holds on top of
// it (see the example). A hook of the application's that keeps something
// of its own in the flow's context must look for it as these do: when a
// FlowStart fails, FlowEnd gets the context the flow began with, which,
// for a flow run by an Await function, holds what the outer flow's
// context holds (docs/DESIGN.md#hooks).
//
// # Metrics
//
// With a MeterProvider in the [Config], the hooks also record, in the
// same instrumentation scope, what the operator of a server wants of its
// flows:
//
//   - asyncsteps.flow.started: the flows begun.
//   - asyncsteps.flow.ended: the flows ended; a failed one with its
//     error's code in asyncsteps.error.code, a cancelled one with
//     asyncsteps.canceled, as its span; neither for a success.
//   - asyncsteps.flow.duration: the seconds from a flow's begin to its
//     end, with the same attributes, on the wall clock (time.Now), not on
//     its tool's: FlowStart and FlowEnd get the flow's context, Run's or
//     context.Background(), and nothing that names the tool or reads its
//     clock. On a Loop the two agree. On a TestTool the
//     duration is the real time taken to drive the flow, not the time
//     the tool's clock moved: a flow that a 3s SetTimeout ended as
//     TestTool.Run jumped the clock lasts about 0s, exactly 0 in a
//     testing/synctest bubble, whose wall clock moves only as its
//     goroutines sleep; a Loop in a bubble has exact durations. A flow
//     whose start failed (see above) has none: its start was lost with
//     its context.
//   - asyncsteps.step.failed: the errors raised in steps, as their spans'
//     events, also those a handler recovers from, by asyncsteps.error.code.
//   - asyncsteps.sync.wait.duration: the seconds a flow waited in the queue
//     of a Mutex, Throttle or Limiter before it was let in, on its tool's
//     clock, by asyncsteps.sync.kind, "mutex", "throttle" or "limiter",
//     and by asyncsteps.sync.name if [Config.SyncerName] names the gate. A
//     flow that waits for both of a Limiter's limits, a slot and then the
//     next period, is measured twice, once per wait. A flow let in at
//     once, or that left the queue without entering, waited for nothing
//     and is not measured.
//
// So that an application cannot grow the number of series, the code of
// an error is one of FTN12's standard codes ([asyncsteps.CommError] and
// the others), or [OtherCode]. Without a MeterProvider the hooks are the
// tracing hooks alone, and cost nothing more. With one, a flow allocates
// what its tracing does (with the SDK's meter, once a series has its
// first measure), and, if its span does not record, one object more for
// each Await, which the Awaits of a recording span allocate anyway: the
// mask that keeps a flow run by the Await's function, if its FlowStart
// fails, from taking the outer flow's span or start for its own.
package otelsteps

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
)

// ScopeName is the instrumentation scope of the spans and the metrics.
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
// provider, and records no metrics.
type Config struct {
	// TracerProvider makes the tracer; nil, also a typed nil such as a
	// *sdktrace.TracerProvider never set, means otel.GetTracerProvider().
	// A provider whose Tracer returns nil traces nothing.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of the metrics. Unlike TracerProvider,
	// nil (also a typed nil) means no metrics, and hooks that cost nothing
	// for them; pass otel.GetMeterProvider() for the global provider. A
	// provider whose Meter returns nil records nothing.
	MeterProvider metric.MeterProvider
	// SyncerName, if set, names the Mutex, Throttle or Limiter a flow
	// waited for (the Syncer its Sync was called on), in the attribute
	// asyncsteps.sync.name of the wait metric; "" leaves the name out.
	// Each name is a series of its own: name a few shared gates, not one
	// made per request. It runs on the flow's loop, at each wait; a panic
	// in it fails the waiting step with an InternalError, as one in any
	// SyncWait hook.
	SyncerName func(obj asyncsteps.Syncer) string
}

// Hooks returns the hooks that trace flows and Await calls, and record
// metrics if c has a MeterProvider, as the package doc says. They may be
// set on any number of tools at once.
func Hooks(c Config) *asyncsteps.Hooks {
	tp := c.TracerProvider
	if isNil(tp) {
		tp = otel.GetTracerProvider()
	}
	t := tracer{tp.Tracer(ScopeName)}
	if isNil(t.Tracer) {
		t.Tracer = noop.NewTracerProvider().Tracer(ScopeName)
	}
	h := &asyncsteps.Hooks{
		FlowStart:  t.flowStart,
		FlowEnd:    flowEnd,
		StepError:  stepError,
		AwaitStart: t.awaitStart,
		AwaitEnd:   awaitEnd,
	}
	if m := newMeters(c); m != nil {
		m.observe(h, t)
	}
	return h
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

// flowKey keys the flowContext of a flow in the flow's context.
type flowKey struct{}

// flowContext is a flow's context: the one FlowStart got, with the flow's
// span and, with metrics, the time the flow began. It is one allocation
// where context.WithValue of the span and of a boxed time.Time would be
// three. A nil *flowContext under flowKey masks an outer flow's.
type flowContext struct {
	context.Context
	span  trace.Span
	start time.Time // zero without metrics
	// masked: the contexts of the flow's Await functions hide it (see
	// awaitStart).
	masked bool
}

func (c *flowContext) Value(key any) any {
	if key == (flowKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// String names the context as the context package names its own, not as
// the one it embeds.
func (c *flowContext) String() string {
	return fmt.Sprint(c.Context) + ".WithValue(otelsteps.flowKey, flow)"
}

func (t tracer) flowStart(ctx context.Context) context.Context {
	return t.startFlow(ctx, time.Time{})
}

// startFlow starts the span of a flow that began at start (zero when not
// measured), a child of ctx's.
func (t tracer) startFlow(ctx context.Context, start time.Time) context.Context {
	ctx, span := t.Start(ctx, FlowSpan)
	// A span that records nothing, failed or ended by another flow, would
	// be none the worse: only a start or a recording span needs the mask.
	masked := !start.IsZero() || span.IsRecording()
	return &flowContext{Context: ctx, span: span, start: start, masked: masked}
}

// ownFlow returns the flowContext of the flow whose context is ctx, if ctx
// holds one. It is found through whatever the hooks that wrap these put
// on top of it (a span of their own), and it is the flow's own: a flow
// whose FlowStart did not return (the tracer panicked, or a span
// processor called runtime.Goexit) has the context it began with, which
// holds the flowContext of no flow but, for a flow run by an Await
// function, its outer flow's, masked there (see awaitStart). A context
// given to Run holds none either, unless taken from a hook.
func ownFlow(ctx context.Context) *flowContext {
	c, _ := ctx.Value(flowKey{}).(*flowContext)
	return c
}

// awaitStart starts the span of an Await, a child of the span in ctx, and
// masks the flow's flowContext in the function's context, so that a flow
// the function runs, whose FlowStart fails, does not take its outer
// flow's span or start for its own. The mask costs an allocation: a flow
// whose span records nothing and that is not measured goes without, as
// failing and ending its span (all the other flow could do to it) does
// nothing.
func (t tracer) awaitStart(ctx context.Context) context.Context {
	if f := ownFlow(ctx); f != nil && f.masked {
		ctx = context.WithValue(ctx, flowKey{}, (*flowContext)(nil))
	}
	ctx, _ = t.Start(ctx, AwaitSpan)
	return ctx
}

func flowEnd(ctx context.Context, err error) {
	f := ownFlow(ctx)
	if f == nil {
		return
	}
	span := f.span
	switch e := errorOf(err); {
	case e != nil:
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
		fail(span, timedOut)
	case err != nil:
		fail(span, err)
	}
	span.End()
}

func stepError(ctx context.Context, err *asyncsteps.Error) {
	if f := ownFlow(ctx); f != nil {
		f.span.AddEvent(StepErrorEvent,
			trace.WithAttributes(CodeKey.String(err.Code), InfoKey.String(err.Info)))
	}
}

// timedOut is the error of a step whose timeout, or Run's deadline, ends
// it: Timeout with no info, as the step's error handlers and the flow's
// span see it. Its Error is "Timeout", where asyncsteps.ErrorFrom of the
// context's error would say "Timeout: context deadline exceeded".
var timedOut = &asyncsteps.Error{Code: asyncsteps.Timeout}

// errorOf returns the *asyncsteps.Error err is or wraps, nil if none.
// The core passes it unwrapped, and the type assertion spares the heap
// allocation of errors.As's target.
func errorOf(err error) *asyncsteps.Error {
	if e, ok := err.(*asyncsteps.Error); ok || err == nil {
		return e
	}
	var e *asyncsteps.Error
	errors.As(err, &e)
	return e
}

func fail(span trace.Span, err *asyncsteps.Error) {
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(CodeKey.String(err.Code))
}
