package asynchttp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A callback that calls runtime.Goexit on the request's goroutine (Tool,
// Done, an Await function the request's goroutine runs) ends that
// goroutine: net/http then closes the connection, and the client used to
// get no answer at all. It gets a complete, logged answer: a 500 when none
// was written yet, else the one written. A Goexit in Flow runs on the
// loop, and is an InternalError like a panic.
func TestHandlerAnswersWhenItsCallbacksGoexit(t *testing.T) {
	loop := newLoop(t)
	onLoop := func() asyncsteps.Tool { return loop }
	goexitLine := `msg="asynchttp: the request's goroutine ended (runtime.Goexit) in a callback" method=GET path=/`
	cases := []struct {
		name     string
		h        asynchttp.Handler
		status   int
		body     string
		wantLogs []string
	}{
		{"Tool", asynchttp.Handler{Tool: func() asyncsteps.Tool { runtime.Goexit(); return nil }},
			500, internalAnswer, []string{goexitLine + " status=500 answered=false"}},
		{"Done after a Reply", asynchttp.Handler{
			Tool: onLoop,
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
				as.Success(&asynchttp.Reply{Status: 201, Body: []byte("made")})
			},
			Done: func(*http.Request, asynchttp.Outcome) { runtime.Goexit() },
		}, 201, "made", []string{goexitLine + " status=0 answered=true"}},
		{"Done after JSON", asynchttp.Handler{
			Tool: onLoop,
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(map[string]int{"n": 1}) },
			Done: func(*http.Request, asynchttp.Outcome) { runtime.Goexit() },
		}, 200, `{"n":1}` + "\n", []string{goexitLine + " status=0 answered=true"}},
		{"Await on the request's goroutine", asynchttp.Handler{
			Tool: onLoop,
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
				as.Await(func(context.Context) (any, error) { runtime.Goexit(); return nil, nil })
			},
		}, 500, internalAnswer, []string{goexitLine + " status=500 answered=false"}},
		{"Flow", asynchttp.Handler{
			Tool: onLoop,
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { runtime.Goexit() },
		}, 500, internalAnswer, []string{`msg="asynchttp: request failed" method=GET path=/ status=500 code=InternalError`}},
		{"Logger", asynchttp.Handler{
			Tool:   onLoop,
			Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(asyncsteps.CommError, "upstream") },
			Logger: slog.New(goexitLog{}),
		}, 502, `{"error":"CommError","info":"upstream"}` + "\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.h.Logger != nil {
				status, _, body := serve(t, &c.h)
				if status != c.status || body != c.body {
					t.Errorf("got %d %q, want %d %q", status, body, c.status, c.body)
				}
				return
			}
			logger, logs := logged()
			h := c.h
			h.Logger = logger
			status, _, body := serve(t, &h)
			if status != c.status || body != c.body {
				t.Errorf("got %d %q, want %d %q", status, body, c.status, c.body)
			}
			for _, want := range c.wantLogs {
				if !strings.Contains(logs(), want) {
					t.Errorf("log %q lacks %q", logs(), want)
				}
			}
		})
	}
}

// goexitLog is a slog.Handler that calls runtime.Goexit.
type goexitLog struct{}

func (goexitLog) Enabled(context.Context, slog.Level) bool  { return true }
func (goexitLog) Handle(context.Context, slog.Record) error { runtime.Goexit(); return nil }
func (l goexitLog) WithAttrs([]slog.Attr) slog.Handler      { return l }
func (l goexitLog) WithGroup(string) slog.Handler           { return l }

// Done is called once per request, also when a callback on the request's
// goroutine calls runtime.Goexit: with the 500 answered for it, or with
// the answer already written when the Logger called it. It was not called
// at all, and such requests were missing from the metrics it keeps.
func TestHandlerDoneSeesARequestWhoseGoroutineGoexits(t *testing.T) {
	loop := newLoop(t)
	onLoop := func() asyncsteps.Tool { return loop }
	goexitInfo := "asynchttp: the request's goroutine ended (runtime.Goexit) in a callback"
	cases := []struct {
		name       string
		h          asynchttp.Handler
		status     int
		code, info string
	}{
		{"Tool", asynchttp.Handler{Tool: func() asyncsteps.Tool { runtime.Goexit(); return nil }},
			500, asyncsteps.InternalError, goexitInfo},
		{"Await on the request's goroutine", asynchttp.Handler{
			Tool: onLoop,
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
				as.Await(func(context.Context) (any, error) { runtime.Goexit(); return nil, nil })
			},
		}, 500, asyncsteps.InternalError, goexitInfo},
		{"Logger", asynchttp.Handler{
			Tool:   onLoop,
			Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(asyncsteps.CommError, "upstream") },
			Logger: slog.New(goexitLog{}),
		}, 502, asyncsteps.CommError, "upstream"},
		{"Logger of a result that cannot be answered", asynchttp.Handler{
			Tool:   onLoop,
			Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success((*asynchttp.Reply)(nil)) },
			Logger: slog.New(goexitLog{}),
		}, 500, asyncsteps.InternalError, "asynchttp: the flow's result is a nil *Reply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outs outcomes
			called := make(chan struct{}, 1)
			h := c.h
			h.Done = func(req *http.Request, o asynchttp.Outcome) {
				outs.done(req, o)
				called <- struct{}{}
			}
			if h.Logger == nil {
				h.Logger = slog.New(slog.DiscardHandler)
			}
			if status, _, _ := serve(t, &h); status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
			// The answer is flushed before Done runs.
			select {
			case <-called:
			case <-time.After(10 * time.Second):
			}
			o := outs.get()
			var e *asyncsteps.Error
			if len(o) != 1 || o[0].Status != c.status || o[0].Code != c.code || o[0].Cancelled ||
				!errors.As(o[0].Err, &e) || e.Code != c.code || e.Info != c.info || o[0].Start.IsZero() {
				t.Fatalf("outcomes %+v, want one with status %d, code %s, info %q", o, c.status, c.code, c.info)
			}
		})
	}
}
