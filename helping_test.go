package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// awaitOn returns an Await function that traces, as name, whether it runs
// on the goroutine caller, and succeeds with name.
func awaitOn(tr *trace, name string, caller *int64) AwaitFunc {
	return func(context.Context) (any, error) {
		tr.add("%s@%s", name, whose(*caller))
		return name, nil
	}
}

// whose names the goroutine that calls it: "caller" when it is caller,
// else "other".
func whose(caller int64) string {
	if goid() == caller {
		return "caller"
	}
	return "other"
}

// runHelpingOn runs r with RunHelping on a goroutine of its own, whose id
// it stores in caller before the flow starts, and returns what RunHelping
// returned.
func runHelpingOn(ctx context.Context, r *Root, caller *int64) ([]any, error) {
	type outcome struct {
		args []any
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		*caller = goid()
		args, err := r.RunHelping(ctx)
		done <- outcome{args, err}
	}()
	o := <-done
	return o.args, o.err
}

// The Await functions of a flow run one after another on the goroutine
// that waits in RunHelping: no goroutine of the loop's is started for
// them.
func TestRunHelpingRunsAwaitOnTheCaller(t *testing.T) {
	l := newTestLoop(t)
	l.awaitWorkers.idleFor = guard // a goroutine started for them would be kept
	var tr trace
	var caller int64
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) { tr.add("s1@%s", whose(caller)) })
	r.Await(awaitOn(&tr, "a1", &caller))
	r.Add(func(as AsyncSteps, args ...any) { tr.add("s2%v", args) })
	r.Await(awaitOn(&tr, "a2", &caller))
	// The next function may start the moment the last one's step
	// completes: the caller takes it all the same.
	onCaller := 0
	r.Repeat(50, func(as AsyncSteps, _ int) {
		as.Await(func(context.Context) (any, error) {
			if goid() == caller {
				onCaller++
			}
			return nil, nil
		})
	})
	r.Add(func(as AsyncSteps, _ ...any) { tr.add("%d of 50 on the caller", onCaller) })
	r.Await(awaitOn(&tr, "a3", &caller))
	args, err := runHelpingOn(context.Background(), r, &caller)
	if err != nil {
		t.Fatal(err)
	}
	tr.add("end%v", args)
	if got, want := tr.String(), "s1@other a1@caller s2[a1] a2@caller 50 of 50 on the caller a3@caller end[a3]"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if n := idleAwaitWorkers(l); n != 0 {
		t.Errorf("%d goroutines of the loop's kept, want 0: none started", n)
	}
}

// An Await function that starts while the caller runs another one runs on
// a goroutine of the loop's, at the same time.
func TestRunHelpingGivesASecondAwaitToTheLoop(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	var both sync.WaitGroup
	both.Add(2)
	branch := func(name string) AwaitFunc {
		return func(context.Context) (any, error) {
			tr.add("%s@%s", name, whose(caller))
			both.Done()
			both.Wait() // each waits for the other: they run at once
			return nil, nil
		}
	}
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Await(branch("b1"))
		p.Await(branch("b2"))
	})
	r.Await(awaitOn(&tr, "after", &caller))
	if _, err := runHelpingOn(ctxFor(t), r, &caller); err != nil {
		t.Fatal(err)
	}
	// b2 is handed over first or second, whichever goroutine gets there.
	got := tr.String()
	if got != "b1@caller b2@other after@caller" && got != "b2@other b1@caller after@caller" {
		t.Errorf("trace %q, want b1@caller and b2@other, then after@caller", got)
	}
}

// waitOrNote waits for ch, or traces note after guard: a function that
// would wait for ever makes a failing trace, not a hung test.
func waitOrNote(tr *trace, ch <-chan struct{}, note string) {
	select {
	case <-ch:
	case <-time.After(guard):
		tr.add("%s", note)
	}
}

