package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Error with an empty code or more than one info is a misuse: the step
// fails with InternalError at once (its error handler runs, the callback
// does not go on), and the info says what was wrong while keeping the code
// and every info given.
func TestErrorWithAnEmptyCodeIsAMisuse(t *testing.T) {
	for _, c := range []struct {
		name string
		code string
		info []string
		want string
	}{
		{"no info", "", nil, "Error: empty error code"},
		{"info", "", []string{"quota gone"}, "Error: empty error code; info: quota gone"},
		{"two infos", asyncsteps.NotImplemented, []string{"quota", "gone"},
			`Error: 2 infos, one at most; code: NotImplemented; info: "quota", "gone"`},
		{"three infos, one empty", "E1", []string{"a", "", "c, d"},
			`Error: 3 infos, one at most; code: E1; info: "a", "", "c, d"`},
		{"empty code and two infos", "", []string{"quota", "gone"},
			`Error: empty error code, 2 infos, one at most; info: "quota", "gone"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				as.Error(c.code, c.info...)
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

// The misuse is the same in a completion from outside the callback, of a
// step that waits.
func TestErrorWithManyInfosFromOutsideIsAMisuse(t *testing.T) {
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(0, func() { as.Error(asyncsteps.CommError, "down", "for good") })
	})
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, `Error: 2 infos, one at most; code: CommError; info: "down", "for good"`)
}

// A wrong Error call that is also misplaced, after Add in the same
// callback or from another goroutine on a step that does not wait, is
// reported as the misplaced call, named with the code the user gave: not
// as Error(InternalError), the code that stands for the wrong call.
func TestAMisplacedWrongErrorCallNamesTheUsersCode(t *testing.T) {
	for _, c := range []struct {
		name string
		step asyncsteps.StepFunc
		want string
	}{
		{"after Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) {})
			as.Error("E1", "a", "b")
		}, "Error(E1) called after Add in the same callback"},
		{"empty code after Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) {})
			as.Error("")
		}, "Error() called after Add in the same callback"},
		{"from another goroutine", func(as asyncsteps.AsyncSteps, _ ...any) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				as.Error("E1", "a", "b")
			}()
			<-done
		}, "Error(E1) called from another goroutine on a step that does not wait: call WaitExternal, SetTimeout or SetCancel first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(c.step, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s:%s", code, as.State().ErrorInfo)
			})

			res := run(t, r, tt)

			wantTrace(t, &tr, "handler:InternalError:"+c.want)
			wantError(t, res.Err, asyncsteps.InternalError, c.want)
		})
	}
}
