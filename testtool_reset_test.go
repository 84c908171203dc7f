package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// endingCtx is a context whose Err the test sets, without a Done channel:
// Root.Run on a TestTool looks at it between the tool's events, so that
// the test decides in which event the context ends.
type endingCtx struct {
	context.Context
	err atomic.Pointer[error]
}

func newEndingCtx() *endingCtx { return &endingCtx{Context: context.Background()} }

func (c *endingCtx) end(err error)         { c.err.Store(&err) }
func (c *endingCtx) Done() <-chan struct{} { return nil }

func (c *endingCtx) Err() error {
	if err := c.err.Load(); err != nil {
		return *err
	}
	return nil
}

// runWithin runs r under ctx, failing the test if Run has not returned
// within 10s: on the old code, a stop that ResetEvents dropped left Run
// waiting for ever.
func runWithin(t *testing.T, r *Root, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run still waits 10s after its context ended: the stop was lost")
		return nil
	}
}

// A PromiseContext whose context ends while its flow waits: the task that
// applies the end survives ResetEvents, and the flow stops when the tool
// runs next. A cancel cancels the waiting step (its cancel handler runs);
// the deadline times it out (its cancel handler, then its error handler).
// Before, ResetEvents dropped the cancel's task, and the flow waited on
// with its cancel requested; the deadline was lost.
func TestTestToolResetEventsKeepsAContextEnd(t *testing.T) {
	cases := []struct {
		name  string
		want  error
		trace string
	}{
		{"cancel", context.Canceled, "wait cancelled"},
		{"deadline", context.DeadlineExceeded, "wait cancelled handler:Timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt := NewTestTool()
				var tr trace
				r := New(WithTool(tt))
				r.Add(func(as AsyncSteps, _ ...any) {
					tr.add("wait")
					as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
				}, func(_ AsyncSteps, code string) { tr.add("handler:%s", code) })
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				ch := r.PromiseContext(ctx)
				tt.Run()
				if c.want == context.Canceled {
					cancel()
				} else {
					time.Sleep(time.Second) // the bubble's clock: the deadline passes
				}
				synctest.Wait() // context.AfterFunc has posted the stop
				tt.ResetEvents()
				if n := tt.Pending(); n != 1 {
					t.Fatalf("Pending() = %d after ResetEvents, want 1: the context's %s", n, c.name)
				}
				tt.Run()
				select {
				case res := <-ch:
					if !errors.Is(res.Err, c.want) {
						t.Errorf("Result.Err = %v, want one matching %v", res.Err, c.want)
					}
				default:
					t.Fatalf("the flow still waits after its context's %s", c.name)
				}
				if got := tr.String(); got != c.trace {
					t.Errorf("trace %q, want %q", got, c.trace)
				}
				if n := tt.Pending(); n != 0 {
					t.Errorf("Pending() = %d at the end, want 0", n)
				}
			})
		})
	}
}

// Root.Run's stops survive a ResetEvents that a callback calls between
// the stop's posting and its turn: the cancel of Run's context, its
// deadline, and past the deadline the timeout at once of the next step
// that waits. Run sees its context end once only, so before, a dropped
// stop left Run waiting for ever.
func TestTestToolResetEventsKeepsRunsStops(t *testing.T) {
	cases := []struct {
		name string
		end  error
		// late: the deadline's timeout is recovered, and the next step
		// waits: the ResetEvents comes before its timeout instead.
		late      bool
		wantTrace string
		wantErr   error
	}{
		{"cancel", context.Canceled, false, "wait reset cancelled", context.Canceled},
		{"deadline", context.DeadlineExceeded, false, "wait reset cancelled handler:Timeout", context.DeadlineExceeded},
		{"after the deadline", context.DeadlineExceeded, true,
			"wait cancelled handler:Timeout wait2 reset cancelled2", context.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tt := NewTestTool()
			ctx := newEndingCtx()
			var tr trace
			reset := func() {
				tr.add("reset")
				tt.ResetEvents()
			}
			r := New(WithTool(tt))
			r.Add(func(as AsyncSteps, _ ...any) {
				tr.add("wait")
				ctx.end(c.end) // Run posts its stop after this event
				if !c.late {
					tt.Immediate(reset) // queued before the stop
				}
				as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
			}, func(as AsyncSteps, code string) {
				tr.add("handler:%s", code)
				if c.late {
					as.Success()
				}
			})
			r.Add(func(as AsyncSteps, _ ...any) {
				tr.add("wait2")
				tt.Immediate(reset) // queued before the timeout of the wait
				as.SetCancel(func(AsyncSteps) { tr.add("cancelled2") })
			})
			err := runWithin(t, r, ctx)
			if !errors.Is(err, c.wantErr) {
				t.Errorf("Run err = %v, want one matching %v", err, c.wantErr)
			}
			if got := tr.String(); got != c.wantTrace {
				t.Errorf("trace %q, want %q", got, c.wantTrace)
			}
			if n := tt.Pending(); n != 0 {
				t.Errorf("Pending() = %d after Run, want 0", n)
			}
		})
	}
}

