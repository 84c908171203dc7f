package asyncsteps

import (
	"context"
	"slices"
	"testing"
)

// The user's functions of TestAHandlerInAFreshFrameNamesTheHelpersFunction.
func stackThenClaimed(as AsyncSteps, _ int) {
	h := as.(*stepAPI)
	as.WaitExternal()
	as.Add(func(AsyncSteps, ...any) {})
	h.claim(0) // a Success from outside claims, and stops before its write
}
func stackHandlerAdds(as AsyncSteps, _ ...any) { as.Error("E1") }

// A step of Then fails as a Success from outside comes after its Add and
// has not been written yet: its error handler runs in a frame of its own,
// the step's being left to the writer. The AsyncStack of a failure under
// that handler still names the user's function that Then ran for the
// step, as it does when the handler takes over the step's frame.
func TestAHandlerInAFreshFrameNamesTheHelpersFunction(t *testing.T) {
	const pkg = "github.com/asyncsteps/asyncsteps."
	l := NewLoop()
	defer l.Close()
	r := New(WithTool(l))
	r.SuccessStep(1)
	Then(r, stackThenClaimed, func(as AsyncSteps, code string) {
		if code != InternalError {
			t.Errorf("the step failed with %s, want %s", code, InternalError)
		}
		as.Add(stackHandlerAdds)
	})
	_, err := r.Run(context.Background())
	if e, ok := err.(*Error); !ok || e.Code != "E1" {
		t.Fatalf("Run: %v, want E1", err)
	}
	want := []string{pkg + "stackThenClaimed", pkg + "stackHandlerAdds"}
	if got := r.State().AsyncStack; !slices.Equal(got, want) {
		t.Errorf("AsyncStack %q, want %q", got, want)
	}
}
