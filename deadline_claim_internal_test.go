package asyncsteps

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

// passingCtx is a context whose deadline passes when the test says so
// (pass): Run's deadline without a clock.
type passingCtx struct {
	context.Context
	passed atomic.Bool
	done   chan struct{}
}

func newPassingCtx() *passingCtx {
	return &passingCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *passingCtx) pass() {
	c.passed.Store(true)
	close(c.done)
}

func (c *passingCtx) Done() <-chan struct{} { return c.done }

func (c *passingCtx) Err() error {
	if c.passed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// The deadline of Run's context passes while a completion from another
// goroutine has claimed the waiting step but has not handed it to the
// loop yet. The deadline notes the claim and queues nothing more: it used
// to queue its timeout again and again, on the loop's goroutine, for as
// long as the writer took. Once the completion runs it wins (a Success
// goes on to the next step, an Error reaches the handler, which
// recovers), then the flow times out where it has got to. The test
// claims the step as Success or Error from outside does, and stops there.
func TestRunDeadlineNotesAClaimWithoutSpinning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  uint32 // what the claim recorded
		args  []any  // what the writer writes
		reset bool   // ResetEvents once the completion is queued: it keeps it
		trace []string
	}{
		{"Success", 0, []any{"v"}, false, []string{
			"next(v)", "next:Timeout",
		}},
		{"SuccessAfterReset", 0, []any{"v"}, true, []string{
			"next(v)", "next:Timeout",
		}},
		{"Error", stFailed, []any{&Error{Code: "Boom"}}, false, []string{
			"first:Boom", "next(recovered)", "next:Timeout",
		}},
		// The handler waits, past the deadline: it fails at once.
		{"ErrorHandlerWaits", stFailed, []any{&Error{Code: "Wait"}}, false, []string{
			"first:Wait",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := NewTestTool()
			r := New(WithTool(tt))
			var trace []string
			var h *stepAPI
			r.Add(func(as AsyncSteps, _ ...any) {
				h = as.(*stepAPI)
				as.WaitExternal()
			}, func(as AsyncSteps, code string) {
				trace = append(trace, "first:"+code)
				if code == "Wait" {
					as.WaitExternal()
					return
				}
				as.Success("recovered")
			})
			r.Add(func(as AsyncSteps, args ...any) {
				trace = append(trace, "next("+args[0].(string)+")")
				as.Add(func(as AsyncSteps, _ ...any) { trace = append(trace, "sub") })
			}, func(_ AsyncSteps, code string) { trace = append(trace, "next:"+code) })
			ctx, w := startUnderDeadline(r, tt)
			if h == nil || !h.f.waiting {
				t.Fatal("the first step does not wait")
			}

			h.st.Or(stClaim | tc.kind) // the writer has claimed, and stops here
			passDeadline(r, ctx, w)
			const budget = 100
			ran := 0
			for ran < budget && tt.NextEvent() {
				ran++
			}
			if ran != 1 || tt.Pending() != 0 {
				t.Fatalf("the deadline ran %d events (budget %d), %d left, while the claim was on its way; want 1, none left",
					ran, budget, tt.Pending())
			}
			if len(trace) != 0 {
				t.Fatalf("trace %q before the completion came, want none", trace)
			}

			h.f.args = tc.args // the writer goes on
			h.publish(false)
			if tc.reset {
				tt.ResetEvents()
			}
			tt.Run()

			if !slices.Equal(trace, tc.trace) {
				t.Errorf("trace %q, want %q", trace, tc.trace)
			}
			checkTimedOutByDeadline(t, tt, w)
		})
	}
}

// A loop closed while a completion that Run's deadline found on its way
// has not reached it drops the completion, and ends the flow: Run
// returns the InternalError of a closed loop, once.
func TestCloseEndsARunWhoseDeadlineFoundAClaim(t *testing.T) {
	loop := NewLoop()
	claimed := make(chan *stepAPI, 1)
	r := New(WithTool(loop))
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		h := as.(*stepAPI)
		if !h.claim(0) {
			t.Error("the waiting step could not be claimed")
		}
		claimed <- h
	})
	ctx := newPassingCtx()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx)
		errc <- err
	}()
	h := <-claimed
	ctx.pass()
	for noted := false; !noted; { // until the deadline has found the claim
		ch := make(chan bool)
		loop.Immediate(func() { ch <- h.st.Load()&stLate != 0 })
		noted = <-ch
	}
	loop.Close()
	h.f.args = []any{"late"} // the writer goes on: its post is dropped
	h.publish(false)

	var e *Error
	if err := <-errc; !errors.As(err, &e) || e.Code != InternalError || e.Info != loopClosedInfo {
		t.Errorf("Run error %v, want the InternalError of a closed loop", err)
	}
}

// startUnderDeadline starts r on tt as Run does, under a context whose
// deadline the test passes with passDeadline, and runs tt.
func startUnderDeadline(r *Root, tt *TestTool) (*passingCtx, *waiter) {
	ctx := newPassingCtx()
	w := &waiter{promise: make(chan Result, 1), ctx: ctx}
	r.startIn(w, w.promise, "Run")
	tt.Run()
	return ctx, w
}

// passDeadline passes the deadline of ctx, and stops the execution w of r
// as Run does when its context is done.
func passDeadline(r *Root, ctx *passingCtx, w *waiter) {
	ctx.pass()
	r.stopFor(ctx, w)
}

// checkTimedOutByDeadline checks that the execution w has ended, once,
// with the Timeout of Run's deadline, and that nothing is left pending on
// tt.
func checkTimedOutByDeadline(t *testing.T, tt *TestTool, w *waiter) {
	t.Helper()
	var res Result
	select {
	case res = <-w.promise:
	default:
		t.Fatal("the flow has not ended")
	}
	var e *Error
	if !errors.As(res.Err, &e) || e.Code != Timeout || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("Result %v, %v; want the Timeout of Run's deadline", res.Args, res.Err)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the flow ended", n)
	}
	select {
	case res = <-w.promise:
		t.Errorf("a second Result: %v, %v", res.Args, res.Err)
	default:
	}
}
