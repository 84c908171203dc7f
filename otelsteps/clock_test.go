package otelsteps_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// timing writes one line per ended span: its name, its start and end as
// offsets from TestToolEpoch, and its events' times likewise, sorted.
func timing(spans []sdktrace.ReadOnlySpan) string {
	at := func(t time.Time) time.Duration { return t.Sub(asyncsteps.TestToolEpoch) }
	var lines []string
	for _, s := range spans {
		line := fmt.Sprintf("%s %v..%v", s.Name(), at(s.StartTime()), at(s.EndTime()))
		for _, e := range s.Events() {
			line += fmt.Sprintf(" %s@%v", e.Name, at(e.Time))
		}
		lines = append(lines, line)
	}
	return describeLines(lines)
}

// With the TestTool's clock in the Config, a flow's span lasts what its
// steps took in the tool's virtual time, to the nanosecond: a step that
// waits 3s for a deferred callback makes a span of exactly 3s, whose step
// error, raised then, is an event at 3s; the flow's duration metric says
// 3 too. Without it, the span and the duration were on the wall clock:
// the microseconds the test took to drive the tool.
func TestSpansOnTheTestToolsClock(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	mp := newMetered()
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		MeterProvider:  mp,
		Now:            tt.Now,
	}))
	tt.Advance(time.Second) // the flow begins at 1s on the tool's clock

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as steps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(3*time.Second, func() { as.Success() })
	})
	r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, "down") },
		func(as steps, _ string) { as.Success() })
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got, want := timing(rec.Ended()), "asyncsteps.flow 1s..4s asyncsteps.step_error@4s"; got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
	want := describeLines([]string{
		`asyncsteps.flow.duration{} count=1 sum=3`,
		`asyncsteps.flow.ended{} 1`,
		`asyncsteps.flow.started{} 1`,
		`asyncsteps.step.failed{asyncsteps.error.code=CommError error.type=CommError} 1`,
	})
	if got := mp.read(t); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// A clock may begin at the zero time, which is no sign of a flow begun
// without metrics: the flow that began then is measured all the same.
func TestDurationOnAClockFromTheZeroTime(t *testing.T) {
	mp := newMetered()
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
		TracerProvider: sdktrace.NewTracerProvider(),
		MeterProvider:  mp,
		Now:            func() time.Time { return time.Time{}.Add(tt.Now().Sub(asyncsteps.TestToolEpoch)) },
	}))
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as steps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(3*time.Second, func() { as.Success() })
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := describeLines([]string{
		`asyncsteps.flow.duration{} count=1 sum=3`,
		`asyncsteps.flow.ended{} 1`,
		`asyncsteps.flow.started{} 1`,
	})
	if got := mp.read(t); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// An Await's span is on the tool's clock too, read as the function
// starts and as it returns: here the step's 3s timeout ends it. The
// bubble's wall clock, which stands still while nothing sleeps, would
// have made it last 0s, and begin at the epoch, not at 1s.
func TestAwaitSpanOnTheTestToolsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tt := asyncsteps.NewTestTool()
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			Now:            tt.Now,
		}))
		tt.Advance(time.Second)

		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) { as.SetTimeout(3 * time.Second); as.Await(untilDone) },
			func(as steps, _ string) { as.Success() })
		p := r.Promise()
		tt.Advance(0)               // the step starts its Await's goroutine
		synctest.Wait()             // whose function now waits for its context
		tt.Advance(3 * time.Second) // the step times out: the function returns
		synctest.Wait()             // and its span has ended
		tt.Run()
		if err := (<-p).Err; err != nil {
			t.Fatalf("flow: %v", err)
		}

		want := describeLines([]string{
			`asyncsteps.await 1s..4s`,
			`asyncsteps.flow 1s..4s asyncsteps.step_error@4s`,
		})
		if got := timing(rec.Ended()); got != want {
			t.Errorf("spans:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A clock that panics is a fault of the hook that read it, as the core
// deals with any hook's: one that panics as an Await ends fails the
// Await's step; one that panics as the step error is told, or as the
// flow ends, is logged. No span is left unended: each ends on the wall
// clock, which the bubble holds at the epoch.
func TestPanickingClock(t *testing.T) {
	logs := captureLogs(t)
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tt := asyncsteps.NewTestTool()
		var reads atomic.Int32
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			Now: func() time.Time {
				if reads.Add(1) > 2 { // after the flow's start and the Await's
					panic("clock bug")
				}
				return tt.Now()
			},
		}))
		tt.Advance(time.Second)

		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Await(func(context.Context) (any, error) { return "ok", nil })
		p := r.Promise()
		tt.Advance(0)   // the step starts its Await's goroutine
		synctest.Wait() // whose AwaitEnd has panicked
		tt.Run()
		if err := (<-p).Err; errText(err) != "InternalError: panic: clock bug" {
			t.Errorf("flow: %v, want the AwaitEnd hook's panic", err)
		}

		want := describeLines([]string{
			`asyncsteps.await 1s..0s`,
			`asyncsteps.flow 1s..0s`,
		})
		if got := timing(rec.Ended()); got != want {
			t.Errorf("spans:\n%s\nwant:\n%s", got, want)
		}
		if got, want := logs.String(), `level=ERROR msg="asyncsteps: panic in hook" hook=StepError panic="clock bug"
level=ERROR msg="asyncsteps: panic in hook" hook=FlowEnd panic="clock bug"
`; got != want {
			t.Errorf("logs:\n%s\nwant:\n%s", got, want)
		}
	})
}
