package otelsteps_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// tenantKey keys a request-scoped value of the context given to Run.
type tenantKey struct{}

// spanTree writes one line per ended span, as describe does, but names
// each span, and its parent, by its name and its place in the order the
// spans started ("asyncsteps.flow#2"), found by span ID: spans of the
// same name tell apart. A parent that did not end is named so too.
func spanTree(rec *tracetest.SpanRecorder) string {
	labels := map[string]string{}
	for i, s := range rec.Started() {
		labels[s.SpanContext().SpanID().String()] = fmt.Sprintf("%s#%d", s.Name(), i+1)
	}
	var lines []string
	for _, s := range rec.Ended() {
		parent := "-"
		if p := s.Parent(); p.IsValid() {
			parent = labels[p.SpanID().String()]
		}
		lines = append(lines, spanLine(s, labels[s.SpanContext().SpanID().String()], parent))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// subflowLoops returns the loops of an outer flow and of the flow it
// runs with AwaitFlow, both with hooks h: the same loop, or two.
func subflowLoops(t *testing.T, h *asyncsteps.Hooks, sameLoop bool) (outer, sub *asyncsteps.Loop) {
	outer = asyncsteps.NewLoop()
	t.Cleanup(outer.Close)
	outer.SetHooks(h)
	if sameLoop {
		return outer, outer
	}
	sub = asyncsteps.NewLoop()
	t.Cleanup(sub.Close)
	sub.SetHooks(h)
	return outer, sub
}

// loopNames names the two cases of subflowLoops.
var loopNames = map[bool]string{true: "same loop", false: "another loop"}

// The flow that AwaitFlow runs is traced in the awaiting flow's trace:
// its span is a child of the AwaitFlow step's, a child of the awaiting
// flow's span, and its Awaits are children of its span; its Await
// functions see the request's values. Before, its span was the root of a
// trace of its own, and its functions saw none of the request's values.
func TestAwaitFlowIsTracedUnderTheFlow(t *testing.T) {
	for _, sameLoop := range []bool{true, false} {
		t.Run(loopNames[sameLoop], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), sameLoop)
				ctx, request := tp.Tracer("test").Start(context.WithValue(context.Background(), tenantKey{}, "acme"), "request")

				sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
				sub.Await(func(ctx context.Context) (any, error) { return ctx.Value(tenantKey{}), nil })
				outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
				asyncsteps.AwaitFlow(outer, sub)
				if args, err := outer.Run(ctx); err != nil || fmt.Sprint(args) != "[acme]" {
					t.Errorf("Run: %v %v, want [acme] <nil>: the sub-flow's Await function sees the request's tenant", args, err)
				}
				request.End()
				synctest.Wait()
				want := describeLines([]string{
					`request#1 <- -: Unset ""`,
					`asyncsteps.flow#2 <- request#1: Unset ""`,
					`asyncsteps.await_flow#3 <- asyncsteps.flow#2: Unset ""`,
					`asyncsteps.flow#4 <- asyncsteps.await_flow#3: Unset ""`,
					`asyncsteps.await#5 <- asyncsteps.flow#4: Unset ""`,
				})
				if got := spanTree(rec); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				checkSameTrace(t, rec.Ended())
			})
		})
	}
}

// endLog is a span processor that logs the end of each flow span, in a
// log that the flow's steps write to too.
type endLog struct {
	sdktrace.SpanProcessor
	log *eventLog
}

func (p endLog) OnEnd(s sdktrace.ReadOnlySpan) {
	p.SpanProcessor.OnEnd(s)
	p.log.add(s.Name() + " ended")
}

// eventLog is a log safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, ", ")
}

// failingSubflowStart wraps h as an application's FlowStart would that
// fails for the second flow to begin, the one AwaitFlow runs: it panics
// before it calls h's FlowStart, or after.
func failingSubflowStart(h *asyncsteps.Hooks, after bool) *asyncsteps.Hooks {
	w := *h
	var flows int
	var mu sync.Mutex
	w.FlowStart = func(ctx context.Context) context.Context {
		mu.Lock()
		flows++
		k := flows
		mu.Unlock()
		if k != 2 {
			return h.FlowStart(ctx)
		}
		if after {
			h.FlowStart(ctx)
		}
		panic("wrapper bug")
	}
	return &w
}

