package asynchttptest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// A Transport serves a handler in memory: the client gets the answer as
// net/http would give it, Content-Length and sniffed Content-Type
// included.
func ExampleTransport() {
	upstream := &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.URL.Query().Get("name"))
	})}
	resp, err := upstream.Client().Get("http://upstream.test/hello?name=gopher")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, resp.ContentLength, resp.Header.Get("Content-Type"))
	fmt.Println(string(body))
	// Output:
	// 200 OK 13 text/plain; charset=utf-8
	// hello, gopher
}

// A client flow tested on virtual time: a GET retried 3 times, each
// attempt under a timeout of 100ms, against an upstream that first
// hangs, then answers 503, then 200. In a synctest bubble, with the Loop
// made there and the upstream served by a Transport, every wait is on
// the bubble's clock: the flow ends after exactly 180ms of virtual time
// (100ms of the first attempt's timeout, 10ms of backoff, 20ms of the
// 503, 20ms of backoff, 30ms of the 200), and the test takes none of
// wall-clock time. The package doc shows its core.
func TestExampleRetriesOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var calls []string
		replies := []struct {
			after  time.Duration
			status int
		}{{time.Hour, 200}, {20 * time.Millisecond, 503}, {30 * time.Millisecond, 200}}
		upstream := &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reply, begin := replies[len(calls)], time.Since(start)
			calls = append(calls, "")
			n := len(calls) - 1
			mu.Unlock()
			outcome := "cancelled"
			select {
			case <-time.After(reply.after):
				w.WriteHeader(reply.status)
				io.WriteString(w, "42")
				outcome = fmt.Sprint(reply.status)
			case <-r.Context().Done():
			}
			mu.Lock()
			calls[n] = fmt.Sprintf("%v-%v %s", begin, time.Since(start), outcome)
			mu.Unlock()
		})}

		loop := asyncsteps.NewLoop() // made in the bubble: its timers are on the bubble's clock
		defer loop.Close()
		c := &asynchttp.Client{HTTP: upstream.Client(), Check: asynchttp.ServerError}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.Retry(r, asyncsteps.RetryOptions{
			Attempts: 3,
			Timeout:  100 * time.Millisecond,
			Backoff:  func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond },
		}, func(as asyncsteps.AsyncSteps, _ int) {
			c.Get(as, "http://upstream.test/answer") // its 503 a CommError, retried
			asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) {
				as.Success(string(resp.Body))
			})
		})
		answer, err := asyncsteps.Run[string](context.Background(), r)
		took := time.Since(start)
		upstream.Wait() // the calls the flow cancelled have ended too

		if answer != "42" || err != nil || took != 180*time.Millisecond {
			t.Errorf("answered %q, %v, after %v; want `42` after 180ms", answer, err, took)
		}
		if want := []string{"0s-100ms cancelled", "110ms-130ms 503", "150ms-180ms 200"}; !slices.Equal(calls, want) {
			t.Errorf("upstream calls %q, want %q", calls, want)
		}
	})
}
