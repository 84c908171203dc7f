package asynchttp_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// Get and Do given more than one error handler fail the flow with an
// InternalError that names them, and send nothing, with a Guard or
// without. They passed the handlers on, and the info named Await (or
// Add, with a Guard), which the user did not call.
func TestClientMoreThanOneHandlerNamesTheCall(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://example.invalid/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, guard := range []asyncsteps.Syncer{nil, asyncsteps.NewMutex(1)} {
		for _, tc := range []struct {
			name, info string
			call       func(c *asynchttp.Client, as asyncsteps.AsyncSteps, h asyncsteps.ErrorFunc)
		}{
			{"Get", "Get: more than one error handler (2 given)",
				func(c *asynchttp.Client, as asyncsteps.AsyncSteps, h asyncsteps.ErrorFunc) {
					c.Get(as, "http://example.invalid/x", h, h)
				}},
			{"Do", "Do: more than one error handler (3 given)",
				func(c *asynchttp.Client, as asyncsteps.AsyncSteps, h asyncsteps.ErrorFunc) { c.Do(as, req, h, h, h) }},
		} {
			var mu sync.Mutex
			var trace []string
			add := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
			c := &asynchttp.Client{Guard: guard, Done: func(*http.Request, int, error) { add("done") }}
			h := func(as asyncsteps.AsyncSteps, code string) { add("handler " + code) }
			for _, inStep := range []bool{false, true} {
				trace = nil
				tt := asyncsteps.NewTestTool()
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				if inStep {
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tc.call(c, as, h) })
				} else {
					tc.call(c, r, h)
				}
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { add("after") })
				p := r.Promise()
				tt.Run()
				res := <-p
				var e *asyncsteps.Error
				if !errors.As(res.Err, &e) || e.Code != asyncsteps.InternalError || e.Info != tc.info || len(trace) != 0 {
					t.Errorf("%s (guard %v, in a step %v): error %v, trace %q; want InternalError: %s, no trace",
						tc.name, guard != nil, inStep, res.Err, trace, tc.info)
				}
			}
		}
	}
}
