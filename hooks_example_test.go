package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Hooks count flows by outcome code and step errors by code, as a metrics
// exporter would (here in maps; a Prometheus counter vector in a server).
func ExampleHooks() {
	tt := asyncsteps.NewTestTool()
	ended := map[string]int{}
	stepErrors := map[string]int{}
	tt.SetHooks(&asyncsteps.Hooks{
		FlowEnd: func(_ context.Context, err error) {
			code := "ok"
			var e *asyncsteps.Error
			switch {
			case errors.As(err, &e):
				code = e.Code
			case errors.Is(err, context.Canceled):
				code = "canceled"
			}
			ended[code]++
		},
		StepError: func(_ context.Context, err *asyncsteps.Error) { stepErrors[err.Code]++ },
	})

	for _, code := range []string{"", "", asyncsteps.NotImplemented, asyncsteps.CommError} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if code != "" {
				as.Error(code)
			}
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.CommError {
				as.Success() // recovered: a step error, not a failed flow
			}
		})
		r.Run(context.Background())
	}

	for _, k := range slices.Sorted(maps.Keys(ended)) {
		fmt.Println("flows", k, ended[k])
	}
	for _, k := range slices.Sorted(maps.Keys(stepErrors)) {
		fmt.Println("step errors", k, stepErrors[k])
	}
	// Output:
	// flows NotImplemented 1
	// flows ok 3
	// step errors CommError 1
	// step errors NotImplemented 1
}

// lateAwaits returns next's hooks (none if nil) with AwaitStart and
// AwaitEnd wrapped to report each Await function still running after,
// on the process's clock, once its step has ended: its context is done
// (a timeout, the lease around it, a cancel, a failed sibling, the end
// of the flow), and the function ignores it. The flow has moved on, but
// such a call holds what was taken around it until it returns: a Mutex
// or Limiter slot, a KeyedMutex key, a ForEachLimit item's slot. report
// gets the function's context, which has the values of the flow's (a
// job's ID, a span), and how long ago the step ended; it is called again
// as the function returns, with returned set, once the first call has
// returned. A goroutine dump
// (/debug/pprof/goroutine?debug=2) shows where the function waits.
func lateAwaits(next *asyncsteps.Hooks, after time.Duration,
	report func(ctx context.Context, late time.Duration, returned bool)) *asyncsteps.Hooks {
	var h asyncsteps.Hooks
	if next != nil {
		h = *next
	}
	start, end := h.AwaitStart, h.AwaitEnd
	h.AwaitStart = func(ctx context.Context) context.Context {
		if start != nil {
			if c := start(ctx); c != nil {
				ctx = c
			}
		}
		w := &lateWatch{}
		ctx = context.WithValue(ctx, lateWatchKey{}, w)
		w.stop = context.AfterFunc(ctx, func() { w.stepEnded(ctx, after, report) })
		return ctx
	}
	h.AwaitEnd = func(ctx context.Context, err *asyncsteps.Error) {
		if w, ok := ctx.Value(lateWatchKey{}).(*lateWatch); ok {
			w.returned(ctx, report)
		}
		if end != nil {
			end(ctx, err)
		}
	}
	return &h
}

type lateWatchKey struct{}

// lateWatch is the watch of one Await call: armed as its context ends,
// reported if the function has not returned after the delay.
type lateWatch struct {
	stop     func() bool // of the context.AfterFunc that arms it
	mu       sync.Mutex
	ended    time.Time // when the step ended; zero while it runs
	timer    *time.Timer
	done     bool // the function has returned
	reported bool
}

func (w *lateWatch) stepEnded(ctx context.Context, after time.Duration,
	report func(context.Context, time.Duration, bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return // the engine ends the context once the function has returned
	}
	w.ended = time.Now()
	w.timer = time.AfterFunc(after, func() {
		// Under the lock: a function that returns meanwhile reports its
		// return once this report has been made, not before or during it.
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.reported = !w.done; w.reported {
			report(ctx, after, false)
		}
	})
}

func (w *lateWatch) returned(ctx context.Context, report func(context.Context, time.Duration, bool)) {
	w.stop()
	w.mu.Lock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	reported, ended := w.reported, w.ended
	w.mu.Unlock()
	if reported {
		report(ctx, time.Since(ended), true)
	}
}

// An Await function that ignores its context outlives its step, which
// timed out: the flow has ended, but the call, and what it holds, goes
// on. Hooks report it once it has run 50ms past its step's end, and
// again as it returns.
func ExampleHooks_lateAwait() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	reported, returned := make(chan struct{}), make(chan struct{})
	loop.SetHooks(lateAwaits(nil, 50*time.Millisecond, func(ctx context.Context, late time.Duration, done bool) {
		if !done {
			fmt.Printf("job %v: an Await function runs %v after its step ended\n", ctx.Value(jobKey{}), late)
			close(reported)
			return
		}
		fmt.Printf("job %v: it has returned\n", ctx.Value(jobKey{}))
		close(returned)
	}))
	deaf := make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(10 * time.Millisecond)
		as.Await(func(context.Context) (any, error) {
			<-deaf // a client without a timeout
			return nil, nil
		})
	})
	_, err := r.Run(context.WithValue(context.Background(), jobKey{}, "x1"))
	fmt.Println(err)
	<-reported
	close(deaf)
	<-returned
	// Output:
	// Timeout
	// job x1: an Await function runs 50ms after its step ended
	// job x1: it has returned
}

// The watch reports a call's return after its late report, never while
// that report runs: the function that returns meanwhile waits for it.
// Both reports came on goroutines of their own, the return's possibly
// first, or while the late one still ran.
func TestLateAwaitsReportsTheReturnAfterTheLateReport(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	deaf := make(chan struct{})
	var inLate atomic.Bool
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	overlapped, returned := make(chan struct{}, 1), make(chan struct{})
	loop.SetHooks(lateAwaits(nil, time.Millisecond, func(_ context.Context, _ time.Duration, done bool) {
		if done {
			if inLate.Load() {
				overlapped <- struct{}{}
			}
			note("returned")
			close(returned)
			return
		}
		inLate.Store(true)
		close(deaf) // the function returns while its late report runs
		select {
		case <-overlapped:
			t.Error("the return was reported while the late report ran")
		case <-time.After(50 * time.Millisecond):
		}
		inLate.Store(false)
		note("late")
	}))
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Millisecond)
		as.Await(func(context.Context) (any, error) {
			<-deaf
			return nil, nil
		})
	})
	_, err := r.Run(context.Background())
	wantError(t, err, asyncsteps.Timeout, "")
	<-returned
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(order); got != "[late returned]" {
		t.Errorf("reports %s, want [late returned]", got)
	}
}
