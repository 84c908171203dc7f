package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
		}, "Run: Timeout: " + deadlineInfo},
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

// runKey keys a value of the context given to Run: a request's tenant.
type runKey struct{}

// ctxSeen describes what a hook or an Await function sees of ctx: the
// value given to Run, the one the outer flow's FlowStart hook added, its
// deadline and whether it can be cancelled.
func ctxSeen(ctx context.Context) string {
	_, deadline := ctx.Deadline()
	return fmt.Sprintf("run=%v hook=%v deadline=%v done=%v cause=%v",
		ctx.Value(runKey{}), ctx.Value(flowCtxKey{}), deadline, ctx.Done() != nil, context.Cause(ctx))
}

// The flow that AwaitFlow runs begins with the values of the awaiting
// flow's context, Run's and what its FlowStart hook added, and neither
// its deadline nor its cancel: its FlowStart hook and its Await functions
// see them, on its own loop too, and the step alone cancels it. Before,
// it began with context.Background(), as a flow started by Promise: a
// tracing hook began a new trace for it, and its Await functions lost
// the request's values.
func TestAwaitFlowRunsTheSubflowWithTheFlowsValues(t *testing.T) {
	for _, sameLoop := range []bool{true, false} {
		name := "on another loop"
		if sameLoop {
			name = "on the same loop"
		}
		t.Run(name, func(t *testing.T) {
			outerLoop, subLoop := asyncsteps.NewLoop(), asyncsteps.NewLoop()
			defer outerLoop.Close()
			defer subLoop.Close()
			if sameLoop {
				subLoop = outerLoop
			}
			var mu sync.Mutex
			var seen []string
			see := func(what string, ctx context.Context) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, what+": "+ctxSeen(ctx))
			}
			flows := 0
			hooks := &asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
				mu.Lock()
				flows++
				k := flows
				mu.Unlock()
				see(fmt.Sprintf("FlowStart %d", k), ctx)
				if k == 1 {
					return context.WithValue(ctx, flowCtxKey{}, "outer span")
				}
				return ctx
			}}
			outerLoop.SetHooks(hooks)
			subLoop.SetHooks(hooks)
			sub := asyncsteps.New(asyncsteps.WithTool(subLoop))
			sub.Await(func(ctx context.Context) (any, error) {
				see("sub's Await", ctx)
				return "done", nil
			})
			r := asyncsteps.New(asyncsteps.WithTool(outerLoop))
			asyncsteps.AwaitFlow(r, sub)
			runCtx, cancel := context.WithTimeout(context.WithValue(context.Background(), runKey{}, "acme"), time.Hour)
			defer cancel()
			if args, err := r.Run(runCtx); err != nil || fmt.Sprint(args) != "[done]" {
				t.Fatalf("Run: %v %v, want [done] <nil>", args, err)
			}
			want := []string{
				"FlowStart 1: run=acme hook=<nil> deadline=true done=true cause=<nil>",
				"FlowStart 2: run=acme hook=outer span deadline=false done=false cause=<nil>",
				"sub's Await: run=acme hook=outer span deadline=false done=true cause=<nil>",
			}
			if got := strings.Join(seen, "\n"); got != strings.Join(want, "\n") {
				t.Errorf("seen:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// The flow that AwaitFlow runs is cancelled by its step, as before, not
// by the end of the awaiting flow's context, whose values it has: once
// the awaiting flow's context is cancelled, which cancels the step, the
// sub-flow's cancel handler runs, and the context its FlowStart got is
// still not ended.
func TestAwaitFlowSubflowIsCancelledByItsStepAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var mu sync.Mutex
		var starts []context.Context
		loop.SetHooks(&asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, ctx)
			return ctx
		}})
		var tr tracer
		sub := asyncsteps.New(asyncsteps.WithTool(loop))
		sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("sub waits")
			as.SetCancel(tr.cancel("sub cancelled"))
		})
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.AwaitFlow(r, sub, tr.handler("onerror"))
		r.Add(tr.step("never"))
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), runKey{}, "acme"))
		done := r.PromiseContext(ctx)
		synctest.Wait()
		cancel()
		if res := <-done; !errors.Is(res.Err, context.Canceled) {
			t.Errorf("Result: %v, want context.Canceled", res.Err)
		}
		synctest.Wait()
		wantTrace(t, &tr, "sub waits,sub cancelled")
		mu.Lock()
		defer mu.Unlock()
		if len(starts) != 2 {
			t.Fatalf("%d flows began, want 2", len(starts))
		}
		if got, want := ctxSeen(starts[1]), "run=acme hook=<nil> deadline=false done=false cause=<nil>"; got != want {
			t.Errorf("the sub-flow's FlowStart got %s, want %s", got, want)
		}
		if err := starts[1].Err(); err != nil {
			t.Errorf("the sub-flow's context ended with the outer one's: %v", err)
		}
	})
}
