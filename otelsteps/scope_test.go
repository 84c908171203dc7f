package otelsteps_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	last, err := lastRelease(f)
	if err != nil {
		t.Fatalf("CHANGELOG.md: %v", err)
	}
	if otelsteps.Version != last {
		t.Errorf("Version %q, want %q, the last release in CHANGELOG.md", otelsteps.Version, last)
	}
}

// releaseHeading is the heading of a release's section in CHANGELOG.md: a
// semantic version, a pre-release or build included, and its date.
var releaseHeading = regexp.MustCompile(`^## ((?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)` +
	`(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?) - \d{4}-\d{2}-\d{2}$`)

// lastRelease returns the version of the newest release a changelog
// records: its first section after Unreleased, which must read
// "## VERSION - YYYY-MM-DD". A section of another form is an error, not
// passed over: Version would be compared with an older release, and kept
// there.
func lastRelease(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "## ") || line == "## Unreleased" {
			continue
		}
		if m := releaseHeading.FindStringSubmatch(line); m != nil {
			return m[1], nil
		}
		return "", fmt.Errorf("section %q is no release's: want \"## VERSION - YYYY-MM-DD\"", line)
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no release")
}

// TestLastReleaseOfChangelog: the last release is the first section after
// Unreleased, whatever its semantic version, and a section whose heading
// does not read as a release's fails rather than being passed over for an
// older one. Before, only a heading of a plain MAJOR.MINOR.PATCH counted:
// over a pre-release's section, or one written "## [0.2.0] - ...", the
// test held Version to the release before it.
func TestLastReleaseOfChangelog(t *testing.T) {
	for _, c := range []struct {
		changelog string
		want      string // "" for an error
	}{
		{"# Changelog\n\n## Unreleased\n\n### Added\n\n## 0.2.0 - 2026-12-10\n\n## 0.1.0 - 2026-11-26\n", "0.2.0"},
		{"## Unreleased\n\n## 0.2.0-rc.1 - 2026-12-10\n\n## 0.1.0 - 2026-11-26\n", "0.2.0-rc.1"},
		{"## Unreleased\n\n## 1.0.0+build.5 - 2026-12-10\n", "1.0.0+build.5"},
		{"## Unreleased\n\n## [0.2.0] - 2026-12-10\n\n## 0.1.0 - 2026-11-26\n", ""},
		{"## Unreleased\n\n## 0.2.0\n\n## 0.1.0 - 2026-11-26\n", ""},
		{"# Changelog\n\n## Unreleased\n\n### Added\n", ""},
	} {
		got, err := lastRelease(strings.NewReader(c.changelog))
		if c.want == "" && err == nil || c.want != "" && (err != nil || got != c.want) {
			t.Errorf("%q: last release %q (%v), want %q", c.changelog, got, err, c.want)
		}
	}
}

// The schema URL the scope names is that of the semantic conventions the
// attributes follow: every file of the package imports the one version of
// semconv whose SchemaURL it is. A file moved to another version alone
// would write attributes of that version under the URL of the first.
func TestOneSemconvVersion(t *testing.T) {
	want := "go.opentelemetry.io/otel/semconv/v" + strings.TrimPrefix(semconv.SchemaURL, "https://opentelemetry.io/schemas/")
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's files: %v, %v", files, err)
	}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "go.opentelemetry.io/otel/semconv/") && path != want {
				t.Errorf("%s imports %s, want %s (the schema URL %s)", name, path, want, semconv.SchemaURL)
			}
		}
	}
}
