package asynchttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// serve sends one GET / to h through a real server on loopback and returns
// the status, the Retry-After header and the body.
func serve(t *testing.T, h http.Handler) (int, string, string) {
	t.Helper()
	return serveWithHeader(t, h, "Retry-After")
}

func newLoop(t *testing.T) *asyncsteps.Loop {
	l := asyncsteps.NewLoop()
	t.Cleanup(l.Close)
	return l
}

// outcomes records what Handler.Done reports.
type outcomes struct {
	mu   sync.Mutex
	list []asynchttp.Outcome
}

func (o *outcomes) done(_ *http.Request, out asynchttp.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, out)
}

func (o *outcomes) get() []asynchttp.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]asynchttp.Outcome(nil), o.list...)
}

func TestHandlerAnswersFromTheFlowsResult(t *testing.T) {
	loop := newLoop(t)
	tests := []struct {
		name       string
		flow       func(as asyncsteps.AsyncSteps, req *http.Request)
		status     int
		retryAfter string
		body       string
		code       string
	}{
		{"value as JSON", func(as asyncsteps.AsyncSteps, req *http.Request) {
			as.Success(map[string]any{"path": req.URL.Path})
		}, 200, "", `{"path":"/"}` + "\n", ""},
		{"no argument", func(as asyncsteps.AsyncSteps, _ *http.Request) {}, 204, "", "", ""},
		{"several arguments", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success("first", "second")
		}, 200, "", "\"first\"\n", ""},
		{"reply", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(&asynchttp.Reply{Status: 201, Body: []byte("made")})
		}, 201, "", "made", ""},
		{"InvalidRequest", fail(asyncsteps.InvalidRequest, "no symbols"), 400, "", `{"error":"InvalidRequest","info":"no symbols"}` + "\n", "InvalidRequest"},
		{"Unauthorized", fail(asyncsteps.Unauthorized, "who"), 401, "", `{"error":"Unauthorized","info":"who"}` + "\n", "Unauthorized"},
		{"PleaseReauth", fail(asyncsteps.PleaseReauth, "again"), 401, "", `{"error":"PleaseReauth","info":"again"}` + "\n", "PleaseReauth"},
		{"SecurityError", fail(asyncsteps.SecurityError, "no"), 403, "", `{"error":"SecurityError","info":"no"}` + "\n", "SecurityError"},
		{"NotImplemented", fail(asyncsteps.NotImplemented, "later"), 501, "", `{"error":"NotImplemented","info":"later"}` + "\n", "NotImplemented"},
		{"ConnectError", fail(asyncsteps.ConnectError, "refused"), 502, "", `{"error":"ConnectError","info":"refused"}` + "\n", "ConnectError"},
		{"CommError", fail(asyncsteps.CommError, "reset"), 502, "", `{"error":"CommError","info":"reset"}` + "\n", "CommError"},
		{"DefenseRejected", fail(asyncsteps.DefenseRejected, "busy"), 503, "3", `{"error":"DefenseRejected","info":"busy"}` + "\n", "DefenseRejected"},
		{"Timeout", fail(asyncsteps.Timeout, ""), 504, "", `{"error":"Timeout","info":"request timed out"}` + "\n", "Timeout"},
		{"Timeout with info", fail(asyncsteps.Timeout, "slow upstream"), 504, "", `{"error":"Timeout","info":"slow upstream"}` + "\n", "Timeout"},
		{"no info", fail(asyncsteps.CommError, ""), 502, "", `{"error":"CommError","info":""}` + "\n", "CommError"},
		{"user code", fail("Teapot", "short"), 418, "", `{"error":"Teapot","info":"short"}` + "\n", "Teapot"},
		{"code mapped to 429", fail("SlowDown", "quota"), 429, "3", `{"error":"SlowDown","info":"quota"}` + "\n", "SlowDown"},
		{"unknown code", fail("Odd", "x"), 500, "", `{"error":"Odd","info":"x"}` + "\n", "Odd"},
		{"step timeout", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }) // never completes
		}, 504, "", `{"error":"Timeout","info":"request timed out"}` + "\n", "Timeout"},
		// The flow's own timeout is answered as the Handler's: the info is
		// the engine's empty one (see Errors and statuses in the package doc).
		{"a Retry attempt's timeout", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2, Timeout: time.Millisecond},
				func(as asyncsteps.AsyncSteps, _ int) { as.WaitExternal() }) // an upstream that never answers
		}, 504, "", `{"error":"Timeout","info":"request timed out"}` + "\n", "Timeout"},
	}
	for _, tc := range tests {
		// Each case with a timeout (a flow that adds nothing still ends at
		// once) and without (Flow runs in the flow's first step itself).
		for _, timeout := range []time.Duration{time.Minute, 0} {
			if tc.name == "step timeout" {
				if timeout == 0 {
					continue
				}
				timeout = 20 * time.Millisecond
			}
			t.Run(fmt.Sprintf("%s/timeout %v", tc.name, timeout), func(t *testing.T) {
				var got outcomes
				h := &asynchttp.Handler{
					Flow:       tc.flow,
					Tool:       func() asyncsteps.Tool { return loop },
					Timeout:    timeout,
					Codes:      map[string]int{"Teapot": http.StatusTeapot, "SlowDown": http.StatusTooManyRequests},
					RetryAfter: 2500 * time.Millisecond,
					Logger:     slog.New(slog.DiscardHandler),
					Done:       got.done,
				}
				status, retryAfter, body := serve(t, h)
				if status != tc.status || retryAfter != tc.retryAfter || body != tc.body {
					t.Errorf("got %d, Retry-After %q, body %q; want %d, %q, %q", status, retryAfter, body, tc.status, tc.retryAfter, tc.body)
				}
				o := got.get()
				if len(o) != 1 || o[0].Status != tc.status || o[0].Code != tc.code || o[0].Cancelled {
					t.Errorf("outcomes %+v, want one with status %d, code %q", o, tc.status, tc.code)
				}
			})
		}
	}
}

