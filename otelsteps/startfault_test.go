package otelsteps_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// faultyProcessor is a span processor that, as the span named span
// number faultAt (from 1) starts, panics or calls runtime.Goexit (a test's
// processor calling t.Fatal).
type faultyProcessor struct {
	sdktrace.SpanProcessor
	span    string
	fault   func()
	faultAt int32
	starts  *atomic.Int32
}

func (p faultyProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	p.SpanProcessor.OnStart(ctx, s)
	if s.Name() == p.span && p.starts.Add(1) == p.faultAt {
		p.fault()
	}
}

// A FlowStart hook that the tracer cuts short fails the flow, and FlowEnd
// still sees it end, with the context the flow began with: the span in
// it is the caller's, or that of the Await whose function runs the flow,
// not one of the flow. It was given the flow's step error event, and
// ended with the flow's InternalError as its status: the request's span,
// ended by the flow it started, could no longer be completed by its
// owner; the span of an outer flow ended as its Await began.
func TestFailedFlowStartLeavesTheCallersSpan(t *testing.T) {
	internal := `Error "InternalError: %s" asyncsteps.error.code=InternalError error.type=InternalError`
	for _, c := range []struct {
		name   string
		fault  func()
		info   string
		nested bool
	}{
		{"panic", func() { panic("exporter bug") }, "exporter bug", false},
		{"Goexit", runtime.Goexit, "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)", false},
		{"panic in a flow run by an Await", func() { panic("exporter bug") }, "exporter bug", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				faultAt := int32(1)
				if c.nested {
					faultAt = 2
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(faultyProcessor{rec, otelsteps.FlowSpan, c.fault, faultAt, new(atomic.Int32)}))
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
				ctx, request := tp.Tracer("test").Start(context.Background(), "request")
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				if c.nested {
					r.Await(func(ctx context.Context) (any, error) {
						inner := asyncsteps.New(asyncsteps.WithTool(loop))
						inner.Add(func(as steps, _ ...any) { as.Success() })
						return inner.Run(ctx)
					})
				} else {
					r.Add(func(as steps, _ ...any) { as.Success() })
				}
				if _, err := r.Run(ctx); errText(err) != "InternalError: "+c.info {
					t.Errorf("Run: %v, want InternalError: %s", err, c.info)
				}
				if !request.IsRecording() {
					t.Errorf("the request's span was ended by the flow")
				}
				request.End()
				synctest.Wait()
				// The span that the tracer did not give back cannot be ended.
				want := []string{`request <- -: Unset ""`}
				if c.nested {
					failed := strings.ReplaceAll(internal, "%s", c.info)
					want = append(want,
						`asyncsteps.await <- asyncsteps.flow: `+failed,
						`asyncsteps.flow <- request: `+failed+` event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=`+c.info)
				}
				if got, want := describe(rec.Ended()), describeLines(want); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
			})
		})
	}
}

// An AwaitStart hook that the tracer cuts short fails the Await's step,
// and no AwaitEnd follows: the flow's span is the flow's own, with the
// step's error, and the Await has no span.
func TestFailedAwaitStartFailsTheStep(t *testing.T) {
	goexit := "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"
	for name, c := range map[string]struct {
		fault func()
		info  string
		event string // the panic's, after the step error's
	}{
		"panic": {func() { panic("exporter bug") }, "panic: exporter bug",
			" event exception exception.type=string exception.message=panic: exporter bug exception.stacktrace=<debug.Stack>"},
		"Goexit": {runtime.Goexit, goexit, ""},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(faultyProcessor{rec, otelsteps.AwaitSpan, c.fault, 1, new(atomic.Int32)}))
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
				ctx, request := tp.Tracer("test").Start(context.Background(), "request")
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Await(func(context.Context) (any, error) { return nil, nil })
				if _, err := r.Run(ctx); errText(err) != "InternalError: "+c.info {
					t.Errorf("Run: %v, want InternalError: %s", err, c.info)
				}
				request.End()
				want := describeLines([]string{
					`request <- -: Unset ""`,
					`asyncsteps.flow <- request: Error "InternalError: ` + c.info + `" asyncsteps.error.code=InternalError error.type=InternalError event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=` + c.info + c.event,
				})
				if got := describe(rec.Ended()); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
			})
		})
	}
}

// describeLines joins lines sorted, as describe writes them.
func describeLines(lines []string) string {
	lines = slices.Clone(lines)
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// errText is err's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
