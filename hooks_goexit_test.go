package asyncsteps_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A LoopPass hook that calls runtime.Goexit (t.FailNow in a test's hook)
// ends the loop's goroutine before the pass has run anything. The loop
// goes on with a new goroutine, which must not be stopped the same way
// before it runs the queue: a hook that exits at every pass would
// otherwise keep the loop from running any flow, a new goroutine a pass.
// The same holds for a Goexit during which a deferred call of the hook
// panics: the loop's recover takes the panic, and Go resumes the Goexit.
func TestLoopPassHookGoexitKeepsTheLoopRunning(t *testing.T) {
	t.Run("Goexit", func(t *testing.T) { loopPassExits(t, runtime.Goexit) })
	t.Run("GoexitWithAPanickingDefer", func(t *testing.T) {
		loopPassExits(t, func() {
			defer panic("deferred")
			runtime.Goexit()
		})
	})
}

// loopPassExits runs flows on a Loop whose LoopPass hook calls exit at
// every pass.
func loopPassExits(t *testing.T, exit func()) {
	inChildFor(t, 10*time.Second, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var passes atomic.Int32
		l.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) {
			passes.Add(1)
			exit()
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
