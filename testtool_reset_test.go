package asyncsteps

import (
	"context"
	"errors"
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

// A PromiseContext whose context is cancelled while its flow waits: the
// task that applies the cancel survives ResetEvents, and the flow is
// cancelled when the tool runs next. Before, ResetEvents dropped it, and
// the flow waited on with its cancel requested.
func TestTestToolResetEventsKeepsAContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := NewTestTool()
		var tr trace
		r := New(WithTool(tt))
		r.Add(func(as AsyncSteps, _ ...any) {
			tr.add("wait")
			as.SetCancel(func(AsyncSteps) { tr.add("cancelled") })
		}, func(_ AsyncSteps, code string) { tr.add("handler:%s", code) })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := r.PromiseContext(ctx)
		tt.Run()
		cancel()
		synctest.Wait() // context.AfterFunc has posted the cancel
		tt.ResetEvents()
		if n := tt.Pending(); n != 1 {
			t.Fatalf("Pending() = %d after ResetEvents, want 1: the context's cancel", n)
		}
		tt.Run()
		select {
		case res := <-ch:
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
			}
		default:
			t.Fatal("the flow still waits after its context's cancel")
		}
		if got, want := tr.String(), "wait cancelled"; got != want {
			t.Errorf("trace %q, want %q", got, want)
		}
		if n := tt.Pending(); n != 0 {
			t.Errorf("Pending() = %d at the end, want 0", n)
		}
	})
}

// A PromiseContext whose context's deadline passes while its flow waits:
// the task that times the flow out survives ResetEvents, and the waiting
// step fails with Timeout when the tool runs next, its cancel handler
// first, then its error handler. Before, the deadline was lost.
func TestTestToolResetEventsKeepsAContextDeadline(t *testing.T) {
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
		time.Sleep(time.Second) // the bubble's clock: the deadline passes
		synctest.Wait()         // context.AfterFunc has posted the timeout
		tt.ResetEvents()
		if n := tt.Pending(); n != 1 {
			t.Fatalf("Pending() = %d after ResetEvents, want 1: the deadline", n)
		}
		tt.Run()
		select {
		case res := <-ch:
			if !errors.Is(res.Err, context.DeadlineExceeded) {
				t.Errorf("Result.Err = %v, want one matching context.DeadlineExceeded", res.Err)
			}
		default:
			t.Fatal("the flow still waits after its context's deadline")
		}
		if got, want := tr.String(), "wait cancelled handler:Timeout"; got != want {
			t.Errorf("trace %q, want %q", got, want)
		}
		if n := tt.Pending(); n != 0 {
			t.Errorf("Pending() = %d at the end, want 0", n)
		}
	})
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

// A context's stop that ResetEvents kept is dropped when its flow ends
// before the tool applies it, and never reaches the Root's next
// execution: a cancel, and a deadline.
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
	if e, ok := res.Err.(*Error); !ok || e.Code != "Boom" {
		t.Errorf("first Result.Err = %#v, want Boom", res.Err)
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
