package otelsteps_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// traced is a Loop made in a testing/synctest bubble, whose flows are
// traced into rec; its Await functions trace "call" spans with tracer.
type traced struct {
	loop   *asyncsteps.Loop
	rec    *tracetest.SpanRecorder
	tracer trace.Tracer
}

// untilDone is an Await function that waits for its context to end.
func untilDone(ctx context.Context) (any, error) { <-ctx.Done(); return nil, ctx.Err() }

// outcome is a flow whose spans a test checks: build adds its steps to r;
// run, if set, runs it in place of r.Run(ctx).
type outcome struct {
	name  string
	build func(tr *traced, r *asyncsteps.Root)
	run   func(tr *traced, ctx context.Context, r *asyncsteps.Root) error
	err   string // the error Run returns, "" for none
	spans []string
}

// deadlineInfo is the info of the Timeout of Run's deadline, which says
// so; a step's own timeout has none.
const deadlineInfo = "the flow's context deadline passed"

var outcomes = []outcome{{
	name:  "success",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(func(as steps, _ ...any) { as.Success("ok") }) },
	spans: []string{`asyncsteps.flow <- request: Unset ""`},
}, {
	name: "failure",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.NotImplemented, "nope") })
	},
	err:   "NotImplemented: nope",
	spans: []string{`asyncsteps.flow <- request: Error "NotImplemented: nope" asyncsteps.error.code=NotImplemented error.type=NotImplemented event asyncsteps.step_error asyncsteps.error.code=NotImplemented asyncsteps.error.info=nope`},
}, {
	name: "handler replaces the error",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, "down") },
			func(as steps, code string) { as.Error(asyncsteps.ConnectError, "wrapped "+code) })
	},
	err:   "ConnectError: wrapped CommError",
	spans: []string{`asyncsteps.flow <- request: Error "ConnectError: wrapped CommError" asyncsteps.error.code=ConnectError error.type=ConnectError event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down event asyncsteps.step_error asyncsteps.error.code=ConnectError asyncsteps.error.info=wrapped CommError`},
}, {
	name: "handler recovers",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, "down") },
			func(as steps, _ string) { as.Success() })
	},
	spans: []string{`asyncsteps.flow <- request: Unset "" event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`},
}, {
	name:  "Root.Cancel",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(func(as steps, _ ...any) { as.WaitExternal() }) },
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		p := r.Promise()
		synctest.Wait()
		r.Cancel()
		return (<-p).Err
	},
	err:   "context canceled",
	spans: []string{`asyncsteps.flow <- -: Unset "" asyncsteps.canceled=true`},
}, {
	name:  "Run's context cancelled",
	build: func(_ *traced, r *asyncsteps.Root) { r.Await(untilDone) },
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		ctx, cancel := context.WithCancel(ctx)
		go func() { synctest.Wait(); cancel() }()
		_, err := r.Run(ctx)
		return err
	},
	err: "context canceled",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- request: Unset "" asyncsteps.canceled=true`,
	},
}, {
	// The Await's span describes the step's Timeout as the flow's does,
	// "Timeout" with no info: it said "Timeout: context deadline
	// exceeded", the text of its context's error.
	name: "step timeout",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) { as.SetTimeout(time.Second); as.Await(untilDone) })
	},
	err: "Timeout",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`,
		`asyncsteps.flow <- request: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
	},
}, {
	name:  "Run's deadline",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(func(as steps, _ ...any) { as.WaitExternal() }) },
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := r.Run(ctx)
		return err
	},
	err:   "Timeout: " + deadlineInfo,
	spans: []string{`asyncsteps.flow <- request: Error "Timeout: ` + deadlineInfo + `" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=` + deadlineInfo},
}, {
	// The Await's span says "Timeout" as for a step's timeout: its
	// context ends with context.DeadlineExceeded either way. The flow's
	// span and its step error say which.
	name:  "Run's deadline during an Await",
	build: func(_ *traced, r *asyncsteps.Root) { r.Await(untilDone) },
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := r.Run(ctx)
		return err
	},
	err: "Timeout: " + deadlineInfo,
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`,
		`asyncsteps.flow <- request: Error "Timeout: ` + deadlineInfo + `" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=` + deadlineInfo,
	},
}, {
	name:  "panic in a step",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(func(as steps, _ ...any) { panic(errors.New("boom")) }) },
	err:   "InternalError: boom",
	spans: []string{`asyncsteps.flow <- request: Error "InternalError: boom" asyncsteps.error.code=InternalError error.type=InternalError event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=boom event exception exception.type=*errors.errorString exception.message=panic: boom exception.stacktrace=<debug.Stack>`},
}, {
	name:  "Goexit in a step",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(func(as steps, _ ...any) { runtime.Goexit() }) },
	err:   "InternalError: runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)",
	spans: []string{`asyncsteps.flow <- request: Error "InternalError: runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)" asyncsteps.error.code=InternalError error.type=InternalError event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)`},
}, {
	name: "parallel Awaits, one fails",
	build: func(tr *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Await(func(ctx context.Context) (any, error) {
				_, call := tr.tracer.Start(ctx, "call")
				call.End()
				return "ok", nil
			})
			p.Await(untilDone)
			p.Await(func(context.Context) (any, error) {
				time.Sleep(time.Second) // after the first two have begun
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "down"}
			})
		})
	},
	err: "CommError: down",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError`,
		`asyncsteps.await <- asyncsteps.flow: Unset ""`,
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- request: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`,
		`call <- asyncsteps.await: Unset ""`,
	},
}, {
	name: "Await panics and exits",
	build: func(_ *traced, r *asyncsteps.Root) {
		recover := func(as steps, _ string) { as.Success() }
		r.Await(func(context.Context) (any, error) { panic("boom") }, recover)
		r.Await(func(context.Context) (any, error) { runtime.Goexit(); return nil, nil }, recover)
		r.Await(func(context.Context) (any, error) { return nil, errors.New("plain") }, recover)
	},
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "InternalError: panic: boom" asyncsteps.error.code=InternalError error.type=InternalError event exception exception.type=string exception.message=panic: boom exception.stacktrace=<debug.Stack>`,
		`asyncsteps.await <- asyncsteps.flow: Error "InternalError: plain" asyncsteps.error.code=InternalError error.type=InternalError`,
		`asyncsteps.await <- asyncsteps.flow: Error "InternalError: runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)" asyncsteps.error.code=InternalError error.type=InternalError`,
		`asyncsteps.flow <- request: Unset "" event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=panic: boom event exception exception.type=string exception.message=panic: boom exception.stacktrace=<debug.Stack> event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?) event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=plain`,
	},
}, {
	name: "Break and Continue",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Repeat(5, func(as steps, i int) {
			if i == 0 {
				as.Continue()
			}
			as.Break()
		})
	},
	spans: []string{`asyncsteps.flow <- request: Unset ""`},
}, {
	name: "Retry",
	build: func(_ *traced, r *asyncsteps.Root) {
		asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 3, Timeout: time.Second}, func(as steps, i int) {
			if i == 0 {
				as.Error(asyncsteps.CommError, "try")
			}
			as.Await(func(ctx context.Context) (any, error) {
				if i == 1 {
					return untilDone(ctx)
				}
				return "ok", nil
			})
		})
	},
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`,
		`asyncsteps.await <- asyncsteps.flow: Unset ""`,
		`asyncsteps.flow <- request: Unset "" event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=try event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
	},
}, {
	name: "Sync queued, admitted, rejected",
	build: func(_ *traced, r *asyncsteps.Root) {
		m := asyncsteps.NewMutex(1, 1)
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Sync(m, func(as steps, _ ...any) {
				as.Await(func(context.Context) (any, error) { time.Sleep(time.Second); return nil, nil })
			})
			p.Sync(m, func(as steps, _ ...any) {})                                            // queued, then admitted
			p.Sync(m, func(as steps, _ ...any) {}, func(as steps, _ string) { as.Success() }) // rejected
		})
	},
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset ""`,
		`asyncsteps.flow <- request: Unset "" event asyncsteps.step_error asyncsteps.error.code=DefenseRejected asyncsteps.error.info=Mutex queue limit`,
	},
}, {
	name: "RunHelping",
	build: func(tr *traced, r *asyncsteps.Root) {
		r.Await(func(ctx context.Context) (any, error) {
			_, call := tr.tracer.Start(ctx, "call")
			call.End()
			return nil, nil
		})
	},
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		_, err := r.RunHelping(ctx)
		return err
	},
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset ""`,
		`asyncsteps.flow <- request: Unset ""`,
		`call <- asyncsteps.await: Unset ""`,
	},
}, {
	name: "a flow run by an Await",
	build: func(tr *traced, r *asyncsteps.Root) {
		r.Await(func(ctx context.Context) (any, error) {
			inner := asyncsteps.New(asyncsteps.WithTool(tr.loop))
			inner.Add(func(as steps, _ ...any) { as.Error("NotFound", "inner") })
			return inner.Run(ctx)
		})
	},
	err: "NotFound: inner",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Error "NotFound: inner" asyncsteps.error.code=NotFound error.type=NotFound`,
		`asyncsteps.flow <- asyncsteps.await: Error "NotFound: inner" asyncsteps.error.code=NotFound error.type=NotFound event asyncsteps.step_error asyncsteps.error.code=NotFound asyncsteps.error.info=inner`,
		`asyncsteps.flow <- request: Error "NotFound: inner" asyncsteps.error.code=NotFound error.type=NotFound event asyncsteps.step_error asyncsteps.error.code=NotFound asyncsteps.error.info=inner`,
	},
}, {
	name: "Sync waiter times out",
	build: func(_ *traced, r *asyncsteps.Root) {
		m := asyncsteps.NewMutex(1)
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Sync(m, func(as steps, _ ...any) { as.Await(untilDone) })
			p.Add(func(as steps, _ ...any) {
				as.SetTimeout(time.Second)
				as.Sync(m, func(as steps, _ ...any) {})
			})
		})
	},
	err: "Timeout",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- request: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
	},
}, {
	name: "a sibling branch times out",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Await(untilDone)
			p.Add(func(as steps, _ ...any) { as.SetTimeout(time.Second); as.WaitExternal() })
		})
	},
	err: "Timeout",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- request: Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
	},
}, {
	name:  "a misused Root",
	build: func(_ *traced, r *asyncsteps.Root) { r.Add(nil) },
	err:   "InternalError: Add: nil step function",
	spans: []string{`asyncsteps.flow <- request: Error "InternalError: Add: nil step function" asyncsteps.error.code=InternalError error.type=InternalError event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=Add: nil step function`},
}, {
	name: "Loop closed",
	build: func(_ *traced, r *asyncsteps.Root) {
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Add(func(as steps, _ ...any) { as.WaitExternal() })
			p.Await(untilDone)
		})
	},
	run: func(tr *traced, ctx context.Context, r *asyncsteps.Root) error {
		p := r.Promise()
		synctest.Wait()
		tr.loop.Close()
		return (<-p).Err
	},
	err: "InternalError: the flow's loop is closed",
	spans: []string{
		`asyncsteps.await <- asyncsteps.flow: Unset "" asyncsteps.canceled=true`,
		`asyncsteps.flow <- -: Error "InternalError: the flow's loop is closed" asyncsteps.error.code=InternalError error.type=InternalError`,
	},
}}

