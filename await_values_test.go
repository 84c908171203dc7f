package asyncsteps_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// An Await function's context looks the keys of type *int up apart (the
// context package keeps a context's cancel under such a key, which the
// call hides): a user's own key of that type, below or above the cancel
// of Run's context, must still find its value, there and in a context
// derived from the call's, as any other key does.
func TestAwaitContextFindsRunValuesUnderIntPointerKeys(t *testing.T) {
	below, above := new(int), new(int)
	base := context.WithValue(context.Background(), below, "below")
	cancellable, cancel := context.WithCancel(base)
	defer cancel()
	for name, ctx := range map[string]context.Context{
		"cancellable":     context.WithValue(cancellable, above, "above"),
		"never cancelled": context.WithValue(base, above, "above"),
	} {
		t.Run(name, func(t *testing.T) {
			l := asyncsteps.NewLoop()
			defer l.Close()
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Await(func(ctx context.Context) (any, error) {
				derived, cancel := context.WithCancel(ctx)
				defer cancel()
				return fmt.Sprintf("%v %v %v %v %v", ctx.Value(below), ctx.Value(above), derived.Value(below), derived.Value(above), ctx.Value(new(int))), nil
			})
			args, err := r.Run(ctx)
			if want := "below above below above <nil>"; err != nil || len(args) != 1 || args[0] != want {
				t.Errorf("the Await function saw %v %v, want [%s] <nil>", args, err, want)
			}
		})
	}
}
