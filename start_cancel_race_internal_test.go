package asyncsteps

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
)

// The races of a Root's start and cancel, forced with the hooks that run
// between a check of the flow's running state and what the caller does
// once it has found it so.

// onceHook sets *hook to f for one call, until the test ends: the starts
// and cancels that f makes pass the hook by.
func onceHook(t *testing.T, hook *func(), f func()) {
	t.Helper()
	*hook = func() {
		*hook = nil
		f()
	}
	t.Cleanup(func() { *hook = nil })
}

// waits makes steps that wait: each notes in trace that it ran, and its
// cancel handler that it was cancelled; held is the step that ran last.
type waits struct {
	trace []string
	held  AsyncSteps
}

func (w *waits) step(name string) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		w.trace = append(w.trace, name)
		w.held = as
		as.SetCancel(func(AsyncSteps) { w.trace = append(w.trace, "cancel "+name) })
	}
}

// startPanic returns what start panicked with, "" if it did not.
func startPanic(start func()) (msg string) {
	defer func() { msg, _ = recover().(string) }()
	start()
	return ""
}

// Two goroutines start one idle Root at once: both find it not running,
// and the other one claims it first. Its execution begins, waits, and a
// cancel is asked of it before this one's claim fails. The loser panics
// as any second start does, and leaves the winner's execution alone: the
// cancel applies, and the winner ends cancelled.
func TestLosingStartKeepsTheWinnersCancel(t *testing.T) {
	t.Run("Cancel", func(t *testing.T) {
		loseToCancelledWinner(t, "Execute", func(r *Root) { r.Execute() },
			func(r *Root) <-chan Result { return r.Promise() },
			func(r *Root) { r.Cancel() })
	})
	t.Run("the end of the context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			loseToCancelledWinner(t, "Run", func(r *Root) { _, _ = r.Run(context.Background()) },
				func(r *Root) <-chan Result { return r.PromiseContext(ctx) },
				func(*Root) {
					cancel()
					synctest.Wait() // the watch of ctx has requested the cancel
				})
		})
	})
}

