package otelsteps_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// queryError is a panic value of a named type of this package.
type queryError struct{}

func (*queryError) Error() string { return "query failed" }

// eventNames returns the names of the events of span, in order.
func eventNames(span tracetest.SpanStub) string {
	var names []string
	for _, e := range span.Events {
		names = append(names, e.Name)
	}
	return strings.Join(names, " ")
}

// exceptionsOf returns the attributes of the exception events of span.
func exceptionsOf(span tracetest.SpanStub) [][]attribute.KeyValue {
	var found [][]attribute.KeyValue
	for _, e := range span.Events {
		if e.Name == semconv.ExceptionEventName {
			found = append(found, e.Attributes)
		}
	}
	return found
}

// exceptionOf returns the attributes of the one exception event of span,
// failing t if it has none or more.
func exceptionOf(t *testing.T, span tracetest.SpanStub) []attribute.KeyValue {
	t.Helper()
	found := exceptionsOf(span)
	if len(found) != 1 {
		t.Fatalf("span %s has %d exception events, want 1", span.Name, len(found))
	}
	return found[0]
}

// checkException checks that attrs are exactly those of p's exception
// event, and that its stack names the function that panicked.
func checkException(t *testing.T, attrs []attribute.KeyValue, typ, message string, p *asyncsteps.PanicError, panicker string) {
	t.Helper()
	want := []attribute.KeyValue{
		semconv.ExceptionType(typ),
		semconv.ExceptionMessage(message),
		semconv.ExceptionStacktrace(string(p.Stack)),
	}
	if len(attrs) != len(want) {
		t.Fatalf("exception attributes %v, want %v", attrs, want)
	}
	for i := range want {
		if attrs[i] != want[i] {
			t.Errorf("exception attribute %d: %s=%q, want %s=%q",
				i, attrs[i].Key, attrs[i].Value.String(), want[i].Key, want[i].Value.String())
		}
	}
	if !strings.Contains(string(p.Stack), panicker) {
		t.Errorf("the stack does not name %s:\n%s", panicker, p.Stack)
	}
}

// A panic in a step is an exception event of its flow's span, after the
// step error event and at the same time, as OpenTelemetry's semantic
// conventions have it: the fully qualified type of the panic value, the
// message, and the stack of the goroutine at the panic, the one the
// engine recorded in the *PanicError it made the error's Cause. An
// error handler that raises another error in its place raises no panic
// of its own: the span has one exception event. Before, a panic's span
// had no stack.
func TestPanicInAStepIsAnException(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, Now: tt.Now}))
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(steps, ...any) { panic(&queryError{}) },
		func(as steps, _ string) { as.Error(asyncsteps.Unauthorized, "replaced") })
	_, err := r.Run(context.Background())
	var flowErr *asyncsteps.Error
	if !errors.As(err, &flowErr) || flowErr.Code != asyncsteps.Unauthorized {
		t.Fatalf("Run: %v, want Unauthorized", err)
	}
	p, ok := flowErr.Cause.(*asyncsteps.PanicError)
	if !ok {
		t.Fatalf("the flow's error has cause %T, want the *PanicError", flowErr.Cause)
	}

	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the flow's", len(spans))
	}
	flow := spans[0]
	if got, want := eventNames(flow), "asyncsteps.step_error exception asyncsteps.step_error"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if at := flow.Events[1].Time; !at.Equal(flow.Events[0].Time) || !at.Equal(tt.Now()) {
		t.Errorf("exception at %v, step error at %v, want both at %v", at, flow.Events[0].Time, tt.Now())
	}
	checkException(t, exceptionOf(t, flow),
		"*github.com/asyncsteps/asyncsteps/otelsteps_test.queryError", "panic: query failed",
		p, "otelsteps_test.TestPanicInAStepIsAnException.func1(")
}

