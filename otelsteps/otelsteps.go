// Package otelsteps traces asyncsteps flows with OpenTelemetry: a span per
// flow, and a span per Await call and per AwaitFlow step, a child of its
// flow's span; and, if asked to, measures them.
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
// is its child. An [asyncsteps.AwaitFlow] step is traced as an Await is,
// by a span of its own (AwaitFlowSpan) from the step's start, as it asks
// for the awaited flow to begin, to the step's end, which shows how long
// that flow waited for its loop and when the step stopped waiting for it;
// the awaited flow begins with the values of the step's context, so its
// span is a child of the step's, in the same trace. The span of an
// AwaitFlow step ends with the step's outcome, as an Await's does: the
// error the step fails with (the awaited flow's, or the loop's that was
// closed under it), asyncsteps.canceled for a step that a cancel ended,
// or the closing of its Loop, and Timeout for one that a timeout ended.
// That is the outcome the step takes: a cancel that comes as the awaited
// flow's success is being delivered ends the span cancelled if it ended
// the step first (the success then has no effect), and the success ends
// it if the step took that first (the cancel then runs no cancel handler
// of the step's); a failure the step took first ends it failed. Through a decorator of the step's AsyncSteps whose
// Success panics, or raises an error, before it completes the step, the
// span fails with the error the step fails with. The awaited flow's
// span, which the step cancels then, ends with that flow's own outcome,
// once it has stopped, often after the step's. A panic in the awaited
// flow is an exception of that flow's span, not of the step's. The error
// a flow or an Await fails with sets its span's status to Error, with the
// error as description (its info cut: see Infos and panics below), and
// its code in the attribute
// asyncsteps.error.code and in error.type, the attribute OpenTelemetry's
// semantic conventions give the class of error a failed operation ended
// with; each step error, also one that a handler recovers from, is an
// event of the flow's span, which fails only if the flow does. A
// cancelled flow is not an error: its span has the attribute
// asyncsteps.canceled, and so has the span of an Await cancelled with
// its step (its flow cancelled, its loop closed, a sibling branch
// failed), whatever its function returned then; the span of an Await
// whose step timed out (its SetTimeout, or Run's deadline) is a Timeout
// as its flow's span is, described "Timeout" with no info, the error the
// step's handlers see, also when its function, ignoring its context,
// succeeded later.
//
// Across processes, the trace goes on as the context does: an
// asynchttp.Handler runs its flows under its request's context, so that
// an otelhttp handler around it makes the request's server span the
// flow's parent; an asynchttp.Client makes its requests with their
// Await's context, so that an otelhttp transport on its http.Client
// sends the Await's span as the upstream's parent, in the traceparent
// header. otelhttp propagates with the global propagator, which sends
// and reads nothing until the program sets one:
// otel.SetTextMapPropagator(propagation.TraceContext{}).
//
// A flow whose span the tracer does not give back (its sampler or a span
// processor panics as the span starts) fails with an InternalError, as
// for any panic of a hook that starts a flow, and has no span: the span
// in its context, its caller's, is left alone, and so is an outer flow's
// when an Await function or AwaitFlow runs the flow.
//
// A flow on a tool without these hooks is not traced: it has no span,
// nor have its Awaits or its AwaitFlow steps, though its context holds
// the values of the traced flow that runs it (by AwaitFlow, or from an
// Await function), where these hooks keep what traces that flow's
// AwaitFlow steps. A flow that it runs on a tool with the hooks is a
// child of the span in its context: that of the traced step, AwaitFlow
// or Await, that runs the untraced flow, the nearest span in the trace.
//
// A flow whose span its sampler drops costs what the tracer's spans cost
// and one object of these hooks (with metrics, one more per Await): its
// errors, its end and its Awaits' ends write nothing to spans that
// record nothing, however many errors it raises.
//
// # Infos and panics
//
// An error's info is the application's text, and may say more than a
// trace should keep ("db down: password=hunter2"), at any length. The
// spans export it cut to [Config].MaxInfoBytes, [DefaultMaxInfoBytes]
// unless set: in the status description of a failed span ("code: info"),
// in the asyncsteps.error.info of a step error event, and in the
// exception.message of a panic's event; [Config].OmitInfo leaves it out
// of all three. The Result, the step's handlers and the logs of the
// application still get the info whole: only what leaves the process in
// a trace is cut. It leaves as valid UTF-8, as OTLP's protobuf encoding
// requires of its strings (an exporter refuses the whole batch of spans
// a string that is not is in), and so do the codes and the stacks: each
// run of bytes that are not UTF-8 (from an upstream, a file name) is made
// a U+FFFD, whose 3 bytes count in the cap.
//
// A code is an identifier (FTN12's take under 20 bytes), yet the
// application's text too, which may come from a peer (a FutoIn service's
// error, raised as it answered) or a Go error's FutoInCode, at any
// length: the spans export one over 128 bytes cut to 128 as an info is,
// whatever caps the infos and with OmitInfo too, in a failed span's
// status description, in asyncsteps.error.code and error.type, and in a
// step error event. The Result keeps it whole; the metrics count it as
// [OtherCode] anyway.
//
// A panic in a step, in a cancel or error handler, or in an Await
// function is an exception event, as OpenTelemetry's semantic
// conventions have it, of the span of its flow, after its step error
// event and at the same time, and, in an Await function, of the Await's
// span too, as it ends: exception.type is the fully qualified type of
// the panic value ("string", "*example.com/app/db.QueryError"),
// exception.message "panic: " and the printed value, and
// exception.stacktrace the stack of the panicking goroutine, as
// runtime/debug.Stack prints it, which the engine records in the
// [*asyncsteps.PanicError] it makes the Cause of the panic's
// InternalError. An Await function that returns a *PanicError itself (a
// panic it recovered on a goroutine of its own) counts as one that
// panicked. The error an error handler raises in place of a panic's
// keeps the panic as its Cause, and is not a panic again: the flow's span
// has one exception event per panic. A panic in a flow run by an Await
// function is an exception of that flow's span, not of the outer flow's
// or the Await's, also when an error handler of the outer flow raises an
// error in place of the one the Await failed with. A stack holds the names of the
// functions and files, not the application's data; it is cut to
// [Config].MaxStackBytes, [DefaultMaxStackBytes] (8 KiB) unless set, after
// its last whole line that fits, and ends with a line "…". The SDK's span
// limits (sdktrace.SpanLimits) bound every attribute's length too.
//
// An Await function that returns a Go error which is not an
// [*asyncsteps.Error], and that nothing else classifies (a network
// error, a [asyncsteps.FutoInCoder]: see [asyncsteps.ErrorFrom]), fails
// its step with an InternalError, as a panic does: that is the engine's
// mapping, which these hooks report as it is, in the spans' codes and in
// asyncsteps.step.failed. Only the exception event tells a panic from
// such an error. An application that wants them apart in its metrics
// gives its errors a code (return an *asyncsteps.Error, or implement
// FutoInCoder).
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
// it (see the example). So does an Await's span, as its function
// returns, under a span that the application's AwaitStart puts on top
// of it, a child of the Await's, and ends itself. The flow's context
// also holds what traces its AwaitFlow steps, which no field of
// asyncsteps.Hooks reports: the application's hooks keep it as they
// derive the flow's context from the one these returned, and the spans
// of its steps are children of the span on top. A hook of the application's that keeps something
// of its own in the flow's context must look for it as these do: when a
// FlowStart fails, FlowEnd gets the context the flow began with, which,
// for a flow run by an Await function or by AwaitFlow, holds what the
// outer flow's context holds (docs/DESIGN.md#hooks).
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
//     end, with the same attributes, on the clock of the spans (see
//     Timing below). A flow whose start failed (see above) has none: its
//     start was lost with its context.
//   - asyncsteps.step.failed: the errors raised in steps, as their spans'
//     events, also those a handler recovers from, by asyncsteps.error.code.
//   - asyncsteps.sync.wait.duration: the seconds a flow waited in the queue
//     of a Mutex, Throttle or Limiter before it was let in, on its tool's
//     clock, by asyncsteps.sync.kind, "mutex", "throttle" or "limiter" (a
//     KeyedMutex is a Mutex per key: "mutex"; a KeyedThrottle,
//     "throttle"; a KeyedLimiter, "limiter"), and by
//     asyncsteps.sync.name if [Config.SyncerName] names the gate. A flow
//     that waits for both of a Limiter's limits, a slot and then the next
//     period, is measured twice, once per wait. A flow let in at once, or
//     that left the queue without entering, waited for nothing and is not
//     measured.
//
// Where a metric has asyncsteps.error.code, error.type says the same, as
// the semantic conventions ask of a duration metric, in the same series.
// So that an application cannot grow the number of series, the code of
// an error is one of FTN12's standard codes ([asyncsteps.CommError] and
// the others), or [OtherCode]. Without a MeterProvider the hooks are the
// tracing hooks alone, and cost nothing more. With one, a flow allocates
// what its tracing does (with the SDK's meter, once a series has its
// first measure), and, if its span does not record, one object more for
// each Await, which the Awaits of a recording span allocate anyway: the
// mask that keeps a flow run by the Await's function, if its FlowStart
// fails, from taking the outer flow's span or start for its own.
//
// # Timing
//
// Spans, their events and the flow durations are timed on the wall clock
// (time.Now), as the tracer times a span it is given no times for, not on
// the flow's tool's: the hooks get the flow's context, Run's or
// context.Background(), and nothing that names the tool or reads its
// clock. On a Loop the two agree. On a TestTool they do not: a flow that
// a 3s SetTimeout ended as TestTool.Run jumped the clock lasts the real
// time taken to drive it, about 0s, exactly 0 in a testing/synctest
// bubble, whose wall clock moves only as its goroutines sleep (a Loop in
// a bubble is timed exactly). A test that checks the times gives the
// hooks the tool's clock, [Config].Now:
//
//	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, Now: tt.Now}))
//
// and its flows are timed in the tool's virtual time, to the nanosecond
// (see the example). An Await's span begins and ends as its function
// does, on the function's goroutine, which a TestTool does not wait for
// as it moves its clock: a test that times one lets the function begin
// before it moves the clock, and return before it reads the span
// (testing/synctest.Wait in a bubble). Each time given to the tracer is
// an option of its call, a few allocations per span: the clock is for
// tests, and a Loop's is the wall clock anyway.
package otelsteps

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
	"weak"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// ScopeName is the instrumentation scope of the spans and the metrics.