// The deadline of Run's context that a callback of the flow, driving its
// own TestTool (a misuse), comes to is deferred until the callback
// returns, and ResetEvents keeps the deferred task as any other stop. A
// deadline, unlike a cancel, is not seen by the flow at its next step:
// the error of the reentry, which a handler recovers from, lets the flow
// go on, and only that task times it out. Dropped, it left the next step
// waiting for ever, and Run with it: Run sees its context end once.
func TestTestToolResetEventsKeepsADeadlineDeferredByReentry(t *testing.T) {
	tt := NewTestTool()
	ctx := newEndingCtx()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		ctx.end(context.DeadlineExceeded)
		tt.Immediate(func() {}) // the flow yields: Run posts the deadline's stop
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		tr.add("drive")
		tt.NextEvent() // the deadline's stop: deferred
		tt.Immediate(func() { tr.add("reset"); tt.ResetEvents() })
	}, func(as AsyncSteps, code string) {
		tr.add("handler:%s", code)
		as.Success()
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		tr.add("wait")
		as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
	})
	err := runWithin(t, r, ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run err = %v, want one matching context.DeadlineExceeded", err)
	}
	if got, want := tr.String(), "drive handler:InternalError reset"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after Run, want 0", n)
	}
}

// A context's stop that ResetEvents kept is dropped when its flow ends
// before the tool applies it, and never reaches the Root's next
// execution: a cancel, and a deadline. The error raised after the stop
// ends the flow: cancelled for a cancel, which wins over it, with the
// error for a deadline, a timeout that has not reached the flow yet.
func TestTestToolResetEventsKeepsNoContextStopOfAnEndedFlow(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		name := map[bool]string{false: "cancel", true: "deadline"}[deadline]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkContextStopForgotten(t, deadline) })
		})
	}
}

