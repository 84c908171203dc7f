//go:build cgo

package cabi

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A free from another thread that comes while execute starts the flow,
// after execute found the root not freed, and whose release the loop runs
// before the start: the flow must not run the freed root's C steps with
// nothing left to cancel them. The free waits for the start, which it
// then cancels: the C step's cancel handler runs, as for a free that
// follows an execute. Before, the release ran first and the flow started
// after it, running the C step of the freed root and leaving it waiting
// for ever, its cancel handler never called.
func TestFreeDuringExecuteCancelsTheStartedFlow(t *testing.T) {
	tool := asyncsteps.NewTestTool()
	ctest.Reset()
	ro := newOwnedRoot(tool)
	p := unsafe.Pointer(ro.node.bsi)
	ctest.HeldWithCancel(p)
	testHookStart = func() {
		testHookStart = nil
		ctest.Free(p)
		tool.Run() // the loop runs what the free posted, before the start
	}
	defer func() { testHookStart = nil }()
	ctest.ExecuteOnly(p, "x", 1)
	tool.Run()
	if got, want := ctest.Trace(), "held\nheld cancel\n"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	if ro.root.Running() {
		t.Error("the freed root's flow still runs")
	}
}
