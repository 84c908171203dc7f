package asynchttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// internalAnswer is the body of every 500 a Handler writes.
const internalAnswer = `{"error":"InternalError","info":"internal error, see the server log"}` + "\n"

// logged returns a logger that writes text lines to a buffer, and a function
// that reads them.
func logged() (*slog.Logger, func() string) { return loggedWith(nil) }

// loggedWith is logged with the handler options opts.
func loggedWith(opts *slog.HandlerOptions) (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, opts)), read
}

// A status that net/http refuses, or that is not final, in a Reply or in
// Codes is answered with a logged 500 instead of a panic in net/http that
// left the client without an answer.
func TestHandlerAnswersABadStatusWith500(t *testing.T) {
	loop := newLoop(t)
	for _, status := range []int{-1, 1, 103, 600, 1000} {
		t.Run("Reply "+itoa(status), func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			h := &asynchttp.Handler{
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
					as.Success(&asynchttp.Reply{Status: status, Header: http.Header{"X-Reply": {"1"}}, Body: []byte("body")})
				},
				Tool:   func() asyncsteps.Tool { return loop },
				Logger: logger,
				Done:   outs.done,
			}
			got, header, body := serveWithHeader(t, h, "X-Reply")
			if got != 500 || body != internalAnswer || header != "" {
				t.Errorf("got %d %q with X-Reply %q, want 500 %q without it", got, body, header, internalAnswer)
			}
			want := `msg="asynchttp: Reply.Status is not a final HTTP status" status=` + itoa(status)
			if !strings.Contains(logs(), want) {
				t.Errorf("log %q lacks %q", logs(), want)
			}
			if o := outs.get(); len(o) != 1 || o[0].Status != 500 {
				t.Errorf("outcomes %+v, want one with status 500", o)
			}
		})
	}
	t.Run("nil Reply", func(t *testing.T) {
		var outs outcomes
		logger, logs := logged()
		h := &asynchttp.Handler{
			Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
				as.Success((*asynchttp.Reply)(nil))
			},
			Tool:   func() asyncsteps.Tool { return loop },
			Logger: logger,
			Done:   outs.done,
		}
		got, _, body := serve(t, h)
		if got != 500 || body != internalAnswer {
			t.Errorf("got %d %q, want 500 %q", got, body, internalAnswer)
		}
		if want := `msg="asynchttp: the flow's result is a nil *Reply"`; !strings.Contains(logs(), want) {
			t.Errorf("log %q lacks %q", logs(), want)
		}
		if o := outs.get(); len(o) != 1 || o[0].Status != 500 {
			t.Errorf("outcomes %+v, want one with status 500", o)
		}
	})
	for _, status := range []int{0, 42, 103, 1000} {
		t.Run("Codes "+itoa(status), func(t *testing.T) {
			logger, logs := logged()
			h := &asynchttp.Handler{
				Flow:   fail("Mine", "why"),
				Tool:   func() asyncsteps.Tool { return loop },
				Codes:  map[string]int{"Mine": status},
				Logger: logger,
			}
			got, _, body := serve(t, h)
			wantBody := `{"error":"Mine","info":"why"}` + "\n"
			if got != 500 || body != wantBody {
				t.Errorf("got %d %q, want 500 %q", got, body, wantBody)
			}
			want := `msg="asynchttp: Handler.Codes maps a code to no final HTTP status" code=Mine status=` + itoa(status)
			if !strings.Contains(logs(), want) {
				t.Errorf("log %q lacks %q", logs(), want)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// serveWithHeader sends one GET / to h through a real server on loopback
// and returns the status, the header named name and the body.
func serveWithHeader(t *testing.T, h http.Handler, name string) (int, string, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, body, err := getAll(t, srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get(name), body
}

type panickyJSON struct{}

func (panickyJSON) MarshalJSON() ([]byte, error) { panic("marshal boom") }

// panickyLog is a slog handler whose every line panics.
type panickyLog struct{ slog.Handler }

func (panickyLog) Enabled(context.Context, slog.Level) bool  { return true }
func (panickyLog) Handle(context.Context, slog.Record) error { panic("log boom") }

// A panic in a function the Handler calls besides the flow's steps (Tool,
// Done, the Logger's handler, a result's MarshalJSON) still gives the
// client its answer: net/http, which the panic reached before, closed the
// connection without one.
func TestHandlerAnswersWhenItsOwnCallbacksPanic(t *testing.T) {
	loop := newLoop(t)
	tool := func() asyncsteps.Tool { return loop }
	ok := func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("ok") }
	tests := []struct {
		name   string
		h      asynchttp.Handler
		status int
		body   string
		log    string
	}{
		{"Tool", asynchttp.Handler{Flow: ok, Tool: func() asyncsteps.Tool { panic("tool boom") }},
			500, internalAnswer, `info="asynchttp: Handler.Tool panicked: tool boom"`},
		{"Done", asynchttp.Handler{Flow: ok, Tool: tool, Done: func(*http.Request, asynchttp.Outcome) { panic("done boom") }},
			200, "\"ok\"\n", `msg="asynchttp: Handler.Done panicked" panic="done boom"`},
		{"MarshalJSON", asynchttp.Handler{Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(panickyJSON{}) }, Tool: tool},
			500, internalAnswer, `err="json: MarshalJSON panicked: marshal boom"`},
		{"Logger", asynchttp.Handler{Flow: fail(asyncsteps.InternalError, "x"), Tool: tool, Logger: slog.New(panickyLog{})},
			500, internalAnswer, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			logs := func() string { return "" }
			if h.Logger == nil {
				h.Logger, logs = logged()
			}
			status, _, body := serve(t, &h)
			if status != tc.status || body != tc.body {
				t.Errorf("got %d %q, want %d %q", status, body, tc.status, tc.body)
			}
			if !strings.Contains(logs(), tc.log) {
				t.Errorf("log %q lacks %q", logs(), tc.log)
			}
		})
	}
}

// failingGuard is a Syncer whose Sync panics, or calls runtime.Goexit.
type failingGuard struct{ goexit bool }

func (g failingGuard) Sync(asyncsteps.AsyncSteps, asyncsteps.StepFunc, ...asyncsteps.ErrorFunc) {
	if g.goexit {
		runtime.Goexit()
	}
	panic("guard boom")
}

// A Guard, of the Handler or of a Client, whose Sync panics or calls
// runtime.Goexit, and a Client's Done that does, fail the request with a
// logged 500 InternalError, which the Handler's Done sees: a Guard runs
// in a step of the flow, and a Client's Done in its Await function.
func TestHandlerAnswersWhenAGuardOrAClientHookFails(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "price") }))
	t.Cleanup(upstream.Close)
	loop := newLoop(t)
	tool := func() asyncsteps.Tool { return loop }
	ok := func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("ok") }
	fetch := func(c *asynchttp.Client) func(as asyncsteps.AsyncSteps, _ *http.Request) {
		return func(as asyncsteps.AsyncSteps, _ *http.Request) { c.Get(as, upstream.URL) }
	}
	const goexitInfo = `info="runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"`
	for _, tc := range []struct {
		name string
		h    asynchttp.Handler
		log  string // a part of the log line
	}{
		{"Handler.Guard panics", asynchttp.Handler{Flow: ok, Tool: tool, Guard: failingGuard{}},
			`code=InternalError info="guard boom" cause="panic: guard boom"`},
		{"Handler.Guard calls Goexit", asynchttp.Handler{Flow: ok, Tool: tool, Guard: failingGuard{goexit: true}},
			"code=InternalError " + goexitInfo},
		{"Client.Guard panics", asynchttp.Handler{Flow: fetch(&asynchttp.Client{Guard: failingGuard{}}), Tool: tool},
			`code=InternalError info="guard boom" cause="panic: guard boom"`},
		{"Client.Guard calls Goexit", asynchttp.Handler{Flow: fetch(&asynchttp.Client{Guard: failingGuard{goexit: true}}), Tool: tool},
			"code=InternalError " + goexitInfo},
		{"Client.Done panics", asynchttp.Handler{Tool: tool, Flow: fetch(&asynchttp.Client{HTTP: upstream.Client(),
			Done: func(*http.Request, int, error) { panic("client done boom") }})},
			`code=InternalError info="panic: client done boom" cause="panic: client done boom"`}, // as an Await function's panic
		{"Client.Done calls Goexit", asynchttp.Handler{Tool: tool, Flow: fetch(&asynchttp.Client{HTTP: upstream.Client(),
			Done: func(*http.Request, int, error) { runtime.Goexit() }})},
			"status=500"}, // the request's goroutine ended, or a loop's: the Handler says which
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen outcomes
			h := tc.h
			h.Done = seen.done
			logger, logs := logged()
			h.Logger = logger
			status, _, body := serve(t, &h)
			if status != http.StatusInternalServerError || body != internalAnswer {
				t.Errorf("got %d %q, want 500 %q", status, body, internalAnswer)
			}
			if !strings.Contains(logs(), tc.log) {
				t.Errorf("log %q lacks %q", logs(), tc.log)
			}
			if got := seen.get(); len(got) != 1 || got[0].Code != asyncsteps.InternalError || got[0].Status != http.StatusInternalServerError {
				t.Errorf("Done saw %+v, want one InternalError answered 500", got)
			}
		})
	}
}

