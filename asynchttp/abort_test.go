package asynchttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A callback of the flow that panics with http.ErrAbortHandler aborts the
// response, as net/http aborts a handler that panics with it: the client
// gets no answer but a dropped connection (HTTP/1) or a reset stream
// (HTTP/2), Done counts the request once as an InternalError with no
// status, nothing is logged, and the server and the loop serve the next
// request. It was a logged 500, with the panic's stack.
func TestHandlerAbortsTheResponseOnErrAbortHandler(t *testing.T) {
	loop := newLoop(t)
	onLoop := func() asyncsteps.Tool { return loop }
	var toolAborted atomic.Bool // the first request's Tool panics
	alive := func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Success("alive") }
	abortIn := func(flow func(as asyncsteps.AsyncSteps, req *http.Request)) func(as asyncsteps.AsyncSteps, req *http.Request) {
		return func(as asyncsteps.AsyncSteps, req *http.Request) {
			if req.URL.Query().Has("abort") {
				flow(as, req)
				return
			}
			alive(as, req)
		}
	}
	cases := []struct {
		name string
		h    asynchttp.Handler
	}{
		{"step", asynchttp.Handler{Tool: onLoop, Flow: abortIn(func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { panic(http.ErrAbortHandler) })
		})}},
		{"Flow", asynchttp.Handler{Tool: onLoop, Flow: abortIn(func(asyncsteps.AsyncSteps, *http.Request) {
			panic(http.ErrAbortHandler)
		})}},
		{"Await on the request's goroutine", asynchttp.Handler{Tool: onLoop, Flow: abortIn(func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Await(func(context.Context) (any, error) { panic(http.ErrAbortHandler) })
		})}},
		{"Await on a goroutine of the loop's", asynchttp.Handler{Tool: onLoop, Flow: abortIn(func(as asyncsteps.AsyncSteps, _ *http.Request) {
			second := make(chan struct{})
			p := as.Parallel()
			p.Await(func(context.Context) (any, error) { <-second; return nil, nil }) // holds the request's goroutine
			p.Await(func(context.Context) (any, error) {
				defer close(second)
				panic(http.ErrAbortHandler)
			})
		})}},
		{"Tool", asynchttp.Handler{Tool: func() asyncsteps.Tool {
			if !toolAborted.Swap(true) {
				panic(http.ErrAbortHandler)
			}
			return loop
		}, Flow: alive}},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, c := range cases {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				var outs outcomes
				logger, logs := logged()
				h := c.h
				h.Logger, h.Done = logger, outs.done
				toolAborted.Store(false)
				srv, client, serverLog := serveProto(t, &h, proto)
				resp, err := client.Get(srv.URL + "?abort")
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Fatalf("answered %s %d %q, want the response aborted", resp.Proto, resp.StatusCode, body)
				}
				// The connection closed before a status line, or the stream
				// reset by the server (net/http's words for it).
				if aborted := proto == "HTTP/1.1" && errors.Is(err, io.EOF) ||
					proto == "HTTP/2.0" && strings.Contains(err.Error(), "INTERNAL_ERROR; received from peer"); !aborted {
					t.Errorf("error %v, want the connection closed (HTTP/1) or the stream reset (HTTP/2)", err)
				}
				o := outs.get()
				var e *asyncsteps.Error
				var p *asyncsteps.PanicError
				if len(o) != 1 || o[0].Status != 0 || o[0].Code != asyncsteps.InternalError || o[0].Cancelled ||
					!errors.As(o[0].Err, &e) || e.Code != asyncsteps.InternalError ||
					!errors.As(o[0].Err, &p) || p.Value != http.ErrAbortHandler || o[0].Start.IsZero() {
					t.Errorf("outcomes %+v, want one InternalError caused by the panic, with no status", o)
				}
				next, body, err := getAll(t, client, srv.URL)
				if err != nil || next.StatusCode != 200 || body != "\"alive\"\n" || len(outs.get()) != 2 {
					t.Errorf("next request: %d %q (%v), %d outcomes; want 200 %q, 2", next.StatusCode, body, err, len(outs.get()), "\"alive\"\n")
				}
				if logs() != "" || serverLog() != "" {
					t.Errorf("logged %q, server logged %q; want nothing", logs(), serverLog())
				}
			})
		}
	}
}

