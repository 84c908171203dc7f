//go:build cgo

package cabi_test

import (
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
	"github.com/asyncsteps/asyncsteps/internal/eagertool"
)

// On a Tool that runs the flow inside execute, a C step may free its own
// root: the free, which comes while execute starts the flow, is released
// once the start has returned, but cancels the flow at once, as a free in
// a callback of the root's own flow does: the held step never runs.
// Holding a lock over the start, so that a free from another thread waits
// for it, would deadlock here.
func TestStepFreesItsRootOnToolThatRunsInsideImmediate(t *testing.T) {
	ctest.Reset()
	root := cabi.New(&eagertool.Tool{})
	ctest.FreeOwn(root)
	ctest.HeldWithCancel(root)
	ctest.ExecuteOnly(root, "x", 1)
	want := []string{"free own root"}
	if got := ctest.Lines(); !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}
