package asynchttp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A Handler's flow runs its Await functions on the request's goroutine:
// the function's stack is ServeHTTP's, and a second one started while
// the first runs is on another goroutine.
func TestHandlerRunsAwaitOnTheRequestsGoroutine(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	inServeHTTP := func() bool {
		buf := make([]byte, 64<<10)
		return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*Handler).ServeHTTP")
	}
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			first, second := make(chan bool, 1), make(chan bool, 1)
			secondDone := make(chan struct{})
			p := as.Parallel()
			p.Await(func(context.Context) (any, error) {
				first <- inServeHTTP()
				<-secondDone // busy while the second starts
				return nil, nil
			})
			p.Await(func(context.Context) (any, error) {
				defer close(secondDone)
				second <- inServeHTTP()
				return nil, nil
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success(map[string]bool{"first": <-first, "second": <-second})
			})
		},
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if got, want := strings.TrimSpace(w.Body.String()), `{"first":true,"second":false}`; w.Code != http.StatusOK || got != want {
		t.Errorf("status %d, body %s; want 200, %s", w.Code, got, want)
	}
}

// Handler.Timeout's 504 waits for the Await function the request's
// goroutine runs: at once for one that honours its ctx, only once it
// returns for one that ignores it.
func TestTimeoutAnswerWaitsForTheAwaitFunctionOnTheRequestsGoroutine(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   asyncsteps.AwaitFunc
		took time.Duration
	}{
		{"honours ctx", func(ctx context.Context) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
				return nil, nil
			}
		}, 100 * time.Millisecond},
		{"ignores ctx", func(context.Context) (any, error) {
			time.Sleep(time.Second)
			return nil, nil
		}, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				h := &asynchttp.Handler{
					Tool:    func() asyncsteps.Tool { return loop },
					Timeout: 100 * time.Millisecond,
					Flow:    func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Await(c.fn) },
					Logger:  slog.New(slog.DiscardHandler),
				}
				start := time.Now()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
				if took := time.Since(start); w.Code != http.StatusGatewayTimeout || took != c.took {
					t.Errorf("answered %d after %v, want 504 after %v", w.Code, took, c.took)
				}
			})
		})
	}
}
