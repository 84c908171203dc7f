package otelsteps_test

import (
	"bufio"
	"context"
	"os"
	"regexp"
	"testing"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// The spans and the metrics name their instrumentation scope whole: the
// package, its Version, and the schema URL of the semantic conventions
// whose attributes they carry (error.type, exception.*), by which a
// backend reads them as those of that version. Before, the scope had the
// name alone: a backend could not tell which release of the package, nor
// which conventions, it was reading.
func TestScopeNamesVersionAndSchema(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	m := newMetered()
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
		MeterProvider:  m,
	}))
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(steps, ...any) {})
	r.Run(context.Background())

	check := func(what string, got instrumentation.Scope) {
		t.Helper()
		if got.Name != otelsteps.ScopeName || got.Version != otelsteps.Version || got.SchemaURL != semconv.SchemaURL {
			t.Errorf("%s: scope %q %q %q, want %q %q %q", what, got.Name, got.Version, got.SchemaURL,
				otelsteps.ScopeName, otelsteps.Version, semconv.SchemaURL)
		}
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	check("span", spans[0].InstrumentationScope)
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 {
		t.Fatalf("%d scopes of metrics, want 1", len(rm.ScopeMetrics))
	}
	check("metrics", rm.ScopeMetrics[0].Scope)
}

// Version is the last release that CHANGELOG.md records: a release adds
// its section there, and this test asks for Version to follow.
func TestVersionIsTheLastRelease(t *testing.T) {
	f, err := os.Open("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	release := regexp.MustCompile(`^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2}$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := release.FindStringSubmatch(sc.Text()); m != nil {
			if otelsteps.Version != m[1] {
				t.Errorf("Version %q, want %q, the last release in CHANGELOG.md", otelsteps.Version, m[1])
			}
			return
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("no release in CHANGELOG.md")
}