// TestSpansOfEachOutcome runs each outcome's flow under a context
// carrying a "request" span, and checks the spans exactly, and that every
// span started was ended once the flow and its loop are done.
func TestSpansOfEachOutcome(t *testing.T) {
	for _, o := range outcomes {
		t.Run(o.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				tr := &traced{loop: asyncsteps.NewLoop(), rec: rec, tracer: tp.Tracer("test")}
				defer tr.loop.Close()
				tr.loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
				ctx, request := tr.tracer.Start(context.Background(), "request")
				r := asyncsteps.New(asyncsteps.WithTool(tr.loop))
				o.build(tr, r)
				var err error
				if o.run != nil {
					err = o.run(tr, ctx, r)
				} else {
					_, err = r.Run(ctx)
				}
				if got := errText(err); got != o.err {
					t.Errorf("error %q, want %q", got, o.err)
				}
				tr.loop.Close()
				synctest.Wait() // the Await goroutines end their spans
				request.End()
				want := strings.Join(append(o.spans, `request <- -: Unset ""`), "\n")
				if got := describe(rec.Ended()); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
				checkSameTrace(t, rec.Ended())
			})
		})
	}
}

// checkSameTrace checks that each span with a parent is in its parent's
// trace, so that the spans under "request" are all in its trace.
func checkSameTrace(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && p.TraceID() != s.SpanContext().TraceID() {
			t.Errorf("span %s in trace %v, its parent in %v", s.Name(), s.SpanContext().TraceID(), p.TraceID())
		}
	}
}

// A flow run under a context that carries a remote span context (one a
// propagator extracted from a request's headers) is a child of it, in
// its trace, and so are the flow's Awaits, under the flow.
func TestFlowContinuesARemoteTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}))
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Await(func(context.Context) (any, error) { return nil, nil })
	if _, err := r.Run(trace.ContextWithRemoteSpanContext(context.Background(), remote)); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != otelsteps.AwaitSpan || spans[1].Name() != otelsteps.FlowSpan {
		t.Fatalf("spans:\n%s\nwant an Await's, then a flow's", describe(spans))
	}
	await, flow := spans[0], spans[1]
	if !flow.Parent().Equal(remote) || flow.SpanContext().TraceID() != remote.TraceID() {
		t.Errorf("flow span %v under %v, want under %v", flow.SpanContext(), flow.Parent(), remote)
	}
	if await.Parent().SpanID() != flow.SpanContext().SpanID() || await.SpanContext().TraceID() != remote.TraceID() {
		t.Errorf("Await span %v under %v, want under the flow's %v", await.SpanContext(), await.Parent(), flow.SpanContext())
	}
}
