package asynchttp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
	rec := serveCancelledAsTheFlowEnds(t, h)
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

// A panic of the flow, or of Tool, that comes as the request is cancelled
// (the cancel forced after the flow's end by the hook, as above) makes a
// cancelled request, and is still a bug of the server's: it is logged at
// Error, with its stack, as when the request was not cancelled. The
// cancel's 503 logged nothing, so that a panic that met a client gone
// went unseen.
func TestAPanicAsTheRequestIsCancelledIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Handler
	}{
		{"in a step", Handler{Flow: func(as asyncsteps.AsyncSteps, _ *http.Request) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { panic("rate table empty") })
		}}},
		{"in Tool", Handler{Tool: func() asyncsteps.Tool { panic("rate table empty") }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			h := tc.h
			h.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			rec := serveCancelledAsTheFlowEnds(t, &h)
			if rec.Code != http.StatusServiceUnavailable {
				t.Errorf("answered %d, want 503", rec.Code)
			}
			line := logged.String()
			if strings.Count(line, "\n") != 1 {
				t.Fatalf("logged %q, want one line", line)
			}
			for _, want := range []string{`level=ERROR msg="asynchttp: request failed"`, "status=503 code=InternalError", "rate table empty", "stack="} {
				if !strings.Contains(line, want) {
					t.Errorf("logged %q, want it to contain %q", line, want)
				}
			}
		})
	}
}

// Nothing else of a cancelled request is logged: the cancel that the
// flow saw, an error of another code that came with the cancel (which
// makes it moot), and a body over its limit, the client's mistake.
func TestACancelledRequestLogsNothingElse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  asyncsteps.StepFunc
		after bool // the cancel comes after the flow's end (the hook)
	}{
		{"the cancel the flow saw", nil, false},
		{"another code", func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.CommError, "upstream lost") }, true},
		{"a body over its limit", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, &http.MaxBytesError{Limit: 10} })
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			step := tc.step
			if step == nil {
				step = func(as asyncsteps.AsyncSteps, _ ...any) {
					cancel()
					as.WaitExternal() // ended by the cancel only
				}
			}
			h := &Handler{
				Flow:   func(as asyncsteps.AsyncSteps, _ *http.Request) { as.Add(step) },
				Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}
			if tc.after {
				cancelAsTheFlowEnds(t, cancel)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
			if rec.Code != http.StatusServiceUnavailable {
				t.Errorf("answered %d, want 503", rec.Code)
			}
			if logged.Len() != 0 {
				t.Errorf("logged %q, want nothing", logged.String())
			}
		})
	}
}

// serveCancelledAsTheFlowEnds serves a GET with h, its request's context
// cancelled by testHookFlowEnded: after the flow's end, before its
// outcome is taken.
func serveCancelledAsTheFlowEnds(t *testing.T, h *Handler) *httptest.ResponseRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cancelAsTheFlowEnds(t, cancel)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
	return rec
}

// cancelAsTheFlowEnds sets testHookFlowEnded to cancel for the rest of t.
func cancelAsTheFlowEnds(t *testing.T, cancel func()) {
	prev := testHookFlowEnded
	testHookFlowEnded = cancel
	t.Cleanup(func() { testHookFlowEnded = prev })
}
