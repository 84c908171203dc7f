package asyncsteps_test

import (
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A timeout of 0 or less expires as soon as the callback that set it has
// returned without completing the step; the clock does not move. A
// completion in that callback still wins.
func TestSetTimeoutOfZeroOrLessExpiresAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -1, -time.Hour, -1 << 63} {
		t.Run(d.String(), func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			start := tt.Now()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(d)
				as.SetCancel(tr.cancel("cancel"))
				tr.add("step")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler:%s:%q", code, as.State().ErrorInfo)
			})
			res := run(t, r, tt)
			wantTrace(t, &tr, `step,cancel,handler:Timeout:""`)
			wantError(t, res.Err, asyncsteps.Timeout, "")
			if moved := tt.Now().Sub(start); moved != 0 {
				t.Errorf("the clock moved by %v", moved)
			}

			r, tt = newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(d)
				as.Success("in time")
			})
			wantSuccess(t, run(t, r, tt), "in time")
		})
	}
}
