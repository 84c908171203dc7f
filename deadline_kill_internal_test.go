package asyncsteps

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// Past Run's deadline, a step waits and a completion from another
// goroutine has claimed it, so the deadline left the timeout to that
// completion (stLate). The loop then kills the step before the completion
// runs: an outer step's timeout fires, or a sibling branch fails. The
// handler that recovers adds steps that wait for nothing; the deadline
// still times the flow out where it has got to, as the completion would
// have had it run, and Run returns Timeout rather than success.
func TestRunDeadlineTimesOutAfterAClaimIsKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(r *Root, trace *[]string, claimed *[]*stepAPI, t *testing.T)
		trace []string
	}{
		{"OuterTimeout", buildOuterTimeout, []string{
			"first:Timeout", "outer:Timeout", "next(recovered)", "next:Timeout",
		}},
		// The timeout runs as the flow yields after the handler: between
		// two steps, it times out the flow as a whole.
		{"SiblingFails", buildSiblingFails, []string{
			"first:Timeout", "outer:Boom",
		}},
		// The cancel handler of the step around the killed one faults: the
		// error it unwinds with becomes an InternalError, and the deadline
		// still times the flow out, once.
		{"OuterCancelPanics", buildOuterTimeoutCancel(func() { panic("boom") }), []string{
			"first:Timeout", "outer:cancel", "outer:InternalError", "next(recovered)", "next:Timeout",
		}},
		// A Goexit in it goes on in the turn a panic does: the handler
		// runs in the outer timeout's task, and the next step with it,
		// before the deadline's timeout queued by the kill.
		{"OuterCancelGoexits", buildOuterTimeoutCancel(runtime.Goexit), []string{
			"first:Timeout", "outer:cancel", "outer:InternalError", "next(recovered)", "next:Timeout",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := NewTestTool()
			r := New(WithTool(tt))
			var trace []string
			var claimed []*stepAPI
			// The deadline times this step out; the steps after it wait
			// past the deadline.
			r.Add(func(as AsyncSteps, _ ...any) {
				as.WaitExternal()
			}, func(as AsyncSteps, code string) {
				trace = append(trace, "first:"+code)
				as.Success()
			})
			tc.build(r, &trace, &claimed, t)
			r.Add(func(as AsyncSteps, args ...any) {
				trace = append(trace, "next("+args[0].(string)+")")
				as.Add(func(AsyncSteps, ...any) { trace = append(trace, "sub") })
			}, func(_ AsyncSteps, code string) { trace = append(trace, "next:"+code) })
			ctx, w := startUnderDeadline(r, tt)
			passDeadline(r, ctx, w)
			// Run moves the clock to each timer it finds: the outer step's
			// timeout (or the sibling's failure) kills the claimed step,
			// and the flow ends, before its writer publishes.
			runOnGoroutines(t, tt)
			if len(claimed) != 1 || claimed[0].st.Load()&stLate == 0 {
				t.Fatalf("%d steps claimed, want 1 the deadline found on its way (trace %q)", len(claimed), trace)
			}
			claimed[0].f.args = []any{"late"} // the writer goes on: the step is over
			claimed[0].publish(false)
			runOnGoroutines(t, tt)

			if !slices.Equal(trace, tc.trace) {
				t.Errorf("trace %q, want %q", trace, tc.trace)
			}
			checkTimedOutByDeadline(t, tt, w)
		})
	}
}

// claimingStep waits and claims its own completion as a Success from
// another goroutine does, and stops there: the writer has not written.
func claimingStep(claimed *[]*stepAPI, t *testing.T) StepFunc {
	return func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		h := as.(*stepAPI)
		if !h.claim(0) {
			t.Error("the waiting step could not be claimed")
		}
		*claimed = append(*claimed, h)
	}
}

// buildOuterTimeout adds a step whose timeout fires while its sub-step
// waits, claimed; its handler recovers.
func buildOuterTimeout(r *Root, trace *[]string, claimed *[]*stepAPI, t *testing.T) {
	r.Add(func(as AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second)
		as.Add(claimingStep(claimed, t))
	}, func(as AsyncSteps, code string) {
		*trace = append(*trace, "outer:"+code)
		as.Success("recovered")
	})
}

// buildOuterTimeoutCancel is buildOuterTimeout with a cancel handler on
// the outer step that ends with fault.
func buildOuterTimeoutCancel(fault func()) func(*Root, *[]string, *[]*stepAPI, *testing.T) {
	return func(r *Root, trace *[]string, claimed *[]*stepAPI, t *testing.T) {
		r.Add(func(as AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.SetCancel(func(AsyncSteps) {
				*trace = append(*trace, "outer:cancel")
				fault()
			})
			as.Add(claimingStep(claimed, t))
		}, func(as AsyncSteps, code string) {
			*trace = append(*trace, "outer:"+code)
			as.Success("recovered")
		})
	}
}

// runOnGoroutines runs tt until nothing is pending, each time on a
// goroutine of its own (see withinWallClock): a Goexit in a callback ends
// the goroutine that drives the tool.
func runOnGoroutines(t *testing.T, tt *TestTool) {
	for i := 0; i == 0 || i < 10 && tt.Pending() > 0; i++ {
		withinWallClock(t, tt.Run)
	}
}

// buildSiblingFails adds a Parallel whose first branch waits, claimed,
// while the second fails a turn later; the Parallel's handler recovers.
func buildSiblingFails(r *Root, trace *[]string, claimed *[]*stepAPI, t *testing.T) {
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(claimingStep(claimed, t))
		p.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(as AsyncSteps, _ ...any) { as.Error("Boom") })
		})
	}, func(as AsyncSteps, code string) {
		*trace = append(*trace, "outer:"+code)
		as.Success("recovered")
	})
}
