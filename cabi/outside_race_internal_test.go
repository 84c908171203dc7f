//go:build cgo

package cabi

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// Two threads complete one waiting step, by success and handle_error:
// the completion that claims the step first is the one applied, also
// when the other one reaches the loop first. The seam makes the second
// call, and its post, between the first one's claim and its post.
// Before, the loop applied the one posted first: the claimed success
// lost to the error (which ran the step's cancel handler), or the
// claimed error to the success.
func TestRacingOutsideCompletionsApplyTheFirstClaim(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second int // FlowComplete's code: 0 success, else error E<code>
		ended         string
		cancels       int
	}{
		{"success claims first", 0, 3, "ok", 0},
		{"handle_error claims first", 3, 0, "E3", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var step unsafe.Pointer
			w := startWrapRun(t, func(w *wrapRun, p unsafe.Pointer) {
				step = p
				ctest.FlowGuard(p, 0) // waits, with a C cancel handler
			})
			t.Cleanup(func() { testHookClaimed = nil })
			var claims []bool
			testHookClaimed = func(_ *node, _ uint32, won bool) {
				claims = append(claims, won)
				if len(claims) == 1 {
					ctest.FlowComplete(step, tc.second) // posted before the first
				}
			}
			completeFromThread(step, tc.first)
			if want := []bool{true, false}; len(claims) != 2 || claims[0] != want[0] || claims[1] != want[1] {
				t.Fatalf("claims won %v, want %v", claims, want)
			}
			w.tt.Run()
			if w.ended != tc.ended {
				t.Errorf("the flow ended with %q, want %q", w.ended, tc.ended)
			}
			if n := ctest.FlowCounters().Cancels - w.before.Cancels; n != tc.cancels {
				t.Errorf("the step's C cancel handler ran %d times, want %d", n, tc.cancels)
			}
			w.freeClean(t)
		})
	}
}
