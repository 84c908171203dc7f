package asyncsteps_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/asyncsteps/asyncsteps"
)

// RunHelping keeps the channels it waits on between calls; a channel made
// in a testing/synctest bubble must never be waited on from another
// bubble or from outside any: the runtime stops the process then ("select
// on synctest channel from outside bubble"), past any recover. Calls in
// bubble after bubble, then outside, each on a Loop of its own, must all
// return, in a child process since the failure is fatal.
func TestRunHelpingInBubbleAfterBubble(t *testing.T) {
	inChild(t, func(t *testing.T) {
		helpOnce := func(t *testing.T) {
			l := asyncsteps.NewLoop()
			defer l.Close()
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Await(func(context.Context) (any, error) { return "ok", nil })
			args, err := r.RunHelping(context.Background())
			if err != nil || len(args) != 1 || args[0] != "ok" {
				t.Fatalf("RunHelping: %v, %v; want [ok], nil", args, err)
			}
		}
		for range 20 {
			synctest.Test(t, helpOnce)
		}
		for range 20 {
			helpOnce(t)
		}
	})
}
