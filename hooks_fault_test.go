package asyncsteps_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// The hooks that have nothing of a flow to fail (LoopPass, LoopLag,
// FlowEnd, StepError) are recovered when they panic: the loop and the
// flows go on as if the hook had returned. These run in child processes:
// without that, a panicking hook crashes the process or hangs a flow.

// A LoopPass hook runs on the loop's goroutine outside of any callback: its
// panic must not end the process, and the loop must go on running flows.
func TestLoopPassHookPanicKeepsTheLoopRunning(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var passes atomic.Int32
		l.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) {
			passes.Add(1)
			panic("LoopPass")
		}})
		for i := range 3 {
			r := asyncsteps.New(asyncsteps.WithTool(l))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(i) })
			args, err := r.Run(context.Background())
			if err != nil || len(args) != 1 || args[0] != i {
				t.Fatalf("flow %d = %v %v, want [%d] <nil>", i, args, err, i)
			}
		}
		if passes.Load() == 0 {
			t.Fatal("the LoopPass hook never ran")
		}
	})
}
