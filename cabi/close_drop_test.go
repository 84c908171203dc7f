//go:build cgo

package cabi_test

import (
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A free that the loop accepted (it was busy with a step of the flow) and
// then dropped, because it was closed before the free's turn, still cleans
// up: once the loop has stopped, the state variable's cleanup runs,
// exactly once, and not while the step runs. Before, it never ran.
func TestFreeAcceptedThenDroppedByAClosedLoopCleansUp(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		owned := cabi.New(loop)
		r := cabi.Wrap(owned).(*asyncsteps.Root)
		ctest.State(owned) // two C steps that allocate the state variable "counter"
		in, resume := make(chan struct{}), make(chan struct{})
		var traceInStep string
		r.Add(func(asyncsteps.AsyncSteps, ...any) {
			close(in)
			<-resume
			loop.Close() // the loop stops when this step returns, dropping the free
			// A cleanup that ran as soon as the loop was closing would run
			// beside this step, which still uses the flow: give it time to.
			time.Sleep(20 * time.Millisecond)
			traceInStep = ctest.Trace()
		})
		ctest.ExecuteOnly(owned, "x", 1)
		<-in
		ctest.Free(owned) // the loop is not closing: it takes the free
		close(resume)
		loop.Close() // waits until the loop has stopped
		if strings.Contains(traceInStep, "cleanup") {
			t.Errorf("state variable cleaned up while a step of the flow ran:\n%s", traceInStep)
		}
		if !ctest.WaitFor("cleanup", 5*time.Second) {
			t.Fatalf("no cleanup once the loop stopped: %q", ctest.Trace())
		}
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\ncleanup counter=2\n"
		if got := ctest.Trace(); got != want {
			t.Errorf("trace:\n%s\nwant:\n%s", got, want)
		}
		if cabi.Wrap(owned) != nil {
			t.Error("the root is still valid after free")
		}
	})
}

// A waiting C step, freed with its root while a busy loop that is closed
// before their turn holds the free (and, in one case, a success given to
// the step from another thread): once the loop has stopped, the step is
// released, after its cancel handler unless it was completed (its stack
// memory, in the reference implementation's mode, cleaned up once), and
// the state variable is cleaned up once; the step after it never runs.
func TestWaitingStepDroppedByAClosedLoopIsReleasedByFree(t *testing.T) {
	for _, succeed := range []bool{false, true} {
		t.Run(map[bool]string{false: "free", true: "success+free"}[succeed], func(t *testing.T) {
			eachCaller(t, func(t *testing.T, _ bool) { checkWaitingStepDropped(t, succeed) })
		})
	}
}

func checkWaitingStepDropped(t *testing.T, succeed bool) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	owned := cabi.New(loop)
	r := cabi.Wrap(owned).(*asyncsteps.Root)
	ctest.State(owned)
	ctest.HeldWithCancel(owned) // waits until SucceedHeld
	r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("the step after the held one ran") })
	ctest.ExecuteOnly(owned, "x", 1)
	if !ctest.WaitFor("held", 5*time.Second) {
		t.Fatalf("the held step did not run: %q", ctest.Trace())
	}
	in, resume := make(chan struct{}), make(chan struct{})
	var traceInCallback string
	loop.Immediate(func() {
		close(in)
		<-resume
		loop.Close()
		time.Sleep(20 * time.Millisecond) // see TestFreeAcceptedThenDroppedByAClosedLoopCleansUp
		traceInCallback = ctest.Trace()
	})
	<-in
	if succeed {
		ctest.SucceedHeld() // accepted, as the free
	}
	ctest.Free(owned)
	close(resume)
	loop.Close()
	if strings.Contains(traceInCallback, "cleanup") {
		t.Errorf("state variable cleaned up while a callback of the loop ran:\n%s", traceInCallback)
	}
	if !ctest.WaitFor("cleanup", 5*time.Second) {
		t.Fatalf("no cleanup once the loop stopped: %q", ctest.Trace())
	}
	want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\nheld cancel\ncleanup counter=2\n"
	if succeed { // the step completed: nothing to cancel
		want = "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\ncleanup counter=2\n"
	}
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// The same for a Go root given to C: its free, taken by the loop and
// dropped, still releases the waiting C step once the loop has stopped,
// after its cancel handler. Before, only the root pointer was released.
func TestWaitingStepOfAGoRootDroppedByAClosedLoopIsReleasedByFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		given := cabi.Binary(r)
		ctest.HeldWithCancel(given) // waits until SucceedHeld
		r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("the step after the held one ran") })
		ctest.ExecuteOnly(given, "x", 1)
		if !ctest.WaitFor("held", 5*time.Second) {
			t.Fatalf("the held step did not run: %q", ctest.Trace())
		}
		in, resume := make(chan struct{}), make(chan struct{})
		loop.Immediate(func() {
			close(in)
			<-resume
			loop.Close()
		})
		<-in
		ctest.Free(given)
		close(resume)
		loop.Close()
		if !ctest.WaitFor("held cancel", 5*time.Second) {
			t.Fatalf("the held step was not cancelled once the loop stopped: %q", ctest.Trace())
		}
		if got, want := ctest.Trace(), "held\nheld cancel\n"; got != want {
			t.Errorf("trace:\n%s\nwant:\n%s", got, want)
		}
		// The fallback releases the root's node after the steps it left, so
		// after the line above: wait for it.
		waitFreed(t, given)
	})
}