// Do with a nil request, or one without a URL, fails its step with a code
// and an info that say so (a nil dereference, and a CommError, before),
// and sends nothing.
func TestClientDoRefusesARequestItCannotSend(t *testing.T) {
	var e ends
	c := &asynchttp.Client{Done: e.done}
	cases := []struct {
		name       string
		req        *http.Request
		code, info string
	}{
		{"nil", nil, asyncsteps.InternalError, "asynchttp: Do: nil request"},
		{"no URL", &http.Request{Method: http.MethodGet}, asyncsteps.InternalError, "asynchttp: Do: request without a URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen string
			_, err := runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
				c.Do(as, tc.req, func(as asyncsteps.AsyncSteps, code string) {
					seen = code + ": " + as.State().ErrorInfo
				})
			})
			var fe *asyncsteps.Error
			if !errors.As(err, &fe) || fe.Code != tc.code || fe.Info != tc.info {
				t.Errorf("flow error %#v, want %s: %s", err, tc.code, tc.info)
			}
			if want := tc.code + ": " + tc.info; seen != want {
				t.Errorf("the handler saw %q, want %q", seen, want)
			}
		})
	}
	if got := e.get(); got != "" {
		t.Errorf("Done was called: %s", got)
	}
}

// A nil *Client acts as the zero Client (its Get and Do dereferenced it
// inside the step that sent the request).
func TestNilClientActsAsTheZeroOne(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Write([]byte(req.Method + " " + req.URL.Path)) //nolint:errcheck // a test server
	}))
	defer srv.Close()
	var c *asynchttp.Client
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/do", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_, err = runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		for _, send := range []func(as asyncsteps.AsyncSteps){
			func(as asyncsteps.AsyncSteps) { c.Get(as, srv.URL+"/get") },
			func(as asyncsteps.AsyncSteps) { c.Do(as, req) },
		} {
			send(as)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
				got = append(got, string(resp.Body))
			})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, ", "); s != "GET /get, POST /do" {
		t.Errorf("answers %q, want %q", s, "GET /get, POST /do")
	}
}