// A flow run by AwaitFlow whose FlowStart fails, in a hook that wraps
// these, before they ran or after, leaves the awaiting flow's span
// alone: its StepError and FlowEnd, which get the context it began with,
// the awaiting flow's values, find there the awaiting flow's record, and
// take it for no record of their own. The awaiting flow's span ends
// once, as that flow ends, with its own outcome and step errors; the
// AwaitFlow step's span ends as the step fails, with the failed start's
// error. Before,
// the failed flow's FlowEnd ended it, with the failed start's error, as
// the awaiting flow still ran, and measured the failed flow's duration
// from the awaiting flow's start.
func TestFailedAwaitFlowStartLeavesTheFlowsSpan(t *testing.T) {
	for _, c := range []struct {
		name           string
		after, metered bool
	}{
		{"before", false, false},
		{"after", true, false},
		{"before, with metrics", false, true},
		{"after, with metrics", true, true},
	} {
		for _, sameLoop := range []bool{true, false} {
			t.Run(c.name+", "+loopNames[sameLoop], func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					log := &eventLog{}
					rec := tracetest.NewSpanRecorder()
					tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(endLog{rec, log}))
					config := otelsteps.Config{TracerProvider: tp}
					m := newMetered()
					if c.metered {
						config.MeterProvider = m
					}
					h := failingSubflowStart(otelsteps.Hooks(config), c.after)
					outerLoop, subLoop := subflowLoops(t, h, sameLoop)
					ctx, request := tp.Tracer("test").Start(context.Background(), "request")

					sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
					sub.Add(func(steps, ...any) { log.add("sub's step") })
					outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
					asyncsteps.AwaitFlow(outer, sub, func(as steps, _ string) { as.Success() })
					outer.Add(func(as steps, _ ...any) {
						as.SetTimeout(time.Second) // a wait, so that the failed flow's FlowEnd has run
						as.Add(func(as steps, _ ...any) { log.add("outer's last step") })
					})
					if _, err := outer.Run(ctx); err != nil {
						t.Errorf("Run: %v", err)
					}
					request.End()
					synctest.Wait()
					want := describeLines([]string{
						`request#1 <- -: Unset ""`,
						`asyncsteps.flow#2 <- request#1: Unset "" event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=wrapper bug`,
						`asyncsteps.await_flow#3 <- asyncsteps.flow#2: Error "InternalError: wrapper bug" asyncsteps.error.code=InternalError error.type=InternalError`,
					})
					if got := spanTree(rec); got != want {
						t.Errorf("spans:\n%s\nwant:\n%s", got, want)
					}
					started := 3
					if c.after {
						started = 4 // the failed flow's span, lost with the context its FlowStart returned
					}
					if n := len(rec.Started()); n != started {
						t.Errorf("%d spans started, want %d", n, started)
					}
					if got, want := log.String(), "asyncsteps.await_flow ended, outer's last step, asyncsteps.flow ended, request ended"; got != want {
						t.Errorf("log: %s\nwant: %s", got, want)
					}
					if !c.metered {
						return
					}
					// The failed flow ends with no duration: its start
					// was lost with its context. Counted as begun once
					// the hooks' FlowStart ran.
					begun := 1
					if c.after {
						begun = 2
					}
					internal := `{asyncsteps.error.code=InternalError error.type=InternalError}`
					want = strings.Join([]string{
						`asyncsteps.flow.duration{} count=1 sum=0`,
						`asyncsteps.flow.ended` + internal + ` 1`,
						`asyncsteps.flow.ended{} 1`,
						fmt.Sprintf(`asyncsteps.flow.started{} %d`, begun),
						`asyncsteps.step.failed` + internal + ` 2`,
					}, "\n")
					if got := m.read(t); got != want {
						t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
					}
				})
			})
		}
	}
}

