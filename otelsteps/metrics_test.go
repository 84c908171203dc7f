package otelsteps_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// metered is a meter provider whose metrics a test reads with read.
type metered struct {
	*sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newMetered() metered {
	r := sdkmetric.NewManualReader()
	return metered{sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), r}
}

// read writes one line per data point, sorted: the metric's name, its
// attributes, and its value, or a histogram's count and sum.
func (m metered) read(t *testing.T) string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s{%s} %d", mt.Name, attrs(p.Attributes.ToSlice()), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s{%s} count=%d sum=%g", mt.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum))
				}
			default:
				lines = append(lines, fmt.Sprintf("%s: unexpected %T", mt.Name, d))
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// attrs writes kvs as key=value, space-separated.
func attrs(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for i, kv := range kvs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", kv.Key, kv.Value.String())
	}
	return b.String()
}

// Each outcome of a flow is counted once, by code, with its duration on
// the clock of the bubble: a success, a failure, a code of the
// application's (counted as "other"), a handler that recovers, a cancel,
// a timeout; each step error is counted as it is raised; the waits in a
// named Mutex, an unnamed Throttle and a named Limiter are timed by kind:
// a Limiter's as "limiter", which SyncerName recognises as the Limiter
// itself, not the Mutex it is made of.
func TestMetricsOfFlows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		db := asyncsteps.NewMutex(1)
		th := asyncsteps.NewThrottle(1, time.Second)
		lim := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 1})
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(),
			MeterProvider:  mp,
			SyncerName: func(obj asyncsteps.Syncer) string {
				switch obj {
				case db:
					return "db"
				case lim:
					return "api"
				}
				return "" // th goes without a name
			},
		}))
		sleep := func(d time.Duration) asyncsteps.AwaitFunc {
			return func(context.Context) (any, error) { time.Sleep(d); return nil, nil }
		}
		run := func(build func(r *asyncsteps.Root), want string) {
			t.Helper()
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			build(r)
			if _, err := r.Run(context.Background()); errText(err) != want {
				t.Errorf("Run: %v, want %q", err, want)
			}
		}
		run(func(r *asyncsteps.Root) { r.Await(sleep(2 * time.Second)) }, "")
		run(func(r *asyncsteps.Root) {
			r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.NotImplemented, "nope") })
		}, "NotImplemented: nope")
		run(func(r *asyncsteps.Root) {
			r.Add(func(as steps, _ ...any) { as.Error("NotFound", "mine") },
				func(as steps, code string) { as.Error(asyncsteps.CommError, "wrapped "+code) })
		}, "CommError: wrapped NotFound")
		run(func(r *asyncsteps.Root) {
			r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "") },
				func(as steps, _ string) { as.Success() })
		}, "")
		run(func(r *asyncsteps.Root) {
			r.Add(func(as steps, _ ...any) { as.SetTimeout(3 * time.Second); as.WaitExternal() })
		}, "Timeout")
		cancelled := asyncsteps.New(asyncsteps.WithTool(loop))
		cancelled.Add(func(as steps, _ ...any) { as.WaitExternal() })
		p := cancelled.Promise()
		time.Sleep(time.Second)
		cancelled.Cancel()
		if err := (<-p).Err; errText(err) != "context canceled" {
			t.Errorf("cancelled: %v", err)
		}
		// Two flows in each gate: the second waits for the first.
		var waiting []<-chan asyncsteps.Result
		for range 2 {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(func(as steps, _ ...any) {
				p := as.Parallel()
				p.Sync(db, func(as steps, _ ...any) { as.Await(sleep(5 * time.Second)) })
				p.Sync(th, func(as steps, _ ...any) {})
				p.Sync(lim, func(as steps, _ ...any) { as.Await(sleep(7 * time.Second)) })
			})
			waiting = append(waiting, r.Promise())
		}
		for _, p := range waiting {
			if err := (<-p).Err; err != nil {
				t.Errorf("a flow in the gates: %v", err)
			}
		}

		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=4 sum=23`, // 2 + 0 + 7 + 14
			`asyncsteps.flow.duration{asyncsteps.canceled=true} count=1 sum=1`,
			`asyncsteps.flow.duration{asyncsteps.error.code=CommError error.type=CommError} count=1 sum=0`,
			`asyncsteps.flow.duration{asyncsteps.error.code=NotImplemented error.type=NotImplemented} count=1 sum=0`,
			`asyncsteps.flow.duration{asyncsteps.error.code=Timeout error.type=Timeout} count=1 sum=3`,
			`asyncsteps.flow.ended{} 4`,
			`asyncsteps.flow.ended{asyncsteps.canceled=true} 1`,
			`asyncsteps.flow.ended{asyncsteps.error.code=CommError error.type=CommError} 1`,
			`asyncsteps.flow.ended{asyncsteps.error.code=NotImplemented error.type=NotImplemented} 1`,
			`asyncsteps.flow.ended{asyncsteps.error.code=Timeout error.type=Timeout} 1`,
			`asyncsteps.flow.started{} 8`,
			`asyncsteps.step.failed{asyncsteps.error.code=CommError error.type=CommError} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=InvalidRequest error.type=InvalidRequest} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=NotImplemented error.type=NotImplemented} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=Timeout error.type=Timeout} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=other error.type=other} 1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=mutex asyncsteps.sync.name=db} count=1 sum=5`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=limiter asyncsteps.sync.name=api} count=1 sum=7`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=throttle} count=1 sum=1`,
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A flow whose FlowStart hook the tracer cuts short is counted as begun
// and as ended with its InternalError, and its step error is counted;
// it has no duration, its start being lost with the context FlowStart did
// not return. A flow run by an Await function does not take its outer
// flow's start for its own: only the outer flow has a duration.
func TestMetricsWhenFlowStartFails(t *testing.T) {
	for _, c := range []struct {
		name   string
		fault  func()
		nested bool
		want   []string
	}{
		{"panic", func() { panic("exporter bug") }, false, []string{
			`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
			`asyncsteps.flow.started{} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
		}},
		{"Goexit", runtime.Goexit, false, []string{
			`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
			`asyncsteps.flow.started{} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
		}},
		{"panic in a flow run by an Await", func() { panic("exporter bug") }, true, []string{
			`asyncsteps.flow.duration{asyncsteps.error.code=InternalError error.type=InternalError} count=1 sum=3`,
			`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} 2`,
			`asyncsteps.flow.started{} 2`,
			`asyncsteps.step.failed{asyncsteps.error.code=InternalError error.type=InternalError} 2`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				faultAt := int32(1)
				if c.nested {
					faultAt = 2
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
					faultyProcessor{tracetest.NewSpanRecorder(), otelsteps.FlowSpan, c.fault, faultAt, new(atomic.Int32)}))
				mp := newMetered()
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				loop.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, MeterProvider: mp}))
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				if c.nested {
					r.Await(func(ctx context.Context) (any, error) {
						time.Sleep(3 * time.Second) // the outer flow's duration
						inner := asyncsteps.New(asyncsteps.WithTool(loop))
						inner.Add(func(as steps, _ ...any) { as.Success() })
						return inner.Run(ctx)
					})
				} else {
					r.Add(func(as steps, _ ...any) { as.Success() })
				}
				if _, err := r.Run(context.Background()); err == nil {
					t.Errorf("Run succeeded, want an InternalError")
				}
				if got, want := mp.read(t), describeLines(c.want); got != want {
					t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
				}
			})
		})
	}
}

// panickyMeters makes the counters of the metrics named in panics panic
// as they count (an exporter's bug), and the rest as its provider does.
type panickyMeters struct {
	metric.MeterProvider
	panics []string
}

func (p panickyMeters) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return panickyMeter{p.MeterProvider.Meter(name, opts...), p.panics}
}

type panickyMeter struct {
	metric.Meter
	panics []string
}

func (m panickyMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, err := m.Meter.Int64Counter(name, opts...)
	if slices.Contains(m.panics, name) {
		c = panickyCounter{c}
	}
	return c, err
}

type panickyCounter struct{ metric.Int64Counter }

func (panickyCounter) Add(context.Context, int64, ...metric.AddOption) { panic("meter bug") }

// A meter that panics as the end of a flow or a step error is counted
// costs the flow nothing: the panic is logged, the span still gets its
// event and ends with the flow's error, and the flow's Result is its own.
// A meter that panics as a flow begins fails the flow, as any FlowStart
// hook that panics does: its span is not started, and its end is counted.
func TestPanickingMeter(t *testing.T) {
	logs := captureLogs(t)
	for _, c := range []struct {
		name   string
		panics []string
		err    string
		spans  []string
		logs   string
		counts []string
	}{{
		name:   "ended and failed",
		panics: []string{otelsteps.FlowEndedMetric, otelsteps.StepFailedMetric},
		err:    "CommError: down",
		spans:  []string{`asyncsteps.flow <- -: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`},
		logs: `level=ERROR msg="asyncsteps: panic in hook" hook=StepError panic="meter bug"