// An Await function that panics fails its span with an exception event,
// at the span's end, and the step error that the panic raises adds one
// to its flow's span: the same panic, the one in the step's
// LastException. So does a function that returns a *PanicError (one
// that recovered a panic of its own goroutine), which the engine makes
// the Cause of the step's error as it does for a panic's; without a
// stack, with no exception.stacktrace. A function that returns a plain Go
// error raises an InternalError too (the engine maps every error it
// cannot classify to it), but no exception: it did not panic.
func TestPanicInAnAwaitIsAnException(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, Now: tt.Now}))
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	var p *asyncsteps.PanicError
	r.Await(func(context.Context) (any, error) { panic("boom") }, func(as steps, _ string) {
		p, _ = as.State().LastException.(*asyncsteps.PanicError)
		as.Success()
	})
	recovered := func(as steps, _ string) { as.Success() }
	r.Await(func(context.Context) (any, error) { return nil, &asyncsteps.PanicError{Value: 42} }, recovered)
	r.Await(func(context.Context) (any, error) { return nil, errors.New("plain") })
	_, err := r.Run(context.Background())
	if errText(err) != "InternalError: plain" {
		t.Fatalf("Run: %v, want InternalError: plain", err)
	}
	if p == nil {
		t.Fatal("the handler saw no *PanicError")
	}

	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 3 Awaits and their flow", len(spans))
	}
	panicked, stackless, plain, flow := spans[0], spans[1], spans[2], spans[3]
	checkException(t, exceptionOf(t, panicked), "string", "panic: boom",
		p, "otelsteps_test.TestPanicInAnAwaitIsAnException.func1(")
	if at := panicked.Events[0].Time; !at.Equal(panicked.EndTime) {
		t.Errorf("exception at %v, want at the span's end, %v", at, panicked.EndTime)
	}
	// A *PanicError made without its stack has an exception all the same.
	stacklessWant := []attribute.KeyValue{semconv.ExceptionType("int"), semconv.ExceptionMessage("panic: 42")}
	if got := exceptionOf(t, stackless); !slices.Equal(got, stacklessWant) {
		t.Errorf("exception of a *PanicError without a stack: %v, want %v", got, stacklessWant)
	}
	if len(plain.Events) != 0 || plain.Status.Description != "InternalError: plain" {
		t.Errorf("the plain error's span: %q with events %v, want InternalError: plain alone",
			plain.Status.Description, plain.Events)
	}
	want := "asyncsteps.step_error exception asyncsteps.step_error exception asyncsteps.step_error"
	if got := eventNames(flow); got != want {
		t.Fatalf("the flow's events: %s, want %s", got, want)
	}
	exceptions := exceptionsOf(flow)
	checkException(t, exceptions[0], "string", "panic: boom",
		p, "otelsteps_test.TestPanicInAnAwaitIsAnException.func1(")
	if !slices.Equal(exceptions[1], stacklessWant) {
		t.Errorf("the flow's exception of a *PanicError without a stack: %v, want %v", exceptions[1], stacklessWant)
	}
}

// recurse calls itself n times, then panics: a stack of n frames more.
func recurse(n int) {
	if n == 0 {
		panic("deep")
	}
	recurse(n - 1)
}

// The stack of a deep recursion is exported cut to the cap, 8 KiB unless
// set, after its last whole line that fits and with a line "…": its top,
// where the panic was, stays. A negative cap exports it whole.
func TestPanicStackIsCut(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxStack int
		cap      int
	}{
		{"default", 0, otelsteps.DefaultMaxStackBytes},
		{"set", 1000, 1000},
		{"none", -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, Now: tt.Now, MaxStackBytes: c.maxStack}))
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(steps, ...any) { recurse(300) })
			_, err := r.Run(context.Background())
			var flowErr *asyncsteps.Error
			if !errors.As(err, &flowErr) {
				t.Fatalf("Run: %v, want the panic's InternalError", err)
			}
			p, ok := flowErr.Cause.(*asyncsteps.PanicError)
			if !ok || len(p.Stack) <= otelsteps.DefaultMaxStackBytes {
				t.Fatalf("the panic's stack: %d bytes, want over %d", len(p.Stack), otelsteps.DefaultMaxStackBytes)
			}
			var got string
			for _, a := range exceptionOf(t, exp.GetSpans()[0]) {
				if a.Key == semconv.ExceptionStacktraceKey {
					got = a.Value.AsString()
				}
			}
			if c.cap == 0 {
				if got != string(p.Stack) {
					t.Errorf("exported %d bytes of the stack, want all %d", len(got), len(p.Stack))
				}
				return
			}
			kept, ok := strings.CutSuffix(got, "\n…")
			if !ok || len(got) > c.cap || len(got) < c.cap-200 || !strings.HasPrefix(string(p.Stack), kept+"\n") {
				t.Errorf("exported %d bytes ending %q, want the stack's whole lines in at most %d bytes and a line \"…\"",
					len(got), got[max(len(got)-40, 0):], c.cap)
			}
			if !strings.Contains(kept, "otelsteps_test.recurse(") {
				t.Errorf("the stack kept does not name the function that panicked:\n%s", kept)
			}
		})
	}
}

