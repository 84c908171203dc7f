package asyncsteps_test

import (
	"context"
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The user's functions of TestHelperStacksNameTheUsersFunctions.
func stackThen(as asyncsteps.AsyncSteps, _ int)         { as.Error("E1") }
func stackGatherThen(as asyncsteps.AsyncSteps, _ []int) { as.Error("E1") }
func stackBranchOK(as asyncsteps.AsyncSteps)            { as.Success(1) }
func stackBranchFails(as asyncsteps.AsyncSteps)         { as.Error("E1") }
func stackBranchString(as asyncsteps.AsyncSteps)        { as.Success("one") }
func stackBranchAdds(as asyncsteps.AsyncSteps)          { as.Add(stackSubFails) }
func stackSubFails(as asyncsteps.AsyncSteps, _ ...any)  { as.Error("E1") }
func stackAwait(context.Context) (int, error)           { return 1, nil }

func stackSettleThen(as asyncsteps.AsyncSteps, _ []asyncsteps.Settled[int]) { as.Error("E1") }

func stackOuter(as asyncsteps.AsyncSteps, _ ...any) {
	as.SuccessStep(1)
	asyncsteps.Then(as, stackThen)
}

// The AsyncStack of a failure in a step that Then, Gather, Settle, First,
// Quorum or AwaitThen added names the user's function that the step runs, not the helper's
// closures around it (docs/DESIGN.md#error-info-and-last-exception): the
// helper's own steps are left out, as the engine's are.
func TestHelperStacksNameTheUsersFunctions(t *testing.T) {
	const pkg = "github.com/asyncsteps/asyncsteps_test."
	for _, c := range []struct {
		name  string
		add   func(r *asyncsteps.Root)
		code  string
		stack []string
	}{
		{"Then", func(r *asyncsteps.Root) {
			r.SuccessStep(1)
			asyncsteps.Then(r, stackThen)
		}, "E1", []string{"stackThen"}},
		{"Then in a step", func(r *asyncsteps.Root) { r.Add(stackOuter) }, "E1", []string{"stackOuter", "stackThen"}},
		{"Then of a result of another type", func(r *asyncsteps.Root) {
			r.SuccessStep("one")
			asyncsteps.Then(r, stackThen)
		}, asyncsteps.InternalError, []string{"stackThen"}},
		{"Gather: a branch", func(r *asyncsteps.Root) {
			asyncsteps.Gather(r, stackGatherThen, stackBranchOK, stackBranchFails)
		}, "E1", []string{"stackBranchFails"}},
		{"Gather: a branch's step", func(r *asyncsteps.Root) {
			asyncsteps.Gather(r, stackGatherThen, stackBranchOK, stackBranchAdds)
		}, "E1", []string{"stackBranchAdds", "stackSubFails"}},
		{"Gather: a result of another type", func(r *asyncsteps.Root) {
			asyncsteps.Gather(r, stackGatherThen, stackBranchOK, stackBranchString)
		}, asyncsteps.InternalError, []string{"stackBranchString"}},
		{"Gather: then", func(r *asyncsteps.Root) {
			asyncsteps.Gather(r, stackGatherThen, stackBranchOK, stackBranchOK)
		}, "E1", []string{"stackGatherThen"}},
		{"First: the last branch to fail", func(r *asyncsteps.Root) {
			asyncsteps.First(r, stackThen, stackBranchAdds, stackBranchFails)
		}, "E1", []string{"stackBranchAdds", "stackSubFails"}},
		{"First: then", func(r *asyncsteps.Root) {
			asyncsteps.First(r, stackThen, stackBranchFails, stackBranchOK)
		}, "E1", []string{"stackThen"}},
		{"Quorum: a branch's step", func(r *asyncsteps.Root) {
			asyncsteps.Quorum(r, 2, stackGatherThen, stackBranchOK, stackBranchAdds)
		}, "E1", []string{"stackBranchAdds", "stackSubFails"}},
		{"Quorum: a result of another type", func(r *asyncsteps.Root) {
			asyncsteps.Quorum(r, 2, stackGatherThen, stackBranchString, stackBranchOK)
		}, asyncsteps.InternalError, []string{"stackBranchString"}},
		{"Quorum: then", func(r *asyncsteps.Root) {
			asyncsteps.Quorum(r, 2, stackGatherThen, stackBranchOK, stackBranchOK)
		}, "E1", []string{"stackGatherThen"}},
		{"Settle: then, after a branch's error", func(r *asyncsteps.Root) {
			asyncsteps.Settle(r, stackSettleThen, stackBranchOK, stackBranchFails)
		}, "E1", []string{"stackSettleThen"}},
		{"Then: a step its error handler adds", func(r *asyncsteps.Root) {
			r.SuccessStep(1)
			asyncsteps.Then(r, stackThen, func(as asyncsteps.AsyncSteps, _ string) { as.Add(stackSubFails) })
		}, "E1", []string{"stackThen", "stackSubFails"}},
		{"AwaitThen: then", func(r *asyncsteps.Root) {
			asyncsteps.AwaitThen(r, stackAwait, stackThen)
		}, "E1", []string{"stackThen"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := asyncsteps.NewLoop()
			defer l.Close()
			r := asyncsteps.New(asyncsteps.WithTool(l))
			c.add(r)
			_, err := r.Run(context.Background())
			wantCode(t, err, c.code)
			want := make([]string, len(c.stack))
			for i, name := range c.stack {
				want[i] = pkg + name
			}
			if got := r.State().AsyncStack; !slices.Equal(got, want) {
				t.Errorf("AsyncStack %q, want %q", got, want)
			}
		})
	}
}
