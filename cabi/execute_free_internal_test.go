//go:build cgo

package cabi

import (
	"bytes"
	"log/slog"
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

// An execute on a running flow starts nothing and keeps the misuse it
// took for the next execute; a free from another thread between the two
// found no record to log, and the execute, finding the root freed, kept
// nothing: the misuse was lost, neither reported nor logged. It is
// logged now, once.
func TestFreeDuringExecuteOfARunningRootLogsTheMisuseTaken(t *testing.T) {
	var logs bytes.Buffer // written on this goroutine only: a TestTool
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	defer slog.SetDefault(old)
	tool := asyncsteps.NewTestTool()
	ctest.Reset()
	ro := newOwnedRoot(tool)
	p := unsafe.Pointer(ro.node.bsi)
	ctest.HeldWithCancel(p)
	ctest.ExecuteOnly(p, "x", 1)
	tool.Run() // the flow runs, its step held
	ctest.IdleCall(p, ctest.IdleSuccess)
	testHookTaken = func() {
		testHookTaken = nil
		ctest.Free(p)
	}
	defer func() { testHookTaken = nil }()
	ctest.ExecuteOnly(p, "y", 1) // on the running flow: starts nothing
	tool.Run()
	want := `level=ERROR msg="asyncsteps: unhandled error" code=InternalError info="success called on a root: it has no step to complete"` + "\n"
	if got := logs.String(); got != want {
		t.Errorf("logged %q, want %q", got, want)
	}
}