// An AwaitFlow step has a span of its own, a child of its flow's, and the
// flow it runs is a child of the step's span, as an Await function's work
// is a child of the Await's span: the trace reads as the code does. The
// step's span ends as the step does, with the step's outcome: the error
// it fails with, Timeout when its timeout (or one around it) ends it,
// asyncsteps.canceled when a cancel does; the flow it runs ends with its
// own. Before, the step had no span, and the flow it ran hung off the
// awaiting flow's span.
func TestAwaitFlowStepHasASpan(t *testing.T) {
	timeout := `Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`
	invalid := `Error "InvalidRequest: bad" asyncsteps.error.code=InvalidRequest error.type=InvalidRequest`
	for _, c := range []struct {
		name  string
		sub   func(sub *asyncsteps.Root)
		step  func(as steps, sub *asyncsteps.Root)
		run   func(ctx context.Context, outer *asyncsteps.Root) error
		err   string
		spans []string
	}{{
		name: "success",
		sub:  func(sub *asyncsteps.Root) { sub.Await(func(context.Context) (any, error) { return 1, nil }) },
		spans: []string{
			`asyncsteps.flow#2 <- request#1: Unset ""`,
			`asyncsteps.await_flow#3 <- asyncsteps.flow#2: Unset ""`,
			`asyncsteps.flow#4 <- asyncsteps.await_flow#3: Unset ""`,
			`asyncsteps.await#5 <- asyncsteps.flow#4: Unset ""`,
		},
	}, {
		name: "error",
		sub: func(sub *asyncsteps.Root) {
			sub.Add(func(as steps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "bad") })
		},
		err: "InvalidRequest: bad",
		spans: []string{
			`asyncsteps.flow#2 <- request#1: ` + invalid + ` event asyncsteps.step_error asyncsteps.error.code=InvalidRequest asyncsteps.error.info=bad`,
			`asyncsteps.await_flow#3 <- asyncsteps.flow#2: ` + invalid,
			`asyncsteps.flow#4 <- asyncsteps.await_flow#3: ` + invalid + ` event asyncsteps.step_error asyncsteps.error.code=InvalidRequest asyncsteps.error.info=bad`,
		},
	}, {
		name: "timeout",
		sub:  func(sub *asyncsteps.Root) { sub.Await(untilDone) },
		step: func(as steps, sub *asyncsteps.Root) {
			as.SetTimeout(time.Second)
			asyncsteps.AwaitFlow(as, sub)
		},
		err: "Timeout",
		spans: []string{
			`asyncsteps.flow#2 <- request#1: ` + timeout + ` event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
			`asyncsteps.await_flow#3 <- asyncsteps.flow#2: ` + timeout,
			`asyncsteps.flow#4 <- asyncsteps.await_flow#3: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.await#5 <- asyncsteps.flow#4: Unset "" asyncsteps.canceled=true`,
		},
	}, {
		name: "cancel",
		sub:  func(sub *asyncsteps.Root) { sub.Await(untilDone) },
		run: func(ctx context.Context, outer *asyncsteps.Root) error {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(time.Second, cancel)
			_, err := outer.Run(ctx)
			return err
		},
		err: "context canceled",
		spans: []string{
			`asyncsteps.flow#2 <- request#1: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.await_flow#3 <- asyncsteps.flow#2: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.flow#4 <- asyncsteps.await_flow#3: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.await#5 <- asyncsteps.flow#4: Unset "" asyncsteps.canceled=true`,
		},
	}} {
		for _, sameLoop := range []bool{true, false} {
			t.Run(c.name+", "+loopNames[sameLoop], func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rec := tracetest.NewSpanRecorder()
					tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
					outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), sameLoop)
					ctx, request := tp.Tracer("test").Start(context.Background(), "request")

					sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
					c.sub(sub)
					outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
					if c.step != nil {
						outer.Add(func(as steps, _ ...any) { c.step(as, sub) })
					} else {
						asyncsteps.AwaitFlow(outer, sub)
					}
					run := func(ctx context.Context, outer *asyncsteps.Root) error { _, err := outer.Run(ctx); return err }
					if c.run != nil {
						run = c.run
					}
					if err := run(ctx, outer); errText(err) != c.err {
						t.Errorf("Run: %v, want %q", err, c.err)
					}
					request.End()
					synctest.Wait()
					want := describeLines(append([]string{`request#1 <- -: Unset ""`}, c.spans...))
					if got := spanTree(rec); got != want {
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
}

// The span of an AwaitFlow step shows the wait: it begins as the step
// starts the flow, before the flow's loop, busy, begins it, and ends as
// the step's timeout ends the step, before the flow, whose cancel handler
// takes its time, has stopped.
func TestAwaitFlowSpanTimesTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), false)
		start := time.Now()

		sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
		sub.Add(func(as steps, _ ...any) {
			as.SetCancel(func(as steps) { time.Sleep(300 * time.Millisecond) })
			as.WaitExternal()
		})
		outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
		outer.Add(func(as steps, _ ...any) {
			subLoop.Immediate(func() { time.Sleep(200 * time.Millisecond) }) // the flow's loop is busy
			as.SetTimeout(time.Second)
			asyncsteps.AwaitFlow(as, sub)
		})
		if _, err := outer.Run(context.Background()); errText(err) != "Timeout" {
			t.Errorf("Run: %v, want Timeout", err)
		}
		time.Sleep(time.Second) // the flow's cancel handler returns meanwhile
		synctest.Wait()
		var got []string
		for _, s := range rec.Ended() {
			got = append(got, fmt.Sprintf("%s %v-%v", s.Name(), s.StartTime().Sub(start), s.EndTime().Sub(start)))
		}
		slices.Sort(got)
		want := []string{
			"asyncsteps.await_flow 0s-1s",
			"asyncsteps.flow 0s-1s",
			"asyncsteps.flow 200ms-1.3s",
		}
		if !slices.Equal(got, want) {
			t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// The span of an AwaitFlow step ends whatever way the step ends without
// the flow's Result: a Close of the step's loop, which runs no cancel
// handler, ends it cancelled, as the awaited flow's, which the step
// cancels; a flow that cannot start (running already) fails the step,
// whose span ends with the step's error.
func TestAwaitFlowSpanEndsWithoutAResult(t *testing.T) {
	running := `Error "InternalError: asyncsteps: Promise called on a running flow" asyncsteps.error.code=InternalError error.type=InternalError`
	for _, c := range []struct {
		name  string
		run   func(outerLoop *asyncsteps.Loop, outer, sub *asyncsteps.Root) error
		err   string
		spans []string
	}{{
		name: "closed loop",
		run: func(outerLoop *asyncsteps.Loop, outer, sub *asyncsteps.Root) error {
			sub.Await(untilDone)
			asyncsteps.AwaitFlow(outer, sub)
			time.AfterFunc(time.Second, outerLoop.Close)
			_, err := outer.Run(context.Background())
			return err
		},
		err: "InternalError: the flow's loop is closed",
		spans: []string{
			`asyncsteps.flow#1 <- -: Error "InternalError: the flow's loop is closed" asyncsteps.error.code=InternalError error.type=InternalError`,
			`asyncsteps.await_flow#2 <- asyncsteps.flow#1: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.flow#3 <- asyncsteps.await_flow#2: Unset "" asyncsteps.canceled=true`,
			`asyncsteps.await#4 <- asyncsteps.flow#3: Unset "" asyncsteps.canceled=true`,
		},
	}, {
		name: "running flow",
		run: func(_ *asyncsteps.Loop, outer, sub *asyncsteps.Root) error {
			sub.Add(func(as steps, _ ...any) { as.WaitExternal() })
			sub.Execute()
			synctest.Wait() // sub's span starts first
			defer sub.Cancel()
			asyncsteps.AwaitFlow(outer, sub)
			_, err := outer.Run(context.Background())
			return err
		},
		err: "InternalError: asyncsteps: Promise called on a running flow",
		spans: []string{
			`asyncsteps.flow#1 <- -: Unset "" asyncsteps.canceled=true`, // sub, run by Execute
			`asyncsteps.flow#2 <- -: ` + running + ` event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=asyncsteps: Promise called on a running flow event exception exception.type=string exception.message=panic: asyncsteps: Promise called on a running flow exception.stacktrace=<debug.Stack>`,
			`asyncsteps.await_flow#3 <- asyncsteps.flow#2: ` + running,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), false)
				sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
				outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
				if err := c.run(outerLoop, outer, sub); errText(err) != c.err {
					t.Errorf("Run: %v, want %q", err, c.err)
				}
				synctest.Wait()
				if got, want := spanTree(rec), describeLines(c.spans); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
			})
		})
	}
}