func fail(code, info string) func(as asyncsteps.AsyncSteps, _ *http.Request) {
	return func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(code, info) }
}

// A panic and a misuse in a step are 500 answers that hide the details from
// the client, log them, and leave the server serving.
func TestHandlerPanicAndMisuseAre500AndLogged(t *testing.T) {
	loop := newLoop(t)
	tests := []struct {
		name string
		flow func(as asyncsteps.AsyncSteps, req *http.Request)
		log  string
	}{
		{"panic", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("boom") })
		}, `info=boom`},
		{"misuse", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(asyncsteps.AsyncSteps, ...any) {})
				as.Success() // Success after Add is a misuse
			})
		}, `code=InternalError`},
		{"unencodable result", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Success(make(chan int))
		}, `type="chan int"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			var mu sync.Mutex
			h := &asynchttp.Handler{
				Flow:   tc.flow,
				Tool:   func() asyncsteps.Tool { return loop },
				Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)),
			}
			status, _, body := serve(t, h)
			want := `{"error":"InternalError","info":"internal error, see the server log"}` + "\n"
			if status != 500 || body != want {
				t.Errorf("got %d %q, want 500 %q", status, body, want)
			}
			mu.Lock()
			logged := logs.String()
			mu.Unlock()
			if !strings.Contains(logged, "level=ERROR") || !strings.Contains(logged, tc.log) {
				t.Errorf("log %q lacks an error with %q", logged, tc.log)
			}
			// The loop still serves.
			h.Flow = func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("alive") }
			if status, _, body := serve(t, h); status != 200 || body != "\"alive\"\n" {
				t.Errorf("after the failure: %d %q", status, body)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A Guard that is full rejects the next request with 503 and Retry-After;
// the request inside is not disturbed.
func TestHandlerGuardRejectsWith503(t *testing.T) {
	loop := newLoop(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	h := &asynchttp.Handler{
		Tool:  func() asyncsteps.Tool { return loop },
		Guard: asyncsteps.NewMutex(1, 0),
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			if req.URL.Query().Get("hold") == "" {
				as.Success("in")
				return
			}
			entered <- struct{}{}
			asyncsteps.AwaitChan(as, release)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("held") })
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	first := make(chan string)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "?hold=1")
		if err != nil {
			first <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- resp.Status + " " + string(b)
	}()
	<-entered
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":"DefenseRejected","info":"Mutex queue limit"}` + "\n"
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || string(b) != want {
		t.Errorf("second request: %d Retry-After %q %q; want 503, 1, %q", resp.StatusCode, resp.Header.Get("Retry-After"), b, want)
	}
	close(release)
	if got := <-first; got != "200 OK \"held\"\n" {
		t.Errorf("first request: %q", got)
	}
}

// A client that goes away cancels its flow: the waiting step's cancel
// handler runs, and Done reports the request as cancelled.
func TestHandlerClientGoneCancelsTheFlow(t *testing.T) {
	loop := newLoop(t)
	waiting := make(chan struct{})
	cancelled := make(chan struct{})
	var got outcomes
	doneCalled := make(chan struct{})
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { close(cancelled) })
				close(waiting)
			})
		},
		Done: func(req *http.Request, o asynchttp.Outcome) {
			got.done(req, o)
			close(doneCalled)
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-waiting
	cancel()
	<-cancelled
	<-doneCalled
	if err := <-errc; err == nil {
		t.Error("the client got an answer after it went away")
	}
	o := got.get()
	if len(o) != 1 || !o[0].Cancelled || o[0].Code != asyncsteps.DefenseRejected || o[0].Status != 503 {
		t.Errorf("outcomes %+v, want one cancelled 503", o)
	}
}

