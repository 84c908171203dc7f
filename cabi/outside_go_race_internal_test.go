//go:build cgo

package cabi

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A waiting C step is completed from outside its callback twice: by
// success from a C thread, and by Go, through Wrap of its pointer, from
// another goroutine, with a call that fails a waiting step (Break,
// Continue, or a late Add). Both come before the loop's next turn, so
// neither has been applied when the other is made. The one made first
// applies, as between two C threads: the step's C cancel handler runs
// only when Go's call does. Before, Go's call went to the engine with no
// claim of cabi's: the engine applied it whichever came first, and when
// success had claimed the step first, its task released the node, so the
// failed step's cancel handler never ran; when Go came first, success
// still claimed the step as completed, with the same outcome.
func TestGoCallRacingAnOutsideSuccessFirstMadeApplies(t *testing.T) {
	calls := []struct {
		name  string
		call  func(asyncsteps.AsyncSteps)
		ended string // the flow's end (code: info) when the call applies
	}{
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }, "InternalError: Break outside of a loop"},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }, "InternalError: Continue outside of a loop"},
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(func(asyncsteps.AsyncSteps, ...any) {}) },
			"InternalError: Add called on a step whose callback has returned: only the step's own callback adds sub-steps"},
	}
	for _, c := range calls {
		for _, successFirst := range []bool{true, false} {
			name := c.name + " first"
			ended, cancels := c.ended, 1
			if successFirst {
				name = "success first, then " + c.name
				ended, cancels = "ok", 0
			}
			t.Run(name, func(t *testing.T) {
				var step unsafe.Pointer
				w := startWrapRun(t, func(w *wrapRun, p unsafe.Pointer) {
					step = p
					ctest.FlowGuard(p, 0) // waits, with a C cancel handler
				})
				goCall := func() { fromGoroutine(func() { c.call(Wrap(step)) }) }
				if successFirst {
					completeFromThread(step, 0)
					goCall()
				} else {
					goCall()
					completeFromThread(step, 0)
				}
				w.tt.Run()
				got := w.ended
				if got != "ok" {
					got += ": " + w.st.ErrorInfo
				}
				if got != ended {
					t.Errorf("the flow ended with %q, want %q", got, ended)
				}
				if n := ctest.FlowCounters().Cancels - w.before.Cancels; n != cancels {
					t.Errorf("the step's C cancel handler ran %d times, want %d", n, cancels)
				}
				w.freeClean(t)
			})
		}
	}
}

// fromGoroutine runs f on a goroutine of its own and waits for it.
func fromGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// Go's Break, Continue and Add through Wrap of a C step's pointer, from
// a Go sub-step of that step, raise InternalError in the sub-step's
// callback, as they do when nothing else came (see
// TestWrapCallFromASubStepIsInternalError), also when a completion from
// another thread claimed the step while its callback ran, before the
// callback added the sub-step: that completion is void (the sub-steps
// run), and it claims nothing that the call could lose to. Before, the
// call found that claim and did nothing: the sub-step went on, and the
// flow ended "ok".
func TestWrapCallFromASubStepAfterAVoidClaimIsInternalError(t *testing.T) {
	calls := []struct {
		name string
		call func(parent asyncsteps.AsyncSteps)
	}{
		{"Break", func(p asyncsteps.AsyncSteps) { p.Break() }},
		{"Continue", func(p asyncsteps.AsyncSteps) { p.Continue() }},
		{"Add", func(p asyncsteps.AsyncSteps) { p.Add(func(asyncsteps.AsyncSteps, ...any) {}) }},
	}
	for _, c := range calls {
		for _, code := range []int{0, 3} { // success, handle_error
			t.Run(fmt.Sprintf("%s code=%d", c.name, code), func(t *testing.T) {
				checkCallFromSubstep(t, c.name, c.call, func(cstep unsafe.Pointer) {
					completeFromThread(cstep, code) // claims the step, posts
				})
			})
		}
	}
}
