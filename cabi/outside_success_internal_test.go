//go:build cgo

package cabi

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A step waits with a C cancel handler; in one task of the loop, the root
// is cancelled and then the step is completed from outside its callback.
// The completion is posted to the loop, behind the cancel: a success so
// accepted has completed the step, so its cancel handler does not run
// (C code that frees its data on success and in the handler would free
// it twice), as for a Success claimed from another goroutine on a Go
// step; an error still runs it, as the error would. Before, the handler
// ran after every one of them.
func TestCancelAfterAnOutsideCompletionOfAStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		goStep  bool // a Go step given by Binary, not a C step
		code    int  // 0: success, else handle_error
		wrap    bool // Go's Success through Wrap on the loop, not the table from a thread
		cancels int
	}{
		{"C step, success from a thread", false, 0, false, 0},
		{"C step, handle_error from a thread", false, 3, false, 1},
		{"C step, Success through Wrap", false, 0, true, 0},
		{"Go step, success from a thread", true, 0, false, 0},
		{"Go step, handle_error from a thread", true, 3, false, 1},
		{"Go step, Success through Wrap", true, 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var step unsafe.Pointer
			w := startWrapRun(t, func(w *wrapRun, p unsafe.Pointer) {
				if tc.goStep {
					Wrap(p).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.WaitExternal()
						step = Binary(as)
						ctest.FlowGuard(step, 0)
					})
					return
				}
				step = p
				ctest.FlowGuard(p, 0)
			})
			before := ctest.FlowCounters().Cancels
			w.tt.Immediate(func() {
				Wrap(w.ptr).(*asyncsteps.Root).Cancel()
				if tc.wrap {
					Wrap(step).Success()
				} else {
					completeFromThread(step, tc.code)
				}
			})
			w.tt.Run()
			if n := ctest.FlowCounters().Cancels - before; n != tc.cancels {
				t.Errorf("the step's C cancel handler ran %d times, want %d", n, tc.cancels)
			}
			if w.ended != "" {
				t.Errorf("the cancelled flow ended with %q", w.ended)
			}
			w.freeClean(t)
		})
	}
}
