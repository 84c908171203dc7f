package asynchttp

import (
	"errors"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The cause a failure's log line has is the Go error under the copies of
// the error that the engine and a retry loop wrap around it; an
// *asyncsteps.Error that says something else is logged as it is, and a
// chain that loops ends the walk.
func TestLogCauseIsTheGoErrorUnderTheCopies(t *testing.T) {
	goErr := errors.New(`Get "http://10.0.0.7:9000/price": dial tcp 10.0.0.7:9000: connect: connection refused`)
	copyOf := func(cause error) *asyncsteps.Error {
		return &asyncsteps.Error{Code: asyncsteps.ConnectError, Info: "asynchttp: GET: connection refused", Cause: cause}
	}
	other := &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream answered 500", Cause: goErr}
	loop := copyOf(nil)
	loop.Cause = loop
	for _, tc := range []struct {
		name string
		e    *asyncsteps.Error
		want error
	}{
		{"the Go error", copyOf(goErr), goErr},
		{"under the engine's copy", copyOf(copyOf(goErr)), goErr},
		{"under a retry's copy too", copyOf(copyOf(copyOf(goErr))), goErr},
		{"no Go error under the copy", copyOf(copyOf(nil)), nil},
		{"another error", copyOf(other), other},
		{"no cause", copyOf(nil), nil},
		{"a loop", copyOf(loop), loop},
	} {
		if got := logCause(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
