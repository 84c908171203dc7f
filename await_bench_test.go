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
