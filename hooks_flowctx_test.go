package asyncsteps_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// flowCtxKey is the key of the value a FlowStart hook puts in the flow's
// context.
type flowCtxKey struct{}

// deadlineSeen runs an Await step in a flow of loop under ctx, with a
// FlowStart hook that returns derive(ctx) with a value, and returns what
// the function saw of its context: its deadline and the value.
func deadlineSeen(t *testing.T, ctx context.Context, derive func(context.Context) context.Context) string {
	t.Helper()
	l := asyncsteps.NewLoop()
	defer l.Close()
	l.SetHooks(&asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
		return context.WithValue(derive(ctx), flowCtxKey{}, "span")
	}})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	var seen string
	r.Await(func(ctx context.Context) (any, error) {
		d, ok := ctx.Deadline()
		seen = fmt.Sprintf("deadline %v %v, value %v", d.UTC().Format(time.RFC3339), ok, ctx.Value(flowCtxKey{}))
		return nil, nil
	})
	if _, err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return seen
}

// The context a FlowStart hook returns gives the flow's hooks and its
// Await functions its values, not its deadline: an Await function's
// context has the deadline of Run's context and of the step timeouts
// around it, which the engine enforces. Before, a deadline the hook set
// showed in the function's Deadline, though nothing timed the flow out
// there.
func TestFlowStartContextGivesValuesNotItsDeadline(t *testing.T) {
	runDeadline := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	hookDeadline := time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC)
	withHookDeadline := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithDeadline(ctx, hookDeadline)
		t.Cleanup(cancel)
		return ctx
	}
	runCtx, cancel := context.WithDeadline(context.Background(), runDeadline)
	defer cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		derive func(context.Context) context.Context
		want   string
	}{
		{"no deadline", context.Background(), withHookDeadline, "deadline 0001-01-01T00:00:00Z false, value span"},
		{"Run's deadline", runCtx, withHookDeadline, "deadline 2100-01-01T00:00:00Z true, value span"},
		{"without cancel", runCtx, context.WithoutCancel, "deadline 2100-01-01T00:00:00Z true, value span"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := deadlineSeen(t, c.ctx, c.derive); got != c.want {
				t.Errorf("the Await function saw %s, want %s", got, c.want)
			}
		})
	}
}

// A flow whose Run's deadline has passed as it begins times out before
// its first step, whatever context its FlowStart hook returns; and a
// deadline of the hook's own that has passed times nothing out. Before,
// the flow went by the hook's context: one without cancel
// (WithoutCancel) hid Run's deadline, and the first step ran; one whose
// deadline had passed timed out a flow that had none.
func TestFlowStartContextDoesNotTimeTheFlow(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Hour))
	defer cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		derive func(context.Context) context.Context
		want   string
	}{
		{"Run's deadline hidden", asyncsteps.NewPassingCtx(), func(ctx context.Context) context.Context {
			ctx.(*asyncsteps.PassingCtx).Pass() // after Run looked at it, before the flow does
			return context.WithoutCancel(ctx)
		}, "Run: Timeout"},
		{"the hook's deadline", context.Background(), func(context.Context) context.Context { return expired }, "[first step] Run: <nil>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			tt.SetHooks(&asyncsteps.Hooks{FlowStart: c.derive})
			var trace []string
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(asyncsteps.AsyncSteps, ...any) { trace = append(trace, "first step") })
			_, err := r.Run(c.ctx)
			got := fmt.Sprintf("Run: %v", err)
			if len(trace) > 0 {
				got = fmt.Sprint(trace) + " " + got
			}
			if got != c.want {
				t.Errorf("%s, want %s", got, c.want)
			}
		})
	}
}