level=ERROR msg="asyncsteps: panic in hook" hook=FlowEnd panic="meter bug"
`,
		counts: []string{`asyncsteps.flow.started{} 1`},
	}, {
		name:   "started",
		panics: []string{otelsteps.FlowStartedMetric},
		err:    "InternalError: meter bug",
		counts: []string{
			`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			logs.Reset()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			mp := newMetered()
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
				TracerProvider: tp,
				MeterProvider:  panickyMeters{mp, c.panics},
			}))
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, "down") })
			if _, err := r.Run(context.Background()); errText(err) != c.err {
				t.Errorf("Run: %v, want %s", err, c.err)
			}
			if got, want := describe(rec.Ended()), describeLines(c.spans); got != want {
				t.Errorf("spans:\n%s\nwant:\n%s", got, want)
			}
			if got := logs.String(); got != c.logs {
				t.Errorf("logs:\n%s\nwant:\n%s", got, c.logs)
			}
			if got, want := mp.read(t), describeLines(c.counts); got != want {
				t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// A SyncerName that panics fails the step that waited, as a SyncWait hook
// that panics does: the flow ends with an InternalError, its slot given
// back, and the wait is not recorded.
func TestPanickingSyncerName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		m := asyncsteps.NewMutex(1)
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		loop.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(),
			MeterProvider:  mp,
			SyncerName:     func(asyncsteps.Syncer) string { panic("name bug") },
		}))
		var results []<-chan asyncsteps.Result
		for range 2 {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Sync(m, func(as steps, _ ...any) {
				as.Await(func(context.Context) (any, error) { time.Sleep(time.Second); return nil, nil })
			})
			results = append(results, r.Promise())
		}
		var errs []string
		for _, p := range results {
			errs = append(errs, errText((<-p).Err))
		}
		if got, want := strings.Join(errs, "; "), "; InternalError: panic: name bug"; got != want {
			t.Errorf("results %q, want %q", got, want)
		}
		third := asyncsteps.New(asyncsteps.WithTool(loop))
		third.Sync(m, func(as steps, _ ...any) {})
		if _, err := third.Run(context.Background()); err != nil {
			t.Errorf("the slot was not given back: %v", err)
		}
		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=2 sum=1`,
			`asyncsteps.flow.duration{asyncsteps.error.code=InternalError error.type=InternalError} count=1 sum=1`,
			`asyncsteps.flow.ended{} 2`,
			`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
			`asyncsteps.flow.started{} 3`,
			`asyncsteps.step.failed{asyncsteps.error.code=InternalError error.type=InternalError} 1`,
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A flow's duration is on the wall clock, which a TestTool's virtual time
// does not move: FlowStart and FlowEnd are given nothing that reads the
// tool's clock, unless the Config has it (TestSpansOnTheTestToolsClock). In a testing/synctest bubble, whose wall clock stands
// still while nothing sleeps, a flow that a TestTool timed out after 3s
// of its clock lasts 0s; a Sync wait, which the core measures on the
// tool's clock, lasts the 3s it waited.
func TestFlowDurationIsOnTheWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		tt := asyncsteps.NewTestTool()
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{MeterProvider: mp}))
		db := asyncsteps.NewMutex(1)
		begun, wall := tt.Now(), time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			p.Sync(db, func(as steps, _ ...any) { as.SetTimeout(3 * time.Second); as.WaitExternal() },
				func(as steps, _ string) { as.Success() })
			p.Sync(db, func(as steps, _ ...any) {})
		})
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if d := tt.Now().Sub(begun); d != 3*time.Second {
			t.Errorf("the tool's clock moved %v, want 3s", d)
		}
		if d := time.Since(wall); d != 0 {
			t.Errorf("the bubble's clock moved %v, want 0", d)
		}
		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=1 sum=0`,
			`asyncsteps.flow.ended{} 1`,
			`asyncsteps.flow.started{} 1`,
			`asyncsteps.step.failed{asyncsteps.error.code=Timeout error.type=Timeout} 1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=mutex} count=1 sum=3`,
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}

// captureLogs sends the default logger's records, without their time and
// stack, to the builder it returns until t ends.
func captureLogs(t *testing.T) *strings.Builder {
	logs := new(strings.Builder)
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "time" || a.Key == "stack" {
				return slog.Attr{}
			}
			return a
		},
	})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return logs
}

// A KeyedMutex is a Mutex per key: a wait for one of its keys is timed as
// a Mutex's, and SyncerName is given the key's Syncer, which it may name
// by comparing it with what the KeyedMutex's Key returns.
func TestKeyedMutexWaitIsAMutexWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		tt := asyncsteps.NewTestTool()
		accounts := asyncsteps.NewKeyedMutex[string](1)
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			MeterProvider: mp,
			SyncerName: func(obj asyncsteps.Syncer) string {
				if obj == accounts.Key("vip") {
					return "vip"
				}
				return ""
			},
		}))
		syncTwoKeysTwice(t, tt, func(as steps, key string) {
			accounts.Sync(as, key, holdTwoSeconds)
		})
		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=1 sum=0`,
			`asyncsteps.flow.ended{} 1`,
			`asyncsteps.flow.started{} 1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=mutex asyncsteps.sync.name=vip} count=1 sum=2`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=mutex} count=1 sum=2`,
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}

// syncTwoKeysTwice runs on tt one flow whose four parallel branches give
// section the keys "vip", "vip", "a" and "a": the second branch of each
// key waits for the first.
func syncTwoKeysTwice(t *testing.T, tt *asyncsteps.TestTool, section func(as steps, key string)) {
	t.Helper()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as steps, _ ...any) {
		p := as.Parallel()
		for _, key := range []string{"vip", "vip", "a", "a"} {
			p.Add(func(as steps, _ ...any) { section(as, key) })
		}
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// holdTwoSeconds is a critical section that lasts 2s on the flow's clock.
func holdTwoSeconds(as steps, _ ...any) {
	as.WaitExternal()
	as.Tool().Deferred(2*time.Second, func() { as.Success() })
}

// A KeyedThrottle is a Throttle per key and a KeyedLimiter a Limiter per
// key: a wait for one of their keys is timed as a Throttle's or a
// Limiter's.
func TestKeyedThrottleAndLimiterWaitsAreOfTheirKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		tt := asyncsteps.NewTestTool()
		tenants := asyncsteps.NewKeyedThrottle[string](1, time.Second)
		hosts := asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited})
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			MeterProvider: mp,
			SyncerName: func(obj asyncsteps.Syncer) string {
				if obj == tenants.Key("vip") || obj == hosts.Key("vip") {
					return "vip"
				}
				return ""
			},
		}))
		syncTwoKeysTwice(t, tt, func(as steps, key string) {
			tenants.Sync(as, key, func(as steps, _ ...any) {})
			hosts.Sync(as, key, holdTwoSeconds)
		})
		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=1 sum=0`,
			`asyncsteps.flow.ended{} 1`,
			`asyncsteps.flow.started{} 1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=limiter asyncsteps.sync.name=vip} count=1 sum=1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=limiter} count=1 sum=1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=throttle asyncsteps.sync.name=vip} count=1 sum=1`,
			`asyncsteps.sync.wait.duration{asyncsteps.sync.kind=throttle} count=1 sum=1`,
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A name SyncerName gives that is not UTF-8 (a KeyedMutex's key from a
// request) is recorded with each run of bad bytes made a U+FFFD. Before,
// it was recorded as it was, and the OTLP exporter's protobuf encoding
// refused the whole export with it, at every collection from then on:
// the series stays in a cumulative reader's state for good.
func TestSyncerNameIsValidUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := newMetered()
		tt := asyncsteps.NewTestTool()
		m := asyncsteps.NewMutex(1)
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			MeterProvider: mp,
			SyncerName:    func(asyncsteps.Syncer) string { return "gate\xfe" },
		}))
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) {
			p := as.Parallel()
			for range 2 {
				p.Sync(m, func(as steps, _ ...any) {
					as.WaitExternal()
					as.Tool().Deferred(2*time.Second, func() { as.Success() })
				})
			}
		})
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := describeLines([]string{
			`asyncsteps.flow.duration{} count=1 sum=0`,
			`asyncsteps.flow.ended{} 1`,
			`asyncsteps.flow.started{} 1`,
			"asyncsteps.sync.wait.duration{asyncsteps.sync.kind=mutex asyncsteps.sync.name=gate\uFFFD} count=1 sum=2",
		})
		if got := mp.read(t); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
	})
}
