//go:build cgo

package cabi

import (
	"runtime"
	"testing"

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
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	shared := ctest.SharedSync(true)
	tt := asyncsteps.NewTestTool()
	owned := New(tt)
	r := Wrap(owned).(*asyncsteps.Root)
	ctest.SyncHeld(owned, shared)
	ctest.ExecuteOnly(owned, "x", 1)
	tt.Run() // the lock step waits
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
