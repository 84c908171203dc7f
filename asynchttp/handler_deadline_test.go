package asynchttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A deadline of the request's context that has passed before the flow
// starts (a middleware before the Handler used it up) is a timeout too,
// not a cancel: Run starts nothing under an ended context and returns
// the context's error, context.DeadlineExceeded, which is answered as a
// Timeout, a 504, and reported as a finished request.
func TestHandlerRequestDeadlinePassedBeforeTheFlowIs504(t *testing.T) {
	loop := newLoop(t)
	var got outcomes
	h := &asynchttp.Handler{
		Tool: func() asyncsteps.Tool { return loop },
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			t.Error("the flow ran under an ended context")
		},
		Done: got.done,
	}
	expired := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithDeadline(req.Context(), time.Now().Add(-time.Second))
		defer cancel()
		h.ServeHTTP(w, req.WithContext(ctx))
	})
	status, retry, body := serve(t, expired)
	if status != http.StatusGatewayTimeout || retry != "" || body != `{"error":"Timeout","info":""}`+"\n" {
		t.Errorf("answer %d, Retry-After %q, body %q; want 504, none, the Timeout error", status, retry, body)
	}
	o := got.get()
	if len(o) != 1 || o[0].Cancelled || o[0].Code != asyncsteps.Timeout || o[0].Status != http.StatusGatewayTimeout {
		t.Errorf("outcomes %+v, want one finished 504 Timeout", o)
	}
}