func TestStatusOf(t *testing.T) {
	want := map[string]int{
		asyncsteps.InvalidRequest: 400, asyncsteps.Unauthorized: 401, asyncsteps.PleaseReauth: 401,
		asyncsteps.SecurityError: 403, asyncsteps.NotImplemented: 501, asyncsteps.DefenseRejected: 503,
		asyncsteps.Timeout: 504, asyncsteps.ConnectError: 502, asyncsteps.CommError: 502,
		asyncsteps.InternalError: 500, asyncsteps.InvokerError: 500, "Custom": 500,
	}
	for code, status := range want {
		if got := asynchttp.StatusOf(code); got != status {
			t.Errorf("StatusOf(%q) = %d, want %d", code, got, status)
		}
	}
}

// errRequestBudget is the cause a middleware gives the deadline it sets
// on a request's context.
var errRequestBudget = errors.New("request budget spent")

// A deadline of the request's context (set by a middleware, say) is a
// timeout of the whole flow, as with Run: its waiting step fails with
// Timeout, and the answer is a 504, counted as a finished request, not as
// a cancelled one. So is a deadline that has passed before the flow
// starts (a middleware before the Handler used the time up): Run starts
// nothing under an ended context and returns a Timeout. The answer and
// the line logged say it was the deadline of the request's context, not
// the Handler's Timeout ("request timed out"), and the line has the
// deadline's cause, which the outcome's Err matches, and the step it
// timed out as async_stack.
func TestHandlerRequestDeadlineIs504(t *testing.T) {
	const body = `{"error":"Timeout","info":"the flow's context deadline passed"}` + "\n"
	for _, c := range []struct {
		name     string
		deadline time.Duration // from when the middleware runs
		async    []string      // the line's async_stack; nil: none
	}{
		{"passes while the flow waits", 10 * time.Millisecond, []string{pkg + "slowStep"}},
		{"passed before the flow starts", -time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			loop := newLoop(t)
			var got outcomes
			rec := &recordingHandler{}
			h := &asynchttp.Handler{
				Tool:    func() asyncsteps.Tool { return loop },
				Timeout: time.Hour, // answered "request timed out": not this one
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
					as.Add(slowStep) // waits for the deadline
				},
				Done:   got.done,
				Logger: slog.New(rec),
			}
			withDeadline := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				ctx, cancel := context.WithTimeoutCause(req.Context(), c.deadline, errRequestBudget)
				defer cancel()
				h.ServeHTTP(w, req.WithContext(ctx))
			})
			status, retry, answer := serve(t, withDeadline)
			if status != http.StatusGatewayTimeout || retry != "" || answer != body {
				t.Errorf("answer %d, Retry-After %q, body %q; want 504, none, %q", status, retry, answer, body)
			}
			o := got.get()
			if len(o) != 1 || o[0].Cancelled || o[0].Code != asyncsteps.Timeout || o[0].Status != http.StatusGatewayTimeout || !errors.Is(o[0].Err, errRequestBudget) {
				t.Errorf("outcomes %+v, want one finished 504 Timeout caused by errRequestBudget", o)
			}
			r := rec.only(t)
			if r.attrs["info"] != "the flow's context deadline passed" || r.attrs["cause"] != errRequestBudget {
				t.Errorf("logged info %q, cause %v; want the deadline's, errRequestBudget", r.attrs["info"], r.attrs["cause"])
			}
			if got, _ := r.attrs["async_stack"].([]string); !slices.Equal(got, c.async) {
				t.Errorf("async_stack %q, want %q", got, c.async)
			}
		})
	}
}

