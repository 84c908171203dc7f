//go:build cgo

package cabi

import (
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A handle_error from another thread on a waiting C step, made once its
// loop has stopped, before or after the free of the root: its fallback
// runs the step's cancel handler, once, as the error would have run it,
// and the free's fallback then finds the step released (or, free first,
// the free's runs it and the error's finds the step released). Before,
// the error's fallback released the step without its cancel handler,
// which then never ran.
func TestHandleErrorOnAStoppedLoopRunsTheCancelHandler(t *testing.T) {
	for _, freeFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "handle_error+free", true: "free+handle_error"}[freeFirst], func(t *testing.T) {
			loop, owned, lp, r := heldOnLoop(t) // waits until FailHeld
			loop.Close()                        // waits until the loop has stopped
			if freeFirst {
				ctest.Free(owned)
				ctest.FailHeld()
			} else {
				ctest.FailHeld()
				ctest.Free(owned)
			}
			waitFallbacks(t, lp)
			want := "held\nunhandled InternalError data=x root=1\nheld cancel\n"
			checkTraceLeavesNoNode(t, r, want)
		})
	}
}
