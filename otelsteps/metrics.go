package otelsteps

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// Names of the metrics, and of the attributes and values only they use.
const (
	FlowStartedMetric  = "asyncsteps.flow.started"
	FlowEndedMetric    = "asyncsteps.flow.ended"
	FlowDurationMetric = "asyncsteps.flow.duration"
	StepFailedMetric   = "asyncsteps.step.failed"
	SyncWaitMetric     = "asyncsteps.sync.wait.duration"
	SyncKindKey        = attribute.Key("asyncsteps.sync.kind")
	SyncNameKey        = attribute.Key("asyncsteps.sync.name")
	// OtherCode stands in the attribute asyncsteps.error.code of a metric
	// for a code that is none of the standard ones, so that an
	// application's own codes cannot grow the number of series.
	OtherCode = "other"
)

// standardCodes are the codes a metric's asyncsteps.error.code keeps as
// they are: FTN12's. LoopBreak and LoopCont are never errors of the hooks.
var standardCodes = []string{
	asyncsteps.ConnectError, asyncsteps.CommError, asyncsteps.UnknownInterface,
	asyncsteps.NotSupportedVersion, asyncsteps.NotImplemented, asyncsteps.Unauthorized,
	asyncsteps.InternalError, asyncsteps.InvokerError, asyncsteps.InvalidRequest,
	asyncsteps.DefenseRejected, asyncsteps.PleaseReauth, asyncsteps.SecurityError,
	asyncsteps.Timeout,
}

// secondsBuckets are the bucket boundaries, in seconds, of the duration
// histograms: from a millisecond, which a step that waits on I/O rarely
// beats, to a minute, past which a flow is a job rather than a request.
var secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// measures are the measurement options of one set of attributes, built
// once, so that recording a measure allocates nothing of ours.
type measures struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func measuresOf(attrs ...attribute.KeyValue) measures {
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return measures{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
}

// errorMeasures are the measures of an error with code, a standard code
// or OtherCode: in asyncsteps.error.code and in the semantic conventions'
// error.type alike, one series for both.
func errorMeasures(code string) measures {
	return measuresOf(CodeKey.String(code), semconv.ErrorTypeKey.String(code))
}

// meters records the metrics of flows; nil when the Config has no
// MeterProvider. Its fields are set once by newMeters and only read after,
// so that hooks running on several loops at once share it without a lock.
type meters struct {
	started, ended, stepFailed metric.Int64Counter
	duration, syncWait         metric.Float64Histogram
	syncerName                 func(asyncsteps.Syncer) string
	now                        clock // of the spans, which durations share

	success, canceled, other measures            // success: no attributes
	byCode                   map[string]measures // the standard codes
	mutex, throttle, limiter measures            // the kinds of gate, without a name
	syncer                   measures            // a Syncer of another kind
}

// newMeters returns the meters of c, or nil when c asks for no metrics.
func newMeters(c Config) *meters {
	if isNil(c.MeterProvider) {
		return nil
	}
	meter := c.MeterProvider.Meter(ScopeName,
		metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(semconv.SchemaURL))
	if isNil(meter) {
		return nil
	}
	m := &meters{
		syncerName: c.SyncerName,
		now:        clock(c.Now),
		canceled:   measuresOf(CanceledKey.Bool(true)),
		other:      errorMeasures(OtherCode),
		byCode:     make(map[string]measures, len(standardCodes)),
		mutex:      measuresOf(SyncKindKey.String("mutex")),
		throttle:   measuresOf(SyncKindKey.String("throttle")),
		limiter:    measuresOf(SyncKindKey.String("limiter")),
		syncer:     measuresOf(SyncKindKey.String("other")),
	}
	for _, code := range standardCodes {
		m.byCode[code] = errorMeasures(code)
	}
	m.started = counter(meter, FlowStartedMetric, "{flow}", "Flows begun.")
	m.ended = counter(meter, FlowEndedMetric, "{flow}",
		"Flows ended, by the code of their error or their cancel; neither on success.")
	m.stepFailed = counter(meter, StepFailedMetric, "{error}",
		"Errors raised in steps, also those a handler recovers from, by code.")
	m.duration = histogram(meter, FlowDurationMetric,
		"How long flows ran, from begin to end, by outcome as "+FlowEndedMetric+".")
	m.syncWait = histogram(meter, SyncWaitMetric,
		"How long flows waited in the queue of a Mutex, Throttle or Limiter before they were let in.")
	return m
}

// counter makes the counter name. An error of the meter goes to the otel
// error handler, as the SDK's own do, and a meter that gives no counter
// gets a no-op one: flows go on with what can be had.
func counter(meter metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
	}
	if isNil(c) {
		c, _ = noop.Meter{}.Int64Counter(name)
	}
	return c
}