// Retry-After is RetryAfter rounded up to whole seconds, 1 at least, up to
// the largest Duration without overflow, on a 503 and a 429 alike: a code
// Codes maps to 429 (DefenseRejected or one of the application's) had
// none, though a client that is told to slow down looks for it there.
func TestRetryAfterRoundsUpToSeconds(t *testing.T) {
	loop := newLoop(t)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1"}, {-time.Second, "1"}, {time.Nanosecond, "1"}, {time.Second, "1"},
		{1500 * time.Millisecond, "2"}, {math.MaxInt64, "9223372037"},
	} {
		for _, answer := range []struct {
			code   string
			codes  map[string]int
			status int
		}{
			{asyncsteps.DefenseRejected, nil, http.StatusServiceUnavailable},
			{asyncsteps.DefenseRejected, map[string]int{asyncsteps.DefenseRejected: http.StatusTooManyRequests}, http.StatusTooManyRequests},
			{"Quota", map[string]int{"Quota": http.StatusTooManyRequests}, http.StatusTooManyRequests},
		} {
			h := &asynchttp.Handler{
				Flow:       fail(answer.code, "full"),
				Tool:       func() asyncsteps.Tool { return loop },
				Codes:      answer.codes,
				RetryAfter: c.d,
				Logger:     slog.New(slog.DiscardHandler),
			}
			if status, retryAfter, _ := serve(t, h); status != answer.status || retryAfter != c.want {
				t.Errorf("%s with RetryAfter %v: %d, Retry-After %q; want %d, %q", answer.code, c.d, status, retryAfter, answer.status, c.want)
			}
			w := httptest.NewRecorder()
			if status := h.WriteError(w, answer.code, "full"); status != answer.status || w.Header().Get("Retry-After") != c.want {
				t.Errorf("WriteError(%s) with RetryAfter %v: %d, Retry-After %q; want %d, %q", answer.code, c.d, status, w.Header().Get("Retry-After"), answer.status, c.want)
			}
		}
	}
}

// WriteError answers an empty info of Timeout, the one a step's timeout
// leaves, as TimeoutInfo; any other info as given, empty or not, whatever
// status its code maps to.
func TestWriteErrorFillsTheEmptyInfoOfTimeoutOnly(t *testing.T) {
	h := &asynchttp.Handler{Codes: map[string]int{"Slow": http.StatusGatewayTimeout}}
	for _, c := range []struct {
		code, info string
		status     int
		body       string
	}{
		{asyncsteps.Timeout, "", 504, `{"error":"Timeout","info":"request timed out"}`},
		{asyncsteps.Timeout, "attempt 4", 504, `{"error":"Timeout","info":"attempt 4"}`},
		{"Slow", "", 504, `{"error":"Slow","info":""}`},
		{asyncsteps.CommError, "", 502, `{"error":"CommError","info":""}`},
		{asyncsteps.InvalidRequest, "", 400, `{"error":"InvalidRequest","info":""}`},
	} {
		w := httptest.NewRecorder()
		status := h.WriteError(w, c.code, c.info)
		header := map[string]string{"Content-Type": w.Header().Get("Content-Type"), "Content-Length": w.Header().Get("Content-Length")}
		want := map[string]string{"Content-Type": "application/json", "Content-Length": strconv.Itoa(len(c.body) + 1)}
		if status != c.status || w.Code != c.status || !maps.Equal(header, want) || w.Body.String() != c.body+"\n" {
			t.Errorf("WriteError(%q, %q): %d (written %d) %v %q; want %d %v %q", c.code, c.info, status, w.Code, header, w.Body, c.status, want, c.body+"\n")
		}
	}
}

// An info longer than 1 KiB is answered clipped to it and "...", cut
// before a character it would split, as the log line clips it: a flow
// that raised the text of an upstream's answer of a megabyte answered
// that megabyte. The Content-Length is that of the clipped body.
func TestHandlerAnswersALongInfoClipped(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	clipped := strings.Repeat("x", 1024) + "..."
	t.Run("flow", func(t *testing.T) {
		loop := newLoop(t)
		log, read := logged()
		h := &asynchttp.Handler{
			Tool:   func() asyncsteps.Tool { return loop },
			Logger: log,
			Flow:   fail(asyncsteps.CommError, long),
		}
		status, _, body := serve(t, h)
		want := `{"error":"CommError","info":"` + clipped + `"}` + "\n"
		if status != http.StatusBadGateway || body != want {
			t.Errorf("answered %d with a body of %d bytes %.60q...; want 502 and %d bytes", status, len(body), body, len(want))
		}
		if line := read(); !strings.HasSuffix(line, "info="+clipped+"\n") {
			t.Errorf("logged %.200q..., want the info clipped", line)
		}
	})
	for _, c := range []struct{ name, info, want string }{
		{"1 KiB", strings.Repeat("x", 1024), strings.Repeat("x", 1024)},
		{"ASCII", long, clipped},
		{"a character across the cut", strings.Repeat("x", 1023) + "é" + strings.Repeat("x", 100), strings.Repeat("x", 1023) + "..."},
	} {
		t.Run("WriteError "+c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			(&asynchttp.Handler{}).WriteError(w, asyncsteps.CommError, c.info)
			want := `{"error":"CommError","info":"` + c.want + `"}` + "\n"
			if w.Body.String() != want || w.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
				t.Errorf("answered %d bytes (Content-Length %s), want %d", w.Body.Len(), w.Header().Get("Content-Length"), len(want))
			}
		})
	}
}

