package otelsteps

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
	bare := tracer{Tracer: tp.Tracer(ScopeName)}
	failure := &asyncsteps.Error{Code: asyncsteps.CommError}
	tracing := testing.AllocsPerRun(100, func() {
		ctx := bare.flowStart(context.Background())
		bare.awaitEnd(bare.awaitStart(ctx), nil)
		bare.stepError(ctx, failure)
		bare.flowEnd(ctx, nil)
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
		if ctx := h.FlowStart(context.Background()); ownFlow(ctx).measured {
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

// A flow with one Await, traced with a no-op tracer, allocates 3 objects
// with tracing alone: its span's context, its flowContext, and the Await
// span's context. Metrics add 1, the mask of the flowContext in the
// Await's context (which a recording span's Awaits have with tracing
// alone), with a no-op meter as with the SDK's: the start rides
// in the flowContext, the options are built once, and the SDK adds to a
// series it has without allocating. A flow that fails with a step error
// allocates 2 either way, as it starts: its no-op span records nothing,
// so it gets no event and no status, which cost 4 more before. Before the
// flowContext, the counts were 4 and 7 for tracing alone, 8 and 10 with
// either meter.
func TestMetricsAllocations(t *testing.T) {
	tp := tracenoop.NewTracerProvider()
	failure := &asyncsteps.Error{Code: asyncsteps.CommError}
	reader := sdkmetric.NewManualReader()
	for _, c := range []struct {
		name string
		mp   metric.MeterProvider
		want float64
	}{
		{"tracing alone", nil, 3},
		{"no-op meter", noop.NewMeterProvider(), 4},
		{"SDK ManualReader", sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), 4},
	} {
		h := Hooks(Config{TracerProvider: tp, MeterProvider: c.mp})
		succeed := func() {
			ctx := h.FlowStart(context.Background())
			h.AwaitEnd(h.AwaitStart(ctx), nil)
			h.FlowEnd(ctx, nil)
		}
		fail := func() {
			ctx := h.FlowStart(context.Background())
			h.StepError(ctx, failure)
			h.FlowEnd(ctx, failure)
		}
		succeed() // the SDK makes a series at its first measure
		fail()
		if n := testing.AllocsPerRun(100, succeed); n != c.want {
			t.Errorf("%s: %v allocations a flow with an Await, want %v", c.name, n, c.want)
		}
		if n := testing.AllocsPerRun(100, fail); n != 2 {
			t.Errorf("%s: %v allocations a failed flow, want 2", c.name, n)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	// 2 flows, then 101 of each kind: AllocsPerRun runs once more first.
	var started int64
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == FlowStartedMetric {
			started = m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
		}
	}
	if want := int64(2 + 2*101); started != want {
		t.Errorf("%s = %d, want %d: the SDK did not record every flow", FlowStartedMetric, started, want)
	}
}

// A flow that its sampler drops has spans that record nothing: its hooks
// allocate what the tracer allocates for those spans (2 objects a span
// with the SDK: the span and its context), and the flowContext, with
// the mask of each Await's context when metrics need one, and nothing for
// the errors raised in it or the failures it ends with, whose events,
// statuses and descriptions nobody would read. Those cost 8 objects more
// for this flow (10 with metrics), twice the tracer's, before: for every
// request of an error storm, on a server that samples few.
func TestUnsampledFlowCostsItsSpansAlone(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	tr := tp.Tracer(ScopeName)
	spans := testing.AllocsPerRun(100, func() {
		ctx, flow := tr.Start(context.Background(), FlowSpan)
		_, call := tr.Start(ctx, AwaitSpan)
		call.End()
		flow.End()
	})
	failure := &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"}
	replaced := &asyncsteps.Error{Code: asyncsteps.InvalidRequest, Info: "bad", Cause: failure}
	for _, c := range []struct {
		name string
		mp   metric.MeterProvider
		ours float64 // the flowContext, and an Await's mask with metrics
	}{
		{"tracing alone", nil, 1},
		{"no-op meter", noop.NewMeterProvider(), 2},
	} {
		h := Hooks(Config{TracerProvider: tp, MeterProvider: c.mp})
		n := testing.AllocsPerRun(100, func() {
			ctx := h.FlowStart(context.Background())
			h.AwaitEnd(h.AwaitStart(ctx), failure)
			h.StepError(ctx, failure)
			h.StepError(ctx, replaced)
			h.FlowEnd(ctx, replaced)
		})
		if want := spans + c.ours; n != want {
			t.Errorf("%s: %v allocations a failed unsampled flow, want %v: %v for its spans, %v of ours",
				c.name, n, want, spans, c.ours)
		}
	}
}
