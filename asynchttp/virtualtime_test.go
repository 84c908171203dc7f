package asynchttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// The recipe of the package doc's "Testing on virtual time": a service
// whose flow fans out to two upstreams with a Client, each call under its
// own timeout and retried, all calls under one Limiter, tested in a
// synctest bubble on a Loop made there, with an upstream served in memory
// by an asynchttptest.Transport, on the bubble's clock. The answers, the
// virtual times and the upstream calls are exact, and the test takes no
// wall-clock time.

// memoryUpstream is the upstreams' http.Handler: it answers each call of
// a path with the next reply of its script, after the reply's delay, and
// logs each call ("/a#1 110ms-130ms 503"), or its cancel by the client
// ("/a#0 0s-100ms cancelled").
type memoryUpstream struct {
	start  time.Time
	script map[string][]upstreamReply

	mu    sync.Mutex
	calls map[string]int
	log   []string
}

type upstreamReply struct {
	after  time.Duration
	status int
	body   string
}

func (u *memoryUpstream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	u.mu.Lock()
	path, n := req.URL.Path, u.calls[req.URL.Path]
	u.calls[path]++
	u.mu.Unlock()
	r, begin := u.script[path][n], time.Since(u.start)
	ended := fmt.Sprint(r.status)
	select {
	case <-time.After(r.after):
		w.WriteHeader(r.status)
		io.WriteString(w, r.body)
	case <-req.Context().Done():
		ended = "cancelled"
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.log = append(u.log, fmt.Sprintf("%s#%d %v-%v %s", path, n, begin, time.Since(u.start), ended))
}

func (u *memoryUpstream) callLog() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Sorted(slices.Values(u.log))
}

// fanOut is the flow under test: both upstreams in parallel, each the
// Retry of a GET whose 5xx answer is a CommError (c's Check), the bodies
// gathered.
func fanOut(c *asynchttp.Client) func(as asyncsteps.AsyncSteps, req *http.Request) {
	get := func(url string) func(as asyncsteps.AsyncSteps) {
		return func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{
				Attempts: 3,
				Timeout:  100 * time.Millisecond,
				Backoff:  func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond },
			}, func(as asyncsteps.AsyncSteps, _ int) {
				c.Get(as, url)
				asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) {
					as.Success(string(resp.Body))
				})
			})
		}
	}
	return func(as asyncsteps.AsyncSteps, req *http.Request) {
		asyncsteps.Gather(as, func(as asyncsteps.AsyncSteps, bodies []string) {
			as.Success(map[string]string{"a": bodies[0], "b": bodies[1]})
		}, get("http://up.test/a"), get("http://up.test/b"))
	}
}

// serveOnVirtualTime serves one request with fanOut inside a synctest
// bubble and returns the status, the body, the virtual time the answer
// took and the upstream's calls.
func serveOnVirtualTime(t *testing.T, ctx context.Context, concurrent int, script map[string][]upstreamReply) (int, string, time.Duration, []string) {
	loop := asyncsteps.NewLoop() // made in the bubble: its timers are on the bubble's clock
	defer loop.Close()
	up := &memoryUpstream{start: time.Now(), script: script, calls: map[string]int{}}
	upstreams := &asynchttptest.Transport{Handler: up}
	client := &asynchttp.Client{
		HTTP:  upstreams.Client(),
		Check: asynchttp.ServerError,
		Guard: asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: concurrent,
			MaxQueue:   asyncsteps.Unlimited, // 0 would reject the calls beyond Concurrent
		}),
	}
	h := &asynchttp.Handler{
		Tool:    func() asyncsteps.Tool { return loop },
		Timeout: time.Second,
		Flow:    fanOut(client),
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
	took := time.Since(up.start)
	// The answer does not wait for the calls its flow cancelled: wait
	// until the upstream has seen them end before reading its log.
	upstreams.Wait()
	return w.Code, strings.TrimSpace(w.Body.String()), took, up.callLog()
}

func TestServiceOnVirtualTime(t *testing.T) {
	t.Run("retries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			status, body, took, calls := serveOnVirtualTime(t, context.Background(), 4, map[string][]upstreamReply{
				"/a": {
					{after: time.Second, status: 200, body: "late"}, // its attempt times out at 100ms
					{after: 20 * time.Millisecond, status: 503},     // retried after 10ms of backoff
					{after: 30 * time.Millisecond, status: 200, body: "A"},
				},
				"/b": {{after: 50 * time.Millisecond, status: 200, body: "B"}},
			})
			checkServed(t, status, body, took, calls, 200, `{"a":"A","b":"B"}`, 180*time.Millisecond,
				"/a#0 0s-100ms cancelled", "/a#1 110ms-130ms 503", "/a#2 150ms-180ms 200", "/b#0 0s-50ms 200")
		})
	})
	t.Run("one call at a time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			status, body, took, calls := serveOnVirtualTime(t, context.Background(), 1, map[string][]upstreamReply{
				"/a": {{after: 30 * time.Millisecond, status: 200, body: "A"}},
				"/b": {{after: 50 * time.Millisecond, status: 200, body: "B"}},
			})
			checkServed(t, status, body, took, calls, 200, `{"a":"A","b":"B"}`, 80*time.Millisecond,
				"/a#0 0s-30ms 200", "/b#0 30ms-80ms 200")
		})
	})
	t.Run("client gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(40*time.Millisecond, cancel)
			status, body, took, calls := serveOnVirtualTime(t, ctx, 4, map[string][]upstreamReply{
				"/a": {{after: 60 * time.Millisecond, status: 200, body: "A"}},
				"/b": {{after: 70 * time.Millisecond, status: 200, body: "B"}},
			})
			checkServed(t, status, body, took, calls, 503, `{"error":"DefenseRejected","info":"request cancelled"}`,
				40*time.Millisecond, "/a#0 0s-40ms cancelled", "/b#0 0s-40ms cancelled")
		})
	})
}

func checkServed(t *testing.T, status int, body string, took time.Duration, calls []string,
	wantStatus int, wantBody string, wantTook time.Duration, wantCalls ...string) {
	t.Helper()
	if status != wantStatus || body != wantBody || took != wantTook {
		t.Errorf("answered %d %s after %v, want %d %s after %v", status, body, took, wantStatus, wantBody, wantTook)
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("upstream calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
	}
}
