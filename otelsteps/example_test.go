package otelsteps_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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