// faultySuccess is a decorator of the steps added through it, which it
// gives themselves decorated, and unwraps; its Success panics, before it
// calls the step's ("before") or after ("after"), or calls the step's
// Error instead ("error").
type faultySuccess struct {
	steps
	fault string
}

func (d faultySuccess) Add(fn asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) steps {
	d.steps.Add(func(as steps, args ...any) { fn(faultySuccess{as, d.fault}, args...) }, onerror...)
	return d
}

func (d faultySuccess) Success(args ...any) {
	switch d.fault {
	case "error":
		d.steps.Error(asyncsteps.InvalidRequest, "refused")
	case "after":
		d.steps.Success(args...)
	}
	panic("decorator bug")
}

func (d faultySuccess) Unwrap() steps { return d.steps }

// syncTool is a Tool of the user's that runs each callback as it is
// given it: a flow on it has ended when Promise returns, and AwaitFlow
// takes its Result in the step's callback.
type syncTool struct{}

type spentHandle struct{}

func (spentHandle) Cancel()       {}
func (spentHandle) IsValid() bool { return false }

func (syncTool) Immediate(f func()) asyncsteps.Handle             { f(); return spentHandle{} }
func (syncTool) Deferred(time.Duration, func()) asyncsteps.Handle { return spentHandle{} }
func (syncTool) IsSameThread() bool                               { return true }
func (syncTool) Now() time.Time                                   { return time.Now() }

