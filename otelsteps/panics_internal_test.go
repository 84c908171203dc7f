package otelsteps

import (
	"context"
	"runtime"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
)

// A flow that recovers from a panic at each turn of a loop keeps no more
// of the panics, for the exception events of its span, than the
// application still holds: here the last one, which State().LastException
// keeps, and the one raised now. Without that, a flow serving requests
// for ever, one panic a while, would keep the stack of each. (The flow's
// span records: one that does not keeps no panic.)
func TestAFlowForgetsThePanicsNoErrorHolds(t *testing.T) {
	h := Hooks(Config{TracerProvider: sdktrace.NewTracerProvider()})
	var flow *flowContext
	flowStart := h.FlowStart
	h.FlowStart = func(ctx context.Context) context.Context {
		ctx = flowStart(ctx)
		flow = ownFlow(ctx)
		return ctx
	}
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(h)
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	held := make([]int, 0, 100)
	r.Repeat(100, func(as asyncsteps.AsyncSteps, _ int) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) {
			held = append(held, len(flow.panics))
			runtime.GC() // the panics no error holds are collected
			panic("again")
		}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, n := range held {
		if want := min(i, 2); n != want {
			t.Fatalf("turn %d: the flow holds %d panics, want %d", i, n, want)
		}
	}
}

// A flow whose span records nothing keeps no panic: it has no exception
// to keep apart, and its record is not its own alone (see
// TestFailedStartOnAnotherLoopLeavesAnUnrecordedFlow).
func TestAnUnrecordedFlowKeepsNoPanic(t *testing.T) {
	bare := tracer{Tracer: noop.NewTracerProvider().Tracer(ScopeName)}
	ctx := bare.flowStart(context.Background())
	bare.stepError(ctx, &asyncsteps.Error{Code: asyncsteps.InternalError, Cause: &asyncsteps.PanicError{Value: "bug"}})
	if f := ownFlow(ctx); f.masked || len(f.panics) != 0 {
		t.Errorf("masked %v, %d panics kept; want neither", f.masked, len(f.panics))
	}
}
