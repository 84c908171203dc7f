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
// its span is a child of the awaiting flow's span (the AwaitFlow step
// has none of its own), and its Awaits are children of its span; its
// Await functions see the request's values. Before, its span was the
// root of a trace of its own, and its functions saw none of the
// request's values.
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
					`asyncsteps.flow#3 <- asyncsteps.flow#2: Unset ""`,
					`asyncsteps.await#4 <- asyncsteps.flow#3: Unset ""`,
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
// once, as that flow ends, with its own outcome and step errors. Before,
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
					})
					if got := spanTree(rec); got != want {
						t.Errorf("spans:\n%s\nwant:\n%s", got, want)
					}
					started := 2
					if c.after {
						started = 3 // the failed flow's span, lost with the context its FlowStart returned
					}
					if n := len(rec.Started()); n != started {
						t.Errorf("%d spans started, want %d", n, started)
					}
					if got, want := log.String(), "outer's last step, asyncsteps.flow ended, request ended"; got != want {
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

// An AwaitFlow step cancelled by its timeout cancels the flow it runs,
// whose span is a cancelled child of the awaiting flow's, which times
// out: each span ends once, with its own flow's outcome.
func TestCancelledAwaitFlowStep(t *testing.T) {
	for _, sameLoop := range []bool{true, false} {
		t.Run(loopNames[sameLoop], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				outerLoop, subLoop := subflowLoops(t, otelsteps.Hooks(otelsteps.Config{TracerProvider: tp}), sameLoop)
				ctx, request := tp.Tracer("test").Start(context.Background(), "request")

				sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
				sub.Await(untilDone)
				outer := asyncsteps.New(asyncsteps.WithTool(outerLoop))
				outer.Add(func(as steps, _ ...any) {
					as.SetTimeout(time.Second)
					asyncsteps.AwaitFlow(as, sub)
				})
				if _, err := outer.Run(ctx); errText(err) != "Timeout" {
					t.Errorf("Run: %v, want Timeout", err)
				}
				request.End()
				synctest.Wait()
				timeout := `Error "Timeout" asyncsteps.error.code=Timeout error.type=Timeout`
				want := describeLines([]string{
					`request#1 <- -: Unset ""`,
					`asyncsteps.flow#2 <- request#1: ` + timeout + ` event asyncsteps.step_error asyncsteps.error.code=Timeout asyncsteps.error.info=`,
					`asyncsteps.flow#3 <- asyncsteps.flow#2: Unset "" asyncsteps.canceled=true`,
					`asyncsteps.await#4 <- asyncsteps.flow#3: Unset "" asyncsteps.canceled=true`,
				})
				if got := spanTree(rec); got != want {
					t.Errorf("spans:\n%s\nwant:\n%s", got, want)
				}
				if s, e := len(rec.Started()), len(rec.Ended()); s != e {
					t.Errorf("%d spans started, %d ended", s, e)
				}
			})
		})
	}
}
