package otelsteps_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// leaky is an info that says more than a trace should keep, and at
// length: 26 ASCII bytes, then 200 "é" of 2 bytes each, 426 bytes in all.
var leaky = "db down: password=hunter2 " + strings.Repeat("é", 200)

// The infos the spans export, in status descriptions, step error events
// and a panic's exception.message, are cut to Config.MaxInfoBytes (256
// by default) at a UTF-8 boundary, with "…" in the last 3 bytes, or
// left out with OmitInfo. A flow fails in an Await with leaky as info,
// another panics in a step with leaky as value (its info; the
// exception's message is "panic: " and the value). Before the cap, the
// spans exported leaky whole, whatever the Config.
func TestInfosAreCappedOrOmitted(t *testing.T) {
	ascii := "db down: password=hunter2 "
	for _, c := range []struct {
		name    string
		config  otelsteps.Config
		info    string // leaky as exported
		message string // "panic: " + leaky as exported
	}{{
		// 253 bytes leave "…" its 3: the 253rd byte is the first of an
		// "é" after the 7 of "panic: ", the second of one without.
		name:    "default",
		info:    ascii + strings.Repeat("é", 113) + "…",
		message: "panic: " + ascii + strings.Repeat("é", 110) + "…",
	}, {
		name:    "20 bytes",
		config:  otelsteps.Config{MaxInfoBytes: 20},
		info:    "db down: password…",
		message: "panic: db down: p…",
	}, {
		name:    "30 bytes: not in the middle of an é",
		config:  otelsteps.Config{MaxInfoBytes: 30},
		info:    ascii + "…",
		message: "panic: db down: password=hu…",
	}, {
		name:    "2 bytes: no room for the ellipsis",
		config:  otelsteps.Config{MaxInfoBytes: 2},
		info:    "db",
		message: "pa",
	}, {
		name:    "no cap",
		config:  otelsteps.Config{MaxInfoBytes: -1},
		info:    leaky,
		message: "panic: " + leaky,
	}, {
		name:   "omitted",
		config: otelsteps.Config{OmitInfo: true, MaxInfoBytes: 20},
	}} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			c.config.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(c.config))

			awaited := asyncsteps.New(asyncsteps.WithTool(tt))
			awaited.Await(func(context.Context) (any, error) {
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: leaky}
			})
			if _, err := awaited.Run(context.Background()); errText(err) != "CommError: "+leaky {
				t.Fatalf("Run: %v, want the CommError whole: only the spans cap it", err)
			}
			panicked := asyncsteps.New(asyncsteps.WithTool(tt))
			panicked.Add(func(steps, ...any) { panic(leaky) })
			panicked.Run(context.Background())

			comm, internal := `Error "CommError"`, `Error "InternalError"`
			info, message := "", ""
			if !c.config.OmitInfo {
				comm = `Error "CommError: ` + c.info + `"`
				internal = `Error "InternalError: ` + c.info + `"`
				info = " asyncsteps.error.info=" + c.info
				message = " exception.message=" + c.message
			}
			want := describeLines([]string{
				`asyncsteps.await <- asyncsteps.flow: ` + comm + ` asyncsteps.error.code=CommError error.type=CommError`,
				`asyncsteps.flow <- -: ` + comm + ` asyncsteps.error.code=CommError error.type=CommError` +
					` event asyncsteps.step_error asyncsteps.error.code=CommError` + info,
				`asyncsteps.flow <- -: ` + internal + ` asyncsteps.error.code=InternalError error.type=InternalError` +
					` event asyncsteps.step_error asyncsteps.error.code=InternalError` + info +
					` event exception exception.type=string` + message + ` exception.stacktrace=<debug.Stack>`,
			})
			if got := describe(exp.GetSpans().Snapshots()); got != want {
				t.Errorf("spans:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// The texts the spans export are valid UTF-8, as OTLP's protobuf
// encoding requires of its strings: in an error's info or code, or a
// panic's printed value, that is not (bytes from an upstream, a file
// name), each run of bad bytes is made a U+FFFD, within the cap, which
// counts the 3 bytes it takes. Before, the spans exported them as they
// were, and the OTLP exporter failed to encode the whole batch they were
// in ("string field contains invalid UTF-8"): every span of it was lost.
func TestExportedTextsAreValidUTF8(t *testing.T) {
	const bad = "\xff\xfe"
	for _, c := range []struct {
		name    string
		config  otelsteps.Config
		info    string // "said " + bad + ": down" as exported
		panic   string // the info of panic("bytes \xc3("), its value, as exported
		message string // "panic: bytes \xc3(" as exported
	}{{
		name:    "default",
		info:    "said \uFFFD: down",
		panic:   "bytes \uFFFD(",
		message: "panic: bytes \uFFFD(",
	}, {
		name:    "8 bytes",
		config:  otelsteps.Config{MaxInfoBytes: 8},
		info:    "said …",
		panic:   "bytes…", // 8 bytes as raised, 10 once made valid
		message: "panic…",
	}, {
		name:    "12 bytes",
		config:  otelsteps.Config{MaxInfoBytes: 12},
		info:    "said \uFFFD:…",
		panic:   "bytes \uFFFD(",
		message: "panic: by…",
	}, {
		name:    "16 bytes",
		config:  otelsteps.Config{MaxInfoBytes: 16},
		info:    "said \uFFFD: down",
		panic:   "bytes \uFFFD(",
		message: "panic: bytes …", // 15 bytes as raised, 17 once made valid
	}, {
		name:    "no cap",
		config:  otelsteps.Config{MaxInfoBytes: -1},
		info:    "said \uFFFD: down",
		panic:   "bytes \uFFFD(",
		message: "panic: bytes \uFFFD(",
	}} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			c.config.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(c.config))

			failed := asyncsteps.New(asyncsteps.WithTool(tt))
			failed.Add(func(as steps, _ ...any) { as.Error("Upstream"+bad, "said "+bad+": down") })
			if _, err := failed.Run(context.Background()); errText(err) != "Upstream"+bad+": said "+bad+": down" {
				t.Fatalf("Run: %q, want the error as raised: only the spans change it", errText(err))
			}
			panicked := asyncsteps.New(asyncsteps.WithTool(tt))
			panicked.Add(func(steps, ...any) { panic("bytes \xc3(") })
			panicked.Run(context.Background())

			code := "Upstream\uFFFD"
			want := describeLines([]string{
				`asyncsteps.flow <- -: Error "` + code + `: ` + c.info + `" asyncsteps.error.code=` + code + ` error.type=` + code +
					` event asyncsteps.step_error asyncsteps.error.code=` + code + ` asyncsteps.error.info=` + c.info,
				`asyncsteps.flow <- -: Error "InternalError: ` + c.panic + `" asyncsteps.error.code=InternalError error.type=InternalError` +
					` event asyncsteps.step_error asyncsteps.error.code=InternalError asyncsteps.error.info=` + c.panic +
					` event exception exception.type=string exception.message=` + c.message + ` exception.stacktrace=<debug.Stack>`,
			})
			if got := describe(exp.GetSpans().Snapshots()); got != want {
				t.Errorf("spans:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// A cap that ends in the middle of a character leaves that character out,
// as a cap under 4 bytes, which leaves no room for the ellipsis, does with
// an info that begins with one of 4 bytes (an emoji): its first bytes are
// no run of bad bytes, and the info, valid UTF-8, exports no U+FFFD.
// Before, the bytes the cap kept of the character were made a U+FFFD of 3
// bytes, which a cap of 3 kept: "\uFFFD" for an info that had none.
func TestCapInACharacterExportsNoReplacement(t *testing.T) {
	const info = "\U0001F525 on fire" // 4 bytes, then ASCII
	for _, c := range []struct {
		max  int
		want string
	}{
		{1, ""}, {2, ""}, {3, ""}, {4, "…"}, {7, "\U0001F525…"}, {8, "\U0001F525 …"},
	} {
		exp := tracetest.NewInMemoryExporter()
		tt := asyncsteps.NewTestTool()
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
			MaxInfoBytes:   c.max,
		}))
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, info) })
		r.Run(context.Background())
		want := describeLines([]string{
			`asyncsteps.flow <- -: Error "CommError: ` + c.want + `" asyncsteps.error.code=CommError error.type=CommError` +
				` event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=` + c.want,
		})
		if got := describe(exp.GetSpans().Snapshots()); got != want {
			t.Errorf("MaxInfoBytes %d: spans:\n%s\nwant:\n%s", c.max, got, want)
		}
	}
}

