package asynchttptest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// The same Transport serves an asynchttp.Handler: its flow runs on a
// Loop made in the bubble, its Timeout on the bubble's clock, and the
// read deadline with which it ends a read of the request's body that
// its flow left running works as over HTTP/1.
func TestTransportServesAnAsynchttpHandler(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool // the client sends its body whole
		want  []string
	}{
		{"body sent whole", true, []string{`0s client: 200 {"echo":"ping"}`, `0s flow read "ping" <nil>`}},
		{"body never ended", false, []string{
			`100ms client: 504 {"error":"Timeout","info":"request timed out"}`,
			`100ms flow read "ping" asynchttp: request body read after its flow ended`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, tr *asynchttptest.Transport, tl *timeline) []string {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				tr.Handler = &asynchttp.Handler{
					Tool:    func() asyncsteps.Tool { return loop },
					Timeout: 100 * time.Millisecond,
					Logger:  slog.New(slog.DiscardHandler),
					Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
						asyncsteps.AwaitThen(as, func(context.Context) (string, error) {
							body, err := io.ReadAll(req.Body)
							tl.add("flow read %q %v", body, err)
							return string(body), err
						}, func(as asyncsteps.AsyncSteps, body string) {
							as.Success(map[string]string{"echo": body})
						})
					},
				}
				body, send := io.Pipe()
				go func() {
					io.WriteString(send, "ping")
					if tc.close {
						send.Close()
					}
				}()
				resp, err := tr.Client().Post("http://service.test/echo", "text/plain", body)
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				tl.add("client: %d %s", resp.StatusCode, strings.TrimSpace(string(answer)))
				send.Close()
				return tc.want
			})
		})
	}
}
