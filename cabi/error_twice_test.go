//go:build cgo

package cabi_test

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go step that recovers the abort of its Error, then hands itself to C,
// whose handle_error raises another error: the step failed with the first
// error, and its code and info stay together for the Go handler, as for a
// second Error in Go.
func TestHandleErrorAfterARecoveredGoErrorKeepsTheFirst(t *testing.T) {
	r, _ := newRoot(t)
	var got []string
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		func() {
			defer func() { _ = recover() }()
			as.Error("First", "first info")
		}()
		ctest.HandleError(cabi.Binary(as), "Second", "second info")
	}, func(as asyncsteps.AsyncSteps, code string) {
		got = append(got, code, as.State().ErrorInfo)
	})
	_, err := run(t, r)
	wantErr := &asyncsteps.Error{Code: "First", Info: "first info"}
	if e, ok := err.(*asyncsteps.Error); !ok || e.Code != wantErr.Code || e.Info != wantErr.Info {
		t.Errorf("Run: %v, want %v", err, wantErr)
	}
	if len(got) != 2 || got[0] != "First" || got[1] != "first info" {
		t.Errorf("Go handler saw %q, want [First first info]", got)
	}
}

// handle_error with an empty code fails the step with InternalError, as
// Go's Error does, with the info given, if any, after the engine's own:
// the header and the package doc say so.
func TestHandleErrorWithAnEmptyCode(t *testing.T) {
	for _, tc := range []struct{ info, want string }{
		{"boom", "Error: empty error code; info: boom"},
		{"", "Error: empty error code"},
	} {
		r, _ := newRoot(t)
		var got []string
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			ctest.HandleError(cabi.Binary(as), "", tc.info)
		}, func(as asyncsteps.AsyncSteps, code string) {
			got = append(got, code, as.State().ErrorInfo)
		})
		_, _ = run(t, r)
		if want := []string{asyncsteps.InternalError, tc.want}; !slices.Equal(got, want) {
			t.Errorf("info %q: the handler saw %q, want %q", tc.info, got, want)
		}
	}
}