// A panic has one exception event on its flow's span however other panics
// come between it and the error an error handler raises in its place: the
// panic of a cancel handler of a sibling branch that the first cancels
// (a cleanup that panics), or of a sibling that panics while the first's
// handler waits. Before, the span remembered the last panic alone, and the
// replacement, which keeps the first panic as its Cause, exported the
// first again.
func TestPanicIsOneExceptionWhateverComesBetween(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(r *asyncsteps.Root)
		err   string
		want  string
	}{{
		name: "a sibling's cancel handler panics",
		build: func(r *asyncsteps.Root) {
			r.Add(func(as steps, _ ...any) {
				p := as.Parallel()
				p.Add(func(as steps, _ ...any) { as.SetCancel(func(steps) { panic("cleanup") }) })
				p.Add(func(steps, ...any) { panic("first") })
			}, func(as steps, _ string) { as.Error(asyncsteps.CommError, "replaced") })
		},
		err:  "CommError: replaced",
		want: "InternalError:first panic:first InternalError:cleanup panic:cleanup CommError:replaced",
	}, {
		name: "a sibling panics while the handler waits",
		build: func(r *asyncsteps.Root) {
			var waiting steps
			r.Add(func(as steps, _ ...any) {
				p := as.Parallel()
				p.Add(func(steps, ...any) { panic("first") }, func(as steps, _ string) {
					waiting = as
					as.WaitExternal()
				})
				p.Add(func(steps, ...any) { panic("second") }, func(as steps, _ string) { as.Success() })
				p.Add(func(as steps, _ ...any) {
					waiting.Error(asyncsteps.CommError, "replaced")
					as.Success()
				})
			})
		},
		err:  "CommError: replaced",
		want: "InternalError:first panic:first InternalError:second panic:second CommError:replaced",
	}} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			c.build(r)
			_, err := r.Run(context.Background())
			var flowErr *asyncsteps.Error
			if errText(err) != c.err || !errors.As(err, &flowErr) {
				t.Fatalf("Run: %v, want %s", err, c.err)
			}
			if p, ok := flowErr.Cause.(*asyncsteps.PanicError); !ok || p.Value != "first" {
				t.Fatalf("the flow's error has cause %#v, want the first panic", flowErr.Cause)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want the flow's", len(spans))
			}
			if got := eventSummary(spans[0]); got != c.want {
				t.Errorf("the flow's events:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// eventSummary writes the events of span in order: a step error as its
// code and info, an exception as its message.
func eventSummary(span tracetest.SpanStub) string {
	var events []string
	for _, e := range span.Events {
		var code, info, message string
		for _, a := range e.Attributes {
			switch a.Key {
			case otelsteps.CodeKey:
				code = a.Value.AsString()
			case otelsteps.InfoKey:
				info = a.Value.AsString()
			case semconv.ExceptionMessageKey:
				message = a.Value.AsString()
			}
		}
		switch e.Name {
		case otelsteps.StepErrorEvent:
			events = append(events, code+":"+info)
		case semconv.ExceptionEventName:
			events = append(events, strings.ReplaceAll(message, " ", ""))
		default:
			events = append(events, e.Name)
		}
	}
	return strings.Join(events, " ")
}

// A panic in a flow run by an Await function is an exception of that
// flow's span alone, also when an error handler of the outer flow raises
// an error in place of the one the Await failed with, which keeps the
// panic as its Cause, as it does without the handler: the outer flow's
// span has the step errors, no exception. Before, the handler's error
// added the inner panic's exception to the outer flow's span.
func TestPanicOfAFlowRunByAnAwaitIsItsOwn(t *testing.T) {
	replace := func(as steps, _ string) { as.Error(asyncsteps.CommError, "replaced") }
	for _, c := range []struct {
		name  string
		build func(loop *asyncsteps.Loop, outer *asyncsteps.Root, inner *asyncsteps.Root)
		spans []string
	}{{
		name: "Run by an Await function",
		build: func(_ *asyncsteps.Loop, outer, inner *asyncsteps.Root) {
			outer.Await(func(ctx context.Context) (any, error) { return inner.Run(ctx) }, replace)
		},
		spans: []string{
			"asyncsteps.flow: InternalError:inner panic:inner", // the inner flow
			"asyncsteps.await: ",
			"asyncsteps.flow: InternalError:inner CommError:replaced",
		},
	}, {
		name: "AwaitFlow",
		build: func(_ *asyncsteps.Loop, outer, inner *asyncsteps.Root) {
			outer.Add(func(as steps, _ ...any) { asyncsteps.AwaitFlow(as, inner) }, replace)
		},
		spans: []string{
			"asyncsteps.flow: InternalError:inner panic:inner", // the inner flow
			"asyncsteps.await_flow: ",
			"asyncsteps.flow: InternalError:inner CommError:replaced",
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				exp := tracetest.NewInMemoryExporter()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
				outer := asyncsteps.New(asyncsteps.WithTool(loop))
				inner := asyncsteps.New(asyncsteps.WithTool(loop))
				inner.Add(func(steps, ...any) { panic("inner") })
				c.build(loop, outer, inner)
				_, err := outer.Run(context.Background())
				var flowErr *asyncsteps.Error
				if errText(err) != "CommError: replaced" || !errors.As(err, &flowErr) {
					t.Fatalf("Run: %v, want CommError: replaced", err)
				}
				if p, ok := flowErr.Cause.(*asyncsteps.PanicError); !ok || p.Value != "inner" {
					t.Fatalf("the flow's error has cause %#v, want the inner flow's panic", flowErr.Cause)
				}
				synctest.Wait()
				var got []string
				for _, s := range exp.GetSpans() {
					got = append(got, s.Name+": "+eventSummary(s))
				}
				if strings.Join(got, "\n") != strings.Join(c.spans, "\n") {
					t.Errorf("spans in the order ended:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.spans, "\n"))
				}
			})
		})
	}
}