const ScopeName = "github.com/asyncsteps/asyncsteps/otelsteps"

// Version is the release of this package that the spans and the metrics
// name as the version of their instrumentation scope, with the schema URL
// of the semantic conventions they follow: that of the semconv package
// this one imports, whose version the import path names. It is the last
// release that CHANGELOG.md records, and moves with it.
const Version = "0.1.0"

// Names of the spans, the event and the attributes this package writes.
const (
	FlowSpan       = "asyncsteps.flow"                      // a flow, from its start to its end
	AwaitSpan      = "asyncsteps.await"                     // an Await call, a child of its flow's span
	AwaitFlowSpan  = "asyncsteps.await_flow"                // an AwaitFlow step's wait, the awaited flow's parent
	StepErrorEvent = "asyncsteps.step_error"                // an error raised in a step, on its flow's span
	CodeKey        = attribute.Key("asyncsteps.error.code") // a failure's FutoIn code, on spans, events and metrics
	InfoKey        = attribute.Key("asyncsteps.error.info") // a step error event's info, cut to Config.MaxInfoBytes
	CanceledKey    = attribute.Key("asyncsteps.canceled")   // true on a span, or a measure, of what a cancel ended
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
	// waited for (the Syncer its Sync was called on; for a KeyedMutex,
	// a KeyedThrottle or a KeyedLimiter, what its Key returns for the
	// key), in the attribute
	// asyncsteps.sync.name of the wait metric; "" leaves the name out.
	// Each name is a series of its own: name a few shared gates, not one
	// made per request. A name that is not UTF-8 is recorded with each
	// run of bad bytes made a U+FFFD. It runs on the flow's loop, at each
	// wait; a panic in it fails the waiting step with an InternalError,
	// as one in any SyncWait hook.
	SyncerName func(obj asyncsteps.Syncer) string
	// Now, if set, is the clock that times the spans (their start, their
	// end and their events) and the flow duration metric, in place of the
	// wall clock: pass a TestTool's Now, so that a flow on it is timed in
	// its virtual time, as its timeouts and deferred steps are (see
	// Timing in the package doc). Nil keeps the wall clock, which the
	// tracer reads itself, at no cost; a Loop's Now, time.Now, says the
	// same at the cost of the options that carry its times. The hooks
	// read it on the flows' tools and on the goroutines of Await
	// functions at once, so it must be safe for concurrent use, as a
	// Tool's Now is; and they read it whatever tool the flow runs on, so
	// hooks made with a TestTool's clock are for that tool alone. A panic
	// in it is a panic of the hook that called it (docs/DESIGN.md#hooks),
	// and a span it was to end ends all the same, on the wall clock.
	Now func() time.Time
	// MaxInfoBytes caps the info of an error where the spans export it:
	// in a span's status description, in the asyncsteps.error.info of a
	// step error event, and in the exception.message of a panic's event.
	// An info longer than the cap, as exported (each run of bytes that are
	// not UTF-8 one U+FFFD), is cut to at most MaxInfoBytes bytes, at a
	// UTF-8 character boundary, ending with "…" (3 of those bytes) when
	// the cap leaves room for it (MaxInfoBytes over 3). 0 means
	// DefaultMaxInfoBytes; a negative value, no cap. An info is the
	// application's text, whatever Error was given: it may say more than
	// a trace should keep, at any length.
	MaxInfoBytes int
	// OmitInfo leaves the infos out of the spans: a failed span's status
	// description is its error's code alone, a step error event has no
	// asyncsteps.error.info, and a panic's event no exception.message
	// (its exception.type and exception.stacktrace stay: the type of the
	// panic value and the code that panicked, not the application's
	// text). The codes, which the metrics carry, stay too.
	OmitInfo bool
	// MaxStackBytes caps the exception.stacktrace of a panic's event: a
	// longer stack is cut after its last whole line that fits, and ends
	// with a line "…" (all within MaxStackBytes bytes). 0 means
	// DefaultMaxStackBytes; a negative value, no cap. The stack of a deep
	// recursion runs to megabytes, which an exporter may refuse with the
	// whole batch of spans it is in; its top frames, kept, say where the
	// panic was.
	MaxStackBytes int
}

