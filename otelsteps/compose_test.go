package otelsteps_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// userSpanKey keys the span that withUserSpan's hooks start in a flow.
type userSpanKey struct{}

// withUserSpan wraps h as an application adding its own span to each
// flow would: its FlowStart calls h's, then starts a span named name on
// the context h's returned, a child of the flow's; its FlowEnd ends that
// span and calls h's.
func withUserSpan(h *asyncsteps.Hooks, tracer trace.Tracer, name string) *asyncsteps.Hooks {
	w := *h
	w.FlowStart = func(ctx context.Context) context.Context {
		ctx, span := tracer.Start(h.FlowStart(ctx), name)
		return context.WithValue(ctx, userSpanKey{}, span)
	}
	w.FlowEnd = func(ctx context.Context, err error) {
		if span, ok := ctx.Value(userSpanKey{}).(trace.Span); ok {
			span.End()
		}
		h.FlowEnd(ctx, err)
	}
	return &w
}

// Hooks that wrap otelsteps' and put a span of their own on top of the
// flow's: the flow's span still ends once, at the flow's end, with the
// flow's error as its status and its step errors as events; the Awaits
// are children of the span on top, the one in the flow's context. The
// flow's span was left unended: FlowEnd took it for another flow's, as
// the span in its context was not the flow's; before that, it ended the
// user's span in its place.
func TestHooksWrappedWithASpanOnTop(t *testing.T) {
	for _, metered := range []bool{false, true} {
		name := "tracing alone"
		if metered {
			name = "with metrics"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				c := otelsteps.Config{TracerProvider: tp}
				m := newMetered()
				if metered {
					c.MeterProvider = m
				}
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				loop.SetHooks(withUserSpan(otelsteps.Hooks(c), tp.Tracer("test"), "handler"))
				ctx, request := tp.Tracer("test").Start(context.Background(), "request")

				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Await(func(context.Context) (any, error) {
					return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"}
				}, func(as steps, _ string) { as.Success() })
				r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.NotImplemented, "nope") })
				if _, err := r.Run(ctx); errText(err) != "NotImplemented: nope" {
					t.Errorf("Run: %v, want NotImplemented: nope", err)
				}
				request.End()
				synctest.Wait()
				want := describeLines([]string{
					`request <- -: Unset ""`,
					`asyncsteps.flow <- request: Error "NotImplemented: nope" asyncsteps.error.code=NotImplemented error.type=NotImplemented` +
						` event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down` +
						` event asyncsteps.step_error asyncsteps.error.code=NotImplemented asyncsteps.error.info=nope`,
					`handler <- asyncsteps.flow: Unset ""`,
					`asyncsteps.await <- handler: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError`,
				})
				if got := describe(rec.Ended()); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
				if !metered {
					return
				}
				got := m.read(t)
				for _, line := range []string{
					`asyncsteps.flow.duration{asyncsteps.error.code=NotImplemented error.type=NotImplemented} count=1 sum=0`,
					`asyncsteps.flow.ended{asyncsteps.error.code=NotImplemented error.type=NotImplemented} 1`,
				} {
					if !strings.Contains(got, line) {
						t.Errorf("metrics:\n%s\nwant a line %s", got, line)
					}
				}
			})
		})
	}
}

// A flow run by an Await function, whose FlowStart the tracer cuts
// short, leaves the outer flow's span alone, with hooks as Hooks made
// them as with hooks that wrap them: what its FlowEnd and StepError find
// in the Await's context is not its own flow's, which has no span. The
// outer flow, whose function shrugs the inner one's error off, succeeds.
func TestFailedStartInAnAwaitLeavesTheOuterFlow(t *testing.T) {
	for _, c := range []struct {
		name    string
		metered bool
		wrap    bool
	}{
		{"tracing alone", false, false},
		{"tracing alone, wrapped", false, true},
		{"with metrics", true, false},
		{"with metrics, wrapped", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failStartInAnAwait(t, c.metered, c.wrap) })
		})
	}
}

func failStartInAnAwait(t *testing.T, metered, wrap bool) {
	rec := tracetest.NewSpanRecorder()
	fault := faultyProcessor{rec, otelsteps.FlowSpan, func() { panic("exporter bug") }, 2, new(atomic.Int32)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(fault))
	c := otelsteps.Config{TracerProvider: tp}
	if metered {
		c.MeterProvider = newMetered()
	}
	h := otelsteps.Hooks(c)
	parent := otelsteps.FlowSpan
	if wrap {
		h, parent = withUserSpan(h, tp.Tracer("test"), "handler"), "handler"
	}
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	loop.SetHooks(h)

	outer := asyncsteps.New(asyncsteps.WithTool(loop))
	outer.Await(func(ctx context.Context) (any, error) {
		inner := asyncsteps.New(asyncsteps.WithTool(loop))
		inner.Add(func(as steps, _ ...any) { as.Success() })
		if _, err := inner.Run(ctx); errText(err) != "InternalError: exporter bug" {
			t.Errorf("inner Run: %v, want InternalError: exporter bug", err)
		}
		return "fallback", nil
	})
	if _, err := outer.Run(context.Background()); err != nil {
		t.Errorf("Run: %v", err)
	}
	synctest.Wait()
	want := []string{
		`asyncsteps.flow <- -: Unset ""`,
		`asyncsteps.await <- ` + parent + `: Unset ""`,
	}
	if wrap {
		want = append(want, `handler <- asyncsteps.flow: Unset ""`)
	}
	if got, want := describe(rec.Ended()), describeLines(want); got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
}

// userCallKey keys the span that withUserCallSpan's hooks start in an
// Await's context.
type userCallKey struct{}

