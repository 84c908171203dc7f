//go:build cgo

package cabi_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A state variable that a C step makes in the flow of a Go root given by
// Binary lives in the Go State, which outlives the C pointer (the Root may
// run again): its cleanup runs once the Root and its State are collected,
// exactly once.
func TestGoRootStateVariableCleanedUpByGC(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		runGoRootWithStateVariable(t)
		collectUntilCleanup(t, "the Go root was collected")
		checkTrace(t,
			"alloc counter",
			"state1 missing=(nil)",
			"state2 counter=2 same=1",
			"cleanup counter=2",
		)
	})
}

// A Go step that unsets the variable in its State ends it: its cleanup
// runs after a garbage collection, while the Root lives on.
func TestGoRootStateVariableUnsetIsCleanedUp(t *testing.T) {
	r, root := newRoot(t)
	ctest.State(root)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.State().Unset("counter") })
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	collectUntilCleanup(t, "the variable was unset")
	checkTrace(t,
		"alloc counter",
		"state1 missing=(nil)",
		"state2 counter=2 same=1",
		"cleanup counter=2",
	)
	runtime.KeepAlive(r)
	ctest.Free(root)
}

// runGoRootWithStateVariable runs, on a Go root given to C and then freed
// by C, two C steps sharing a state variable. It drops the root on return,
// and closes its loop: the test need not depend on when a running Loop lets
// go of a flow that has ended.
func runGoRootWithStateVariable(t *testing.T) {
	t.Helper()
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	root := cabi.Binary(r)
	ctest.State(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	ctest.Free(root)
	checkTrace(t,
		"alloc counter",
		"state1 missing=(nil)",
		"state2 counter=2 same=1",
	)
}

// The free of a root owned by C cleans its state variables up; a garbage
// collection afterwards does not clean them up a second time.
func TestCRootStateVariableCleanedUpOnceByFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		runCRootWithStateVariable(t)
		settleCleanups()
		checkTrace(t,
			"alloc counter",
			"state1 missing=(nil)",
			"state2 counter=2 same=1",
			"end",
			"cleanup counter=2",
		)
	})
}

// runCRootWithStateVariable runs a root owned by C with two C steps sharing
// a state variable, frees it, waits for the variable's cleanup and closes
// the root's loop, so that nothing keeps the flow's State.
func runCRootWithStateVariable(t *testing.T) {
	t.Helper()
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	root := cabi.New(loop)
	ctest.State(root)
	runAndFree(t, root)
}

// gcUntil collects garbage until cond holds, for up to d.
func gcUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return true
}

// collectUntilCleanup collects garbage until a C cleanup shows in the
// trace, failing the test if none does in 5 s (once what names has
// happened), then lets the other cleanups due run (settleCleanups).
func collectUntilCleanup(t *testing.T, what string) {
	t.Helper()
	if !gcUntil(5*time.Second, func() bool { return strings.Contains(ctest.Trace(), "cleanup") }) {
		t.Fatalf("no cleanup once %s: %q", what, ctest.Trace())
	}
	settleCleanups()
}

// settleCleanups gives the cleanups of everything a test dropped the
// chance to run: it collects garbage until the cleanup of an object dropped
// now has run, then once more (a pointer-free object this small could wait
// for its neighbours in a shared block, hence the pointers).
func settleCleanups() {
	ran := make(chan struct{})
	runtime.AddCleanup(new([4]*byte), func(ch chan struct{}) { close(ch) }, ran)
	gcUntil(5*time.Second, func() bool {
		select {
		case <-ran:
			return true
		default:
			return false
		}
	})
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
}