// A Reply given by value is answered as the *Reply would be: its status,
// header and body, a zero status as 200, a status that is not final as a
// logged 500. It was encoded as JSON, a struct with a 200 status.
func TestHandlerAnswersAReplyValueAsItsPointer(t *testing.T) {
	loop := newLoop(t)
	cases := []struct {
		name        string
		reply       asynchttp.Reply
		status      int
		xID, length string
		body, code  string
		log         string // a line the Logger must have, "" for none at all
	}{
		{"status, header, body", asynchttp.Reply{Status: 201, Header: http.Header{"x-id": {"7"}}, Body: []byte("made")},
			201, "7", "4", "made", "", ""},
		{"zero status", asynchttp.Reply{Body: []byte("ok")}, 200, "", "2", "ok", "", ""},
		{"no body status", asynchttp.Reply{Status: 204, Body: []byte("lost")}, 204, "", "", "", "", ""},
		{"not a final status", asynchttp.Reply{Status: 1000, Header: http.Header{"X-Id": {"7"}}},
			500, "", strconv.Itoa(len(internalAnswer)), internalAnswer, asyncsteps.InternalError,
			`msg="asynchttp: Reply.Status is not a final HTTP status" status=1000`},
	}
	for _, c := range cases {
		for _, result := range []any{c.reply, &c.reply} {
			t.Run(fmt.Sprintf("%s/%T", c.name, result), func(t *testing.T) {
				var outs outcomes
				logger, logs := logged()
				h := &asynchttp.Handler{
					Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success(result) },
					Tool:   func() asyncsteps.Tool { return loop },
					Logger: logger,
					Done:   outs.done,
				}
				srv := httptest.NewServer(h)
				defer srv.Close()
				resp, body, err := getAll(t, srv.Client(), srv.URL)
				xID, length := resp.Header.Get("X-Id"), resp.Header.Get("Content-Length")
				if err != nil || resp.StatusCode != c.status || xID != c.xID || length != c.length || body != c.body {
					t.Errorf("got %d, X-Id %q, Content-Length %q, body %q (%v); want %d, %q, %q, %q",
						resp.StatusCode, xID, length, body, err, c.status, c.xID, c.length, c.body)
				}
				if o := outs.get(); len(o) != 1 || o[0].Status != c.status || o[0].Code != c.code {
					t.Errorf("outcomes %+v, want one with status %d, code %q", o, c.status, c.code)
				}
				if c.log == "" && logs() != "" || !strings.Contains(logs(), c.log) {
					t.Errorf("log %q, want %q (none if empty)", logs(), c.log)
				}
			})
		}
	}
}

// Handler.Timeout is the timeout of the Handler's step around Flow's:
// Flow's steps are cancelled, their cancel handlers run and none of their
// error handlers sees it, so the answer is the Handler's 504. A timeout
// the flow sets itself is its handlers' to recover from.
func TestHandlerTimeoutIsNotFlowsToRecover(t *testing.T) {
	loop := newLoop(t)
	for _, c := range []struct {
		name          string
		handler, flow time.Duration // Handler.Timeout, the flow's own SetTimeout
		status        int
		body, seen    string
	}{
		{"Handler.Timeout", 20 * time.Millisecond, 0, 504, `{"error":"Timeout","info":"request timed out"}`, "cancel handler"},
		{"the flow's own", time.Minute, 20 * time.Millisecond, 200, `"partial after Timeout"`, "cancel handler,error handler"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen []string // on the loop, read once the answer is written
			h := &asynchttp.Handler{
				Tool:    func() asyncsteps.Tool { return loop },
				Timeout: c.handler,
				Logger:  slog.New(slog.DiscardHandler),
				Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						if c.flow > 0 {
							as.SetTimeout(c.flow)
						}
						as.SetCancel(func(asyncsteps.AsyncSteps) { seen = append(seen, "cancel handler") }) // and wait
					}, func(as asyncsteps.AsyncSteps, code string) {
						seen = append(seen, "error handler")
						as.Success("partial after " + code)
					})
				},
			}
			status, _, body := serve(t, h)
			if got := strings.Join(seen, ","); status != c.status || strings.TrimSpace(body) != c.body || got != c.seen {
				t.Errorf("answered %d %s, ran %q; want %d %s, %q", status, body, got, c.status, c.body, c.seen)
			}
		})
	}
}