// DefaultMaxStackBytes is the cap on the stacks the spans export when
// [Config].MaxStackBytes is 0: some forty frames.
const DefaultMaxStackBytes = 8 << 10

// DefaultMaxInfoBytes is the cap on the infos the spans export when
// [Config].MaxInfoBytes is 0: room for a sentence that says what failed,
// not for a payload a step put in its error.
const DefaultMaxInfoBytes = 256

// Hooks returns the hooks that trace flows and Await calls, and record
// metrics if c has a MeterProvider, as the package doc says. They may be
// set on any number of tools at once.
func Hooks(c Config) *asyncsteps.Hooks {
	tp := c.TracerProvider
	if isNil(tp) {
		tp = otel.GetTracerProvider()
	}
	scope := []trace.TracerOption{trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(semconv.SchemaURL)}
	t := tracer{Tracer: tp.Tracer(ScopeName, scope...), now: clock(c.Now), infos: infoPolicyOf(c), stackMax: stackMaxOf(c)}
	if isNil(t.Tracer) {
		t.Tracer = noop.NewTracerProvider().Tracer(ScopeName, scope...)
	}
	// Before the hooks take their copies of t.
	t.awaitFlows = &awaitFlows{}
	t.awaitFlows.tracer = t
	h := &asyncsteps.Hooks{
		FlowStart:  t.flowStart,
		FlowEnd:    t.flowEnd,
		StepError:  t.stepError,
		AwaitStart: t.awaitStart,
		AwaitEnd:   t.awaitEnd,
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

// tracer starts and ends the spans of flows and Awaits, timed on now, and
// exports the infos of their errors as infos says.
type tracer struct {
	trace.Tracer
	now      clock
	infos    infoPolicy
	stackMax int // the cap on exported stacks; 0: none
	// awaitFlows traces the AwaitFlow steps of the flows these hooks
	// trace: their contexts hold it (see flowContext.Value).
	awaitFlows *awaitFlows
}

// clock is Config.Now: nil for the wall clock.
type clock func() time.Time

// read returns the time on c, if set; else the wall clock's if needed (to
// measure a duration), or zero: the tracer reads the wall clock itself.
func (c clock) read(needed bool) time.Time {
	switch {
	case c != nil:
		return c()
	case needed:
		return time.Now()
	}
	return time.Time{}
}

// startSpan starts the span name, a child of ctx's, at the time at, read
// from t.now; without a clock of its own, the tracer times it, and at is
// not used: no option to build.
func (t tracer) startSpan(ctx context.Context, name string, at time.Time) (context.Context, trace.Span) {
	if t.now == nil {
		return t.Start(ctx, name)
	}
	return t.Start(ctx, name, trace.WithTimestamp(at))
}

// endSpan ends span now, on t.now if set, after the exception event of
// the panic p, if not nil. A clock that panics, or calls runtime.Goexit,
// still leaves the span ended, on the wall clock: the panic goes on to the
// hook's caller.
func (t tracer) endSpan(span trace.Span, p *asyncsteps.PanicError) {
	if t.now == nil && p == nil {
		span.End()
		return
	}
	ended := false
	defer func() {
		if !ended {
			span.End()
		}
	}()
	if t.now == nil {
		t.addPanic(span, p)
		ended = true
		span.End()
		return
	}
	at := trace.WithTimestamp(t.now())
	if p != nil {
		t.addPanic(span, p, at)
	}
	ended = true
	span.End(at)
}

// flowKey keys the flowContext of a flow in the flow's context.
type flowKey struct{}

// flowContext is a flow's context: the one FlowStart got, with the flow's
// span and, with metrics, the time the flow began. It is one allocation
// where context.WithValue of the span and of a boxed time.Time would be
// three. A nil *flowContext under flowKey masks an outer flow's.
type flowContext struct {
	context.Context
	span trace.Span
	// start is when the flow began, on the clock of the spans, if
	// measured (with metrics): measured says so, as a clock of the
	// Config's may well start at the zero time.
	start    time.Time
	measured bool
	// masked: the contexts of the flow's Await functions hide it (see
	// awaitStart).
	masked bool
	// awaitFlows traces the flow's AwaitFlow steps.
	awaitFlows *awaitFlows
	// under is the token of the AwaitFlow start that the flow began
	// under (see toolinfo.SubflowKey), nil for a flow begun otherwise: a
	// context that holds another token is not the flow's (see ownFlow).
	under any
	// panics are the panics whose exception events the span has had: the
	// error an error handler raises in place of a panic's keeps the panic
	// as its Cause, and is no panic of its own, also when other panics
	// came between (a sibling branch's, a cancel handler's). Held weakly:
	// a panic that no error holds any more can raise nothing, and its
	// stack is not kept for the flow's life. On the flow's loop.
	panics []weak.Pointer[asyncsteps.PanicError]
}

// firstException reports whether the span has had no exception event of
// the panic p yet, and notes that it has one now. The panics collected
// meanwhile are forgotten on the way, so that a long flow that recovers
// from a panic at each turn keeps no more of them than are still held.
func (c *flowContext) firstException(p *asyncsteps.PanicError) bool {
	wp := weak.Make(p)
	seen := false
	held := c.panics[:0]
	for _, q := range c.panics {
		seen = seen || q == wp
		if q.Value() != nil {
			held = append(held, q)
		}
	}
	clear(c.panics[len(held):])
	c.panics = held
	if !seen {
		c.panics = append(c.panics, wp)
	}
	return !seen
}

func (c *flowContext) Value(key any) any {
	switch key {
	case flowKey{}:
		return c
	case toolinfo.SubflowKey{}:
		return c.under // what c.Context holds, without the walk up to it
	case toolinfo.AwaitFlowKey{}:
		if c.awaitFlows != nil {
			return c.awaitFlows
		}
	}
	return c.Context.Value(key)
}

// String names the context as the context package names its own, not as
// the one it embeds.
func (c *flowContext) String() string {
	return fmt.Sprint(c.Context) + ".WithValue(otelsteps.flowKey, flow)"
}

func (t tracer) flowStart(ctx context.Context) context.Context {
	return t.startFlow(ctx, false)
}

// startFlow starts the span of a flow, a child of ctx's, and keeps the
// time the flow began if measured.
func (t tracer) startFlow(ctx context.Context, measured bool) context.Context {
	under := ctx.Value(toolinfo.SubflowKey{})
	start := t.now.read(measured)
	ctx, span := t.startSpan(ctx, FlowSpan, start)
	if !measured {
		start = time.Time{}
	}
	// A span that records nothing, failed or ended by another flow, would
	// be none the worse: only a start or a recording span needs the mask.
	masked := measured || span.IsRecording()
	return &flowContext{Context: ctx, span: span, start: start, measured: measured, masked: masked,
		awaitFlows: t.awaitFlows, under: under}
}

// ownFlow returns the flowContext of the flow whose context is ctx, if ctx
// holds one. It is found through whatever the hooks that wrap these put
// on top of it (a span of their own), and it is the flow's own: a flow
// whose FlowStart did not return (the tracer panicked, a span processor
// called runtime.Goexit, a hook that wraps these failed before or after
// them) has the context it began with, which holds the flowContext of no
// flow but its outer flow's: masked there for a flow run by an Await
// function (see awaitStart); for a flow of AwaitFlow, which begins with
// the values of the awaiting flow's context, made under another token
// of toolinfo.SubflowKey than the one that context holds. A context
// given to Run holds none either, unless taken from a hook.
func ownFlow(ctx context.Context) *flowContext {
	c, _ := ctx.Value(flowKey{}).(*flowContext)
	if c != nil && c.under != ctx.Value(toolinfo.SubflowKey{}) {
		return nil
	}
	return c
}

// awaitKey keys the awaitContext of an Await call in its function's
// context.
type awaitKey struct{}

// awaitContext is the context of an Await function: the one AwaitStart
// got, with the Await's span, which AwaitEnd finds through whatever the
// hooks that wrap these put on top of it (a span of their own), as
// FlowEnd finds its flow's. If masked, it hides the flowContext of its
// flow (see awaitStart).
type awaitContext struct {
	context.Context
	span   trace.Span
	masked bool
}

func (c *awaitContext) Value(key any) any {
	switch key {
	case awaitKey{}:
		return c
	case flowKey{}:
		if c.masked {
			return (*flowContext)(nil)
		}
	}
	return c.Context.Value(key)
}

// String names the context as the context package names its own, not as
// the one it embeds.
func (c *awaitContext) String() string {
	return fmt.Sprint(c.Context) + ".WithValue(otelsteps.awaitKey, call)"
}

// awaitStart starts the span of an Await, a child of the span in ctx, and
// returns the function's context, an awaitContext that keeps the span for
// awaitEnd and masks the flow's flowContext, so that a flow the function
// runs, whose FlowStart fails, does not take its outer flow's span or
// start for its own. The awaitContext costs an allocation: an Await whose
// span records nothing, of a flow that needs no mask, goes without, as
// failing and ending its span does nothing; unless an outer Await's is in
// ctx, which its awaitEnd would take for its own.
func (t tracer) awaitStart(ctx context.Context) context.Context {
	return t.startWait(ctx, AwaitSpan)
}

// startWait is awaitStart for a span named name: an Await's, or an
// AwaitFlow step's, whose context, ctx, is made as an Await function's
// (see toolinfo.AwaitFlowObserver), and whose awaited flow begins with
// the values of the context returned.
func (t tracer) startWait(ctx context.Context, name string) context.Context {
	f := ownFlow(ctx)
	masked := f != nil && f.masked
	ctx, span := t.startSpan(ctx, name, t.now.read(false))
	if masked || span.IsRecording() || ctx.Value(awaitKey{}) != nil {
		return &awaitContext{Context: ctx, span: span, masked: masked}
	}
	return ctx
}

func (t tracer) flowEnd(ctx context.Context, err error) {
	f := ownFlow(ctx)
	if f == nil {
		return
	}
	span := f.span
	if !span.IsRecording() {
		span.End() // a sampler dropped it: its status and its time go nowhere
		return
	}
	switch e := errorOf(err); {
	case e != nil:
		t.fail(span, e)
	case err != nil: // a cancel: not an error of the flow
		span.SetAttributes(CanceledKey.Bool(true))
	}
	t.endSpan(span, nil) // its panics are events of its step errors
}

func (t tracer) awaitEnd(ctx context.Context, err *asyncsteps.Error) {
	t.endWait(ctx, err, true)
}

// endWait is awaitEnd for the span startWait started: an Await's, whose
// function's panic is an exception of the span (withPanic), or an
// AwaitFlow step's, whose error's panic, if any, is an exception of the
// span of the flow where it was raised.
func (t tracer) endWait(ctx context.Context, err *asyncsteps.Error, withPanic bool) {
	call, _ := ctx.Value(awaitKey{}).(*awaitContext)
	if call == nil || call.span == nil {
		return // its span records nothing (see awaitStart), or it has none (see AwaitFlowStart)
	}
	span := call.span
	if !span.IsRecording() {
		span.End() // a mask's (see startWait): the span records nothing
		return
	}
	// A context ended before the function returned: the step was
	// cancelled or timed out, whatever the function returned then (often
	// ctx.Err(), which would read as an InternalError).
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		span.SetAttributes(CanceledKey.Bool(true))
	case cause != nil:
		t.fail(span, timedOut)
	case err != nil:
		t.fail(span, err)
	}
	if !withPanic {
		t.endSpan(span, nil)
		return
	}
	// The function's panic, even one after its step ended: this span
	// alone can tell it.
	t.endSpan(span, panicOf(err))
}

// awaitFlows is the observer of AwaitFlow steps that the contexts of the
// flows traced by a tracer hold (see toolinfo.AwaitFlowObserver): it
// traces each step as the span of a wait, as an Await's, whose child is
// the span of the flow the step runs. One per Hooks call, shared by the
// flows: it is not one allocation more per flow.
type awaitFlows struct{ tracer }

var _ toolinfo.AwaitFlowObserver = (*awaitFlows)(nil)

// AwaitFlowStart starts the span of an AwaitFlow step, a child of the
// span in ctx, the step's context, as awaitStart does for an Await. The
// step of a flow these hooks do not trace (its tool has other hooks, or
// none; its FlowStart failed), which finds a among the values of the
// traced flow that runs it, has none, as its Awaits have none: its
// context hides the outer step's or Await's, which its end would take for
// its own (see endWait). That costs an allocation: only such a step pays
// it.
func (a *awaitFlows) AwaitFlowStart(ctx context.Context) context.Context {
	if ownFlow(ctx) == nil {
		return &awaitContext{Context: ctx}
	}
	return a.startWait(ctx, AwaitFlowSpan)
}

// AwaitFlowEnd ends the span of an AwaitFlow step with the step's
// outcome, as awaitEnd does for an Await.
func (a *awaitFlows) AwaitFlowEnd(ctx context.Context, err error) {
	a.endWait(ctx, errorOf(err), false)
}

// stepError adds the step error event of err to its flow's span, and the
// exception event of the panic that raised it, if one did.
func (t tracer) stepError(ctx context.Context, err *asyncsteps.Error) {
	f := ownFlow(ctx)
	if f == nil || !f.span.IsRecording() {
		// A span that a sampler dropped keeps no event, nor an
		// exception to tell from a later one. A flow run by one of its
		// Await functions, whose FlowStart failed, may find f as its
		// own (unmasked: see startFlow), from a loop of its own: f is
		// not written. A recording span's flow is masked.
		return
	}
	attrs := t.infos.eventAttributes(err)
	p := panicOf(err)
	switch {
	case p != nil:
		if !f.firstException(p) {
			p = nil // recorded already: a handler raised err in its place
		}
	default:
		if q := copiedPanicOf(err); q != nil {
			// Another flow's, whose span has its exception: an error a
			// handler raises in place of err is no panic here either.
			f.firstException(q)
		}
	}
	if t.now == nil {
		f.span.AddEvent(StepErrorEvent, attrs)
		if p != nil {
			t.addPanic(f.span, p)
		}
		return
	}
	at := trace.WithTimestamp(t.now())
	f.span.AddEvent(StepErrorEvent, attrs, at)
	if p != nil {
		t.addPanic(f.span, p, at)
	}
}

// timedOut is the error an Await's span ends with when a step's timeout,
// or Run's deadline, cut its function short: Timeout with no info, as the
// step's error handlers see a step's timeout. Its Error is "Timeout",
// where asyncsteps.ErrorFrom of the context's error would say "Timeout:
// context deadline exceeded". The function's context ends with
// context.DeadlineExceeded either way, so the span does not say which;
// the flow's span does, with the step's error (the deadline's info says
// so).
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

func (t tracer) fail(span trace.Span, err *asyncsteps.Error) {
	span.SetStatus(codes.Error, t.infos.describe(err))
	code := exportedCode(err.Code)
	span.SetAttributes(CodeKey.String(code), semconv.ErrorTypeKey.String(code))
}
