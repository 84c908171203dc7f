package otelsteps_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

type steps = asyncsteps.AsyncSteps

// describe writes one line per ended span: its name, its parent's name
// ("-" for a root span), its status, attributes and events, sorted so that
// spans ended by concurrent Await goroutines compare in a fixed order.
func describe(spans []sdktrace.ReadOnlySpan) string {
	names := map[trace.SpanID]string{}
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var lines []string
	for _, s := range spans {
		parent := "-"
		if p := s.Parent(); p.IsValid() {
			parent = names[p.SpanID()]
			if parent == "" {
				parent = "?" // a parent that did not end
			}
		}
		lines = append(lines, spanLine(s, s.Name(), parent))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// spanLine is the line of describe and spanTree for s, named name, whose
// parent is named parent: its status, attributes and events.
func spanLine(s sdktrace.ReadOnlySpan, name, parent string) string {
	line := fmt.Sprintf("%s <- %s: %s %q", name, parent, s.Status().Code, s.Status().Description)
	for _, a := range s.Attributes() {
		line += fmt.Sprintf(" %s=%s", a.Key, a.Value.String())
	}
	for _, e := range s.Events() {
		line += " event " + e.Name
		for _, a := range e.Attributes {
			line += fmt.Sprintf(" %s=%s", a.Key, shortStack(a))
		}
	}
	return line
}

// shortStack returns a's value, or "<debug.Stack>" for a stack trace as
// runtime/debug.Stack prints it, whose goroutine number and addresses
// change from run to run (exceptions_test.go checks its text).
func shortStack(a attribute.KeyValue) string {
	v := a.Value.String()
	if a.Key == semconv.ExceptionStacktraceKey && strings.HasPrefix(v, "goroutine ") &&
		strings.Contains(v, "\nruntime/debug.Stack()\n") {
		return "<debug.Stack>"
	}
	return v
}

func TestSpansOfFlowsAndAwaits(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")

	// A flow whose two Awaits run in parallel: one traces a call of its
	// own, the other fails and its handler recovers.
	fanOut := asyncsteps.New(asyncsteps.WithTool(tt))
	fanOut.Add(func(as steps, _ ...any) {
		p := as.Parallel()
		p.Await(func(ctx context.Context) (any, error) {
			_, call := tp.Tracer("test").Start(ctx, "upstream call")
			call.End()
			return "ok", nil
		})
		p.Await(func(context.Context) (any, error) {
			return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"}
		}, func(as steps, code string) { as.Success() })
	})
	if _, err := fanOut.Run(ctx); err != nil {
		t.Fatal(err)
	}

	failed := asyncsteps.New(asyncsteps.WithTool(tt))
	failed.Add(func(as steps, _ ...any) { as.Error(asyncsteps.NotImplemented, "nope") })
	failed.Run(context.Background())

	cancelled := asyncsteps.New(asyncsteps.WithTool(tt))
	cancelled.Add(func(as steps, _ ...any) { as.WaitExternal() })
	cctx, cancel := context.WithCancel(context.Background())
	tt.Immediate(cancel)
	cancelled.Run(cctx)
	request.End()

	want := strings.Join([]string{
		`asyncsteps.await <- asyncsteps.flow: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError`,
		`asyncsteps.await <- asyncsteps.flow: Unset ""`,
		`asyncsteps.flow <- -: Error "NotImplemented: nope" asyncsteps.error.code=NotImplemented error.type=NotImplemented event asyncsteps.step_error asyncsteps.error.code=NotImplemented asyncsteps.error.info=nope`,
		`asyncsteps.flow <- -: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- request: Unset "" event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`,
		`request <- -: Unset ""`,
		`upstream call <- asyncsteps.await: Unset ""`,
	}, "\n")
	if got := describe(rec.Ended()); got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
	if n := len(rec.Started()); n != 7 {
		t.Errorf("%d spans started, want 7: every span ended", n)
	}
}

// The Await spans are children of their own flow's span, not of another
// flow's: two flows run at once on one tool.
func TestAwaitSpansBelongToTheirFlow(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
	var chs []<-chan asyncsteps.Result
	for range 2 {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Await(func(context.Context) (any, error) { return nil, nil })
		r.Await(func(context.Context) (any, error) { return nil, nil })
		chs = append(chs, r.Promise())
	}
	for _, ch := range chs {
		for {
			select {
			case <-ch:
			default:
				tt.Advance(0)
				continue
			}
			break
		}
	}
	parents := map[trace.SpanID]int{}
	flows := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case otelsteps.FlowSpan:
			flows[s.SpanContext().SpanID()] = true
		case otelsteps.AwaitSpan:
			parents[s.Parent().SpanID()]++
		}
	}
	if len(flows) != 2 || len(parents) != 2 {
		t.Fatalf("%d flow spans and Await spans under %d parents, want 2 and 2", len(flows), len(parents))
	}
	for p, n := range parents {
		if !flows[p] || n != 2 {
			t.Errorf("%d Await spans under %v (a flow span: %v), want 2 under each flow", n, p, flows[p])
		}
	}
}

// An Await cancelled with its flow is not an error of its span, as the
// flow's is not: its function returned ctx.Err(), which the step never
// fails with. Its span was marked Error "InternalError: context canceled".
// An Await whose step times out is an error, also when its function
// ignores its context and then succeeds: its span said Unset.
func TestCancelledAwaitIsNoError(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	l := asyncsteps.NewLoop()
	defer l.Close()
	l.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
	untilDone := func(ctx context.Context) (any, error) { <-ctx.Done(); return nil, ctx.Err() }

	started := make(chan struct{})
	cancelled := asyncsteps.New(asyncsteps.WithTool(l))
	cancelled.Await(func(ctx context.Context) (any, error) { close(started); return untilDone(ctx) })
	p := cancelled.Promise()
	<-started
	cancelled.Cancel()
	<-p

	timedOut := asyncsteps.New(asyncsteps.WithTool(l))
	timedOut.Add(func(as steps, _ ...any) {
		as.SetTimeout(time.Millisecond)
		as.Await(untilDone)
	})
	<-timedOut.Promise()

	// A function that ignores its context and succeeds after its step
	// timed out: the step failed all the same.
	late := make(chan struct{})
	ignoring := asyncsteps.New(asyncsteps.WithTool(l))
	ignoring.Add(func(as steps, _ ...any) {
		as.SetTimeout(time.Millisecond)
		as.Await(func(context.Context) (any, error) { <-late; return "late", nil })
	})
	<-ignoring.Promise()
	close(late)

	// The spans of Awaits end on their goroutines, after the flows' ends.
	for deadline := time.Now().Add(10 * time.Second); len(rec.Ended()) < 6 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	want := strings.Join([]string{
		`asyncsteps.await <- asyncsteps.flow: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`,
		`asyncsteps.await <- asyncsteps.flow: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`,
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- -: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
		`asyncsteps.flow <- -: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
		`asyncsteps.flow <- -: Unset "" asyncsteps.canceled=true`,
	}, "\n")
	if got := describe(rec.Ended()); got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
}