func checkContextStopForgotten(t *testing.T, deadline bool) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.Add(func(as AsyncSteps, _ ...any) {
		if deadline {
			time.Sleep(time.Second) // the bubble's clock: the deadline passes
		} else {
			cancel()
		}
		synctest.Wait() // context.AfterFunc has posted the stop
		tt.ResetEvents()
		tr.add("kept:%d", tt.Pending())
		as.Error("Boom") // the flow ends before its next step
	})
	res := <-promiseRun(tt, r.PromiseContext(ctx))
	if e, ok := res.Err.(*Error); deadline && (!ok || e.Code != "Boom") {
		t.Errorf("first Result.Err = %#v, want Boom", res.Err)
	}
	if !deadline && !errors.Is(res.Err, context.Canceled) {
		t.Errorf("first Result.Err = %#v, want one matching context.Canceled", res.Err)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the flow ended, want 0", n)
	}

	r.Add(func(as AsyncSteps, _ ...any) {
		tr.add("again")
		as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
	})
	ch := r.PromiseContext(context.Background())
	tt.Run()
	if !r.Running() || tt.Pending() != 0 {
		t.Fatalf("next execution: running %v, Pending() = %d; want true, 0", r.Running(), tt.Pending())
	}
	r.Cancel()
	tt.Run()
	if res := <-ch; !errors.Is(res.Err, context.Canceled) {
		t.Errorf("next Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	if got, want := tr.String(), "kept:1 again cancelled"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// promiseRun runs tt until no event is left and returns ch, which then
// holds the flow's Result.
func promiseRun(tt *TestTool, ch <-chan Result) <-chan Result {
	tt.Run()
	return ch
}

// resultOf returns what the flow behind ch ended with, as "ok [args]",
// "Code" or "Code: info" for an *Error, or "none" while it runs.
func resultOf(ch <-chan Result) string {
	select {
	case res := <-ch:
		var e *Error
		switch {
		case res.Err == nil:
			return fmt.Sprintf("ok %v", res.Args)
		case errors.Is(res.Err, context.Canceled):
			return "canceled"
		case errors.As(res.Err, &e) && e.Info != "":
			return e.Code + ": " + e.Info
		case errors.As(res.Err, &e):
			return e.Code
		}
		return res.Err.Error()
	default:
		return "none"
	}
}

// A waiter on one TestTool that a holder on another lets into a Mutex (a
// Limiter's, too) holds the slot from that moment: ResetEvents keeps the
// admission, which the slot already counts, and the waiter enters when
// its tool runs next, then lets the next flow in; so too with a SyncWait
// hook, which reports the wait then. Cancelled before its tool runs, the
// waiter ends with its cancel, and gives the slot back. Before,
// ResetEvents dropped the admission: the waiter never entered, the slot
// stayed taken for good, and the third flow never entered.
func TestTestToolResetEventsKeepsAMutexAdmission(t *testing.T) {
	syncers := []struct {
		name   string
		make   func() Syncer
		hooked bool
	}{
		{"Mutex", func() Syncer { return NewMutex(1) }, false},
		{"KeyedMutex", func() Syncer { return NewKeyedMutex[string](1).Key("a") }, false},
		{"Limiter", func() Syncer { return NewLimiter(LimiterOptions{Concurrent: 1, MaxQueue: Unlimited}) }, false},
		{"KeyedLimiter", func() Syncer {
			return NewKeyedLimiter[string](LimiterOptions{Concurrent: 1, MaxQueue: Unlimited}).Key("a")
		}, false},
		{"Mutex SyncWait", func() Syncer { return NewMutex(1) }, true},
	}
	for _, s := range syncers {
		for _, cancelled := range []bool{false, true} {
			name := s.name + map[bool]string{false: "", true: " cancelled"}[cancelled]
			t.Run(name, func(t *testing.T) { checkAdmissionKept(t, s.make(), s.hooked, cancelled) })
		}
	}
}

func checkAdmissionKept(t *testing.T, m Syncer, hooked, cancelled bool) {
	holderTool, waiterTool := NewTestTool(), NewTestTool()
	var tr trace
	if hooked {
		waiterTool.SetHooks(&Hooks{SyncWait: func(_ Syncer, waited time.Duration) { tr.add("waited %v", waited) }})
	}
	var held AsyncSteps
	holder := New(WithTool(holderTool))
	holder.Sync(m, func(as AsyncSteps, _ ...any) {
		tr.add("holder in")
		as.WaitExternal()
		held = as
	})
	flowIn := func(tool *TestTool, name string) *Root {
		r := New(WithTool(tool))
		r.Sync(m, func(as AsyncSteps, _ ...any) {
			tr.add("%s in", name)
			as.Success(name)
		}, func(_ AsyncSteps, code string) { tr.add("%s handler:%s", name, code) })
		return r
	}
	waiter, third := flowIn(waiterTool, "waiter"), flowIn(holderTool, "third")
	holderCh := holder.Promise()
	holderTool.Run()
	waiterCh := waiter.Promise()
	waiterTool.Run() // queued behind the holder
	thirdCh := third.Promise()
	holderTool.Run() // queued behind the waiter

	held.Success()
	holderTool.Run() // the holder leaves: the waiter is let in
	waiterTool.ResetEvents()
	if n := waiterTool.Pending(); n != 1 {
		t.Errorf("waiter's tool: Pending() = %d after ResetEvents, want 1: the admission", n)
	}
	if cancelled {
		waiter.Cancel()
	}
	waiterTool.Run() // the waiter enters and leaves, or is cancelled
	holderTool.Run() // the third flow enters

	wantTrace, wantWaiter := "holder in waiter in third in", "ok [waiter]"
	if cancelled {
		wantTrace, wantWaiter = "holder in third in", "canceled"
	}
	if hooked {
		wantTrace = strings.Replace(wantTrace, "holder in", "holder in waited 0s", 1)
	}
	if got := tr.String(); got != wantTrace {
		t.Errorf("trace %q, want %q", got, wantTrace)
	}
	got := [3]string{resultOf(holderCh), resultOf(waiterCh), resultOf(thirdCh)}
	if want := [3]string{"ok []", wantWaiter, "ok [third]"}; got != want {
		t.Errorf("results (holder, waiter, third) %q, want %q", got, want)
	}
	if a, b := holderTool.Pending(), waiterTool.Pending(); a != 0 || b != 0 {
		t.Errorf("Pending() = %d, %d at the end, want 0, 0", a, b)
	}
	if n := KeysInUse(m); n > 0 {
		t.Errorf("%d keys in use at the end, want 0", n)
	}
}

// A flow on a TestTool that a Throttle's next period lets in, timed on
// another tool, enters after ResetEvents when its tool runs next: the
// Throttle counted it in that period. Before, ResetEvents dropped the
// admission, and the flow waited for ever.
func TestTestToolResetEventsKeepsAThrottleEntry(t *testing.T) {
	const period = time.Second
	first, waiterTool := NewTestTool(), NewTestTool()
	th := NewThrottle(1, period)
	var tr trace
	flowIn := func(tool *TestTool, name string) <-chan Result {
		r := New(WithTool(tool))
		r.Sync(th, func(as AsyncSteps, _ ...any) {
			tr.add("%s in at %v", name, offset(tool))
			as.Success(name)
		})
		return r.Promise()
	}
	firstCh := flowIn(first, "first")
	first.Advance(0) // enters; the period is timed on first
	waiterCh := flowIn(waiterTool, "waiter")
	waiterTool.Run() // queued for the next period
	first.Advance(period)
	// The next period is timed on the waiter's tool: ResetEvents ends it,
	// and keeps the admission.
	waiterTool.ResetEvents()
	if n := waiterTool.Pending(); n != 1 {
		t.Errorf("Pending() = %d after ResetEvents, want 1: the admission", n)
	}
	waiterTool.Run()

	if got, want := tr.String(), "first in at 0s waiter in at 0s"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	got := [2]string{resultOf(firstCh), resultOf(waiterCh)}
	if want := [2]string{"ok [first]", "ok [waiter]"}; got != want {
		t.Errorf("results (first, waiter) %q, want %q", got, want)
	}
	if n := waiterTool.Pending(); n != 0 {
		t.Errorf("Pending() = %d at the end, want 0", n)
	}
}

// A holder whose waiting step inside a Mutex section was completed from
// outside its callback leaves the section after ResetEvents, when its
// tool runs next: the completion was made, and nothing could make it
// again. The flow waiting on another tool then enters. Before,
// ResetEvents dropped the completion: the holder waited for ever inside
// the section, and the slot was never given back.
func TestTestToolResetEventsKeepsAHoldersCompletion(t *testing.T) {
	m := NewMutex(1)
	holderTool, waiterTool := NewTestTool(), NewTestTool()
	var tr trace
	var held AsyncSteps
	holder := New(WithTool(holderTool))
	holder.Sync(m, func(as AsyncSteps, _ ...any) {
		tr.add("holder in")
		as.WaitExternal()
		held = as
	})
	holder.Add(func(as AsyncSteps, args ...any) { tr.add("holder out %v", args) })
	waiter := New(WithTool(waiterTool))
	waiter.Sync(m, func(as AsyncSteps, _ ...any) { tr.add("waiter in") })
	holderCh := holder.Promise()
	holderTool.Run()
	waiterCh := waiter.Promise()
	waiterTool.Run() // queued behind the holder

	held.Success("done")
	holderTool.ResetEvents()
	if n := holderTool.Pending(); n != 1 {
		t.Errorf("Pending() = %d after ResetEvents, want 1: the completion", n)
	}
	if held.IsValid() {
		t.Error("the completed step is valid again after ResetEvents")
	}
	holderTool.Run() // the holder leaves: the waiter is let in
	waiterTool.Run()

	if got, want := tr.String(), "holder in holder out [done] waiter in"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	got := [2]string{resultOf(holderCh), resultOf(waiterCh)}
	if want := [2]string{"ok []", "ok []"}; got != want {
		t.Errorf("results (holder, waiter) %q, want %q", got, want)
	}
}

// The result of an Await function (AwaitChan here), delivered to the
// flow's TestTool once the function returned, survives ResetEvents: the
// Await step completes when the tool runs next. So too through a
// decorator of the step, whose Success runs on the tool. Before,
// ResetEvents dropped the delivery, and the flow waited for ever: the
// function had returned, and nothing else would complete the step.
func TestTestToolResetEventsKeepsAnAwaitResult(t *testing.T) {
	for _, decorated := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "decorated"}[decorated]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkAwaitResultKept(t, decorated) })
		})
	}
}