// waitFreed waits until the fallback of a free, which releases the root's
// node last, has made the root pointer stale.
func waitFreed(t *testing.T, root unsafe.Pointer) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for cabi.Wrap(root) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the root pointer is still valid after free")
		}
		time.Sleep(time.Millisecond)
	}
}

// On a loop that has stopped already, a success given to a waiting step
// from another thread and then the free of its root run their fallbacks in
// the order they were called: the step completed, so the free does not
// call its cancel handler. Before, each fallback ran on a goroutine of its
// own, the free's often first.
func TestSuccessThenFreeOnAStoppedLoopKeepTheirOrder(t *testing.T) {
	for range 20 {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		owned := cabi.New(loop)
		ctest.State(owned)
		ctest.HeldWithCancel(owned) // waits until SucceedHeld
		ctest.ExecuteOnly(owned, "x", 1)
		if !ctest.WaitFor("held", 5*time.Second) {
			t.Fatalf("the held step did not run: %q", ctest.Trace())
		}
		loop.Close()
		ctest.SucceedHeld()
		ctest.Free(owned)
		if !ctest.WaitFor("cleanup", 5*time.Second) {
			t.Fatalf("no cleanup once the loop stopped: %q", ctest.Trace())
		}
		// The closed loop ended the flow, which reported it unhandled.
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\n" +
			"unhandled InternalError data=x root=1\ncleanup counter=2\n"
		if got := ctest.Trace(); got != want {
			t.Fatalf("trace:\n%s\nwant:\n%s", got, want)
		}
	}
}

// A C step inside the section of a foreign FutoInSync that C flows share,
// left waiting by a loop that was closed: the free of its root, once the
// loop has stopped, calls the cancel handler of the step (unless a success
// completed it), then the sync's unlock, once, on the thread of the
// fallbacks (is_same_thread 0), so that a flow of another loop enters the
// sync next. Before, unlock was never called and the sync stayed locked.
func TestForeignSyncLeftByAClosedLoopIsUnlockedByFree(t *testing.T) {
	for _, succeed := range []bool{false, true} {
		t.Run(map[bool]string{false: "free", true: "success+free"}[succeed], func(t *testing.T) {
			eachCaller(t, func(t *testing.T, _ bool) { checkForeignSyncLeft(t, succeed) })
		})
	}
}

func checkForeignSyncLeft(t *testing.T, succeed bool) {
	ctest.Reset()
	shared := ctest.SharedSync(false)
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	owned := cabi.New(loop)
	ctest.SyncHeld(owned, shared) // waits inside the section until SucceedHeld
	ctest.ExecuteOnly(owned, "x", 1)
	if !ctest.WaitFor("held", 5*time.Second) {
		t.Fatalf("the held step did not run: %q", ctest.Trace())
	}
	loop.Close()
	if succeed {
		ctest.SucceedHeld() // the loop has stopped: a fallback releases the step
	}
	ctest.Free(owned)
	if !ctest.WaitFor("shared unlock", 5*time.Second) {
		t.Fatalf("the shared sync was not unlocked once the loop stopped: %q", ctest.Trace())
	}
	want := "shared lock\nheld\nunhandled InternalError data=x root=1\nheld cancel\n" +
		"shared unlock held=1 same_thread=0\n"
	if succeed { // the step completed: nothing to cancel
		want = "shared lock\nheld\nunhandled InternalError data=x root=1\n" +
			"shared unlock held=1 same_thread=0\n"
	}
	waitFreed(t, owned) // the fallback has ended: a second unlock would show
	if got := ctest.Trace(); got != want {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, want)
	}

	// A flow of another loop enters the sync now.
	ctest.Reset()
	other := asyncsteps.NewLoop()
	defer other.Close()
	next := cabi.New(other)
	ctest.Sync(next, shared, "next", false)
	ctest.Execute(next, "y")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatalf("the flow of the other loop did not end: %q", ctest.Trace())
	}
	ctest.Free(next)
	checkTrace(t, "shared lock", "next enter", "next leave", "shared unlock held=1 same_thread=1", "end")
}

