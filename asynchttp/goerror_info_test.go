package asynchttp_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// upstreamDown is an error type of the program's own that gives its code.
type upstreamDown struct{}

func (upstreamDown) Error() string      { return "quotes.example.internal is down" }
func (upstreamDown) FutoInCode() string { return asyncsteps.CommError }

// panickyText is an error whose Error panics.
type panickyText struct{}

func (panickyText) Error() string { panic("text boom") }

// A network error that a flow's own Await function returns (a dial's
// *net.OpError, the *url.Error of an http.Client of its own) is a
// ConnectError or a CommError, or a Timeout, whose info is the Go error's
// text, as asyncsteps.ErrorFrom gives it: that text names the address and
// the URL the server connects to, and the Handler answered it to its
// client. It answers the kind of failure in the words a Client uses, and
// logs the Go error. The info a flow sets, a Client's, a FutoInCoder's
// text and the context's error's are answered as they are.
func TestHandlerAnswersNoGoErrorText(t *testing.T) {
	loop := newLoop(t)
	refused := refusedAddr(t)
	upstream := "http://" + refused + "/price?symbol=AAPL"
	dial := func(ctx context.Context) (any, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", refused)
		if err == nil {
			conn.Close()
		}
		return nil, err
	}
	get := func(ctx context.Context) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream, nil)
		if err != nil {
			return nil, err
		}
		resp, err := (&http.Client{}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return nil, err
	}
	late := func(ctx context.Context) (any, error) {
		ctx, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
		defer cancel()
		return get(ctx)
	}
	const refusedBody = `{"error":"ConnectError","info":"connection refused"}` + "\n"
	const kept = `{"error":"CommError","info":"upstream answered 502 for IBM"}` + "\n"
	tests := []struct {
		name   string
		flow   func(as asyncsteps.AsyncSteps)
		status int
		body   string
		logged string // in the log line, "" for none
	}{
		{"net.OpError of a refused dial", func(as asyncsteps.AsyncSteps) { as.Await(dial) },
			502, refusedBody, "dial tcp " + refused},
		{"url.Error of an http.Client", func(as asyncsteps.AsyncSteps) { as.Await(get) },
			502, refusedBody, upstream},
		{"url.Error of a deadline passed", func(as asyncsteps.AsyncSteps) { as.Await(late) },
			504, `{"error":"Timeout","info":"timed out"}` + "\n", upstream},
		{"under an error handler that does not recover", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(dial) }, func(asyncsteps.AsyncSteps, string) {})
		}, 502, refusedBody, "dial tcp " + refused},
		{"raised again by an error handler", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(dial) }, func(as asyncsteps.AsyncSteps, code string) {
				as.Error(code, as.State().ErrorInfo) // FTN12's as.error(code) in onerror, with the info
			})
		}, 502, refusedBody, "dial tcp " + refused},
		{"raised again by an error handler as another code", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(dial) }, func(as asyncsteps.AsyncSteps, _ string) {
				as.Error(asyncsteps.CommError, as.State().ErrorInfo)
			})
		}, 502, `{"error":"CommError","info":"connection refused"}` + "\n", "dial tcp " + refused},
		{"info an error handler sets, the Go error its cause", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(dial) }, func(as asyncsteps.AsyncSteps, _ string) {
				as.Error(asyncsteps.CommError, "upstream answered 502 for IBM")
			})
		}, 502, kept, "dial tcp " + refused},
		{"under Retry", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Retry(as, asyncsteps.RetryOptions{Attempts: 2}, func(as asyncsteps.AsyncSteps, _ int) { as.Await(get) })
		}, 502, refusedBody, upstream},
		{"under AwaitFlow", func(as asyncsteps.AsyncSteps) {
			sub := asyncsteps.New(asyncsteps.WithTool(loop))
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(dial) })
			asyncsteps.AwaitFlow(as, sub)
		}, 502, refusedBody, "dial tcp " + refused},
		{"in an Error of the Await function's, as its info", func(as asyncsteps.AsyncSteps) {
			as.Await(func(ctx context.Context) (any, error) {
				_, err := dial(ctx)
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: err.Error(), Cause: err}
			})
		}, 502, `{"error":"CommError","info":"connection refused"}` + "\n", "dial tcp " + refused},
		{"the context's deadline", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) { return nil, context.DeadlineExceeded })
		}, 504, `{"error":"Timeout","info":"context deadline exceeded"}` + "\n", "context deadline exceeded"},
		{"info the flow sets", func(as asyncsteps.AsyncSteps) {
			as.Error(asyncsteps.CommError, "upstream answered 502 for IBM")
		}, 502, kept, ""},
		{"info the flow sets, the Go error its cause", func(as asyncsteps.AsyncSteps) {
			as.Await(func(ctx context.Context) (any, error) {
				_, err := dial(ctx)
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream answered 502 for IBM", Cause: err}
			})
		}, 502, kept, "dial tcp " + refused},
		{"a Client's info", func(as asyncsteps.AsyncSteps) { (&asynchttp.Client{}).Get(as, upstream) },
			502, `{"error":"ConnectError","info":"asynchttp: GET: connection refused"}` + "\n", upstream},
		{"a FutoInCoder's text", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) { return nil, upstreamDown{} })
		}, 502, `{"error":"CommError","info":"quotes.example.internal is down"}` + "\n", ""},
		{"a FutoInCoder's text in an http.Client's url.Error", func(as asyncsteps.AsyncSteps) {
			as.Await(func(ctx context.Context) (any, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream, nil)
				if err != nil {
					return nil, err
				}
				_, err = (&http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
					return nil, upstreamDown{}
				})}).Do(req)
				return nil, err
			})
		}, 502, `{"error":"CommError","info":"quotes.example.internal is down"}` + "\n", upstream},
		{"a cause whose text panics", func(as asyncsteps.AsyncSteps) {
			as.Await(func(context.Context) (any, error) {
				return nil, &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream", Cause: panickyText{}}
			})
		}, 502, `{"error":"CommError","info":"request failed"}` + "\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := logged()
			var outs outcomes
			h := &asynchttp.Handler{
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { tc.flow(as) },
				Tool:   func() asyncsteps.Tool { return loop },
				Logger: logger,
				Done:   outs.done,
			}
			status, _, body := serve(t, h)
			if status != tc.status || body != tc.body {
				t.Errorf("got %d %q, want %d %q", status, body, tc.status, tc.body)
			}
			if o := outs.get(); len(o) != 1 || o[0].Status != tc.status {
				t.Errorf("outcomes %+v, want one with status %d", o, tc.status)
			}
			if tc.logged != "" && !strings.Contains(logs(), tc.logged) {
				t.Errorf("log %q does not name %q", logs(), tc.logged)
			}
		})
	}
}
