package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Error with an empty code is a misuse: the step fails with InternalError
// at once (its error handler runs, the callback does not go on), and the
// info says what was wrong while keeping the info given.
func TestErrorWithAnEmptyCodeIsAMisuse(t *testing.T) {
	for _, c := range []struct {
		name string
		info []string
		want string
	}{
		{"no info", nil, "Error: empty error code"},
		{"info", []string{"quota gone"}, "Error: empty error code; info: quota gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				as.Error("", c.info...)
				tr.add("not aborted")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s:%s", code, as.State().ErrorInfo)
			})

			res := run(t, r, tt)

			wantTrace(t, &tr, "step,handler:InternalError:"+c.want)
			wantError(t, res.Err, asyncsteps.InternalError, c.want)
		})
	}
}

// An *Error with an empty Code names no error: ErrorFrom makes it an
// InternalError that says so and keeps its Info, with the original as
// Cause (TestAwaitErrorMapping: an Await function returning one).
func TestEmptyCodedErrorValueIsAnInternalError(t *testing.T) {
	empty := &asyncsteps.Error{Info: "half made"}
	got := asyncsteps.ErrorFrom(empty)
	if got.Code != asyncsteps.InternalError || got.Info != "*Error: empty error code; info: half made" || got.Cause != error(empty) {
		t.Errorf("ErrorFrom = {Code: %q, Info: %q, Cause: %v}, want InternalError, the info naming the empty code, the original as Cause", got.Code, got.Info, got.Cause)
	}
}