// The same for a lock that a foreign FutoInSync grants, by a success from
// another thread, once the loop has stopped: the fallback of that success
// counts the section as held, and the free of the root unlocks it. Before,
// the sync stayed locked.
func TestForeignSyncGrantedAfterTheLoopStoppedIsUnlockedByFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		shared := ctest.SharedSync(true)
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		owned := cabi.New(loop)
		ctest.SyncHeld(owned, shared)
		ctest.ExecuteOnly(owned, "x", 1)
		if !ctest.WaitFor("shared lock wait", 5*time.Second) {
			t.Fatalf("the lock step did not run: %q", ctest.Trace())
		}
		loop.Close()
		ctest.SharedGrant()
		ctest.Free(owned)
		waitFreed(t, owned)
		want := "shared lock wait\nunhandled InternalError data=x root=1\nshared grant\n" +
			"shared unlock held=1 same_thread=0\n"
		if got := ctest.Trace(); got != want {
			t.Errorf("trace:\n%s\nwant:\n%s", got, want)
		}
	})
}

// On a TestTool, a free (and, in one case, a success given to the waiting
// step before it) that ResetEvents drops still releases what C was given:
// its fallback runs inside ResetEvents, as a stopped Loop's runs once the
// loop has stopped. The waiting step is released after its cancel handler
// unless the success completed it (the dropped success applies, as a
// TestTool keeps Go's Success from another goroutine), and the state
// variable is cleaned up once. The flow is cancelled when the tool runs next, calling no cancel
// handler twice. Before, the release was lost with the dropped callback.
func TestReleaseDroppedByResetEventsRunsItsFallback(t *testing.T) {
	for _, succeed := range []bool{false, true} {
		t.Run(map[bool]string{false: "free", true: "success+free"}[succeed], func(t *testing.T) {
			eachCaller(t, func(t *testing.T, ri bool) { checkResetEventsDrop(t, succeed, ri) })
		})
	}
}

func checkResetEventsDrop(t *testing.T, succeed, ri bool) {
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	alive := ctest.StrictAlive()
	tt := asyncsteps.NewTestTool()
	owned := cabi.New(tt)
	r := cabi.Wrap(owned).(*asyncsteps.Root)
	ctest.State(owned)
	ctest.HeldWithCancel(owned) // waits until SucceedHeld
	ctest.ExecuteOnly(owned, "x", 1)
	tt.Run()
	if succeed {
		ctest.SucceedHeld()
		tt.ResetEvents() // drops the success's task: the success applies all the same
	}
	ctest.Free(owned)
	tt.ResetEvents() // drops the free: the root is released now
	want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\nheld cancel\ncleanup counter=2\n"
	if succeed { // the step completed: nothing to cancel
		want = "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nheld\ncleanup counter=2\n"
	}
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if cabi.Wrap(owned) != nil {
		t.Error("the root is still valid after its free was dropped")
	}
	// The fallback cancelled the flow: its callback is left, after the
	// delivery of the success (the first reset applied it, as a TestTool
	// keeps Go's Success from another goroutine), and calls no cancel
	// handler twice.
	pending := 1
	if succeed {
		pending = 2
	}
	if n := tt.Pending(); n != pending {
		t.Errorf("%d callbacks scheduled after ResetEvents, want %d", n, pending)
	}
	tt.Run()
	if r.Running() {
		t.Error("the freed root's flow still runs")
	}
	if got := ctest.Trace(); got != want {
		t.Errorf("trace once the flow was cancelled:\n%s\nwant:\n%s", got, want)
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("%d callbacks scheduled once the tool ran", n)
	}
	if succeed && ri {
		// The success's args (the caller's placeholders) went to the
		// flow: once the flow lets them go, their cleanups run on tt.
		runCleanupsOn(tt, alive)
	}
}

// runCleanupsOn runs tt, with collections, until the caller's
// placeholders alive are no more than alive, or for 5 seconds: the
// cleanup of a custom object that Go dropped runs on its flow's tool.
func runCleanupsOn(tt *asyncsteps.TestTool, alive int) {
	deadline := time.Now().Add(5 * time.Second)
	for ctest.StrictAlive() > alive && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
		tt.Run()
	}
}
