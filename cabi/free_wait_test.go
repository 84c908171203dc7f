//go:build cgo

package cabi_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// free from a thread that runs no loop returns once the cleanups have run
// on the loop, as the C++ reference implementation's destructor does: the
// caller may destroy what the cleanups use, or exit, at once. The loop is
// busy with another callback when free is called, so a free that only
// posted would return before them.
func TestFreeOffTheLoopWaitsForTheCleanups(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.State(root)
		ctest.Execute(root, "x")
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatal("the flow did not end")
		}
		loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
		busy := make(chan struct{})
		loop.Immediate(func() { <-busy })
		time.AfterFunc(20*time.Millisecond, func() { close(busy) })
		ctest.Free(root)
		// Read once: checkTrace would wait for a late cleanup.
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\nend\ncleanup counter=2\n"
		if got := ctest.Trace(); got != want {
			t.Errorf("trace when free returned:\n%s\nwant:\n%s", got, want)
		}
	})
}

// free called in a callback on one loop, of a root on another loop that
// waits for the first one's callback to end, returns at once: waiting for
// the other loop there would deadlock both.
func TestFreeOnALoopThreadDoesNotWait(t *testing.T) {
	root := newCRoot(t)
	ctest.State(root)
	ctest.Execute(root, "x")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("the flow did not end")
	}
	other := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	here := asyncsteps.NewLoop()
	defer here.Close()
	cabi.Wrap(cabi.New(here)) // cabi pins the loop's thread
	inCallback, freed, rescue := make(chan struct{}), make(chan struct{}), make(chan struct{})
	other.Immediate(func() { // the other loop waits for ours
		select {
		case <-inCallback:
		case <-rescue: // the test failed: end the deadlock, or Close hangs
		}
	})
	here.Immediate(func() {
		defer close(freed)
		ctest.Free(root)
		close(inCallback)
	})
	select {
	case <-freed:
	case <-time.After(10 * time.Second):
		close(rescue)
		<-freed
		t.Fatal("free on a loop's thread waited for a loop that waits for it")
	}
	if !ctest.WaitFor("cleanup", 5*time.Second) {
		t.Errorf("no cleanup after free: %q", ctest.Trace())
	}
}

// free of a root that was never executed and has no state variable has no
// C callback to wait for: it returns at once, even while the loop is busy,
// so that making and freeing roots stays cheap.
func TestFreeOfAnUnusedRootDoesNotWait(t *testing.T) {
	root := newCRoot(t)
	loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	busy := make(chan struct{})
	defer close(busy) // before the loop's Close, a cleanup of newCRoot's
	loop.Immediate(func() { <-busy })
	freed := make(chan struct{})
	go func() {
		ctest.Free(root)
		close(freed)
	}()
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("free of an unused root waited for its busy loop")
	}
}

// free called in a Go callback on a loop that cabi has never seen (so it
// has not pinned its thread), of a root on another loop that waits for
// that callback to end, returns at once: the callback calls C, which calls
// free, and waiting there would deadlock both loops.
func TestFreeOnAnUnseenLoopDoesNotWait(t *testing.T) {
	root := newCRoot(t)
	ctest.State(root)
	ctest.Execute(root, "x")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("the flow did not end")
	}
	other := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	unseen := asyncsteps.NewLoop()
	defer unseen.Close()
	inCallback, freed, rescue := make(chan struct{}), make(chan struct{}), make(chan struct{})
	other.Immediate(func() { // the other loop waits for the unseen one
		select {
		case <-inCallback:
		case <-rescue: // the test failed: end the deadlock, or Close hangs
		}
	})
	unseen.Immediate(func() {
		defer close(freed)
		ctest.Free(root)
		close(inCallback)
	})
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		close(rescue)
		<-freed
		t.Fatal("free in a callback of an unseen loop waited for a loop that waits for it")
	}
	if !ctest.WaitFor("cleanup", 5*time.Second) {
		t.Errorf("no cleanup after free: %q", ctest.Trace())
	}
}

// A state variable allocated through the idle root, before any execute,
// has a cleanup to wait for: free off the loop returns once it has run,
// also while the loop is busy with another callback.
func TestFreeOfAnIdleRootWaitsForItsStateVariable(t *testing.T) {
	root := newCRoot(t)
	ctest.StateIdle(root)
	loop := cabi.Wrap(root).(*asyncsteps.Root).Tool().(*asyncsteps.Loop)
	busy := make(chan struct{})
	loop.Immediate(func() { <-busy })
	time.AfterFunc(20*time.Millisecond, func() { close(busy) })
	ctest.Free(root)
	if got, want := ctest.Trace(), "alloc counter\ncleanup counter=5\n"; got != want {
		t.Errorf("trace when free returned: %q, want %q", got, want)
	}
}

// free called by an Await function of the root's own flow, on a goroutine
// that waits for nothing of the loop's, waits for the cleanups without
// deadlocking: the loop cancels the flow, and the Await step with it,
// without waiting for the function to return.
func TestFreeFromTheFlowsOwnAwaitFunction(t *testing.T) {
	root := newCRoot(t)
	ctest.State(root)
	r := cabi.Wrap(root).(*asyncsteps.Root)
	freed := make(chan string, 1)
	r.Await(func(context.Context) (any, error) {
		ctest.Free(root)
		freed <- ctest.Trace()
		return nil, nil
	})
	r.ExecuteWith(func(*asyncsteps.Error) {})
	select {
	case got := <-freed:
		want := "alloc counter\nstate1 missing=(nil)\nstate2 counter=2 same=1\ncleanup counter=2\n"
		if got != want {
			t.Errorf("trace when free returned:\n%s\nwant:\n%s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("free in the flow's own Await function did not return")
	}
}

// free off the loop that is waiting when the loop closes, before the loop
// has run the release it took, returns, and the cleanups still run, once
// the loop has stopped: a closing loop drops the callbacks it took, so
// nothing else would run them.
func TestFreeWaitingAsTheLoopClosesCleansUpOnceItHasStopped(t *testing.T) {
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
		ctest.Free(root) // its release waits behind the callback
		close(freed)
	}()
	for ctest.IsValid(root) != 0 { // free has begun
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // and posted its release (else the test cannot fail)
	close(release)
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("free did not return once the loop closed")
	}
	if !ctest.WaitFor("cleanup counter=2", 5*time.Second) {
		t.Errorf("no cleanup once the loop stopped: %q", ctest.Trace())
	}
}