// A result the Handler cannot answer as it is (a nil *Reply, a Reply
// status net/http refuses, a value JSON cannot encode) is answered as an
// InternalError, and Done is told so: the code and the error said
// success before, while the client got a 500 InternalError.
func TestHandlerOutcomeOfAnUnanswerableResultIsInternalError(t *testing.T) {
	loop := newLoop(t)
	for _, c := range []struct {
		name   string
		result any
		info   string
	}{
		{"nil Reply", (*asynchttp.Reply)(nil), "asynchttp: the flow's result is a nil *Reply"},
		{"Reply status", &asynchttp.Reply{Status: 1000}, "asynchttp: Reply.Status is not a final HTTP status"},
		{"not JSON", make(chan int), "asynchttp: result not encodable as JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outs outcomes
			h := &asynchttp.Handler{
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(c.result) },
				Tool:   func() asyncsteps.Tool { return loop },
				Logger: slog.New(slog.DiscardHandler),
				Done:   outs.done,
			}
			if status, _, body := serve(t, h); status != 500 || body != internalAnswer {
				t.Errorf("got %d %q, want 500 %q", status, body, internalAnswer)
			}
			o := outs.get()
			var e *asyncsteps.Error
			if len(o) != 1 || o[0].Status != 500 || o[0].Code != asyncsteps.InternalError ||
				!errors.As(o[0].Err, &e) || e.Code != asyncsteps.InternalError || e.Info != c.info {
				t.Errorf("outcomes %+v, want one 500 InternalError %q", o, c.info)
			}
		})
	}
}