// ctxFor returns a context that ends after guard, with the test.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// A panic in an Await function run by the caller fails its step with
// InternalError, and RunHelping returns as usual.
func TestRunHelpingAwaitPanic(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	r := New(WithTool(l))
	r.Await(func(context.Context) (any, error) {
		tr.add("a@%s", whose(caller))
		panic("boom")
	}, func(as AsyncSteps, code string) {
		var pe *PanicError
		tr.add("handler %s %q panic=%v", code, as.State().ErrorInfo, errors.As(as.State().LastException, &pe))
	})
	_, err := runHelpingOn(ctxFor(t), r, &caller)
	tr.add("end %v", err)
	want := `a@caller handler InternalError "panic: boom" panic=true end InternalError: panic: boom`
	if got := tr.String(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// An Await function that calls runtime.Goexit on the goroutine of
// RunHelping ends that goroutine, which so takes no function any more:
// the flow's next Await functions run on the loop's goroutines, and the
// flow ends, with nothing left running. Had the goroutine been freed for
// them, as one whose function returned is, they would have waited in its
// channel for ever. In a bubble, a flow that never ends is a deadlock,
// reported at once.
func TestRunHelpingAwaitsAfterAGoexit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		endable bool // RunHelping watches ctx, and, gone, leaves a watch
	}{{"context.Background", false}, {"a context that can end", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLoop()
				defer l.Close()
				var tr trace
				ended := make(chan struct{})
				l.SetHooks(&Hooks{FlowEnd: func(_ context.Context, err error) {
					tr.add("flow end: %v", err)
					close(ended)
				}})
				var caller int64
				r := New(WithTool(l))
				r.Await(func(context.Context) (any, error) {
					runtime.Goexit()
					return nil, nil
				}, func(as AsyncSteps, code string) {
					tr.add("handler %s", code)
					as.Await(awaitOn(&tr, "second", &caller))
					as.Await(awaitOn(&tr, "third", &caller))
				})
				ctx := context.Background()
				if tc.endable {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
				}
				gone := make(chan struct{})
				go func() {
					defer close(gone)
					caller = goid()
					_, err := r.RunHelping(ctx)
					tr.add("RunHelping returned %v", err)
				}()
				<-gone
				<-ended
				l.Close()
				synctest.Wait() // the watch of ctx, if any, has ended too
				if got, want := tr.String(), "handler InternalError second@other third@other flow end: <nil>"; got != want {
					t.Errorf("trace %q, want %q", got, want)
				}
			})
		})
	}
}

