package asynchttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// One Handler and one Client serve requests at once (run it with -race):
// each request's flow, on one of two loops, fetches two answers in
// parallel through a shared Guard and answers with both, and Done counts
// every request once.
func TestHandlerServesConcurrentRequests(t *testing.T) {
	group := asyncsteps.NewLoopGroup(2)
	defer group.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, strings.TrimPrefix(req.URL.Path, "/"))
	}))
	defer upstream.Close()
	c := &asynchttp.Client{HTTP: upstream.Client(), Guard: asyncsteps.NewMutex(3, asyncsteps.Unlimited)}
	var outs outcomes
	h := &asynchttp.Handler{
		Tool:    func() asyncsteps.Tool { return group.Next() },
		Timeout: time.Minute,
		Guard:   asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 4, MaxQueue: asyncsteps.Unlimited}),
		Done:    outs.done,
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			id := strings.TrimPrefix(req.URL.Path, "/")
			bodies := make([]string, 2)
			p := as.Parallel()
			for i, part := range []string{"a", "b"} {
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					c.Get(as, upstream.URL+"/"+id+part)
					as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
						resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
						bodies[i] = string(resp.Body)
					})
				})
			}
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success(&asynchttp.Reply{Header: http.Header{"X-Id": {id}}, Body: []byte(strings.Join(bodies, ","))})
			})
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const requests = 24
	var wg sync.WaitGroup
	answers := make([]string, requests)
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := srv.Client().Get(fmt.Sprintf("%s/%d", srv.URL, i))
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			answers[i] = fmt.Sprintf("%d %s %s %v", resp.StatusCode, resp.Header.Get("X-Id"), body, err)
		}()
	}
	wg.Wait()
	for i, got := range answers {
		if want := fmt.Sprintf("200 %d %da,%db <nil>", i, i, i); got != want {
			t.Errorf("request %d: %q, want %q", i, got, want)
		}
	}
	if o := outs.get(); len(o) != requests {
		t.Errorf("Done called %d times, want %d", len(o), requests)
	}
}
