package asyncsteps_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// FlowStart and AwaitStart return the context that the flow, or the Await
// function, goes on with; one that returns nil keeps the context it was
// given (the Hooks doc: "Nil keeps ctx"), rather than leave the flow and
// its hooks a nil context, or the function one it cannot use.
func TestStartHooksReturningNilKeepTheContext(t *testing.T) {
	type key struct{}
	l := asyncsteps.NewLoop()
	defer l.Close()
	var ends []string
	l.SetHooks(&asyncsteps.Hooks{
		FlowStart:  func(context.Context) context.Context { return nil },
		FlowEnd:    func(ctx context.Context, _ error) { ends = append(ends, fmt.Sprint("FlowEnd ", ctx.Value(key{}))) },
		AwaitStart: func(context.Context) context.Context { return nil },
		AwaitEnd: func(ctx context.Context, _ *asyncsteps.Error) {
			ends = append(ends, fmt.Sprint("AwaitEnd ", ctx.Value(key{}))) // before the step completes
		},
	})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Await(func(ctx context.Context) (any, error) { return ctx.Value(key{}), nil })
	args, err := r.Run(context.WithValue(context.Background(), key{}, "v"))
	if err != nil || len(args) != 1 || args[0] != "v" {
		t.Errorf("Run = %v %v, want [v] <nil>", args, err)
	}
	if got := fmt.Sprint(ends); got != "[AwaitEnd v FlowEnd v]" {
		t.Errorf("the hooks saw %s, want [AwaitEnd v FlowEnd v]", got)
	}
}
