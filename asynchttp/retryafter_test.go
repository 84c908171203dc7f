package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// RetryAfter reads both forms of the header, seconds and an HTTP date
// (in its three formats), relative to the flow's clock; anything else
// asks for nothing.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC)
	for _, c := range []struct {
		header string
		wait   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"120", 2 * time.Minute, true},
		{" 2 ", 2 * time.Second, true},
		{"0", 0, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"99999999999999999999999", math.MaxInt64, true},
		{"Sun, 01 Mar 2026 12:00:03 GMT", 2500 * time.Millisecond, true},
		{"Sunday, 01-Mar-26 12:00:03 GMT", 2500 * time.Millisecond, true},
		{"Sun Mar  1 12:00:03 2026", 2500 * time.Millisecond, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true}, // past
		{"-1", 0, false},
		{"1.5", 0, false},
		{"2s", 0, false},
		{"tomorrow", 0, false},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Retry-After", c.header)
		}
		wait, ok := asynchttp.RetryAfter(h, now)
		if wait != c.wait || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.header, wait, ok, c.wait, c.ok)
		}
	}
}

// busyPage starts a provider whose first answer is a 429 asking for 2s
// with an HTML page longer than maxBody (a Client's MaxBody), its length
// announced or, chunked, not; every later answer is a 200 "ok".
func busyPage(t *testing.T, chunked bool, maxBody int) *httptest.Server {
	page := "<html>" + strings.Repeat("<p>busy</p>", maxBody) + "</html>"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) > 1 {
			io.WriteString(w, "ok") //nolint:errcheck // the client reads it or not
			return
		}
		w.Header().Set("Retry-After", "2")
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		if chunked {
			w.(http.Flusher).Flush() // the header goes before the body: no length
		}
		io.WriteString(w, page) //nolint:errcheck // the client stops reading
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 429 whose body is longer than MaxBody (a provider's HTML error page),
// over loopback, its length announced or not, fails the step with the
// CommError of any body too long, answered and logged by a Handler as
// such; its Cause, a *BodyTooLongError, keeps the answer's status and
// header, Retry-After included, for errors.As.
func TestClientBodyTooLongKeepsStatusAndHeader(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprint("chunked=", chunked), func(t *testing.T) {
			srv := busyPage(t, chunked, 64)
			logger, logs := loggedWithoutTime()
			var flowErr, doneErr error
			c := &asynchttp.Client{HTTP: srv.Client(), MaxBody: 64, Done: func(_ *http.Request, _ int, err error) { doneErr = err }}
			loop := newLoop(t)
			h := &asynchttp.Handler{
				Tool:   func() asyncsteps.Tool { return loop },
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { c.Get(as, srv.URL) },
				Logger: logger,
				Done:   func(_ *http.Request, o asynchttp.Outcome) { flowErr = o.Err },
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/sync", nil))
			const info = "asynchttp: response body longer than MaxBody"
			if want := `{"error":"CommError","info":"` + info + `"}` + "\n"; rec.Code != 502 || rec.Body.String() != want {
				t.Errorf("answer %d %q, want 502 %q", rec.Code, rec.Body.String(), want)
			}
			wantLog := `level=WARN msg="asynchttp: request failed" method=GET path=/sync status=502 code=CommError ` +
				`info="` + info + `" cause="asynchttp: body of a 429 answer longer than MaxBody (64 bytes)"` + "\n"
			if got := logs(); got != wantLog {
				t.Errorf("log\n%s want\n%s", got, wantLog)
			}
			for name, err := range map[string]error{"flow": flowErr, "Done": doneErr} {
				if got := flowError(err); got != "CommError: "+info {
					t.Errorf("%s error %q, want CommError %q", name, got, info)
				}
				var tooLong *asynchttp.BodyTooLongError
				if !errors.As(err, &tooLong) {
					t.Fatalf("%s error %v: no *BodyTooLongError in its chain", name, err)
				}
				announced := map[bool]string{false: strconv.Itoa(len("<html></html>") + 64*len("<p>busy</p>")), true: ""}[chunked]
				if tooLong.StatusCode != 429 || tooLong.Limit != 64 ||
					tooLong.Header.Get("Retry-After") != "2" || tooLong.Header.Get("Content-Length") != announced {
					t.Errorf("%s error's cause: %d, limit %d, header %v; want 429, limit 64, Retry-After 2, Content-Length %q",
						name, tooLong.StatusCode, tooLong.Limit, tooLong.Header, announced)
				}
			}
		})
	}
}

// A RetryOptions.Delay honours the Retry-After of a 429 whose body is too
// long, read from the *BodyTooLongError: on the bubble's clock the retry
// comes exactly 2s after the first attempt. The requests go over
// loopback: the clock stands still while one is in flight, and moves
// only for the Delay.
func TestClientDelayHonoursRetryAfterOfBodyTooLong(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprint("chunked=", chunked), func(t *testing.T) {
			srv := busyPage(t, chunked, 64) // outside the bubble: its goroutines too
			synctest.Test(t, func(t *testing.T) {
				// No idle connection left in the bubble: its goroutine
				// would wait on the socket, which synctest.Test waits for.
				hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
				c := &asynchttp.Client{HTTP: hc, MaxBody: 64}
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				start := time.Now()
				var trace []string
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				asyncsteps.Retry(r, asyncsteps.RetryOptions{
					Attempts: 2,
					Delay: func(n int, err error) time.Duration {
						var tooLong *asynchttp.BodyTooLongError
						if !errors.As(err, &tooLong) {
							trace = append(trace, fmt.Sprint("delay ", n, ": ", err))
							return 0
						}
						wait, ok := asynchttp.RetryAfter(tooLong.Header, loop.Now())
						trace = append(trace, fmt.Sprint("delay ", n, ": ", flowError(err), " from a ", tooLong.StatusCode, ", wait ", wait, " ", ok))
						return wait
					},
				}, func(as asyncsteps.AsyncSteps, n int) {
					trace = append(trace, fmt.Sprint("attempt ", n, " at ", time.Since(start)))
					c.Get(as, srv.URL)
				})
				asyncsteps.Then(r, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) {
					trace = append(trace, fmt.Sprint(resp.StatusCode, " ", string(resp.Body), " at ", time.Since(start)))
				})
				if _, err := r.Run(context.Background()); err != nil {
					t.Fatalf("flow: %v", err)
				}
				want := []string{
					"attempt 0 at 0s",
					"delay 1: CommError: asynchttp: response body longer than MaxBody from a 429, wait 2s true",
					"attempt 1 at 2s",
					"200 ok at 2s",
				}
				if !slices.Equal(trace, want) {
					t.Errorf("trace\n%s\nwant\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
				}
			})
		})
	}
}
