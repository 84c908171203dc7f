package otelsteps_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// startFaultTracer records nothing, and panics as the span of its
// faultAt-th flow starts (a tracer of the application's with a bug).
type startFaultTracer struct {
	trace.Tracer
	flows   *atomic.Int32
	faultAt int32
}

func (t startFaultTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if name == otelsteps.FlowSpan && t.flows.Add(1) == t.faultAt {
		panic("tracer bug")
	}
	return t.Tracer.Start(ctx, name, opts...)
}

type startFaultProvider struct {
	trace.TracerProvider
	tracer startFaultTracer
}

func (p startFaultProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.tracer }

// A flow whose span records nothing, and that is not measured, shows its
// own record to the flows its Await functions run (its Awaits' contexts
// need no mask). One of them whose FlowStart fails, on another loop,
// finds that record as its own: its StepError, the failed start's panic,
// must leave it alone, while the outer flow's loop may be writing it, a
// panic of its own at the same time. It noted the panic in the outer
// flow's list of exported panics, a data race that -race reports.
func TestFailedStartOnAnotherLoopLeavesAnUnrecordedFlow(t *testing.T) {
	tp := startFaultProvider{tracer: startFaultTracer{tracenoop.NewTracerProvider().Tracer(""), new(atomic.Int32), 2}}
	h := otelsteps.Hooks(otelsteps.Config{TracerProvider: tp})
	outerLoop, innerLoop := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	defer outerLoop.Close()
	defer innerLoop.Close()
	outerLoop.SetHooks(h)
	innerLoop.SetHooks(h)

	const turns = 50
	outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
	outer.Parallel(nil).
		Add(func(as steps, _ ...any) {
			as.Await(func(ctx context.Context) (any, error) {
				inner := asyncsteps.New(asyncsteps.WithTool(innerLoop))
				inner.Add(func(as steps, _ ...any) {})
				_, err := inner.Run(ctx)
				return nil, err
			}, func(as steps, _ string) { as.Success() })
		}).
		Add(func(as steps, _ ...any) {
			as.Repeat(turns, func(as steps, _ int) {
				as.Add(func(steps, ...any) { panic("step bug") }, func(as steps, _ string) { as.Success() })
			})
		})
	if _, err := outer.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