// An Await function that calls runtime.Goexit on the caller ends the
// caller's goroutine: RunHelping does not return. The step fails with
// InternalError, the flow goes on from there, and the end of ctx still
// cancels it; the loop goes on, and leaves no goroutine once closed.
func TestRunHelpingAwaitGoexit(t *testing.T) {
	before := runtime.NumGoroutine()
	l := NewLoop()
	defer l.Close()
	var tr trace
	ended := make(chan struct{})
	l.SetHooks(&Hooks{FlowEnd: func(_ context.Context, err error) {
		tr.add("flow end: %v", err)
		close(ended)
	}})
	waiting := make(chan struct{})
	r := New(WithTool(l))
	r.Await(func(context.Context) (any, error) {
		runtime.Goexit()
		return nil, nil
	}, func(as AsyncSteps, code string) {
		tr.add("handler %s %q", code, as.State().ErrorInfo)
		// Recover into a step that waits until the flow is cancelled.
		as.Add(func(as AsyncSteps, _ ...any) {
			as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
			tr.add("waiting")
			close(waiting)
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, err := r.RunHelping(ctx)
		tr.add("RunHelping returned %v", err)
	}()
	wait(t, gone, "the end of the goroutine of RunHelping")
	wait(t, waiting, "the step after the Goexit")
	tr.add("caller gone")
	cancel()
	wait(t, ended, "the end of the flow")
	want := `handler InternalError "` + goexitInfo + `" waiting caller gone cancelled flow end: context canceled`
	if got := tr.String(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	// The loop goes on.
	l.SetHooks(nil)
	var next trace
	var caller int64
	again := New(WithTool(l))
	again.Await(awaitOn(&next, "next", &caller))
	if _, err := runHelpingOn(ctxFor(t), again, &caller); err != nil || next.String() != "next@caller" {
		t.Errorf("the next flow: trace %q, error %v; want next@caller, no error", next.String(), err)
	}
	l.Close()
	waitGoroutineCount(t, before)
}

// The end of ctx while the caller runs an Await function cancels the flow
// at once, which cancels the function's context; RunHelping returns once
// the function has returned, after the end of the flow.
func TestRunHelpingCtxEndsDuringAwait(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	started, ended := make(chan struct{}), make(chan struct{})
	l.SetHooks(&Hooks{FlowEnd: func(_ context.Context, err error) {
		tr.add("flow end: %v", err)
		close(ended)
	}})
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.SetCancel(func(AsyncSteps) { tr.add("outer cancelled") })
		as.Await(func(ctx context.Context) (any, error) {
			tr.add("a@%s", whose(caller))
			close(started)
			waitOrNote(&tr, ctx.Done(), "a not cancelled")
			waitOrNote(&tr, ended, "the flow not ended") // it ends while the function runs
			tr.add("a returns: %v", ctx.Err())
			return nil, ctx.Err()
		}, func(as AsyncSteps, code string) { tr.add("handler %s", code) })
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := runHelpingOn(ctx, r, &caller)
	tr.add("returned %v", err)
	want := "a@caller outer cancelled flow end: context canceled a returns: context canceled returned context canceled"
	if got := tr.String(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want one matching context.Canceled", err)
	}
}

// Root.Cancel while the caller runs an Await function cancels the
// function's context; RunHelping returns once it has returned.
func TestRunHelpingCancelDuringAwait(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		tr.add("a@%s", whose(caller))
		r.Cancel()
		waitOrNote(&tr, ctx.Done(), "a not cancelled")
		tr.add("a returns: %v", ctx.Err())
		return "late", nil
	}, func(as AsyncSteps, code string) { tr.add("handler %s", code) })
	args, err := runHelpingOn(context.Background(), r, &caller)
	tr.add("returned %v %v", args, err)
	want := "a@caller a returns: context canceled returned [] context canceled"
	if got := tr.String(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// The deadline of ctx passing while the caller runs an Await function
// times the step out, as with Run: its error handler may recover.
func TestRunHelpingDeadlineDuringAwait(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		tr.add("a@%s", whose(caller))
		waitOrNote(&tr, ctx.Done(), "a not cancelled")
		tr.add("a: %v", ctx.Err())
		return nil, ctx.Err()
	}, func(as AsyncSteps, code string) {
		tr.add("handler %s", code)
		as.Success("fallback")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	args, err := runHelpingOn(ctx, r, &caller)
	tr.add("returned %v %v", args, err)
	// The handler and the function's end race: both follow the timeout.
	got := tr.String()
	a, b := "a@caller a: context deadline exceeded handler Timeout returned [fallback] <nil>",
		"a@caller handler Timeout a: context deadline exceeded returned [fallback] <nil>"
	if got != a && got != b {
		t.Errorf("trace %q, want %q", got, a)
	}
}

// A Loop closed while the caller runs an Await function cancels the
// function's context; RunHelping returns once it has returned, with the
// InternalError of a closed loop.
func TestRunHelpingLoopClosedDuringAwait(t *testing.T) {
	before := runtime.NumGoroutine()
	l := NewLoop()
	var tr trace
	var caller int64
	started := make(chan struct{})
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		tr.add("a@%s", whose(caller))
		close(started)
		waitOrNote(&tr, ctx.Done(), "a not cancelled")
		tr.add("a: %v", ctx.Err())
		return nil, nil
	})
	go func() {
		<-started
		l.Close()
	}()
	_, err := runHelpingOn(ctxFor(t), r, &caller)
	tr.add("returned %v", err)
	want := "a@caller a: context canceled returned InternalError: the flow's loop is closed"
	if got := tr.String(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	waitGoroutineCount(t, before)
}

// On a TestTool, RunHelping is Run: it drives the tool, and an Await
// function runs on a goroutine of its own.
func TestRunHelpingOnATestToolIsRun(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	var caller int64
	r := New(WithTool(tt))
	r.Await(awaitOn(&tr, "a", &caller))
	args, err := runHelpingOn(ctxFor(t), r, &caller)
	tr.add("returned %v %v", args, err)
	if got, want := tr.String(), "a@other returned [a] <nil>"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// Handing an Await function to the caller costs no allocation that
// handing it to a goroutine of the loop's does not.
func TestRunHelpingAllocatesNoMoreThanRun(t *testing.T) {
	runs, helps := awaitFlowAllocs(t, 2, (*Root).Run), awaitFlowAllocs(t, 2, (*Root).RunHelping)
	if helps > runs {
		t.Errorf("a flow of two Awaits allocates %.1f objects with RunHelping, %.1f with Run", helps, runs)
	}
}

// BenchmarkRunHelping runs a flow of one Await with Run and with
// RunHelping, under a context that never ends and under one that can: the
// allocations per op show what lending the goroutine costs.
func BenchmarkRunHelping(b *testing.B) {
	l := NewLoop()
	defer l.Close()
	l.awaitWorkers.idleFor = time.Minute
	fn := func(context.Context) (any, error) { return nil, nil }
	ways := []struct {
		name string
		run  func(*Root, context.Context) ([]any, error)
	}{{"Run", (*Root).Run}, {"RunHelping", (*Root).RunHelping}}
	for _, way := range ways {
		for _, cancellable := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/cancellable=%v", way.name, cancellable), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ctx, cancel := context.Background(), func() {}
					if cancellable {
						ctx, cancel = context.WithCancel(ctx)
					}
					r := New(WithTool(l))
					r.Await(fn)
					if _, err := way.run(r, ctx); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
			})
		}
	}
}

// RunHelping takes its promise channel, two allocations, from the calls
// that returned before: a flow of one Await costs it two objects fewer
// than Run, whose channel is its own.
func TestRunHelpingReusesItsChannel(t *testing.T) {
	if racing {
		t.Skip("the race detector's sync.Pool drops channels at random")
	}
	runs, helps := awaitFlowAllocs(t, 1, (*Root).Run), awaitFlowAllocs(t, 1, (*Root).RunHelping)
	if helps != runs-2 {
		t.Errorf("a flow of one Await allocates %.1f objects with RunHelping, %.1f with Run: want two fewer", helps, runs)
	}
}

// awaitFlowAllocs returns the objects a flow of n Awaits of a function
// that returns at once allocates, run by run on a loop of its own whose
// Await goroutines stay for the whole measure.
func awaitFlowAllocs(t *testing.T, n int, run func(*Root, context.Context) ([]any, error)) float64 {
	t.Helper()
	l := newTestLoop(t)
	l.awaitWorkers.idleFor = guard
	fn := func(context.Context) (any, error) { return nil, nil }
	return testing.AllocsPerRun(200, func() {
		r := New(WithTool(l))
		for range n {
			r.Await(fn)
		}
		if _, err := run(r, context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