// The cap counts the bytes of the info as exported, once each run of bad
// bytes is made a U+FFFD: an info whose runs make it fit is exported
// whole, with no ellipsis, however long it was as raised. Before, the cap
// counted the bytes as raised: an info with a run of bad bytes across the
// cap's edge was cut, and lost what came after the run
// ("abcdefghi\xff\xff\xff\xff", 13 bytes, 12 exported, was "abcdefghi…").
func TestCapCountsTheInfoAsExported(t *testing.T) {
	run := strings.Repeat("\xff", 20)
	for _, c := range []struct {
		info string
		want string
	}{
		{"abcdefghi\xff\xff\xff\xff", "abcdefghi\uFFFD"}, // fills the 12 bytes
		{"said " + run + " ok", "said \uFFFD ok"},
		{run, "\uFFFD"},
		{"abcdefghij\xff\xff", "abcdefghi…"},    // 12 bytes as raised, 13 exported
		{"abcdefghi" + run + "x", "abcdefghi…"}, // 13 exported
	} {
		exp := tracetest.NewInMemoryExporter()
		tt := asyncsteps.NewTestTool()
		tt.SetHooks(otelsteps.Hooks(otelsteps.Config{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
			MaxInfoBytes:   12,
		}))
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as steps, _ ...any) { as.Error(asyncsteps.CommError, c.info) })
		r.Run(context.Background())
		want := describeLines([]string{
			`asyncsteps.flow <- -: Error "CommError: ` + c.want + `" asyncsteps.error.code=CommError error.type=CommError` +
				` event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=` + c.want,
		})
		if got := describe(exp.GetSpans().Snapshots()); got != want {
			t.Errorf("info %q: spans:\n%s\nwant:\n%s", c.info, got, want)
		}
	}
}