// The span of an AwaitFlow step given through a decorator whose Success
// misbehaves ends as the step does: failed with the InternalError of the
// panic when the decorator panicked before it completed the step, which
// then fails with it, with the error the decorator raised in its place,
// and a success when it panicked after, the step completed; whether the
// step takes the awaited flow's Result in a task on its loop, or in its
// callback (the flow ended at once, on a Tool that runs it there, which
// has no hooks: the flow has no span). Before, the span ended a success
// before the decorator's Success was called, for a step that then failed.
func TestAwaitFlowSpanOfADecoratorWhoseSuccessMisbehaves(t *testing.T) {
	failed := func(code, info string) string {
		return fmt.Sprintf(`Error "%s: %s" asyncsteps.error.code=%s error.type=%s`, code, info, code, code)
	}
	event := func(code, info string) string {
		return fmt.Sprintf(` event asyncsteps.step_error asyncsteps.error.code=%s asyncsteps.error.info=%s`, code, info)
	}
	exception := ` event exception exception.type=string exception.message=panic: decorator bug exception.stacktrace=<debug.Stack>`
	const internal, bug, inTask = asyncsteps.InternalError, "decorator bug", "panic: decorator bug"
	refused := failed(asyncsteps.InvalidRequest, "refused")
	for _, c := range []struct {
		name, fault string
		inCallback  bool
		err         string
		flow, step  string
	}{{
		name: "in a task, before", fault: "before",
		err:  internal + ": " + inTask,
		flow: failed(internal, inTask) + event(internal, inTask) + exception,
		step: failed(internal, inTask),
	}, {
		name: "in a task, after", fault: "after",
		flow: `Unset ""`, step: `Unset ""`,
	}, {
		name: "in a task, an error", fault: "error",
		err:  "InvalidRequest: refused",
		flow: refused + event(asyncsteps.InvalidRequest, "refused"),
		step: refused,
	}, {
		name: "in the callback, before", fault: "before", inCallback: true,
		err:  internal + ": " + bug,
		flow: failed(internal, bug) + event(internal, bug) + exception,
		step: failed(internal, bug),
	}, {
		name: "in the callback, after", fault: "after", inCallback: true,
		err:  internal + ": " + bug,
		flow: failed(internal, bug) + event(internal, bug) + exception,
		step: failed(internal, bug),
	}, {
		name: "in the callback, an error", fault: "error", inCallback: true,
		err:  "InvalidRequest: refused",
		flow: refused + event(asyncsteps.InvalidRequest, "refused"),
		step: refused,
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), false)
				gate := make(chan struct{})
				sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
				sub.Add(func(as steps, _ ...any) { asyncsteps.AwaitChan(as, gate) })
				spans := []string{
					`asyncsteps.flow#1 <- -: ` + c.flow,
					`asyncsteps.await_flow#2 <- asyncsteps.flow#1: ` + c.step,
				}
				if c.inCallback {
					sub = asyncsteps.New(asyncsteps.WithTool(syncTool{}))
					sub.Add(func(as steps, _ ...any) { as.Success(1) })
				} else {
					spans = append(spans, `asyncsteps.flow#3 <- asyncsteps.await_flow#2: Unset ""`)
				}
				outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
				asyncsteps.AwaitFlow(faultySuccess{outer, c.fault}, sub)
				res := outer.Promise()
				synctest.Wait() // the step waits for sub: its Result comes in a task
				close(gate)
				if err := (<-res).Err; errText(err) != c.err {
					t.Errorf("the flow ended with %v, want %q", err, c.err)
				}
				synctest.Wait()
				if got, want := spanTree(rec), describeLines(spans); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
			})
		})
	}
}

