//go:build cgo

package cabi_test

import (
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A root of C's that Go executed through Wrap, whose C step its closed
// loop left waiting, is not an unused root: its free releases that step
// once the loop has stopped, after the step's C cancel handler, as for a
// root that C executed. Released at once on the caller's thread, as a
// root never executed is, the step stayed allocated and its cancel
// handler never ran.
func TestFreeOfAGoExecutedRootReleasesTheStepItsClosedLoopLeft(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		owned := cabi.New(loop)
		ctest.HeldWithCancel(owned) // waits for a completion that never comes
		cabi.Wrap(owned).(*asyncsteps.Root).Execute()
		if !ctest.WaitFor("held", 5*time.Second) {
			t.Fatalf("the held step did not run: %q", ctest.Trace())
		}
		loop.Close() // ends the flow: no cancel handler runs
		ctest.Free(owned)
		if !ctest.WaitFor("held cancel", 2*time.Second) {
			t.Errorf("trace after the free %q, want the held step's cancel handler", ctest.Trace())
		}
		if got, want := ctest.Trace(), "held\nheld cancel\n"; got != want {
			t.Errorf("trace %q, want %q", got, want)
		}
	})
}
