package asyncsteps_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps"
)

// New without WithTool starts no loop: DefaultTool is resolved at the
// first execution. A model flow built in a testing/synctest bubble, with
// its copies, is a test of the bubble's own that ends cleanly; the loop
// would otherwise be the bubble's, blocked for ever when it ends ("deadlock:
// main bubble goroutine has exited but blocked goroutines remain"). The
// test runs in a child process, where no earlier test started the loop.
// Outside the bubble, every such Root then runs on DefaultTool, its
// copies keep the model's steps, state and unhandled-error function.
func TestNewInBubbleStartsNoLoop(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var model, clone, instance, copied *asyncsteps.Root
		unhandled := make(chan string, 1)
		synctest.Test(t, func(t *testing.T) {
			model = asyncsteps.New(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				unhandled <- err.Code
			}))
			model.State().Set("greeting", "hello")
			model.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success(as.State().Get("greeting"))
			})
			clone = model.Clone()
			instance = model.NewInstance()
			instance.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
			copied = asyncsteps.New()
			copied.CopyFrom(model)
		})
		for name, r := range map[string]*asyncsteps.Root{"model": model, "clone": clone, "copied": copied} {
			if r.Tool() != asyncsteps.DefaultTool() {
				t.Errorf("%s.Tool() = %v, want DefaultTool()", name, r.Tool())
			}
			args, err := r.Run(context.Background())
			if err != nil || len(args) != 1 || args[0] != "hello" {
				t.Errorf("%s.Run = %v, %v; want [hello], nil", name, args, err)
			}
		}
		instance.Execute() // its error goes to the model's function
		if code := <-unhandled; code != "Boom" || instance.Tool() != asyncsteps.DefaultTool() {
			t.Fatalf("unhandled error %q, instance on %v; want Boom on DefaultTool()", code, instance.Tool())
		}
	})
}
