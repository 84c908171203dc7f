package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// loopTool is a Tool of another package that runs on its own goroutine:
// it forwards to a Loop without being one, so the engine treats it as a
// foreign tool.
type loopTool struct{ l *asyncsteps.Loop }

func (t loopTool) Immediate(f func()) asyncsteps.Handle { return t.l.Immediate(f) }
func (t loopTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	return t.l.Deferred(d, f)
}
func (t loopTool) IsSameThread() bool { return t.l.IsSameThread() }
func (t loopTool) Now() time.Time     { return t.l.Now() }

// On a foreign Tool with a goroutine of its own, Run waits for the flow and
// what the engine does through the Tool works: an Await function (on a
// goroutine of its own), a Mutex and a Throttle section (the Throttle's
// period timed by the Tool's Deferred), a step that calls runtime.Goexit
// (the flow goes on from a callback queued on the Tool), Run's context
// cancelling the flow, and Run called from the Tool's own callback.
func TestRunOnAForeignToolWithAGoroutine(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		tool := loopTool{l}
		m := asyncsteps.NewMutex(1)
		th := asyncsteps.NewThrottle(1, time.Millisecond)
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Await(func(ctx context.Context) (any, error) { return "awaited", nil })
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) { tr.addf("%v", args) })
		r.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
			as.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("in %d", i) })
			})
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { runtime.Goexit() }, func(as asyncsteps.AsyncSteps, code string) {
			tr.add(code + ": " + as.State().ErrorInfo)
			as.Success("done")
		})
		args, err := r.Run(context.Background())
		if err != nil || fmt.Sprint(args) != "[done]" {
			t.Fatalf("Run = %v %v, want [done] <nil>", args, err)
		}
		wantTrace(t, &tr, "[awaited],in 0,in 1,InternalError: "+goexitInfo)

		// Run's context ends a waiting flow, which sees the cancel.
		ctx, cancel := context.WithCancel(context.Background())
		w := asyncsteps.New(asyncsteps.WithTool(tool))
		w.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("cancelled") })
			cancel()
		})
		if _, err := w.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Run under a cancelled context = %v, want context.Canceled", err)
		}
		wantTrace(t, &tr, "[awaited],in 0,in 1,InternalError: "+goexitInfo+",cancelled")

		// Run from the Tool's own callback would deadlock: it fails at once,
		// as on the goroutine of any Loop, which this Tool's is.
		got := make(chan error, 1)
		tool.Immediate(func() {
			_, err := asyncsteps.New(asyncsteps.WithTool(tool)).Run(context.Background())
			got <- err
		})
		wantError(t, <-got, asyncsteps.InternalError, "Run called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow")
	})
}
