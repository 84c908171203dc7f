package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// lookup returns its error as a typed nil *Error when all went well: the
// classic Go mistake, which makes err != nil.
func lookup() error {
	var e *asyncsteps.Error
	return e
}

// A nil *Error or *PanicError inside an error value, or given as the
// target of errors.Is, is handled by their methods instead of being
// dereferenced: errors.Is and errors.As on it used to panic.
func TestNilErrorValuesAreSafe(t *testing.T) {
	err := lookup()
	timeout := &asyncsteps.Error{Code: asyncsteps.Timeout}
	wrapped := fmt.Errorf("wrapped: %w", err)
	checks := []struct {
		name string
		got  func() any
		want any
	}{
		{"Error()", func() any { return err.Error() }, "<nil>"},
		{"Unwrap", func() any { return errors.Unwrap(err) }, nil},
		{"Is a code", func() any { return errors.Is(wrapped, timeout) }, false},
		{"Is DeadlineExceeded", func() any { return errors.Is(err, context.DeadlineExceeded) }, false},
		{"Is itself", func() any { return errors.Is(err, err) }, true},
		{"Is nil target", func() any { return errors.Is(timeout, err) }, false},
		{"PanicError", func() any { return (*asyncsteps.PanicError)(nil).Error() }, "<nil>"},
		{"PanicError Unwrap", func() any { return (*asyncsteps.PanicError)(nil).Unwrap() }, nil},
	}
	for _, c := range checks {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", c.name, p)
				}
			}()
			if got := c.got(); got != c.want {
				t.Errorf("%s = %v, want %v", c.name, got, c.want)
			}
		}()
	}
}
