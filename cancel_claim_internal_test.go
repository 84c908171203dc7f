package asyncsteps

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// A completion from outside that has claimed a waiting step but not yet
// written itself (stClaim, not stReady) when the loop cancels the step:
// a Success has completed the step, whose own cancel handler does not
// run; an Error runs it, as applying the error would. The claim alone
// tells them apart (stFailed comes with an error's claim), so the loop
// need not wait for the writer. The frame is not recycled under the
// writer, and the completion it then publishes is stale.
func TestCancelInTheWindowOfAClaim(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kind       uint32 // what the claim recorded
		wantCancel bool
	}{
		{"Success", 0, false},
		{"Error", stFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := NewTestTool()
			r := New(WithTool(tt))
			var h *stepAPI
			cancelled := 0
			r.Add(func(as AsyncSteps, _ ...any) {
				h = as.(*stepAPI)
				as.SetCancel(func(AsyncSteps) { cancelled++ })
			})
			ch := r.Promise()
			tt.Run()
			f := h.f
			if !f.waiting {
				t.Fatal("the step does not wait")
			}

			h.st.Or(stClaim | tc.kind) // the writer has claimed, and stops here
			r.Cancel()
			tt.Run()

			if got := cancelled == 1; got != tc.wantCancel || cancelled > 1 {
				t.Errorf("cancel handler ran %d times, want it to run: %v", cancelled, tc.wantCancel)
			}
			if f.consumed || f.h != h {
				t.Error("the frame was recycled while a writer still owns its args")
			}
			// The writer goes on: its completion reaches a step that is over.
			f.args = []any{"late"}
			if tc.kind != 0 {
				f.args = []any{&Error{Code: "Late"}}
			}
			h.publish(false)
			tt.Run()

			res := <-ch
			if !errors.Is(res.Err, context.Canceled) || res.Args != nil {
				t.Errorf("Result = %+v, want cancelled", res)
			}
			if cancelled > 1 {
				t.Errorf("cancel handler ran %d times", cancelled)
			}
			if n := tt.Pending(); n != 0 {
				t.Errorf("Pending() = %d after the flow ended", n)
			}
		})
	}
}

// Each completion from outside records its kind with its claim: an
// error's claim carries stFailed before the error is written.
func TestClaimRecordsTheKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind uint32
	}{{"Success", 0}, {"Error", stFailed}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &stepAPI{}
			h.st.Store(stWait | stIdle)
			if !h.claim(tc.kind) {
				t.Fatal("claim refused on a waiting step")
			}
			if got := h.st.Load(); got != stWait|stIdle|stClaim|tc.kind {
				t.Errorf("state after claim = %#x, want %#x", got, stWait|stIdle|stClaim|tc.kind)
			}
			if h.claim(0) || h.claim(stFailed) {
				t.Error("a second claim was accepted")
			}
		})
	}
}

// A Success that another goroutine makes once the loop has decided that
// the step's own timeout wins, before the unwinding reaches the step's
// cancel handler, is not accepted: the step times out, its cancel handler
// runs, and the step API is dead from the decision on. Here the StepError
// hook, which runs in that stretch, stands for that goroutine.
func TestSuccessWhileTheTimeoutUnwindsIsNotAccepted(t *testing.T) {
	tt := NewTestTool()
	var (
		step  AsyncSteps
		trace []string
	)
	tt.SetHooks(&Hooks{StepError: func(_ context.Context, err *Error) {
		accepted := make(chan bool)
		go func() {
			valid := step.IsValid()
			step.Success("late")
			accepted <- valid
		}()
		trace = append(trace, "hook "+err.Code)
		if <-accepted {
			trace = append(trace, "Success accepted")
		}
	}})
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		step = as
		as.SetCancel(func(AsyncSteps) { trace = append(trace, "cancel handler") })
		as.SetTimeout(time.Second)
	})
	r.ExecuteWith(func(err *Error) { trace = append(trace, "end "+err.Code) })
	tt.Run()
	want := []string{"hook Timeout", "cancel handler", "end Timeout"}
	if !slices.Equal(trace, want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
}