// The AwaitFlow steps of a flow that these hooks do not trace (its tool
// has none: no span of its own) have no span either, as its Awaits have
// none, though its context holds the values of the traced flow that runs
// it, with AwaitFlow or in an Await function: a flow such a step runs,
// on a tool with the hooks, is a child of the span in its context, that
// of the traced step that ran the untraced flow. Before, the untraced
// flow's AwaitFlow steps had spans, children of that step's, found
// through the outer flow's values.
func TestAwaitFlowStepsOfAnUntracedFlowHaveNoSpan(t *testing.T) {
	for _, c := range []struct {
		name  string
		run   func(outer, mid *asyncsteps.Root)
		spans []string
	}{{
		name: "run by AwaitFlow",
		run:  func(outer, mid *asyncsteps.Root) { asyncsteps.AwaitFlow(outer, mid) },
		spans: []string{
			`asyncsteps.flow#1 <- -: Unset ""`,
			`asyncsteps.await_flow#2 <- asyncsteps.flow#1: Unset ""`,
			`asyncsteps.flow#3 <- asyncsteps.await_flow#2: Unset ""`,
			`asyncsteps.await#4 <- asyncsteps.flow#3: Unset ""`,
		},
	}, {
		name: "run by an Await function",
		run: func(outer, mid *asyncsteps.Root) {
			outer.Await(func(ctx context.Context) (any, error) {
				args, err := mid.Run(ctx)
				return fmt.Sprint(args...), err
			})
		},
		spans: []string{
			`asyncsteps.flow#1 <- -: Unset ""`,
			`asyncsteps.await#2 <- asyncsteps.flow#1: Unset ""`,
			`asyncsteps.flow#3 <- asyncsteps.await#2: Unset ""`,
			`asyncsteps.await#4 <- asyncsteps.flow#3: Unset ""`,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				traced, _ := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), true)
				untraced := asyncsteps.NewLoop()
				t.Cleanup(untraced.Close)

				inner := asyncsteps.New(asyncsteps.WithTool(traced))
				inner.Await(func(context.Context) (any, error) { return 1, nil })
				mid := asyncsteps.New(asyncsteps.WithTool(untraced))
				asyncsteps.AwaitFlow(mid, inner)
				outer := asyncsteps.New(asyncsteps.WithTool(traced))
				c.run(outer, mid)
				if args, err := outer.Run(context.Background()); err != nil || fmt.Sprint(args) != "[1]" {
					t.Errorf("Run: %v %v, want [1] <nil>", args, err)
				}
				synctest.Wait()
				if got, want := spanTree(rec), describeLines(c.spans); got != want {
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
