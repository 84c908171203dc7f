package asyncsteps

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A failed Parallel cancels its other branches; the continuation a branch
// had queued (to run the sub-steps it added) is dropped as the flow ends,
// so that Root.Run leaves nothing pending and driving the tool again runs
// no event. The same Root then runs again as new.
func TestTestToolFailedParallelLeavesNothingPending(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	build := func() {
		p := r.Parallel()
		p.Add(func(as AsyncSteps, _ ...any) {
			tr.add("b0")
			as.Add(func(AsyncSteps, ...any) { tr.add("b0s1") })
		})
		p.Add(func(as AsyncSteps, _ ...any) {
			tr.add("b1")
			as.Error("Boom")
		})
	}
	for run := range 2 {
		build()
		_, err := r.Run(context.Background())
		if e, ok := err.(*Error); !ok || e.Code != "Boom" || e.Info != "" {
			t.Fatalf("run %d: err = %#v, want Boom without info", run, err)
		}
		if n := tt.Pending(); n != 0 {
			t.Fatalf("run %d: Pending() = %d after Run, want 0", run, n)
		}
		if tt.NextEvent() {
			t.Fatalf("run %d: NextEvent() ran a leftover event", run)
		}
	}
	if got, want := tr.String(), "b0 b1 b0 b1"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

// A flow that recovers from a failed Parallel and ends drops the
// cancelled branch's continuation as it ends, too, and only its own: the
// events of another flow on the tool stay queued, in order.
func TestTestToolRecoveredParallelLeavesNothingPending(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(AsyncSteps, ...any) { tr.add("never") })
		})
		p.Add(func(as AsyncSteps, _ ...any) { as.Error("Boom") })
	}, func(as AsyncSteps, code string) {
		tr.add("recovered:%s", code)
		as.Success("fallback")
	})
	args, err := r.Run(context.Background())
	if err != nil || len(args) != 1 || args[0] != "fallback" || tt.Pending() != 0 {
		t.Fatalf("Run = %v, %v, Pending() = %d; want [fallback], nil, 0", args, err, tt.Pending())
	}

	// Once more, with another flow started first, whose steps are still
	// queued when r ends.
	other := New(WithTool(tt))
	other.Add(func(as AsyncSteps, _ ...any) { tr.add("other1") })
	other.Add(func(as AsyncSteps, _ ...any) { tr.add("other2") })
	other.Add(func(as AsyncSteps, _ ...any) { tr.add("other3") })
	ch := other.Promise()
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(AsyncSteps, ...any) { tr.add("never") })
		})
		p.Add(func(as AsyncSteps, _ ...any) { as.Error("Boom") })
	})
	_, err = r.Run(context.Background())
	if e, ok := err.(*Error); !ok || e.Code != "Boom" {
		t.Fatalf("second Run: err = %#v, want Boom", err)
	}
	// Only the other flow's continuation is left, not r's cancelled
	// branch's.
	queued := tt.Pending()
	if queued != 1 {
		t.Fatalf("Pending() = %d after the second Run, want 1: the other flow's continuation", queued)
	}
	events := 0
	for tt.NextEvent() {
		events++
	}
	if res := <-ch; res.Err != nil {
		t.Fatalf("other flow: %v", res.Err)
	}
	if got, want := tr.String(), "recovered:Boom other1 other2 other3"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if events != queued || tt.Pending() != 0 {
		t.Fatalf("ran %d events of the %d pending after Run, %d left; want all, 0 left", events, queued, tt.Pending())
	}
}

// A Root.Cancel whose task the flow's end outruns leaves nothing pending
// either: the error raised after it ends the flow cancelled at once, the
// cancel winning, before the task queued for the cancel runs.
func TestTestToolOutrunCancelLeavesNothingPending(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) {
		r.Cancel()
		as.Error("Boom")
	})
	_, err := r.Run(context.Background())
	if !errors.Is(err, context.Canceled) || tt.Pending() != 0 {
		t.Fatalf("Run err = %#v, Pending() = %d; want context.Canceled, 0", err, tt.Pending())
	}
}

// A Throttle's period timer stays armed after the flow that entered has
// ended, as Pending's documentation says: it counts until the period ends.
func TestTestToolPendingCountsAThrottlesPeriod(t *testing.T) {
	tt := NewTestTool()
	th := NewThrottle(1, time.Second)
	r := New(WithTool(tt))
	r.Sync(th, func(as AsyncSteps, _ ...any) { as.Success("in") })
	args, err := r.Run(context.Background())
	if err != nil || len(args) != 1 || args[0] != "in" {
		t.Fatalf("Run = %v, %v; want [in], nil", args, err)
	}
	if n := tt.Pending(); n != 1 {
		t.Fatalf("Pending() = %d after Run, want 1: the period's timer", n)
	}
	tt.Advance(time.Second)
	if n := tt.Pending(); n != 0 {
		t.Fatalf("Pending() = %d once the period ended, want 0", n)
	}
}
