package asyncsteps_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A callback that recovers the abort of its Error and raises again (Error,
// Break, Continue, or a misuse) changes nothing: its step failed with the
// first error, whose code and info the handler, ErrorInfo, LastException
// and the Result all see, and the later call aborts the callback again.
func TestErrorAfterARecoveredErrorKeepsTheFirstWhole(t *testing.T) {
	again := map[string]func(as asyncsteps.AsyncSteps){
		"Error":    func(as asyncsteps.AsyncSteps) { as.Error(asyncsteps.CommError, "second info") },
		"Break":    func(as asyncsteps.AsyncSteps) { as.Break("label") },
		"Continue": func(as asyncsteps.AsyncSteps) { as.Continue() },
		"misuse":   func(as asyncsteps.AsyncSteps) { as.Error("") },
	}
	for name, raise := range again {
		t.Run(name, func(t *testing.T) {
			r, tt := newFlow()
			var tr tracer
			r.Repeat(1, func(as asyncsteps.AsyncSteps, _ int) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					func() {
						defer func() { _ = recover() }()
						as.Error(asyncsteps.InvalidRequest, "first info")
					}()
					func() {
						defer func() { tr.addf("aborted:%v", recover() != nil) }()
						raise(as)
					}()
					tr.add("returned")
				}, func(as asyncsteps.AsyncSteps, code string) {
					st := as.State()
					tr.addf("handler:%s:%s:%v", code, st.ErrorInfo, st.LastException)
				})
			})
			res := run(t, r, tt)
			wantError(t, res.Err, asyncsteps.InvalidRequest, "first info")
			wantTrace(t, &tr, "aborted:true,returned,handler:InvalidRequest:first info:InvalidRequest: first info")
			if info := r.State().ErrorInfo; info != "first info" {
				t.Errorf("ErrorInfo = %q, want %q", info, "first info")
			}
		})
	}
}
