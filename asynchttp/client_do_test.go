package asynchttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// Do sends the request's body, and sends it whole again on each attempt
// of a retry loop that calls Do with the same request: each attempt takes
// a fresh body from GetBody. The request given to Do is left as it was.
func TestClientDoSendsTheBodyOnEveryAttempt(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %q", req.Method, req.URL.Path, body))
		n := len(got)
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/p", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	c := &asynchttp.Client{HTTP: srv.Client()}
	var statuses []int
	var answer string
	_, err = runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) {
		as.Repeat(5, func(as asyncsteps.AsyncSteps, _ int) {
			c.Do(as, req)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				resp, _ := asyncsteps.Arg[*asynchttp.Response](args, 0)
				statuses = append(statuses, resp.StatusCode)
				if resp.StatusCode == http.StatusOK {
					answer = string(resp.Body)
					as.Break()
				}
			})
		})
	})
	if err != nil || answer != "done" {
		t.Fatalf("flow = %v with answer %q, want <nil> and %q", err, answer, "done")
	}
	want := `POST /p "payload"; POST /p "payload"; POST /p "payload"`
	if s := strings.Join(got, "; "); s != want {
		t.Errorf("the server got %s, want %s", s, want)
	}
	if fmt.Sprint(statuses) != "[503 503 200]" {
		t.Errorf("statuses %v, want [503 503 200]", statuses)
	}
	// The caller's request still has its own body, unread.
	if b, _ := io.ReadAll(req.Body); string(b) != "payload" {
		t.Errorf("the request's own body reads %q, want %q", b, "payload")
	}
}

// A GetBody that fails fails the step with InternalError, naming it, and
// sends nothing.
func TestClientDoGetBodyErrorFailsTheStep(t *testing.T) {
	sent := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent = true }))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	gone := errors.New("body gone")
	req.GetBody = func() (io.ReadCloser, error) { return nil, gone }
	c := &asynchttp.Client{HTTP: srv.Client()}
	_, err = runFlow(newLoop(t), func(as asyncsteps.AsyncSteps) { c.Do(as, req) })
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.InternalError || e.Info != "asynchttp: GetBody: body gone" || !errors.Is(err, gone) {
		t.Fatalf("err = %#v, want InternalError %q wrapping the GetBody error", err, "asynchttp: GetBody: body gone")
	}
	if sent {
		t.Error("a request was sent")
	}
}