// withUserCallSpan wraps h as an application adding its own span to each
// Await call would: its AwaitStart calls h's, then starts a span named
// name on the context h's returned, a child of the Await's; its AwaitEnd
// ends that span and calls h's, or calls h's first if endFirst is false.
func withUserCallSpan(h *asyncsteps.Hooks, tracer trace.Tracer, name string, endFirst bool) *asyncsteps.Hooks {
	w := *h
	w.AwaitStart = func(ctx context.Context) context.Context {
		ctx, span := tracer.Start(h.AwaitStart(ctx), name)
		return context.WithValue(ctx, userCallKey{}, span)
	}
	w.AwaitEnd = func(ctx context.Context, err *asyncsteps.Error) {
		span, _ := ctx.Value(userCallKey{}).(trace.Span)
		if endFirst {
			span.End()
		}
		h.AwaitEnd(ctx, err)
		span.End()
	}
	return &w
}

// Hooks that wrap otelsteps' and put a span of their own on top of an
// Await's, as a FlowStart may on top of the flow's: the Await's span
// ends once, as its function returns, with the function's outcome, and
// the user's span is left to the user, whichever of the two AwaitEnd
// hooks runs first. The Await's span was left unended, and the user's
// took its status.
func TestAwaitHooksWrappedWithASpanOnTop(t *testing.T) {
	for _, endFirst := range []bool{true, false} {
		name := "user's span ended first"
		if !endFirst {
			name = "user's span ended last"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				h := otelsteps.Hooks(otelsteps.Config{TracerProvider: tp})
				loop.SetHooks(withUserCallSpan(h, tp.Tracer("test"), "call", endFirst))

				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Await(func(context.Context) (any, error) {
					return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"}
				}, func(as steps, _ string) { as.Success() })
				r.Await(func(context.Context) (any, error) { return "ok", nil })
				if _, err := r.Run(context.Background()); err != nil {
					t.Errorf("Run: %v", err)
				}
				synctest.Wait()
				want := describeLines([]string{
					`asyncsteps.flow <- -: Unset "" event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`,
					`asyncsteps.await <- asyncsteps.flow: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError`,
					`asyncsteps.await <- asyncsteps.flow: Unset ""`,
					`call <- asyncsteps.await: Unset ""`,
					`call <- asyncsteps.await: Unset ""`,
				})
				if got := describe(rec.Ended()); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
			})
		})
	}
}

// innerFlowsDropped samples every span but a flow's with a parent (a
// flow run by an Await function) and the spans under it.
type innerFlowsDropped struct{}

func (innerFlowsDropped) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	parent := trace.SpanContextFromContext(p.ParentContext)
	drop := p.Name == otelsteps.FlowSpan && parent.IsValid() || parent.IsValid() && !parent.IsSampled()
	if drop {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (innerFlowsDropped) Description() string { return "innerFlowsDropped" }

// An Await of a flow whose span records nothing, run by the function of
// an Await whose span records, ends its own span, which records nothing,
// and not the outer Await's, which ends with its own function's outcome.
func TestAwaitOfAnUnsampledFlowInAnAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(innerFlowsDropped{}))
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))

		outer := asyncsteps.New(asyncsteps.WithTool(loop))
		outer.Await(func(ctx context.Context) (any, error) {
			inner := asyncsteps.New(asyncsteps.WithTool(loop))
			inner.Await(func(context.Context) (any, error) {
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "inner"}
			})
			_, err := inner.Run(ctx)
			return nil, &asyncsteps.Error{Code: asyncsteps.NotImplemented, Info: "outer after " + errText(err)}
		})
		if _, err := outer.Run(context.Background()); errText(err) != "NotImplemented: outer after CommError: inner" {
			t.Errorf("Run: %v", err)
		}
		synctest.Wait()
		want := describeLines([]string{
			`asyncsteps.flow <- -: Error "NotImplemented: outer after CommError: inner" asyncsteps.error.code=NotImplemented error.type=NotImplemented event asyncsteps.step_error asyncsteps.error.code=NotImplemented asyncsteps.error.info=outer after CommError: inner`,
			`asyncsteps.await <- asyncsteps.flow: Error "NotImplemented: outer after CommError: inner" asyncsteps.error.code=NotImplemented error.type=NotImplemented`,
		})
		if got := describe(rec.Ended()); got != want {
			t.Errorf("spans:\n%s\nwant:\n%s", got, want)
		}
		if s, e := len(rec.Started()), len(rec.Ended()); s != e {
			t.Errorf("%d spans started, %d ended", s, e)
		}
	})
}

// Hooks that wrap otelsteps' and put a span of their own on top of the
// flow's keep the tracing of its AwaitFlow steps, which the flow's
// context carries: the step's span is a child of the span on top, and
// the awaited flow's a child of the step's.
func TestAwaitFlowUnderHooksWithASpanOnTop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.SetHooks(withUserSpan(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), tp.Tracer("test"), "handler"))

		sub := asyncsteps.New(asyncsteps.WithTool(loop))
		sub.Add(func(steps, ...any) {})
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.AwaitFlow(r, sub)
		if _, err := r.Run(context.Background()); err != nil {
			t.Errorf("Run: %v", err)
		}
		synctest.Wait()
		want := describeLines([]string{
			`asyncsteps.flow#1 <- -: Unset ""`,
			`handler#2 <- asyncsteps.flow#1: Unset ""`,
			`asyncsteps.await_flow#3 <- handler#2: Unset ""`,
			`asyncsteps.flow#4 <- asyncsteps.await_flow#3: Unset ""`,
			`handler#5 <- asyncsteps.flow#4: Unset ""`,
		})
		if got := spanTree(rec); got != want {
			t.Errorf("spans:\n%s\nwant:\n%s", got, want)
		}
	})
}
