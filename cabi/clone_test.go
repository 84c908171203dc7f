//go:build cgo

package cabi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go clone of a root owned by C runs the model's C steps in a flow of
// its own: a state variable they allocate is the clone's, which the
// model's free does not clean up while the clone's step still uses it
// (AddressSanitizer: heap-use-after-free), and whose cleanup runs once
// the clone is collected. Before, it joined the model's variables, and
// the model's free cleaned it up under the clone.
func TestCloneOfACRootKeepsItsOwnStateVariables(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		onLoopOfItsOwn(func(loop *asyncsteps.Loop) {
			model := cabi.New(loop)
			ctest.StateKept(model)
			runClone(t, cabi.Wrap(model).(*asyncsteps.Root).Clone(), func() {
				cabi.FreeWait(model) // the model never ran: nothing of its to clean up
				ctest.SucceedHeld()
			})
			checkTrace(t, "alloc counter", "held", "kept counter=1", "kept later counter=1")
		})
		if !gcUntil(5*time.Second, func() bool { return strings.Contains(ctest.Trace(), "cleanup") }) {
			t.Fatalf("no cleanup once the clone was collected: %q", ctest.Trace())
		}
		settleCleanups()
		checkTrace(t, "alloc counter", "held", "kept counter=1", "kept later counter=1", "cleanup counter=1")
	})
}

// A clone holds in its State the variables its model had when it was
// made, but its C steps do not share them (C gives no way to copy one,
// and the model's loop and free own it): they allocate their own. Each
// is cleaned up once: the model's by its free, the clone's once it is
// collected. Before, the clone's steps counted on in the model's memory.
func TestCloneOfACRootDoesNotShareTheModelsStateVariables(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		onLoopOfItsOwn(func(loop *asyncsteps.Loop) {
			model := cabi.New(loop)
			ctest.StateIdle(model) // "counter" is 5 in the model
			ctest.State(model)
			runClone(t, cabi.Wrap(model).(*asyncsteps.Root).Clone(), nil)
			cabi.FreeWait(model)
			checkTrace(t,
				"alloc counter",                                                    // the model's, by StateIdle
				"alloc counter", "state1 missing=(nil)", "state2 counter=2 same=1", // the clone's
				"cleanup counter=5", // the model's, by its free
			)
		})
		if !gcUntil(5*time.Second, func() bool { return strings.Count(ctest.Trace(), "cleanup") == 2 }) {
			t.Fatalf("no cleanup once the clone was collected: %q", ctest.Trace())
		}
		settleCleanups()
		checkTrace(t,
			"alloc counter",
			"alloc counter", "state1 missing=(nil)", "state2 counter=2 same=1",
			"cleanup counter=5",
			"cleanup counter=2", // the clone's, once collected
		)
	})
}

// onLoopOfItsOwn calls f with a new Loop, which it closes and drops on
// return: a test of a cleanup that waits for the collection of a flow
// need not depend on when a running Loop lets go of a flow that ended.
func onLoopOfItsOwn(f func(loop *asyncsteps.Loop)) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	f(loop)
}

// runClone runs clone, calling during (if not nil) once its first step
// logs "kept counter".
func runClone(t *testing.T, clone *asyncsteps.Root, during func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := clone.Run(ctx)
		done <- err
	}()
	if during != nil {
		if !ctest.WaitFor("kept counter", 5*time.Second) {
			t.Fatalf("the clone's step did not run: %q", ctest.Trace())
		}
		during()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A copy of a C root's steps into a root on another loop (CopyFrom) runs
// them as C steps of that loop and flow: is_same_thread is 1 in them, and
// their rootId is not the model's. Before, they were taken for steps of
// the model's flow, on whose loop's thread they did not run.
func TestCopyOfACRootOnAnotherLoopRunsItsCStepsThere(t *testing.T) {
	ctest.Reset()
	loop, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	defer loop.Close()
	defer other.Close()
	model := cabi.New(loop)
	ctest.Running(model)  // logs whether the model's root and the step are valid
	ctest.SameRoot(model) // logs whether the step has the model's rootId
	r := asyncsteps.New(asyncsteps.WithTool(other))
	r.CopyFrom(cabi.Wrap(model).(*asyncsteps.Root))
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	cabi.FreeWait(model)
	checkTrace(t,
		"running root valid=1 step valid=1",
		"same rootId as the root=0",
		"Boom handler: same rootId as the root=0",
	)
}
