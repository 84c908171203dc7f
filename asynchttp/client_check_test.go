package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// statusUpstream answers /STATUS with that status, a header and a body
// that name it.
var statusUpstream = &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	status, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
	w.Header().Set("X-Why", "status "+strconv.Itoa(status))
	w.WriteHeader(status)
	fmt.Fprintf(w, "body of %d", status)
})}

// retry429 is StatusError's example: a Check that fails a 429 as
// ServerError fails a 5xx.
func retry429(resp *asynchttp.Response) error {
	if resp.StatusCode == http.StatusTooManyRequests {
		return &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream answered 429",
			Cause: &asynchttp.StatusError{Response: *resp}}
	}
	return asynchttp.ServerError(resp)
}

type teapotError struct{}

func (teapotError) Error() string      { return "a teapot answered" }
func (teapotError) FutoInCode() string { return "Teapot" }

// Client.Check makes an answer the step's error: ServerError a 5xx a
// CommError whose Cause holds the answer, a check of the program's own
// any error, mapped as an Await function's. Done is given the same. The
// zero Client checks nothing.
func TestClientCheck(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	for _, tc := range []struct {
		name   string
		check  func(*asynchttp.Response) error
		status int
		want   string
	}{
		{"ServerError: 200", asynchttp.ServerError, 200, `success "body of 200"; done 200 nil`},
		{"ServerError: 404", asynchttp.ServerError, 404, `success "body of 404"; done 404 nil`},
		{"ServerError: 429", asynchttp.ServerError, 429, `success "body of 429"; done 429 nil`},
		{"ServerError: 500", asynchttp.ServerError, 500, `CommError "asynchttp: upstream answered 500" ` +
			`cause 500 "status 500" "body of 500"; done 500 CommError`},
		{"ServerError: 503", asynchttp.ServerError, 503, `CommError "asynchttp: upstream answered 503" ` +
			`cause 503 "status 503" "body of 503"; done 503 CommError`},
		{"ServerError: 599", asynchttp.ServerError, 599, `CommError "asynchttp: upstream answered 599" ` +
			`cause 599 "status 599" "body of 599"; done 599 CommError`},
		{"ServerError: 600", asynchttp.ServerError, 600, `success "body of 600"; done 600 nil`},
		{"no Check", nil, 503, `success "body of 503"; done 503 nil`},
		{"a 429 retried too", retry429, 429, `CommError "upstream answered 429" ` +
			`cause 429 "status 429" "body of 429"; done 429 CommError`},
		{"a 503 through that check", retry429, 503, `CommError "asynchttp: upstream answered 503" ` +
			`cause 503 "status 503" "body of 503"; done 503 CommError`},
		{"a Go error", func(*asynchttp.Response) error { return errors.New("no") }, 200,
			`InternalError "no"; done 200 InternalError`},
		{"a FutoInCoder", func(*asynchttp.Response) error { return teapotError{} }, 418,
			`Teapot "a teapot answered"; done 418 Teapot`},
		{"an *asyncsteps.Error", func(r *asynchttp.Response) error {
			return &asyncsteps.Error{Code: asyncsteps.InvalidRequest, Info: "upstream refused: " + string(r.Body)}
		}, 400, `InvalidRequest "upstream refused: body of 400"; done 400 InvalidRequest`},
		{"a panic", func(*asynchttp.Response) error { panic("boom") }, 200,
			`InternalError "asynchttp: Check panicked: boom"; done 200 InternalError`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ended ends
			c := &asynchttp.Client{HTTP: statusUpstream.Client(), Check: tc.check, Done: ended.done}
			res, err := runFlow(loop, func(as asyncsteps.AsyncSteps) {
				c.Get(as, fmt.Sprintf("http://upstream.test/%d", tc.status))
				asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) { as.Success(string(resp.Body)) })
			})
			got := ""
			var failed *asyncsteps.Error
			var answered *asynchttp.StatusError
			switch {
			case errors.As(err, &failed) && errors.As(err, &answered):
				got = fmt.Sprintf("%s %q cause %d %q %q", failed.Code, failed.Info,
					answered.StatusCode, answered.Header.Get("X-Why"), answered.Body)
			case errors.As(err, &failed):
				got = fmt.Sprintf("%s %q", failed.Code, failed.Info)
			default:
				got = fmt.Sprintf("success %q", res[0])
			}
			got += "; done " + strings.TrimPrefix(ended.get(), fmt.Sprintf("/%d ", tc.status))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	statusUpstream.Wait()
}

