package otelsteps_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// A flow with an Await that fails and one that succeeds: the flow's span
// ends last, with the Await spans as its children.
func ExampleHooks() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	loop := asyncsteps.NewLoop() // or a LoopGroup, or DefaultTool().(*asyncsteps.Loop)
	defer loop.Close()
	loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Await(func(context.Context) (any, error) {
		return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream down"}
	}, func(as asyncsteps.AsyncSteps, code string) { as.Success("fallback") })
	r.Await(func(context.Context) (any, error) { return "ok", nil })
	r.Run(context.Background())

	for _, s := range rec.Ended() {
		fmt.Printf("%s %s %q\n", s.Name(), s.Status().Code, s.Status().Description)
	}
	// Output:
	// asyncsteps.await Error "CommError: upstream down"
	// asyncsteps.await Unset ""
	// asyncsteps.flow Unset ""
}

// A flow on a TestTool, its spans timed on the tool's virtual clock: the
// flow's span lasts the 3s its step waited on that clock, whatever the
// test took to drive the tool, and a test can compare its times exactly.
func ExampleConfig_virtualTime() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, Now: tt.Now}))

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(3*time.Second, func() { as.Success() })
	})
	r.Run(context.Background()) // drives tt, whose clock jumps to the deferred call

	for _, s := range rec.Ended() {
		fmt.Println(s.Name(), "from", s.StartTime().Sub(asyncsteps.TestToolEpoch),
			"for", s.EndTime().Sub(s.StartTime()))
	}
	// Output:
	// asyncsteps.flow from 0s for 3s
}

// Hooks of the application's that wrap those of otelsteps: each flow gets
// a span of the handler's, a child of the flow's, which the flow's Awaits
// are children of. The flow's span ends last, with the flow's outcome and
// its step errors as events.
func ExampleHooks_wrapped() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("checkout")
	type handlerSpan struct{} // the key of the handler's span

	h := otelsteps.Hooks(otelsteps.Config{TracerProvider: tp})
	flowStart, flowEnd, awaitStart := h.FlowStart, h.FlowEnd, h.AwaitStart
	h.FlowStart = func(ctx context.Context) context.Context {
		ctx = flowStart(ctx) // first: the flow's span is in what it returns
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("handler", "checkout"))
		ctx, span := tracer.Start(ctx, "checkout")
		return context.WithValue(ctx, handlerSpan{}, span)
	}
	h.FlowEnd = func(ctx context.Context, err error) {
		if span, ok := ctx.Value(handlerSpan{}).(trace.Span); ok {
			span.End()
		}
		flowEnd(ctx, err) // the context as given: it ends the flow's span
	}
	h.AwaitStart = func(ctx context.Context) context.Context {
		// A flow the function runs, should its FlowStart fail, ends with
		// this context: it must not find this flow's span under the key.
		return context.WithValue(awaitStart(ctx), handlerSpan{}, nil)
	}
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	loop.SetHooks(h)

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Await(func(context.Context) (any, error) { return "reserved", nil })
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.NotImplemented, "no payment") })
	r.Run(context.Background())

	names := map[trace.SpanID]string{}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	for _, s := range rec.Ended() {
		parent, ok := names[s.Parent().SpanID()]
		if !ok {
			parent = "-"
		}
		attrs := attribute.NewSet(s.Attributes()...)
		fmt.Printf("%s <- %s: %s %q [%s] %d events\n", s.Name(), parent, s.Status().Code,
			s.Status().Description, attrs.Encoded(attribute.DefaultEncoder()), len(s.Events()))
	}
	// Output:
	// asyncsteps.await <- checkout: Unset "" [] 0 events
	// checkout <- asyncsteps.flow: Unset "" [] 0 events
	// asyncsteps.flow <- -: Error "NotImplemented: no payment" [asyncsteps.error.code=NotImplemented,error.type=NotImplemented,handler=checkout] 1 events
}

// Metrics for a server's operator: flows begun and ended by outcome, how
// long they ran, the errors raised in steps, the waits in named gates.
func ExampleHooks_metrics() {
	reader := sdkmetric.NewManualReader() // or a PeriodicReader with an exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	db := asyncsteps.NewMutex(1)
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
		MeterProvider: mp,
		SyncerName: func(obj asyncsteps.Syncer) string {
			if obj == db {
				return "db"
			}
			return ""
		},
	}))

	// Two branches need the db: the second waits a second for the first.
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Sync(db, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.Tool().Deferred(time.Second, func() { as.Success() })
		})
		p.Sync(db, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Error(asyncsteps.NotImplemented, "later")
		})
	})
	r.Run(context.Background())

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), "count", p.Count)
			}
		}
	}
	// Output:
	// asyncsteps.flow.started  1
	// asyncsteps.flow.ended asyncsteps.error.code=NotImplemented,error.type=NotImplemented 1
	// asyncsteps.step.failed asyncsteps.error.code=NotImplemented,error.type=NotImplemented 1
	// asyncsteps.flow.duration asyncsteps.error.code=NotImplemented,error.type=NotImplemented count 1
	// asyncsteps.sync.wait.duration asyncsteps.sync.kind=mutex,asyncsteps.sync.name=db count 1
}
