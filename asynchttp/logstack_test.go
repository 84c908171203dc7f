package asynchttp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// recordingHandler is a slog.Handler that keeps each record's level,
// message and attributes, the values as they were logged.
type recordingHandler struct {
	mu      sync.Mutex
	records []loggedRecord
}

type loggedRecord struct {
	level slog.Level
	msg   string
	keys  []string
	attrs map[string]any
}

func (r *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordingHandler) WithGroup(string) slog.Handler            { return r }

func (r *recordingHandler) Handle(_ context.Context, rec slog.Record) error {
	lr := loggedRecord{level: rec.Level, msg: rec.Message, attrs: map[string]any{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.keys = append(lr.keys, a.Key)
		lr.attrs[a.Key] = a.Value.Any()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, lr)
	return nil
}

// only returns the one record logged, failing t if there is not exactly one.
func (r *recordingHandler) only(t *testing.T) loggedRecord {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.records) != 1 {
		t.Fatalf("%d log records, want 1: %+v", len(r.records), r.records)
	}
	return r.records[0]
}

// The steps of the tests below: named functions, whose names the flow's
// AsyncStack shows.
func priceStep(as asyncsteps.AsyncSteps, _ ...any) { as.Add(convertStep) }
func convertStep(asyncsteps.AsyncSteps, ...any)    { panic("rate table empty") }
func quoteStep(as asyncsteps.AsyncSteps, _ ...any) {
	as.SetTimeout(50 * time.Millisecond) // its own bound on the upstream's answer
	as.Add(slowStep)
}
func slowStep(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }
func upstreamStep(as asyncsteps.AsyncSteps, _ ...any) {
	as.Error(asyncsteps.CommError, "upstream answered 502")
}

const pkg = "github.com/asyncsteps/asyncsteps/asynchttp_test."

// serveLogged serves one GET path with h, on a Loop of its own, and returns
// the status and the one line h logged. Timeout and Guard vary: each adds
// a step of the Handler's own around Flow's, which async_stack leaves out.
func serveLogged(t *testing.T, path string, timeout time.Duration, guard asyncsteps.Syncer, step asyncsteps.StepFunc) (int, loggedRecord) {
	t.Helper()
	rec := &recordingHandler{}
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	h := &asynchttp.Handler{
		Tool:    func() asyncsteps.Tool { return loop },
		Timeout: timeout,
		Guard:   guard,
		Flow:    func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Add(step) },
		Logger:  slog.New(rec),
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code, rec.only(t)
}

// The log line of a panic in a step has what a 500 "see the server log"
// sends someone to look for: the panic's stack, down to the function that
// panicked, and the flow's AsyncStack, the steps it ran in.
func TestPanicLogLineHasTheStackAndTheAsyncStack(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		guard   asyncsteps.Syncer
	}{
		{"plain", 0, nil},
		{"under Timeout", time.Minute, nil},
		{"under Guard", 0, asyncsteps.NewMutex(1)},
		{"under both", time.Minute, asyncsteps.NewMutex(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, r := serveLogged(t, "/price", c.timeout, c.guard, priceStep)
			wantKeys := []string{"method", "path", "status", "code", "info", "cause", "stack", "async_stack"}
			if status != http.StatusInternalServerError || r.level != slog.LevelError || r.msg != "asynchttp: request failed" || !slices.Equal(r.keys, wantKeys) {
				t.Fatalf("answered %d, logged %v %q with %v; want 500, ERROR %q with %v", status, r.level, r.msg, r.keys, "asynchttp: request failed", wantKeys)
			}
			if r.attrs["path"] != "/price" || r.attrs["status"] != int64(500) || r.attrs["code"] != asyncsteps.InternalError || r.attrs["info"] != "rate table empty" {
				t.Errorf("path, status, code, info: %v %v %v %v", r.attrs["path"], r.attrs["status"], r.attrs["code"], r.attrs["info"])
			}
			cause, ok := r.attrs["cause"].(*asyncsteps.PanicError)
			if !ok || cause.Value != "rate table empty" {
				t.Fatalf("cause %#v, want the *asyncsteps.PanicError of the panic", r.attrs["cause"])
			}
			stack, _ := r.attrs["stack"].(string)
			if stack != string(cause.Stack) || !strings.HasPrefix(stack, "goroutine ") || !strings.Contains(stack, pkg+"convertStep(") {
				t.Errorf("stack %q, want the PanicError's, through convertStep", stack)
			}
			if got, want := r.attrs["async_stack"], []string{pkg + "priceStep", pkg + "convertStep"}; !slices.Equal(got.([]string), want) {
				t.Errorf("async_stack %q, want %q", got, want)
			}
		})
	}
}

// A 504 names the step whose own timeout ran out, and has no stack:
// nothing panicked. The Handler's Timeout is set by the Handler's own
// step, which the engine's AsyncStack names: the line then has no
// async_stack.
func TestTimeoutLogLineHasTheAsyncStack(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		step    asyncsteps.StepFunc
		took    time.Duration
		async   []string // nil: no async_stack
	}{
		{"the step's own", 0, quoteStep, 50 * time.Millisecond, []string{pkg + "quoteStep"}},
		{"the step's own under Timeout", time.Minute, quoteStep, 50 * time.Millisecond, []string{pkg + "quoteStep"}},
		{"the Handler's Timeout", 100 * time.Millisecond, slowStep, 100 * time.Millisecond, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				status, r := serveLogged(t, "/quote", c.timeout, nil, c.step)
				if took := time.Since(start); status != http.StatusGatewayTimeout || took != c.took {
					t.Fatalf("answered %d after %v, want 504 after %v", status, took, c.took)
				}
				wantKeys := []string{"method", "path", "status", "code", "info"} // no cause: a timeout has none
				if c.async != nil {
					wantKeys = append(wantKeys, "async_stack")
				}
				if r.level != slog.LevelWarn || r.attrs["code"] != asyncsteps.Timeout || !slices.Equal(r.keys, wantKeys) {
					t.Fatalf("logged %v %v with %v, want WARN Timeout with %v", r.level, r.attrs["code"], r.keys, wantKeys)
				}
				if r.attrs["info"] != asynchttp.TimeoutInfo {
					t.Errorf("info %q, want %q, as answered", r.attrs["info"], asynchttp.TimeoutInfo)
				}
				if got, _ := r.attrs["async_stack"].([]string); !slices.Equal(got, c.async) {
					t.Errorf("async_stack %q, want %q", got, c.async)
				}
			})
		})
	}
}

