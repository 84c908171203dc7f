//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C step waits with a timeout and a C cancel handler; a success (or a
// handle_error) from another thread claims it, and ResetEvents drops the
// task that completion posted, with the step's timer. The completion
// applies when the tool runs next, as a TestTool keeps Go's Success or
// Error from another goroutine: the flow goes on with the success (the
// cancel handler not run), or ends with the error's code and info (the
// cancel handler run once). Before, the fallback only released the
// pointer: the step stayed claimed, so nothing but a cancel could end it,
// and the flow still ran once the step's timeout had passed.
func TestOutsideCompletionDroppedByResetEventsApplies(t *testing.T) {
	for _, c := range []struct {
		name    string
		code    int // 0: success; else handle_error with E<code>
		ended   string
		cancels int
	}{
		{"success", 0, "ok", 0},
		{"handle_error", 7, "E7 (from a thread)", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const timeout = 10 * time.Millisecond
			tt := asyncsteps.NewTestTool()
			before := ctest.FlowCounters()
			ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFGo}})
			var step unsafe.Pointer
			ctest.FlowHook = func(p unsafe.Pointer, _ int) {
				step = p
				ctest.FlowGuard(p, 0) // waits, with a C cancel handler
				Wrap(p).SetTimeout(timeout)
			}
			t.Cleanup(func() { ctest.FlowHook = nil })
			ptr := New(tt)
			r := Wrap(ptr).(*asyncsteps.Root)
			ctest.FlowAdd(ptr, 0)
			ended := ""
			r.Add(func(asyncsteps.AsyncSteps, ...any) { ended = "ok" })
			r.ExecuteWith(func(err *asyncsteps.Error) { ended = err.Code + " (" + err.Info + ")" })
			tt.Advance(0) // the step's callback: it waits
			if step == nil {
				t.Fatal("the step's callback did not run")
			}
			fromGoroutine(func() { ctest.FlowComplete(step, c.code) })
			tt.ResetEvents()
			tt.Advance(2 * timeout)
			if ended != c.ended {
				t.Errorf("the flow ended with %q, want %q", ended, c.ended)
			}
			if r.Running() {
				t.Error("the flow still runs")
			}
			if n := ctest.FlowCounters().Cancels - before.Cancels; n != c.cancels {
				t.Errorf("the step's C cancel handler ran %d times, want %d", n, c.cancels)
			}
			ctest.FlowFree(ptr)
			tt.Run()
			if n := nodesOf(r.State()); n != 0 {
				t.Errorf("%d nodes of the flow in the registry, want 0", n)
			}
			if n := ctest.FlowCounters().Violations - before.Violations; n != 0 {
				t.Errorf("%d violations of the C side", n)
			}
		})
	}
}