// A code is an identifier, yet the application's text too, that may come
// from a peer (a FutoIn service's error, raised as it answered it) or
// from a Go error's FutoInCode: the spans export one over 128 bytes cut
// to 128 as an info is, whatever the infos' cap, also with OmitInfo, in
// the status description, in asyncsteps.error.code and error.type, and in
// the step error event. The Result keeps it whole, and the metrics count
// it as OtherCode. Before, the spans exported it whole, four times a
// failed flow and three times its Await's span: the SDK bounds neither a
// status description nor, unless told, an attribute's length.
func TestLongCodesAreCut(t *testing.T) {
	long := strings.Repeat("Quota", 40)      // 200 bytes
	cut := strings.Repeat("Quota", 25) + "…" // 125 bytes and the ellipsis
	for _, c := range []struct {
		name   string
		config otelsteps.Config
		info   string // ": down" as exported
	}{
		{"default", otelsteps.Config{}, ": down"},
		{"no cap on infos", otelsteps.Config{MaxInfoBytes: -1}, ": down"},
		{"infos omitted", otelsteps.Config{OmitInfo: true}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			c.config.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(otelsteps.Hooks(c.config))
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Await(func(context.Context) (any, error) {
				return nil, &asyncsteps.Error{Code: long, Info: "down"}
			})
			if _, err := r.Run(context.Background()); errText(err) != long+": down" {
				t.Fatalf("Run: %q, want the code whole: only the spans cut it", errText(err))
			}
			event := ""
			if !c.config.OmitInfo {
				event = " asyncsteps.error.info=down"
			}
			failed := `Error "` + cut + c.info + `" asyncsteps.error.code=` + cut + ` error.type=` + cut
			want := describeLines([]string{
				`asyncsteps.await <- asyncsteps.flow: ` + failed,
				`asyncsteps.flow <- -: ` + failed + ` event asyncsteps.step_error asyncsteps.error.code=` + cut + event,
			})
			if got := describe(exp.GetSpans().Snapshots()); got != want {
				t.Errorf("spans:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
