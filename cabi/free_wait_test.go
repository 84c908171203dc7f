//go:build cgo

package cabi_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The table's free posts the release and returns without blocking, as the
// C interface's rules want of every function callable from any thread:
// with the loop busy, the cleanups have not run when it returns, and run
// once the loop is free.
func TestFreeReturnsBeforeTheCleanups(t *testing.T) {
	root := executedStateRoot(t)
	loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	busy, freed := make(chan struct{}), make(chan string)
	loop.Immediate(func() { <-busy })
	go func() {
		ctest.Free(root)
		freed <- ctest.Trace()
	}()
	var got string
	select {
	case got = <-freed:
		close(busy)
	case <-time.After(5 * time.Second):
		close(busy)
		<-freed
		t.Fatal("free waited for its busy loop")
	}
	if want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nend\n"; got != want {
		t.Errorf("trace when free returned:\n%s\nwant:\n%s", got, want)
	}
	if !ctest.WaitFor("cleanup counter=2", 5*time.Second) {
		t.Errorf("no cleanup after free: %q", ctest.Trace())
	}
}

// FreeWait from a thread that runs no loop returns once the cleanups have run
// on the loop, as the C++ reference implementation's destructor does: the
// caller may destroy what the cleanups use, or exit, at once. The loop is
// busy with another callback when FreeWait is called, so one that only
// posted would return before them.
func TestFreeWaitOffTheLoopWaitsForTheCleanups(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := executedStateRoot(t)
		loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
		busy := make(chan struct{})
		loop.Immediate(func() { <-busy })
		time.AfterFunc(20*time.Millisecond, func() { close(busy) })
		cabi.FreeWait(root)
		// Read once: checkTrace would wait for a late cleanup.
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nend\ncleanup counter=2\n"
		if got := ctest.Trace(); got != want {
			t.Errorf("trace when FreeWait returned:\n%s\nwant:\n%s", got, want)
		}
	})
}

// FreeWait called in a callback on one loop, of a root on another loop that
// waits for the first one's callback to end, returns at once: waiting for
// the other loop there would deadlock both.
func TestFreeWaitOnALoopThreadDoesNotWait(t *testing.T) {
	here := asyncsteps.NewLoop()
	defer here.Close()
	cabi.Wrap(cabi.New(here)) // cabi pins the loop's thread
	checkFreeWaitInCallback(t, here)
}

// FreeWait of a root that was never executed and has no state variable has no
// C callback to wait for: it returns at once, even while the loop is busy,
// so that making and freeing roots stays cheap.
func TestFreeWaitOfAnUnusedRootDoesNotWait(t *testing.T) {
	root := newCRoot(t)
	loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	busy := make(chan struct{})
	defer close(busy) // before the loop's Close, a cleanup of newCRoot's
	loop.Immediate(func() { <-busy })
	freed := make(chan struct{})
	go func() {
		cabi.FreeWait(root)
		close(freed)
	}()
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("FreeWait of an unused root waited for its busy loop")
	}
}

// FreeWait called in a Go callback on a loop that cabi has never seen (so it
// has not pinned its thread), of a root on another loop that waits for
// that callback to end, returns at once: the callback may call C, which
// calls futoin_asyncsteps_free_wait, and waiting there would deadlock both loops.
func TestFreeWaitOnAnUnseenLoopDoesNotWait(t *testing.T) {
	unseen := asyncsteps.NewLoop()
	defer unseen.Close()
	checkFreeWaitInCallback(t, unseen)
}

// checkFreeWaitInCallback calls FreeWait in a callback of here, for a root
// on another loop that waits for that callback to end, and fails unless
// FreeWait returns at once and the cleanups run after.
func checkFreeWaitInCallback(t *testing.T, here *asyncsteps.Loop) {
	t.Helper()
	root := executedStateRoot(t)
	other := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	inCallback, freed, rescue := make(chan struct{}), make(chan struct{}), make(chan struct{})
	other.Immediate(func() { // the other loop waits for here
		select {
		case <-inCallback:
		case <-rescue: // the test failed: end the deadlock, or Close hangs
		}
	})
	here.Immediate(func() {
		defer close(freed)
		cabi.FreeWait(root)
		close(inCallback)
	})
	select {
	case <-freed:
	case <-time.After(10 * time.Second):
		close(rescue)
		<-freed
		t.Fatal("FreeWait in a loop's callback waited for a loop that waits for it")
	}
	if !ctest.WaitFor("cleanup", 5*time.Second) {
		t.Errorf("no cleanup after FreeWait: %q", ctest.Trace())
	}
}

// executedStateRoot returns a root whose flow allocated the state
// variable "counter" and has ended: its free has a cleanup to run.
func executedStateRoot(t *testing.T) unsafe.Pointer {
	t.Helper()
	root := newCRoot(t)
	ctest.State(root)
	ctest.Execute(root, "x")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("the flow did not end")
	}
	return root
}

// A state variable allocated through the idle root, before any execute,
// has a cleanup to wait for: FreeWait off the loop returns once it has run,
// also while the loop is busy with another callback.
func TestFreeWaitOfAnIdleRootWaitsForItsStateVariable(t *testing.T) {
	root := newCRoot(t)
	ctest.StateIdle(root)
	loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	busy := make(chan struct{})
	loop.Immediate(func() { <-busy })
	time.AfterFunc(20*time.Millisecond, func() { close(busy) })
	cabi.FreeWait(root)
	if got, want := ctest.Trace(), "alloc counter\ncleanup counter=5\n"; got != want {
		t.Errorf("trace when FreeWait returned: %q, want %q", got, want)
	}
}

// FreeWait called by an Await function of the root's own flow, on a goroutine
// that waits for nothing of the loop's, waits for the cleanups without
// deadlocking: the loop cancels the flow, and the Await step with it,
// without waiting for the function to return.
func TestFreeWaitFromTheFlowsOwnAwaitFunction(t *testing.T) {
	root := newCRoot(t)
	ctest.State(root)
	r := cabi.Wrap(root).(*asyncsteps.Root)
	freed := make(chan string, 1)
	r.Await(func(context.Context) (any, error) {
		cabi.FreeWait(root)
		freed <- ctest.Trace()
		return nil, nil
	})
	r.ExecuteWith(func(*asyncsteps.Error) {})
	select {
	case got := <-freed:
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\ncleanup counter=2\n"
		if got != want {
			t.Errorf("trace when FreeWait returned:\n%s\nwant:\n%s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FreeWait in the flow's own Await function did not return")
	}
}

// FreeWait off the loop that is waiting when the loop closes, before the loop
// has run the release it took, returns, and the cleanups still run, once
// the loop has stopped: a closing loop drops the callbacks it took, so
// nothing else would run them.
func TestFreeWaitAsTheLoopClosesCleansUpOnceItHasStopped(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	root := cabi.New(loop)
	ctest.State(root)
	ctest.Execute(root, "x")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("the flow did not end")
	}
	release := make(chan struct{})
	loop.Immediate(func() {
		<-release
		loop.Close() // the loop stops when this callback returns
	})
	freed := make(chan struct{})
	go func() {
		cabi.FreeWait(root) // its release waits behind the callback
		close(freed)
	}()
	for ctest.IsValid(root) != 0 { // FreeWait has begun
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // and posted its release (else the test cannot fail)
	close(release)
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("FreeWait did not return once the loop closed")
	}
	if !ctest.WaitFor("cleanup counter=2", 5*time.Second) {
		t.Errorf("no cleanup once the loop stopped: %q", ctest.Trace())
	}
}
