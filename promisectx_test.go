package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/eagertool"
)

type jobKey struct{}

// PromiseContext runs the flow under ctx without a goroutine waiting for
// it: the Await functions' contexts carry ctx's values.
func TestPromiseContextPassesValuesToAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(func(ctx context.Context) (any, error) { return ctx.Value(jobKey{}), nil })

		res := <-r.PromiseContext(context.WithValue(context.Background(), jobKey{}, "job-42"))

		wantSuccess(t, res, "job-42")
	})
}

// A cancel of ctx cancels the flow: its cancel handlers run, its error
// handlers do not, and the Result's Err matches ctx.Err().
func TestPromiseContextCancelCancelsTheFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("waits")
			as.SetCancel(tr.cancel("cancel handler"))
		}, tr.handler("error handler"))
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.PromiseContext(ctx)
		synctest.Wait()

		cancel()
		res := <-ch

		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
		}
		wantTrace(t, &tr, "waits,cancel handler")
	})
}

// ctx's deadline times the whole flow out, as Run's does: the waiting
// step's error handler sees Timeout, on the bubble's clock.
func TestPromiseContextDeadlineTimesTheFlowOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("handler:%s at %v", code, time.Since(start))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		res := <-r.PromiseContext(ctx)

		wantError(t, res.Err, asyncsteps.Timeout, deadlineInfo)
		if !errors.Is(res.Err, context.DeadlineExceeded) {
			t.Errorf("Result.Err = %v, want one matching context.DeadlineExceeded", res.Err)
		}
		wantTrace(t, &tr, "handler:Timeout at 5s")
	})
}

// A nil ctx or an ended one starts nothing: the Result says why at once.
func TestPromiseContextRefusesANilOrEndedContext(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(tr.step("ran"))
	//lint:ignore SA1012 the nil context is what is tested
	res := <-r.PromiseContext(nil)
	wantError(t, res.Err, asyncsteps.InternalError, "PromiseContext called with a nil context: pass context.Background() or the caller's context")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = <-r.PromiseContext(ctx)
	if res.Err != context.Canceled {
		t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
	}

	tt.Run()
	if r.Running() || tr.String() != "" {
		t.Errorf("running %v, trace %q; want false, nothing run", r.Running(), tr.String())
	}
}

// The watch of ctx ends with the flow: a ctx cancelled after its flow
// has ended does not cancel the Root's next execution.
func TestPromiseContextForgetsItsContextWhenTheFlowEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(tr.step("first"))
		ctx, cancel := context.WithCancel(context.Background())
		wantSuccess(t, <-r.PromiseContext(ctx))

		var step asyncsteps.AsyncSteps
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("second waits")
			as.SetCancel(tr.cancel("second cancelled"))
			step = as
		})
		ch := r.Promise()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !r.Running() {
			t.Fatal("the first execution's context cancelled the second")
		}
		step.Success("done")

		wantSuccess(t, <-ch, "done")
		wantTrace(t, &tr, "first,second waits")
	})
}

// Unlike Run, PromiseContext does not block: a step of one loop may start
// a flow with it, here on the same loop, and wait for its Result.
func TestPromiseContextFromALoopCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		sub := asyncsteps.New(asyncsteps.WithTool(loop))
		sub.Await(func(ctx context.Context) (any, error) { return ctx.Value(jobKey{}), nil })
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			ch := sub.PromiseContext(context.WithValue(context.Background(), jobKey{}, "sub"))
			asyncsteps.AwaitResult(as, ch)
		})

		res := <-r.PromiseContext(context.Background())

		wantSuccess(t, res, "sub")
	})
}

// A cancel of ctx racing with the flow's end: the Result is one or the
// other, never both, and nothing is left to cancel a later execution.
func TestPromiseContextCancelRacesTheEnd(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	for range 200 {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(func(context.Context) (any, error) { return "v", nil })
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.PromiseContext(ctx)
		cancel()
		res := <-ch
		if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Result.Err = %v, want nil or context.Canceled", res.Err)
		}
		if res.Err == nil {
			wantSuccess(t, res, "v")
		}
	}
}

// On a Tool that runs the stop inside Immediate, the cancel of ctx ends
// the flow on the goroutine of context.AfterFunc, which must hold nothing
// that the flow's end takes: the Result comes.
func TestPromiseContextCancelOnAToolThatRunsCallbacksAtOnce(t *testing.T) {
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(&eagertool.Tool{}))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("cancelled"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	ch := r.PromiseContext(ctx)

	cancel()

	wantCancelledSoon(t, ch, "")
	wantTrace(t, &tr, "cancelled")
}

// wantCancelledSoon fails the test (run names the run, if several) unless
// ch gives, within 10s, a Result whose Err matches context.Canceled.
func wantCancelledSoon(t *testing.T, ch <-chan asyncsteps.Result, run string) {
	t.Helper()
	select {
	case res := <-ch:
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("%sResult.Err = %v, want one matching context.Canceled", run, res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%sno Result 10s after the cancel", run)
	}
}

// A Tool whose Immediate panics once stopped, cancelled after the stop:
// the panic comes on the goroutine of context.AfterFunc, which has no
// caller to take it; it is logged, the process goes on, and the flow, on
// a tool that runs nothing any more, waits for good.
func TestPromiseContextCancelOnAStoppedToolIsLogged(t *testing.T) {
	inChild(t, func(t *testing.T) {
		logs := slogRecords()
		tool := &stoppedTool{manualTool: &manualTool{}}
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.PromiseContext(ctx)
		tool.run()
		tool.stopped = true

		cancel()

		wantLogged(t, logs, lostCompletionLog)
		noResult(t, ch)
	})
}

// A cancel of ctx right after PromiseContext: its task may run on the
// loop before the flow has begun. The flow still sees it as it begins,
// and runs its step's cancel handler, on a Root run again and again.
func TestPromiseContextCancelledAsItStarts(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	for i := range 200 {
		var tr tracer
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("cancelled"))
		})
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.PromiseContext(ctx)
		cancel()
		wantCancelledSoon(t, ch, fmt.Sprintf("run %d: ", i))
		if got := tr.String(); got != "" && got != "cancelled" {
			t.Fatalf("run %d: trace %q, want nothing (cancelled before the step) or %q", i, got, "cancelled")
		}
	}
}

// A deadline that passes before the flow has begun: the task that times
// the flow out may run first and find nothing to do; the flow times
// itself out as it begins. Run waited for ever.
func TestRunDeadlineBeforeTheFlowBegins(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	for i := range 200 {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Microsecond)
		got := make(chan error, 1)
		go func() {
			_, err := r.Run(ctx)
			got <- err
		}()
		select {
		case err := <-got:
			// A Timeout of the flow, or ctx.Err() itself when the deadline
			// had passed before Run started the flow.
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run %d: Run = %v, want an error matching context.DeadlineExceeded", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: Run has not returned 10s after its 20µs deadline", i)
		}
		cancel()
	}
}

// A ctx cancel after a Root.Cancel that ResetEvents dropped: the flow is
// cancelled when the tool runs next, as by a second Root.Cancel.
func TestPromiseContextCancelAfterADroppedRootCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("cancelled"))
		})
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.PromiseContext(ctx)
		tt.Run()
		r.Cancel()
		tt.ResetEvents()

		cancel()
		synctest.Wait()
		tt.Run()

		select {
		case res := <-ch:
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
			}
		default:
			t.Fatal("the flow still waits after ctx's cancel")
		}
		wantTrace(t, &tr, "cancelled")
	})
}