func checkAwaitResultKept(t *testing.T, decorated bool) {
	tt := NewTestTool()
	var tr trace
	ch := make(chan string)
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		if decorated {
			as = unwrappingSteps{as}
		}
		AwaitChan(as, ch)
	})
	r.Add(func(as AsyncSteps, args ...any) {
		tr.add("got %v", args)
		as.Success(args...)
	})
	res := r.Promise()
	tt.Run()
	ch <- "v"
	synctest.Wait() // the function's goroutine has delivered the value
	tt.ResetEvents()
	tr.add("kept:%d", tt.Pending())
	tt.Run()
	if got, want := tr.String(), "kept:1 got [v]"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if got, want := resultOf(res), "ok [v]"; got != want {
		t.Errorf("result %q, want %q", got, want)
	}
}

// Error called from another goroutine on a step that does not wait fails
// the step with an InternalError once its callback returns, also when the
// callback called ResetEvents meanwhile: the error was claimed, and the
// step accepts no other completion. Before, ResetEvents dropped it, and
// the flow waited for ever.
func TestTestToolResetEventsKeepsAnErrorFromElsewhere(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		done := make(chan struct{})
		go func() {
			as.Error("Boom")
			close(done)
		}()
		<-done
		tt.ResetEvents()
		tr.add("kept:%d", tt.Pending())
	}, func(_ AsyncSteps, code string) { tr.add("handler:%s", code) })
	res := r.Promise()
	tt.Run()
	if got, want := tr.String(), "kept:1 handler:InternalError"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	want := "InternalError: Error(Boom) called from another goroutine on a step that does not wait:" +
		" call WaitExternal, SetTimeout or SetCancel first"
	if got := resultOf(res); got != want {
		t.Errorf("result %q, want %q", got, want)
	}
}