// Other failures keep the line they had: a 502 has neither stack, nor a
// cause when its error has none. A line that LogFailure logs, for a
// handler that runs no flow, has no AsyncStack, but it has the stack of a
// panic's error.
func TestOtherLogLinesHaveNoStacks(t *testing.T) {
	status, r := serveLogged(t, "/", 0, nil, upstreamStep)
	base := []string{"method", "path", "status", "code", "info"}
	if status != http.StatusBadGateway || r.level != slog.LevelWarn || !slices.Equal(r.keys, base) {
		t.Errorf("answered %d, logged %v with %v, want 502, WARN with %v", status, r.level, r.keys, base)
	}
	base = append(base, "cause")

	rec := &recordingHandler{}
	h := &asynchttp.Handler{Logger: slog.New(rec)}
	p := &asyncsteps.PanicError{Value: "boom", Stack: []byte("goroutine 7 [running]:\nmain.handle()")}
	h.LogFailure(httptest.NewRequest(http.MethodGet, "/", nil),
		&asyncsteps.Error{Code: asyncsteps.InternalError, Info: "boom", Cause: p}, http.StatusInternalServerError)
	r = rec.only(t)
	if want := append(base, "stack"); !slices.Equal(r.keys, want) || r.attrs["stack"] != string(p.Stack) {
		t.Errorf("LogFailure logged %v, stack %q; want %v, stack %q", r.keys, r.attrs["stack"], want, p.Stack)
	}
}

// A failure's info longer than 1 KiB is logged clipped to it, and "...",
// cut before a character it would split; the answer is the flow's to
// make, and LogFailure only logs.
func TestLogFailureClipsALongInfo(t *testing.T) {
	for _, c := range []struct{ name, info, want string }{
		{"1 KiB", strings.Repeat("x", 1024), strings.Repeat("x", 1024)},
		{"ASCII", strings.Repeat("x", 5000), strings.Repeat("x", 1024) + "..."},
		{"a character across the cut", strings.Repeat("x", 1023) + "é" + strings.Repeat("x", 100), strings.Repeat("x", 1023) + "..."},
		{"not UTF-8", strings.Repeat("\x80", 2000), strings.Repeat("\x80", 1024) + "..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingHandler{}
			h := &asynchttp.Handler{Logger: slog.New(rec)}
			h.LogFailure(httptest.NewRequest(http.MethodGet, "/", nil),
				&asyncsteps.Error{Code: asyncsteps.CommError, Info: c.info}, http.StatusBadGateway)
			if got := rec.only(t).attrs["info"]; got != c.want {
				t.Errorf("logged info of %d bytes %.20q..., want %d bytes", len(got.(string)), got, len(c.want))
			}
		})
	}
}

// The method and the path of a request are the client's text, of up to a
// megabyte (net/http's bound on a request line): a log line of the
// Handler's has them clipped to 1 KiB and "...", as a long info, on the
// line of a failed answer, of a Goexit, and of LogFailure.
func TestLogLinesClipTheRequestsMethodAndPath(t *testing.T) {
	method, path := strings.Repeat("M", 2000), "/"+strings.Repeat("p", 5000)
	wantMethod, wantPath := strings.Repeat("M", 1024)+"...", path[:1024]+"..."
	loop := newLoop(t)
	for _, c := range []struct {
		name, msg string
		h         asynchttp.Handler
	}{
		{"failed answer", "asynchttp: request failed", asynchttp.Handler{
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(asyncsteps.CommError, "upstream") },
		}},
		{"Goexit", "asynchttp: the request's goroutine ended (runtime.Goexit) in a callback", asynchttp.Handler{
			Done: func(*http.Request, asynchttp.Outcome) { runtime.Goexit() },
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingHandler{}
			h := c.h
			h.Tool, h.Logger = func() asyncsteps.Tool { return loop }, slog.New(rec)
			srv := httptest.NewServer(&h)
			defer srv.Close()
			req, err := http.NewRequest(method, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
			srv.Close() // waits for the handler, which logs a Goexit after the answer is flushed
			line := rec.only(t)
			if line.msg != c.msg || line.attrs["method"] != wantMethod || line.attrs["path"] != wantPath {
				t.Errorf("logged %q method of %d bytes, path of %d bytes; want %q, %d and %d",
					line.msg, len(line.attrs["method"].(string)), len(line.attrs["path"].(string)), c.msg, len(wantMethod), len(wantPath))
			}
		})
	}
	t.Run("LogFailure", func(t *testing.T) {
		rec := &recordingHandler{}
		h := &asynchttp.Handler{Logger: slog.New(rec)}
		h.LogFailure(httptest.NewRequest(method, path, nil), &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream"}, http.StatusBadGateway)
		if line := rec.only(t); line.attrs["method"] != wantMethod || line.attrs["path"] != wantPath {
			t.Errorf("logged a method of %d bytes, a path of %d bytes; want %d and %d",
				len(line.attrs["method"].(string)), len(line.attrs["path"].(string)), len(wantMethod), len(wantPath))
		}
	})
}
