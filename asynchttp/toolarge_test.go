package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A body read through http.MaxBytesReader that goes over its limit is the
// client's mistake: a 413 InvalidRequest naming the limit, not logged, not
// the 500 "see the server log" it was. Codes still maps InvalidRequest,
// and a code the flow chose for the error stays its answer.
func TestHandlerAnswersABodyOverItsLimitWith413(t *testing.T) {
	loop := newLoop(t)
	// readBody is a flow that reads the request's body, at most 8 bytes,
	// and fails with what wrap makes of the read's error.
	readBody := func(wrap func(error) error) func(as asyncsteps.AsyncSteps, req *http.Request) {
		return func(as asyncsteps.AsyncSteps, req *http.Request) {
			as.Await(func(context.Context) (any, error) {
				_, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, 8))
				return nil, wrap(err)
			})
		}
	}
	asIs := func(err error) error { return err }
	tests := []struct {
		name   string
		flow   func(as asyncsteps.AsyncSteps, req *http.Request)
		codes  map[string]int
		status int
		body   string
	}{
		{"returned", readBody(asIs), nil, 413, `{"error":"InvalidRequest","info":"request body larger than 8 bytes"}`},
		{"wrapped", readBody(func(err error) error { return fmt.Errorf("decode: %w", err) }), nil,
			413, `{"error":"InvalidRequest","info":"request body larger than 8 bytes"}`},
		{"joined", readBody(func(err error) error { return errors.Join(errors.New("first"), err) }), nil,
			413, `{"error":"InvalidRequest","info":"request body larger than 8 bytes"}`},
		{"Codes maps InvalidRequest", readBody(asIs), map[string]int{asyncsteps.InvalidRequest: 422},
			422, `{"error":"InvalidRequest","info":"request body larger than 8 bytes"}`},
		{"a code of the flow's", readBody(func(err error) error {
			return &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Info: "too big", Cause: err}
		}), nil, 503, `{"error":"DefenseRejected","info":"too big"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var outs outcomes
			logger, logs := logged()
			h := &asynchttp.Handler{
				Flow: tc.flow, Tool: func() asyncsteps.Tool { return loop },
				Codes: tc.codes, Logger: logger, Done: outs.done,
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789")))
			if rec.Code != tc.status || rec.Body.String() != tc.body+"\n" {
				t.Errorf("answer %d %q, want %d %q", rec.Code, rec.Body.String(), tc.status, tc.body+"\n")
			}
			o := outs.get()
			var tooLarge *http.MaxBytesError
			if len(o) != 1 || o[0].Status != tc.status || !errors.As(o[0].Err, &tooLarge) || tooLarge.Limit != 8 {
				t.Errorf("outcomes %+v, want one of status %d caused by the MaxBytesError", o, tc.status)
			}
			if tc.status < 500 && (o[0].Code != asyncsteps.InvalidRequest || logs() != "") {
				t.Errorf("code %q, log %q; want InvalidRequest, nothing logged", o[0].Code, logs())
			}
		})
	}
}
