package asyncsteps_test

import (
	"bytes"
	"context"
	"log/slog"
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

// A TestTool driven from a deferred call of a goroutine that
// runtime.Goexit is ending (a test's clean-up after t.FailNow): every
// panic of a callback then looks, by its stack, like one raised during a
// Goexit of the callback's own, and the engine queues the task that would
// go on after that Goexit, while the flow goes on at once as after any
// panic. The flow, which goes on past each of those frames (an error
// handler in the failed step's place that waits, an error unwound through
// a cancel handler that panics), must run as it would anywhere else, once,
// and the queued tasks must do nothing.
func TestHostileTestToolDrivenDuringAGoexitStepsPanic(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var logs bytes.Buffer // the child's own: a panic in the engine is logged
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
		r, tt := newFlow()
		var tr tracer
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A")
			panic("A")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("hA:%s", code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B")
				as.SetTimeout(10 * time.Millisecond) // waits on the tool's clock
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("hB:%s", code)
				as.Success("fallback")
			})
		})
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("C%v", args)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) {
					tr.add("cancelD")
					panic("cancel D")
				})
				as.Error("Boom")
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("hC:%s", code)
			as.Success()
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("E")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Millisecond)
				as.SetCancel(tr.cancel("cancelF"))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("hF:%s", code)
				as.Success("end")
			})
		})
		ch := r.Promise()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer drive(t, tt)
			runtime.Goexit()
		}()
		<-done
		drive(t, tt) // what the panics queued, if anything
		res := result(t, ch)
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != "end" {
			t.Errorf("Result %v %v, want [end] <nil>", res.Args, res.Err)
		}
		wantTrace(t, &tr, "A,hA:InternalError,B,hB:Timeout,C[fallback],cancelD,hC:InternalError,E,cancelF,hF:Timeout")
		if logs.Len() > 0 {
			t.Errorf("the engine logged:\n%s", logs.String())
		}
	})
}
