//go:build cgo

package cabi

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A foreign FutoInSync grants its lock by a success from another thread
// on the waiting lock step, which claims the step, and the flow is
// cancelled before the loop runs the success's task. The claim won: the
// lock step completed, and its cancel handler does not run, so the sync
// is never told that the flow gave the lock up; the section's cancel
// handler must unlock it. Before, it took the section for not held (the
// task that notes the lock held had not run) and the sync stayed locked
// for good.
func TestCancelAfterAClaimedGrantUnlocksTheForeignSync(t *testing.T) {
	tt, owned, r := lockWaitsOnTestTool(t)
	claimed, post, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	testHookClaimed = func(*node, uint32, bool) {
		close(claimed)
		<-post
	}
	t.Cleanup(func() { testHookClaimed = nil })
	go func() {
		defer close(done)
		ctest.SharedGrant()
	}()
	<-claimed
	r.Cancel()
	tt.Run() // the cancel, before the success's task is posted
	close(post)
	<-done
	tt.Run()
	ctest.Free(owned)
	tt.Run()
	want := "shared lock wait\nshared grant\nshared unlock held=1 same_thread=1\n"
	checkTraceLeavesNoNode(t, r, want)
}

// lockWaitsOnTestTool runs, on a new TestTool driven by the test's
// goroutine locked to its thread (the C steps check that they run on
// one), a root made by C (owned; r its Go side) whose flow locks
// ctest's shared foreign sync, and returns once the lock step waits.
func lockWaitsOnTestTool(t *testing.T) (tt *asyncsteps.TestTool, owned unsafe.Pointer, r *asyncsteps.Root) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	ctest.Reset()
	shared := ctest.SharedSync(true)
	tt = asyncsteps.NewTestTool()
	owned = New(tt)
	r = Wrap(owned).(*asyncsteps.Root)
	ctest.SyncHeld(owned, shared)
	ctest.ExecuteOnly(owned, "x", 1)
	tt.Run() // the lock step waits
	return tt, owned, r
}
