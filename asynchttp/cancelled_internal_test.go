package asynchttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A cancel of the request's context that comes as the flow ends with an
// error of its own, after the flow's last step but before the Handler
// takes the outcome (forced by the hook), is a cancel of the request as
// much as one the flow saw: the Outcome says Cancelled, and the answer is
// the cancel's 503, as for a cancel that came earlier. The flow's error
// was answered, and Cancelled was false though the context was cancelled
// before the flow's outcome was taken.
func TestACancelAsTheFlowFailsIsACancel(t *testing.T) {
	var got []Outcome
	h := &Handler{
		Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Error(asyncsteps.CommError, "upstream lost") },
		Done: func(_ *http.Request, o Outcome) { got = append(got, o) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prev := testHookFlowEnded
	testHookFlowEnded = cancel
	defer func() { testHookFlowEnded = prev }()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
	if len(got) != 1 {
		t.Fatalf("Done called %d times, want once", len(got))
	}
	o := got[0]
	var e *asyncsteps.Error
	if !o.Cancelled || o.Code != asyncsteps.DefenseRejected || o.Status != http.StatusServiceUnavailable ||
		!errors.As(o.Err, &e) || e.Code != asyncsteps.CommError {
		t.Errorf("Outcome %+v, want Cancelled, DefenseRejected, 503, and the flow's CommError", o)
	}
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("answered %d, want 503", rec.Code)
	}
}
