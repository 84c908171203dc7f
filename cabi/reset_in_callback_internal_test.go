//go:build cgo

package cabi

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A success (or a handle_error) from another thread on the pointer
// Binary gave for a Go step, made while the step's callback runs, which
// then adds sub-steps: the completion is void (the callback went on to
// add sub-steps), and the flow runs the sub-steps and goes on. A
// ResetEvents that the callback calls in between drops the completion's
// task; its fallback must not apply it inside the callback, as the
// callback's own: the success made the engine skip the sub-steps, the
// error aborted the callback from inside ResetEvents.
func TestResetInTheCallbackDoesNotApplyAnOutsideCompletionThere(t *testing.T) {
	for _, c := range []struct {
		name  string
		reset bool
		code  int
	}{
		{"success", false, 0}, {"success reset", true, 0},
		{"handle_error", false, 7}, {"handle_error reset", true, 7},
	} {
		reset := c.reset
		t.Run(c.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			var trace []string
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				p := Binary(as)
				fromGoroutine(func() { ctest.FlowComplete(p, c.code) })
				if reset {
					tt.ResetEvents()
				}
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					trace = append(trace, "sub")
					as.Success("sub")
				})
			})
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				trace = append(trace, "next")
				as.Success(args...)
			})
			ended := ""
			r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code + " (" + err.Info + ")" })
			tt.Run()
			if got := fmtTrace(trace); got != "sub,next" || ended != "" {
				t.Errorf("trace %q, error %q; want \"sub,next\" and none", got, ended)
			}
			if n := nodesOf(r.State()); n != 0 {
				t.Errorf("%d nodes of the flow in the registry, want 0", n)
			}
		})
	}
}

func fmtTrace(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
