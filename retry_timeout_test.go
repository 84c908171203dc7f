package asyncsteps_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// runToEnd runs r's flow on tt one event at a time until its Result comes,
// and reports whether an event, such as a timer left armed, was still
// scheduled then.
func runToEnd(t *testing.T, r *asyncsteps.Root, tt *asyncsteps.TestTool) (asyncsteps.Result, bool) {
	t.Helper()
	ch := r.Promise()
	for n := 0; ; n++ {
		select {
		case res := <-ch:
			return res, tt.HasEvents()
		default:
		}
		if n > maxEvents || !tt.NextEvent() {
			t.Fatal("the flow did not end")
		}
	}
}

// A Retry's Timeout bounds the attempt and its sub-steps without making the
// attempt wait: an attempt that returns succeeds at once, as without a
// Timeout, and waits only when it calls SetTimeout, SetCancel or
// WaitExternal itself. However the attempts end, no timer is left armed
// (docs/DESIGN.md#retry).
func TestRetryTimeoutBoundsTheAttemptWithoutMakingItWait(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name    string
		attempt func(as asyncsteps.AsyncSteps)
		code    string // "" for success
		info    string
		args    []any
		trace   string
		at      time.Duration
	}{
		{name: "return", attempt: func(asyncsteps.AsyncSteps) {}, trace: "a0"},
		{name: "Success", attempt: func(as asyncsteps.AsyncSteps) { as.Success("ok") }, args: []any{"ok"}, trace: "a0"},
		{name: "sub-step", attempt: func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("sub") })
		}, args: []any{"sub"}, trace: "a0"},
		{name: "Error", attempt: func(as asyncsteps.AsyncSteps) { as.Error(asyncsteps.CommError, "down") },
			code: asyncsteps.CommError, info: "down", trace: "a0,a1"},
		{name: "panic", attempt: func(asyncsteps.AsyncSteps) { panic("boom") },
			code: asyncsteps.InternalError, info: "boom", trace: "a0"},
		{name: "Break", attempt: func(as asyncsteps.AsyncSteps) { as.Break() }, trace: "a0"},
		{name: "SetCancel, completed later", attempt: func(as asyncsteps.AsyncSteps) {
			h := as.Tool().Deferred(50*ms, func() { as.Success("late") })
			as.SetCancel(func(asyncsteps.AsyncSteps) { h.Cancel() })
		}, args: []any{"late"}, trace: "a0", at: 50 * ms},
		{name: "WaitExternal, never completed", attempt: func(as asyncsteps.AsyncSteps) { as.WaitExternal() },
			code: asyncsteps.Timeout, trace: "a0,a1", at: 200 * ms},
		{name: "sub-step slower than the Timeout", attempt: func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		}, code: asyncsteps.Timeout, trace: "a0,a1", at: 200 * ms},
		{name: "own SetTimeout re-arms", attempt: func(as asyncsteps.AsyncSteps) { as.SetTimeout(30 * ms) },
			code: asyncsteps.Timeout, trace: "a0,a1", at: 60 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, tt := newFlow()
			tr := &tracer{}
			since := stopwatch(tt)
			asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Timeout: 100 * ms}, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("a%d", i)
				c.attempt(as)
			})
			res, left := runToEnd(t, r, tt)
			if c.code == "" {
				wantSuccess(t, res, c.args...)
			} else {
				wantError(t, res.Err, c.code, c.info)
			}
			wantTrace(t, tr, c.trace)
			if got := since(); got != c.at {
				t.Errorf("ended at %v, want %v", got, c.at)
			}
			if left {
				t.Error("an event is left on the tool: the attempt's timer was not disarmed")
			}
		})
	}
}

// A cancel of the flow while an attempt's sub-step waits disarms the
// attempt's timer too.
func TestRetryTimeoutIsDisarmedByACancel(t *testing.T) {
	r, tt := newFlow()
	asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Timeout: time.Second}, func(as asyncsteps.AsyncSteps, _ int) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	})
	ch := r.Promise()
	tt.Advance(10 * time.Millisecond)
	noResult(t, ch)
	r.Cancel()
	tt.Advance(0)
	if err := result(t, ch).Err; !errors.Is(err, context.Canceled) {
		t.Fatalf("Err %v, want a cancel", err)
	}
	if tt.HasEvents() {
		t.Error("an event is left on the tool: the attempt's timer was not disarmed")
	}
}

// A Retry's Timeout of 0 or less sets none, unlike SetTimeout, for which
// it falls due at once: an attempt that waits is completed from outside
// however late (docs/DESIGN.md#retry).
func TestRetryTimeoutOfZeroOrLessSetsNone(t *testing.T) {
	for _, timeout := range []time.Duration{0, -1, -time.Hour} {
		t.Run(timeout.String(), func(t *testing.T) {
			r, tt := newFlow()
			tr := &tracer{}
			since := stopwatch(tt)
			asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Timeout: timeout}, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("a%d", i)
				as.WaitExternal()
				as.Tool().Deferred(time.Hour, func() { as.Success("late") })
			})
			res, left := runToEnd(t, r, tt)
			wantSuccess(t, res, "late")
			wantTrace(t, tr, "a0")
			if got := since(); got != time.Hour {
				t.Errorf("ended at %v, want 1h0m0s", got)
			}
			if left {
				t.Error("an event is left on the tool")
			}
		})
	}
}
