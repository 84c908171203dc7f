package asynchttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// BenchmarkHandlerServeHTTP serves a request without a body, and one whose
// body the flow reads in an Await function: a request without a body
// pays nothing for the ending of body reads at the flow's end.
func BenchmarkHandlerServeHTTP(b *testing.B) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			as.Await(func(context.Context) (any, error) {
				n, err := io.Copy(io.Discard, req.Body)
				return n, err
			})
		},
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		b.Run(method, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var body io.Reader
				if method == http.MethodPost {
					body = strings.NewReader("0123456789")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(method, "/", body))
				if w.Code != http.StatusOK {
					b.Fatalf("answered %d", w.Code)
				}
			}
		})
	}
}