// The Cause of ServerError's error reaches an error handler, which reads
// the upstream's error document in it, and a Handler answers the error
// with the info as it is (it names no upstream), the status of a
// CommError, the cause's text in the log only.
func TestServerErrorReachesErrorHandlersAndTheAnswer(t *testing.T) {
	c := &asynchttp.Client{HTTP: statusUpstream.Client(), Check: asynchttp.ServerError}
	var log strings.Builder
	h := &asynchttp.Handler{
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})),
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			c.Get(as, "http://upstream.test"+req.URL.Path, func(as asyncsteps.AsyncSteps, code string) {
				var answered *asynchttp.StatusError
				if errors.As(as.State().LastException, &answered) && answered.StatusCode == http.StatusBadGateway {
					as.Success(&asynchttp.Response{Body: []byte("fallback after " + string(answered.Body))})
				}
			})
			asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) { as.Success(string(resp.Body)) })
		},
	}
	var got []string
	for _, path := range []string{"/502", "/503"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		got = append(got, fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String())))
	}
	want := []string{`200 "fallback after body of 502"`,
		`502 {"error":"CommError","info":"asynchttp: upstream answered 503"}`}
	if !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	if !strings.Contains(log.String(), `cause="asynchttp: answer of status 503"`) {
		t.Errorf("log: %s", log.String())
	}
	statusUpstream.Wait()
}

// A Retry honours the Retry-After of a 503 that ServerError failed,
// through its StatusError, on virtual time: the second attempt starts
// exactly 2s after the first answer; a 500 without one is retried after
// the backoff.
func TestServerErrorRetryAfterOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var calls []string
		replies := []func(w http.ResponseWriter){
			func(w http.ResponseWriter) { w.Header().Set("Retry-After", "2"); w.WriteHeader(503) },
			func(w http.ResponseWriter) { w.WriteHeader(500) },
			func(w http.ResponseWriter) { io.WriteString(w, "42") },
		}
		upstream := &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reply := replies[len(calls)]
			calls = append(calls, time.Since(start).String())
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			reply(w)
		})}
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		c := &asynchttp.Client{HTTP: upstream.Client(), Check: asynchttp.ServerError}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.Retry(r, asyncsteps.RetryOptions{
			Attempts: 3,
			Timeout:  time.Second,
			Delay: func(n int, err error) time.Duration {
				var answered *asynchttp.StatusError
				if errors.As(err, &answered) {
					if wait, ok := asynchttp.RetryAfter(answered.Header, time.Now()); ok {
						return wait
					}
				}
				return time.Duration(n) * 100 * time.Millisecond
			},
		}, func(as asyncsteps.AsyncSteps, _ int) {
			c.Get(as, "http://upstream.test/")
			asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) { as.Success(string(resp.Body)) })
		})
		answer, err := asyncsteps.Run[string](context.Background(), r)
		took := time.Since(start)
		upstream.Wait()
		if answer != "42" || err != nil || took != 2230*time.Millisecond {
			t.Errorf("answered %q, %v after %v, want 42 after 2.23s", answer, err, took)
		}
		if want := []string{"0s", "2.01s", "2.22s"}; !slices.Equal(calls, want) {
			t.Errorf("calls at %q, want %q", calls, want)
		}
	})
}

// Done is told once of each request whose Check fails it, with an
// *asyncsteps.Error of the code and info the step fails with: also when
// Check returns a typed nil or an *asyncsteps.Error without a code
// (mistakes, named as an Await function's are) or calls runtime.Goexit
// (t.FailNow), which ends the request's goroutine.
func TestClientCheckFailureToldToDone(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	for _, tc := range []struct {
		name  string
		check func(*asynchttp.Response) error
		want  string
	}{
		{"a typed nil *asyncsteps.Error", func(*asynchttp.Response) error {
			var e *asyncsteps.Error
			return e
		}, `InternalError "a nil *asyncsteps.Error was given as an error"`},
		{"runtime.Goexit", func(*asynchttp.Response) error {
			runtime.Goexit()
			return nil
		}, `InternalError "runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"`},
		{"a panic", func(*asynchttp.Response) error { panic("boom") },
			`InternalError "asynchttp: Check panicked: boom"`},
		{"an *asyncsteps.Error without a code", func(*asynchttp.Response) error {
			return &asyncsteps.Error{Info: "upstream down"}
		}, `InternalError "*Error: empty error code; info: upstream down"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var told []string
			c := &asynchttp.Client{HTTP: statusUpstream.Client(), Check: tc.check,
				Done: func(_ *http.Request, status int, err error) {
					mu.Lock()
					defer mu.Unlock()
					if e, ok := err.(*asyncsteps.Error); ok && e != nil {
						told = append(told, fmt.Sprintf("%d %s %q", status, e.Code, e.Info))
					} else {
						told = append(told, fmt.Sprintf("%d %#v", status, err))
					}
				}}
			_, err := runFlow(loop, func(as asyncsteps.AsyncSteps) { c.Get(as, "http://upstream.test/200") })
			var failed *asyncsteps.Error
			if !errors.As(err, &failed) || fmt.Sprintf("%s %q", failed.Code, failed.Info) != tc.want {
				t.Errorf("step: %v, want %s", err, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"200 " + tc.want}; !slices.Equal(told, want) {
				t.Errorf("Done told %q, want %q", told, want)
			}
		})
	}
	statusUpstream.Wait()
}
