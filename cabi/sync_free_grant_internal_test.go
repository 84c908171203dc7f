//go:build cgo

package cabi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// grantRace runs the grant of the foreign FutoInSync of ctest.SharedSync
// on another goroutine, held between its claim of the waiting lock step
// and the post of its task until post is called.
type grantRace struct {
	claimed, release, done chan struct{}
}

func startGrant(t *testing.T) *grantRace {
	g := &grantRace{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	testHookClaimed = func(*node, uint32, bool) {
		close(g.claimed)
		<-g.release
	}
	t.Cleanup(func() { testHookClaimed = nil })
	go func() {
		defer close(g.done)
		ctest.SharedGrant()
	}()
	<-g.claimed
	return g
}

// post lets the grant post its task, and waits until it has.
func (g *grantRace) post() {
	close(g.release)
	<-g.done
}

// The free of a root in a foreign FutoInSync's lock step, granted by a
// success from another thread that has claimed the step but whose task
// the tool has not run, in every order of the grant's task, the free and
// the drop of both by ResetEvents: the sync, which counts the lock as
// given, is unlocked exactly once, and nothing of the flow is left; a
// grant after the free has been applied finds the step gone, and the
// flow unlocks nothing. Before, a free dropped by ResetEvents ahead of
// the grant's task released the lock step before the section looked at
// it, took the section for not held, and left the sync locked.
func TestFreeAroundAClaimedForeignGrantUnlocksOnce(t *testing.T) {
	const (
		locked = "shared lock wait\nshared grant\n"
		// By a fallback, as a stopped loop's: is_same_thread 0.
		dropped = locked + "shared unlock held=1 same_thread=0\n"
		onLoop  = locked + "shared unlock held=1 same_thread=1\n"
	)
	for _, c := range []struct {
		name, want string
		run        func(t *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer)
	}{
		{"claim free reset post", dropped, func(t *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
			g := startGrant(t)
			ctest.Free(owned)
			tt.ResetEvents()
			g.post()
		}},
		{"claim free post reset", dropped, func(t *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
			g := startGrant(t)
			ctest.Free(owned)
			g.post()
			tt.ResetEvents()
		}},
		{"claim free run post", onLoop, func(t *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
			g := startGrant(t)
			ctest.Free(owned)
			tt.Run()
			g.post()
		}},
		{"grant free reset", dropped, func(_ *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
			ctest.SharedGrant()
			ctest.Free(owned)
			tt.ResetEvents()
		}},
		{"free run grant", locked, func(_ *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
			ctest.Free(owned)
			tt.Run()
			ctest.SharedGrant() // on a stale pointer: ignored
		}},
		{"grant run free", locked + "held\nheld cancel\nshared unlock held=1 same_thread=1\n",
			func(_ *testing.T, tt *asyncsteps.TestTool, owned unsafe.Pointer) {
				ctest.SharedGrant()
				tt.Run()
				ctest.Free(owned)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tt, owned, r := lockWaitsOnTestTool(t)
			c.run(t, tt, owned)
			tt.Run()
			if got := ctest.Trace(); got != c.want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, c.want)
			}
			// After the free, the grant went to a step that is gone, whose
			// lock this sync (which sets no cancel handler) counts as given:
			// not the flow's to unlock.
			if voidGrant := c.want == locked; ctest.SharedLocked() != voidGrant {
				t.Error("the shared sync stays locked")
			}
			if r.Running() {
				t.Error("the freed root's flow still runs")
			}
			if n := nodesOf(r.State()); n != 0 {
				t.Errorf("%d nodes of the flow in the registry, want 0", n)
			}
		})
	}
}

// The same on a Loop closed between the grant's claim and its post, and
// then freed: once the loop has stopped, the free's fallback, which comes
// first, unlocks the sync, once, on the thread of the fallbacks, and the
// grant's finds the step released. Before, the sync stayed locked.
func TestFreeOfAClosedLoopBeforeAClaimedForeignGrantUnlocks(t *testing.T) {
	ctest.Reset()
	shared := ctest.SharedSync(true)
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	owned := New(loop)
	lp := loopFor(loop)
	r := Wrap(owned).(*asyncsteps.Root)
	ctest.SyncHeld(owned, shared)
	ctest.ExecuteOnly(owned, "x", 1)
	if !ctest.WaitFor("shared lock wait", 5*time.Second) {
		t.Fatalf("the lock step did not run: %q", ctest.Trace())
	}
	g := startGrant(t)
	loop.Close() // waits until the loop has stopped
	ctest.Free(owned)
	g.post()
	waitFallbacks(t, lp)
	want := "shared lock wait\nshared grant\nunhandled InternalError data=x root=1\n" +
		"shared unlock held=1 same_thread=0\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if ctest.SharedLocked() {
		t.Error("the shared sync stays locked")
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
}

// waitFallbacks waits until the watcher of lp, a stopped loop, has
// queued the fallbacks of the callbacks it kept, and until every
// fallback queued has run.
func waitFallbacks(t *testing.T, lp *loopCtx) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		lp.mu.Lock()
		stopped := lp.stopped
		lp.mu.Unlock()
		afterStop.mu.Lock()
		idle := !afterStop.running && len(afterStop.queue) == 0
		afterStop.mu.Unlock()
		if stopped && idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the fallbacks of the stopped loop did not end")
}
