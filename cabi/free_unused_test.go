//go:build cgo

package cabi_test

import (
	"context"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The free of a root that never ran and holds nothing with a C cleanup
// releases it at once, on the caller's thread: it posts nothing to the
// loop, and the step added to it never runs, nor its cancel handler.
// Before, each such free cost the loop a turn, which the C++ reference
// implementation's tests of how many roots a thread makes per 100 ms
// measure (spi/instance_*).
func TestFreeOfAnUnusedRootPostsNothing(t *testing.T) {
	for _, wait := range []bool{false, true} {
		ctest.Reset()
		tool := asyncsteps.NewTestTool()
		root := cabi.New(tool)
		ctest.HeldWithCancel(root)
		if wait {
			cabi.FreeWait(root)
		} else {
			ctest.Free(root)
		}
		if n := tool.Pending(); n != 0 {
			t.Errorf("wait %v: %d events pending after the free, want 0", wait, n)
		}
		tool.Run()
		if got := ctest.Trace(); got != "" {
			t.Errorf("wait %v: trace %q, want none", wait, got)
		}
	}
}

// A root that holds a state variable taken while idle is still released
// on its loop, which runs the variable's cleanup.
func TestFreeOfAnIdleRootWithAStateVariablePostsItsRelease(t *testing.T) {
	ctest.Reset()
	tool := asyncsteps.NewTestTool()
	root := cabi.New(tool)
	ctest.StateIdle(root)
	ctest.Free(root)
	if tool.Pending() == 0 {
		t.Fatal("nothing pending after the free: the cleanup ran off the loop")
	}
	if got, want := ctest.Trace(), "alloc counter\n"; got != want {
		t.Errorf("trace after the free %q, want %q", got, want)
	}
	tool.Run()
	if got, want := ctest.Trace(), "alloc counter\ncleanup counter=5\n"; got != want {
		t.Errorf("trace after the loop ran %q, want %q", got, want)
	}
}

// Roots made and freed from several threads at once, while the loop runs
// flows: the race detector checks that a free on the caller's thread
// shares nothing with the loop, and no step of those roots ever runs.
func TestUnusedRootsMadeAndFreedFromManyThreads(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	const threads, roots = 4, 300
	var wg sync.WaitGroup
	for range threads {
		wg.Go(func() {
			for range roots {
				root := cabi.New(loop)
				ctest.HeldWithCancel(root)
				cabi.FreeWait(root)
			}
		})
	}
	ran := 0
	for range roots {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(asyncsteps.AsyncSteps, ...any) { ran++ })
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if ran != roots {
		t.Errorf("%d flows ran, want %d", ran, roots)
	}
	if got := ctest.Trace(); got != "" {
		t.Errorf("trace %q: a step of an unused root ran", got)
	}
}
