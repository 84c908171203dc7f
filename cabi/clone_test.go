//go:build cgo

package cabi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

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
		collectUntilCleanup(t, "the clone was collected")
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

// modelAndCopy returns a Go root on a loop of its own, its C pointer, and
// a root on another loop that add's steps are copied into (CopyFrom), made
// while the model is idle so that both may then run at once.
func modelAndCopy(t *testing.T, add func(model unsafe.Pointer)) (model *asyncsteps.Root, ptr unsafe.Pointer, cp *asyncsteps.Root) {
	t.Helper()
	model, ptr = newRoot(t)
	other := asyncsteps.NewLoop()
	t.Cleanup(other.Close)
	add(ptr)
	cp = asyncsteps.New(asyncsteps.WithTool(other))
	cp.CopyFrom(model)
	return model, ptr, cp
}

// runModelUntil runs model on a goroutine until the C trace has mark, and
// returns what waits for its end. A test that stops before ReleaseModel
// releases the model when it ends, before its loops close: closing one
// waits for its thread, which the model's C step blocks.
func runModelUntil(t *testing.T, model *asyncsteps.Root, mark string) (wait func() error) {
	t.Helper()
	t.Cleanup(ctest.ReleaseModel)
	done := make(chan error, 1)
	go func() {
		_, err := run(t, model)
		done <- err
	}()
	if !ctest.WaitFor(mark, 5*time.Second) {
		t.Fatalf("no %q: %q", mark, ctest.Trace())
	}
	return func() error { return <-done }
}

// A model and its copy on another loop, running at once, each carry their
// own args past a C loop's breakLoop: here the copy's loop ends while the
// model's body has broken with its args and not yet returned. Before, the
// two flows shared the args carried (a data race), and the model's step
// after the loop got none: the copy's had taken them.
func TestModelAndCopyCarryTheirOwnArgsPastALoop(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		model, _, cp := modelAndCopy(t, ctest.CopyCarry)
		wait := runModelUntil(t, model, "model broke")
		if _, err := run(t, cp); err != nil {
			t.Fatal(err)
		}
		ctest.ReleaseModel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "model broke", "copy after the loop: typed 2", "model after the loop: typed 1")
	})
}

// The steps of a parallel branch in a copy of a root have a rootId of
// their own: one of our syncs, entered through its lock function, keeps
// the copy out of the section that the model's branch holds (a Mutex of
// one slot with no queue rejects it). Before, the copy's branch had the
// rootId of the model's, and entered the section as a reentrant lock of
// its holder.
func TestCopysParallelBranchDoesNotShareTheModelsSection(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		m := cabi.Sync(asyncsteps.NewMutex(1, 0))
		defer cabi.FreeSync(m)
		model, _, cp := modelAndCopy(t, func(root unsafe.Pointer) { ctest.CopySync(root, m) })
		wait := runModelUntil(t, model, "model inside")
		_, err := run(t, cp)
		var e *asyncsteps.Error
		if !errors.As(err, &e) || e.Code != asyncsteps.DefenseRejected {
			t.Errorf("the copy ended with %v, want DefenseRejected", err)
		}
		ctest.ReleaseModel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "model locks", "model inside", "copy locks", "copy lock: DefenseRejected", "model left")
	})
}

// A flow of another implementation of the table enters one of our syncs
// through its lock function apart from our flow of the same rootId: a
// rootId tells flows apart only within its table. Before, the other
// table's step entered the section that our flow holds as a reentrant
// lock of its holder.
func TestOtherTablesFlowDoesNotShareTheSectionOfOurs(t *testing.T) {
	m := cabi.Sync(asyncsteps.NewMutex(1, 0))
	defer cabi.FreeSync(m)
	model, ptr := newRoot(t)
	ctest.CopySync(ptr, m)
	wait := runModelUntil(t, model, "model inside")
	ctest.OtherLock(m)
	if !ctest.WaitFor("other table lock:", 5*time.Second) {
		t.Errorf("the other table's step was not rejected: %q", ctest.Trace())
	}
	ctest.ReleaseModel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	checkTrace(t, "model locks", "model inside", "other table locks", "other table waits",
		"other table lock: DefenseRejected", "model left")
}

// A model and its copy that fail in the same C step at once each keep
// their step's stack memory until their own error handler has returned.
// Before, the step's link to its handler was shared: the copy's handler,
// returning, cleaned up the model's stack memory too, while the model's
// handler was still to read it (AddressSanitizer: heap-use-after-free).
func TestModelAndCopyKeepTheirOwnStackForTheirErrorHandler(t *testing.T) {
	model, _, cp := modelAndCopy(t, ctest.CopyLink)
	wait := runModelUntil(t, model, "model eh waits")
	if _, err := run(t, cp); err != nil {
		t.Fatal(err)
	}
	ctest.ReleaseModel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	checkTrace(t, "model eh waits", "copy eh", "stack of copy cleaned up",
		"model eh: stack of model", "stack of model cleaned up")
}