// Only a panic with http.ErrAbortHandler itself aborts the response, as
// only that one does in net/http: a panic with an error that wraps it, and
// an Await function that returns it, are the logged 500 of any other
// failure.
func TestHandlerAnswersWhatIsNotAnAbortWith500(t *testing.T) {
	loop := newLoop(t)
	for _, c := range []struct {
		name string
		flow func(as asyncsteps.AsyncSteps, _ *http.Request)
		log  string
	}{
		{"panic with a wrapped ErrAbortHandler", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { panic(wrapped{http.ErrAbortHandler}) })
		}, `level=ERROR msg="asynchttp: request failed" method=GET path=/ status=500 code=InternalError info="wrapped: net/http: abort Handler"`},
		{"Await that returns ErrAbortHandler", func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Await(func(context.Context) (any, error) { return nil, http.ErrAbortHandler })
		}, `level=ERROR msg="asynchttp: request failed" method=GET path=/ status=500 code=InternalError info="net/http: abort Handler"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			h := &asynchttp.Handler{Flow: c.flow, Tool: func() asyncsteps.Tool { return loop }, Logger: logger, Done: outs.done}
			if status, _, body := serve(t, h); status != 500 || body != internalAnswer {
				t.Errorf("got %d %q, want 500 %q", status, body, internalAnswer)
			}
			if !strings.Contains(logs(), c.log) {
				t.Errorf("log %q lacks %q", logs(), c.log)
			}
			if o := outs.get(); len(o) != 1 || o[0].Status != 500 || o[0].Code != asyncsteps.InternalError {
				t.Errorf("outcomes %+v, want one 500 InternalError", o)
			}
		})
	}
}

// wrapped is an error that wraps another.
type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

// serveProto starts a TLS server of h that speaks proto ("HTTP/1.1" or
// "HTTP/2.0") with its client, and returns them, with a function that
// reads what the server logged.
func serveProto(t *testing.T, h http.Handler, proto string) (*httptest.Server, *http.Client, func() string) {
	t.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(lockedWriter{&mu, &buf}, "", 0)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	if proto == "HTTP/1.1" {
		client.Transport.(*http.Transport).ForceAttemptHTTP2 = false
		client.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return srv, client, func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// getAll sends GET url with client and returns the response with its
// body, read whole and closed, and the error that ended the read, if any.
func getAll(t *testing.T, client *http.Client, url string) (*http.Response, string, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// A Done that calls runtime.Goexit while the Handler aborts a response
// ends the request's goroutine, which aborts the response all the same:
// no 500 is flushed for it, and the Goexit is logged, as any in Done is.
func TestHandlerAbortsTheResponseWhenDoneGoexitsThen(t *testing.T) {
	loop := newLoop(t)
	logger, logs := logged()
	var calls atomic.Int32
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { panic(http.ErrAbortHandler) })
		},
		Logger: logger,
		Done: func(*http.Request, asynchttp.Outcome) {
			calls.Add(1)
			runtime.Goexit()
		},
	}
	srv, client, serverLog := serveProto(t, h, "HTTP/1.1")
	resp, err := client.Get(srv.URL)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("answered %d %q, want the response aborted", resp.StatusCode, body)
	}
	if !errors.Is(err, io.EOF) {
		t.Errorf("error %v, want the connection closed", err)
	}
	want := `level=ERROR msg="asynchttp: the request's goroutine ended (runtime.Goexit) in a callback" method=GET path=/ status=0 answered=false`
	if calls.Load() != 1 || strings.Count(logs(), "\n") != 1 || !strings.Contains(logs(), want) || serverLog() != "" {
		t.Errorf("Done called %d times, logged %q, server logged %q; want once, one line with %q, nothing",
			calls.Load(), logs(), serverLog(), want)
	}
}