// The rest of a running flow's own work survives ResetEvents, and runs
// when the tool runs next: the flow's start, the continuation of a flow
// that let other events go first, and a Parallel's branches. Before,
// ResetEvents dropped it, and the flow halted for ever: one that had not
// begun answered no Promise, even after Root.Cancel.
func TestTestToolResetEventsKeepsAFlowsOwnWork(t *testing.T) {
	t.Run("start", func(t *testing.T) {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) { tr.add("began"); as.Success("x") })
		res := r.Promise()
		tt.ResetEvents()
		tr.add("kept:%d", tt.Pending())
		tt.Run()
		checkOwnWork(t, &tr, "kept:1 began", res, "ok [x]", tt)
	})
	t.Run("continuation", func(t *testing.T) {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) {
			tr.add("first")
			tt.Immediate(func() { // the flow lets it go first
				tt.ResetEvents()
				tr.add("reset kept:%d", tt.Pending())
			})
		})
		r.Add(func(as AsyncSteps, _ ...any) { tr.add("second"); as.Success("x") })
		res := r.Promise()
		tt.Run()
		checkOwnWork(t, &tr, "first reset kept:1 second", res, "ok [x]", tt)
	})
	t.Run("Parallel", func(t *testing.T) {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) {
			as.Parallel().
				Add(func(as AsyncSteps, _ ...any) {
					tr.add("a")
					tt.ResetEvents() // b's start is queued
					tr.add("kept:%d", tt.Pending())
				}).
				Add(func(as AsyncSteps, _ ...any) { tr.add("b") })
		})
		r.Add(func(as AsyncSteps, _ ...any) { tr.add("joined"); as.Success("x") })
		res := r.Promise()
		tt.Run()
		checkOwnWork(t, &tr, "a kept:1 b joined", res, "ok [x]", tt)
	})
}

func checkOwnWork(t *testing.T, tr *trace, wantTrace string, res <-chan Result, wantResult string, tt *TestTool) {
	t.Helper()
	if got := tr.String(); got != wantTrace {
		t.Errorf("trace %q, want %q", got, wantTrace)
	}
	if got := resultOf(res); got != wantResult {
		t.Errorf("result %q, want %q", got, wantResult)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d at the end, want 0", n)
	}
}
