package asyncsteps

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAwaitCall measures one Await step per op on a Loop: its
// allocations, and under callgrind its instructions (docs/PERFORMANCE.md
// explains the method). The ops run as the iterations of one flow's
// Repeat, so that Run's own cost is spread over b.N Await calls.
//
//   - plain: a function that returns at once, with no step timeout;
//   - http: what net/http does with the context, under a step timeout:
//     a derived cancellable context, its Done channel, and its cancel.
func BenchmarkAwaitCall(b *testing.B) {
	plain := func(context.Context) (any, error) { return nil, nil }
	http := func(ctx context.Context) (any, error) {
		c, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		select {
		case <-c.Done():
			return nil, context.Cause(c)
		default:
			return nil, nil
		}
	}
	b.Run("plain", func(b *testing.B) { benchAwait(b, 0, plain) })
	b.Run("http", func(b *testing.B) { benchAwait(b, time.Hour, http) })
}

func benchAwait(b *testing.B, timeout time.Duration, fn AwaitFunc) {
	l := NewLoop()
	defer l.Close()
	n := b.N
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		if timeout > 0 {
			as.SetTimeout(timeout)
		}
		as.Repeat(n, func(as AsyncSteps, _ int) { as.Await(fn) })
	})
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := r.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAwaitFlow measures a run of a flow whose one step awaits
// another flow, on the same Loop, with AwaitFlow, both flows made anew
// for each op (a Root's steps are gone once it has run): allocations
// and time with no observer of AwaitFlow steps in the flow's context
// (see toolinfo.AwaitFlowKey), what every flow that is not traced pays.
//
//   - model: the step is the Root's own, added before it runs;
//   - added: a step adds it as it runs, as most flows do.
func BenchmarkAwaitFlow(b *testing.B) {
	b.Run("model", func(b *testing.B) {
		benchAwaitFlow(b, func(r *Root, sub *Root) { AwaitFlow(r, sub) })
	})
	b.Run("added", func(b *testing.B) {
		benchAwaitFlow(b, func(r *Root, sub *Root) {
			r.Add(func(as AsyncSteps, _ ...any) { AwaitFlow(as, sub) })
		})
	})
}

func benchAwaitFlow(b *testing.B, build func(r, sub *Root)) {
	l := NewLoop()
	defer l.Close()
	noop := func(AsyncSteps, ...any) {}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sub := New(WithTool(l))
		sub.Add(noop)
		r := New(WithTool(l))
		build(r, sub)
		if _, err := r.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// An AwaitFlow step of a flow whose context holds no observer of
// AwaitFlow steps (see toolinfo.AwaitFlowKey) costs four allocations
// more than an AwaitResult of the awaited flow's Promise: the context
// that flow begins with (the token and WithoutCancel under it), and the
// functions of the step that start the flow and complete the step with
// its Result. Looking for an observer costs nothing more. Before, the
// step cost a fifth, a function around the step that looked for one.
func TestAwaitFlowWithoutAnObserverCostsItsContextAndFunctions(t *testing.T) {
	oneAPIChunk(t)
	l := newTestLoop(t)
	noop := func(AsyncSteps, ...any) {}
	run := func(add func(as AsyncSteps, sub *Root)) float64 {
		return testing.AllocsPerRun(100, func() {
			sub := New(WithTool(l))
			sub.Add(noop)
			r := New(WithTool(l))
			r.Add(func(as AsyncSteps, _ ...any) { add(as, sub) })
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
	result := run(func(as AsyncSteps, sub *Root) { AwaitResult(as, sub.Promise()) })
	flow := run(func(as AsyncSteps, sub *Root) { AwaitFlow(as, sub) })
	if flow != result+4 {
		t.Errorf("a flow allocates %v objects with AwaitFlow, %v with AwaitResult of the Promise: want four more", flow, result)
	}
}
