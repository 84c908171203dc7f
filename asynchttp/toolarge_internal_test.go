package asynchttp

import (
	"errors"
	"net/http"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Every error answer asks whether a body over its limit caused it: that
// costs no allocation, whatever the error, and an error whose Unwrap
// panics is no such body.
func TestRequestTooLargeAllocatesNothing(t *testing.T) {
	internal := func(cause error) *asyncsteps.Error {
		return &asyncsteps.Error{Code: asyncsteps.InternalError, Cause: cause}
	}
	tooLarge := &http.MaxBytesError{Limit: 8}
	for _, tc := range []struct {
		name  string
		err   *asyncsteps.Error
		found bool
	}{
		{"another code", &asyncsteps.Error{Code: asyncsteps.DefenseRejected, Cause: tooLarge}, false},
		{"no cause", internal(nil), false},
		{"another cause", internal(errors.New("boom")), false},
		{"joined", internal(errors.Join(errors.New("boom"), tooLarge)), true},
		{"Unwrap panics", internal(panicky{}), false},
		{"the body", internal(tooLarge), true},
	} {
		if got := requestTooLarge(tc.err) != nil; got != tc.found {
			t.Errorf("%s: found %v, want %v", tc.name, got, tc.found)
		}
		if tc.found {
			continue // the 413 is made, once
		}
		if allocs := testing.AllocsPerRun(100, func() { requestTooLarge(tc.err) }); allocs != 0 {
			t.Errorf("%s: %v allocations, want 0", tc.name, allocs)
		}
	}
}

type panicky struct{}

func (panicky) Error() string { return "panicky" }
func (panicky) Unwrap() error { panic("unwrap boom") }
