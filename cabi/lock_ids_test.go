//go:build cgo

package cabi_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go step of a parallel branch given to C has the branch's rootId, and
// so do the C steps added on it: one of our syncs, entered through its
// lock function, keeps branch B out of the section that branch A holds (a
// Mutex of one slot with no queue rejects B, which cancels A). Before, both
// Go steps had the flow's rootId, and B entered the section as a reentrant
// lock of A's holder.
func TestGoStepsOfTwoBranchesDoNotShareASection(t *testing.T) {
	twoBranchesLock(t, func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return as })
}

// opaque is a decorator without Unwrap: the engine cannot tell the flow or
// branch its steps run in.
type opaque struct{ asyncsteps.AsyncSteps }

// A Go step given to C through a decorator without Unwrap, whose branch
// cannot be told, has a rootId of its own, not the flow's: two branches'
// such steps do not share a section either. Before, both had the flow's
// rootId, and B entered the section that A held.
func TestDecoratedGoStepsOfTwoBranchesDoNotShareASection(t *testing.T) {
	twoBranchesLock(t, func(as asyncsteps.AsyncSteps) asyncsteps.AsyncSteps { return opaque{as} })
}

// twoBranchesLock runs a flow whose two branches lock one Mutex of one
// slot and no queue through its lock function, from C steps added on Go
// steps given to C as decorate makes them, and checks that the second
// branch is rejected and that the three rootIds differ.
func twoBranchesLock(t *testing.T, decorate func(asyncsteps.AsyncSteps) asyncsteps.AsyncSteps) {
	t.Helper()
	m := cabi.Sync(asyncsteps.NewMutex(1, 0))
	defer cabi.FreeSync(m)
	r, root := newRoot(t)
	var ids [2]int64
	lock := func(i int) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			step := cabi.Binary(decorate(as))
			ids[i] = ctest.RootID(step)
			ctest.BranchLock(step, m, i)
		}
	}
	p := r.Parallel()
	p.Add(lock(0))
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			go func() {
				ctest.WaitFor("A inside", 5*time.Second)
				as.Success()
			}()
		})
		as.Add(lock(1))
	})
	_, err := run(t, r)
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.DefenseRejected {
		t.Errorf("the flow ended with %v, want DefenseRejected", err)
	}
	checkTrace(t,
		"A locks, same rootId as its Go step=1", "A inside",
		"B locks, same rootId as its Go step=1", "B lock: DefenseRejected",
		"A cancelled")
	flow := ctest.RootID(root)
	if ids[0] == flow || ids[1] == flow || ids[0] == ids[1] {
		t.Errorf("rootIds: flow %d, branch A's Go step %d, branch B's %d; want three", flow, ids[0], ids[1])
	}
}

// A Go step added in the branch of a C parallel (through Wrap) and given
// to C has the rootId of the branch's C step, not one of its own nor the
// flow's.
func TestGoStepOfACBranchHasTheBranchsRootID(t *testing.T) {
	r, root := newRoot(t)
	var goStep int64
	ctest.CBranchGo(root, func(step unsafe.Pointer) {
		cabi.Wrap(step).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			goStep = ctest.RootID(cabi.Binary(as))
		})
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	flow, branch := ctest.RootID(root), ctest.CBranchID()
	if goStep != branch || branch == flow {
		t.Errorf("rootIds: flow %d, the C branch's step %d, the Go step in it %d; want the last two the same, not the flow's",
			flow, branch, goStep)
	}
}

// Callers of the lock function whose table has no rootId function are each
// a holder of their own: two such flows exclude each other, and a nested
// lock of one flow is not taken for a reentrant one (a Mutex of one slot
// with no queue rejects both). unlock releases the holder inside the
// section. Before, they all had rootId 0 and shared one holder: every lock
// after the first returned at once, as if held.
func TestFlowsOfATableWithoutRootIDExcludeEachOther(t *testing.T) {
	ctest.Reset()
	m := cabi.Sync(asyncsteps.NewMutex(1, 0))
	defer cabi.FreeSync(m)
	lock := func(n int, want string) {
		t.Helper()
		ctest.AnonLock(m, n)
		if !ctest.WaitFor(want, 5*time.Second) {
			t.Fatalf("no %q: %q", want, ctest.Trace())
		}
	}
	lock(1, "anon 1 locked")
	lock(1, "anon 1 lock: ")
	lock(2, "anon 2 lock: ")
	ctest.AnonUnlock(m, 1)
	lock(2, "anon 2 locked")
	ctest.AnonUnlock(m, 2)
	lock(3, "anon 3 locked")
	ctest.AnonUnlock(m, 3)
	checkTrace(t,
		"anon 1 locks", "anon 1 waits", "anon 1 locked",
		"anon 1 locks", "anon 1 waits", "anon 1 lock: DefenseRejected",
		"anon 2 locks", "anon 2 waits", "anon 2 lock: DefenseRejected",
		"anon 1 unlocks",
		"anon 2 locks", "anon 2 waits", "anon 2 locked",
		"anon 2 unlocks",
		"anon 3 locks", "anon 3 waits", "anon 3 locked",
		"anon 3 unlocks")
}

// uncomparable is a decorator passed by value whose type == cannot
// compare: it holds a slice.
type uncomparable struct {
	asyncsteps.AsyncSteps
	tags []string
}

// Binary called twice in one step with a decorator whose type cannot be
// compared gives a step pointer each time, and the step goes on. Before,
// the second call compared it with the first and failed the step with
// "comparing uncomparable type".
func TestBinaryOfAnUncomparableDecoratorTwice(t *testing.T) {
	r, _ := newRoot(t)
	var ptrs [2]unsafe.Pointer
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		for i := range ptrs {
			ptrs[i] = cabi.Binary(uncomparable{as, []string{"x"}})
		}
	})
	if _, err := run(t, r); err != nil {
		t.Fatalf("flow failed: %v", err)
	}
	if ptrs[0] == nil || ptrs[1] == nil {
		t.Errorf("step pointers %v, want two non-nil", ptrs)
	}
}