// histogram makes the histogram of durations name, in seconds, as counter
// makes a counter.
func histogram(meter metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	if isNil(h) {
		h, _ = noop.Meter{}.Float64Histogram(name)
	}
	return h
}

// observe adds the metrics to the hooks h that trace with t, and a
// SyncWait hook. A flow is counted before its span starts, and its end
// before its span ends: a span's end is deferred, so that a meter that
// panics does not leave it open. The hooks must be h's own, as Hooks made
// them. The start of a flow is kept in its flowContext, which the
// context of an Await function masks (see awaitStart), and which a flow
// of AwaitFlow tells from its own by the token of its start (see
// ownFlow), so that a flow that the function or the step runs, whose
// FlowStart hook fails, does not take its outer flow's start for its own.
func (m *meters) observe(h *asyncsteps.Hooks, t tracer) {
	flowEnd, stepError := h.FlowEnd, h.StepError
	h.FlowStart = func(ctx context.Context) context.Context {
		m.started.Add(ctx, 1)
		return t.startFlow(ctx, true)
	}
	h.FlowEnd = func(ctx context.Context, err error) {
		defer flowEnd(ctx, err)
		m.flowEnded(ctx, err)
	}
	h.StepError = func(ctx context.Context, err *asyncsteps.Error) {
		defer stepError(ctx, err)
		m.stepFailed.Add(ctx, 1, m.ofCode(err.Code).add...)
	}
	h.SyncWait = m.syncWaited
}

// flowEnded counts the flow's end by outcome, and records its duration
// when its context holds its start: not when its FlowStart hook failed,
// which left it the context it began with.
func (m *meters) flowEnded(ctx context.Context, err error) {
	var o measures
	switch e := errorOf(err); {
	case err == nil:
		o = m.success
	case e != nil:
		o = m.ofCode(e.Code)
	default: // a cancel, as the spans say
		o = m.canceled
	}
	m.ended.Add(ctx, 1, o.add...)
	if f := ownFlow(ctx); f != nil && f.measured {
		m.duration.Record(ctx, m.now.read(true).Sub(f.start).Seconds(), o.record...)
	}
}

// ofCode returns the measures of an error with code: code if standard,
// OtherCode if not.
func (m *meters) ofCode(code string) measures {
	if o, ok := m.byCode[code]; ok {
		return o
	}
	return m.other
}

// syncKind returns the kind of gate obj is: "mutex", "throttle" or
// "limiter", a key of a keyed one too (a primitive of that kind per
// key), else "other" (the core reports no other kind today).
func syncKind(obj asyncsteps.Syncer) string {
	switch obj.(type) {
	case *asyncsteps.Mutex:
		return "mutex"
	case *asyncsteps.Throttle:
		return "throttle"
	case *asyncsteps.Limiter:
		return "limiter"
	}
	if kind, _ := toolinfo.KeyedKey(obj); kind != "" {
		return kind
	}
	return "other"
}

// ofKind returns the measures of a wait for a gate of kind, without its
// name.
func (m *meters) ofKind(kind string) measures {
	switch kind {
	case "mutex":
		return m.mutex
	case "throttle":
		return m.throttle
	case "limiter":
		return m.limiter
	}
	return m.syncer
}

// syncWaited records a wait in the queue of obj, by its kind, and by its
// name if the Config names it: that set of attributes is made at each
// wait, the price of a name.
func (m *meters) syncWaited(obj asyncsteps.Syncer, waited time.Duration) {
	kind := syncKind(obj)
	o := m.ofKind(kind)
	if m.syncerName != nil {
		if name := m.syncerName(obj); name != "" {
			// A name is the application's text too: OTLP refuses
			// one that is not UTF-8 with the whole export.
			o = measuresOf(SyncKindKey.String(kind), SyncNameKey.String(validUTF8(name)))
		}
	}
	m.syncWait.Record(context.Background(), waited.Seconds(), o.record...)
}
