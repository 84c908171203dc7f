package otelsteps

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/asyncsteps/asyncsteps"
)

type nilMeterProvider struct{ noop.MeterProvider }

func (nilMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return nil }

// Hooks without metrics are the tracing hooks alone: no SyncWait hook,
// no start time in a flow's context, and not one allocation more than
// tracing makes, whether the MeterProvider is nil, a typed nil, or gives
// no meter.
func TestNoMetricsCostNothing(t *testing.T) {
	tp := tracenoop.NewTracerProvider()
	bare := tracer{tp.Tracer(ScopeName)}
	failure := &asyncsteps.Error{Code: asyncsteps.CommError}
	tracing := testing.AllocsPerRun(100, func() {
		ctx := bare.flowStart(context.Background())
		awaitEnd(bare.awaitStart(ctx), nil)
		stepError(ctx, failure)
		flowEnd(ctx, nil)
	})
	for name, mp := range map[string]metric.MeterProvider{
		"nil":       nil,
		"typed nil": (*sdkmetric.MeterProvider)(nil),
		"nil Meter": nilMeterProvider{},
	} {
		h := Hooks(Config{TracerProvider: tp, MeterProvider: mp})
		if h.SyncWait != nil {
			t.Errorf("%s: a SyncWait hook", name)
		}
		if ctx := h.FlowStart(context.Background()); ctx.Value(flowStartKey{}) != nil {
			t.Errorf("%s: the flow's start is in its context", name)
		}
		n := testing.AllocsPerRun(100, func() {
			ctx := h.FlowStart(context.Background())
			h.AwaitEnd(h.AwaitStart(ctx), nil)
			h.StepError(ctx, failure)
			h.FlowEnd(ctx, nil)
		})
		if n != tracing {
			t.Errorf("%s: %v allocations a flow, want %v as tracing alone", name, n, tracing)
		}
	}
}
