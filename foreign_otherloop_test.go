package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// Error from the goroutine of another Loop, in a function given to its
// Immediate, on a step that does not wait should fail the step with the
// InternalError of a foreign call. It does not: every Loop's goroutine
// carries the same mark, so the call is taken as the callback's own (it
// writes the frame from that goroutine and its abort panics there, where
// that loop recovers and logs it), and the step fails with Boom. Known
// limitation (docs/DESIGN.md#step-api-states); skipped until the mark
// names the Loop.
func TestForeignCallFromAnotherLoop(t *testing.T) {
	t.Skip("known limitation: any Loop's goroutine passes as the callback's own")
	inChild(t, func(t *testing.T) {
		l1, l2 := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer l1.Close()
		defer l2.Close()
		tr := &tracer{}
		r := asyncsteps.New(asyncsteps.WithTool(l1))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			done := make(chan struct{})
			l2.Immediate(func() {
				defer close(done)
				as.Error("Boom")
				tr.add("call returned")
			})
			<-done
			tr.add("callback goes on")
			as.Success("ignored")
		})
		res := runOn(t, r, l1, nil)
		wantError(t, res.Err, asyncsteps.InternalError, foreignInfo("Error(Boom)"))
		wantTrace(t, tr, "call returned,callback goes on")
	})
}