// loseToCancelledWinner starts r with lose, method, while in the hook
// between lose's check and its claim another start (win) claims r, runs
// to its wait, and is cancelled (cancel), on a TestTool that no goroutine
// drives until lose returns.
func loseToCancelledWinner(t *testing.T, method string, lose func(*Root), win func(*Root) <-chan Result, cancel func(*Root)) {
	t.Helper()
	tt := NewTestTool()
	r := New(WithTool(tt))
	var w waits
	r.Add(w.step("step"))
	var won <-chan Result
	onceHook(t, &testHookBeforeClaim, func() {
		won = win(r)
		tt.Run() // the winner waits
		cancel(r)
	})
	if got, want := startPanic(func() { lose(r) }), "asyncsteps: "+method+" called on a running flow"; got != want {
		t.Fatalf("the losing %s panicked with %q, want %q", method, got, want)
	}
	tt.Run()
	wantCancelled(t, "the winner", won)
	if want := []string{"step", "cancel step"}; !slices.Equal(w.trace, want) {
		t.Errorf("trace %q, want %q", w.trace, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left on the tool, want 0", n)
	}
}

// A Cancel called while the Root's first execution waits finds it
// running; before it asks for the cancel, that execution ends and a
// second one starts and waits. The Cancel was meant for the first one,
// which has ended: it does nothing, and the second one goes on to its
// own end.
func TestCancelOutrunByTheEndSparesTheNextExecution(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var w waits
	r.Add(w.step("first"))
	first := r.Promise()
	tt.Run()
	var second <-chan Result
	onceHook(t, &testHookCancelChecked, func() {
		w.held.Success("one")
		tt.Run() // the first execution ends
		r.Add(w.step("second"))
		second = r.Promise()
		tt.Run() // the second one waits
	})
	r.Cancel()
	tt.Run()

	wantResult(t, "the first execution", first, "one")
	select {
	case res := <-second:
		t.Fatalf("the second execution ended with %v, %v: the Cancel meant for the first one reached it", res.Args, res.Err)
	default:
	}
	w.held.Success("two")
	tt.Run()
	wantResult(t, "the second execution", second, "two")
	if want := []string{"first", "second"}; !slices.Equal(w.trace, want) {
		t.Errorf("trace %q, want %q", w.trace, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left on the tool, want 0", n)
	}
}

// As above, but a Cancel of the second execution is requested before the
// first Cancel goes on: that one must not take the second one's request
// for a stale one and replace it with its own, which the second
// execution would drop. The second execution ends cancelled, once.
func TestCancelOutrunByTheEndKeepsTheNextOnesCancel(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var w waits
	r.Add(w.step("first"))
	first := r.Promise()
	tt.Run()
	var second <-chan Result
	onceHook(t, &testHookCancelChecked, func() {
		w.held.Success("one")
		tt.Run()
		r.Add(w.step("second"))
		second = r.Promise()
		tt.Run()
		r.Cancel() // the second one's, not applied yet
	})
	r.Cancel()
	tt.Run()

	wantResult(t, "the first execution", first, "one")
	wantCancelled(t, "the second execution", second)
	if want := []string{"first", "second", "cancel second"}; !slices.Equal(w.trace, want) {
		t.Errorf("trace %q, want %q", w.trace, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d events left on the tool, want 0", n)
	}
}

// wantResult checks that ch holds a success with the one argument arg.
func wantResult(t *testing.T, what string, ch <-chan Result, arg any) {
	t.Helper()
	select {
	case res := <-ch:
		if res.Err != nil || !slices.Equal(res.Args, []any{arg}) {
			t.Errorf("%s ended with %v, %v; want [%v], nil", what, res.Args, res.Err, arg)
		}
	default:
		t.Errorf("%s has not ended", what)
	}
}

// wantCancelled checks that ch holds the Result of a cancel: no
// arguments, context.Canceled.
func wantCancelled(t *testing.T, what string, ch <-chan Result) {
	t.Helper()
	select {
	case res := <-ch:
		if res.Err != context.Canceled || res.Args != nil {
			t.Errorf("%s ended with %v, %v; want nil, context.Canceled", what, res.Args, res.Err)
		}
	default:
		t.Errorf("%s was not cancelled: it still waits", what)
	}
}

// A cancel request of an execution that has ended (one applied, or one
// made as its execution ended) is stale: it stops no later execution,
// which drops it as it begins and passes it by if it comes later, and a
// Cancel of the execution that runs replaces it.
func TestStaleCancelRequestStopsNothing(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var w waits
	r.Add(w.step("first"))
	first := r.Promise()
	tt.Run()
	r.Cancel()
	tt.Run()
	wantCancelled(t, "the first execution", first)
	stale := r.fl.stop.Load()
	if stale == nil {
		t.Fatal("the first execution's cancel left no request")
	}

	r.Add(w.step("second")).Add(w.step("third"))
	second := r.Promise()
	tt.Run()
	if r.fl.stop.Load() != nil {
		t.Error("the second execution kept the first one's request")
	}
	r.fl.stop.Store(stale) // as if made as the first one ended, and late
	w.held.Success()
	tt.Run()
	r.fl.stop.Store(stale)
	r.Cancel()
	tt.Run()

	wantCancelled(t, "the second execution", second)
	if want := []string{"first", "cancel first", "second", "third", "cancel third"}; !slices.Equal(w.trace, want) {
		t.Errorf("trace %q, want %q", w.trace, want)
	}
}

// As TestLosingStartKeepsTheWinnersCancel, for a Root made without a
// tool, which its first start puts on DefaultTool: both starts find it
// without its tool, and the other one sets it up, claims it, and runs to
// its wait before this one goes on. The loser neither sets the Root up
// again under the running flow nor races with the winner's set-up: it
// panics, and the winner's cancel applies.
func TestLosingFirstStartOfARootWithoutAToolKeepsTheWinnersCancel(t *testing.T) {
	r := New()
	waiting := make(chan AsyncSteps, 1)
	cancelled := make(chan struct{})
	r.Add(func(as AsyncSteps, _ ...any) {
		as.SetCancel(func(AsyncSteps) { close(cancelled) })
		waiting <- as
	})
	var won <-chan Result
	onceHook(t, &testHookSetUpZero, func() {
		won = r.Promise()
		<-waiting // the winner waits on DefaultTool
	})
	if got, want := startPanic(func() { r.Execute() }), "asyncsteps: Execute called on a running flow"; got != want {
		t.Fatalf("the losing Execute panicked with %q, want %q", got, want)
	}
	r.Cancel()
	roundTrip(DefaultTool()) // the cancel's task, queued before, has run
	select {
	case <-cancelled:
	default:
		t.Fatal("the winner's cancel handler did not run: the cancel was lost")
	}
	wantCancelled(t, "the winner", won)
}

// roundTrip returns once tool has run a callback scheduled now: one
// scheduled before it has run by then.
func roundTrip(tool Tool) {
	done := make(chan struct{})
	tool.Immediate(func() { close(done) })
	<-done
}
