//go:build cgo

package cabi_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// ownCalls are the calls through the table that only a step's own
// callback may make, with the name the engine's misuse info gives each
// and whether it makes the step wait rather than adding sub-steps.
var ownCalls = []struct {
	call  int
	name  string
	waits bool
}{
	{ctest.OCAdd, "Add", false},
	{ctest.OCParallel, "Parallel", false},
	{ctest.OCLoop, "Loop", false},
	{ctest.OCRepeat, "Repeat", false},
	{ctest.OCSync, "Sync", false},
	{ctest.OCTimeout, "SetTimeout", true},
	{ctest.OCCancel, "SetCancel", true},
	{ctest.OCWait, "WaitExternal", true},
	{ctest.OCSuccess, "Success", false},
	{ctest.OCError, "Error(Lost)", false},
	{ctest.OCBreak, "Break", false},
	{ctest.OCContinue, "Continue(outer)", false},
}

// runOwnCall runs OwnCall on a Go root and checks the flow's error (code
// "" for none) and the trace.
func runOwnCall(t *testing.T, call, where int, code, info string, trace ...string) {
	t.Helper()
	r, root := newRoot(t)
	ctest.OwnCall(root, call, where)
	_, err := run(t, r)
	switch e := asyncsteps.ErrorFrom(err); {
	case code == "" && err != nil:
		t.Errorf("the flow failed: %v", err)
	case code != "" && (e == nil || e.Code != code || e.Info != info):
		t.Errorf("the flow ended with %v, want %s: %s", err, code, info)
	}
	checkTrace(t, trace...)
}

// Spec section 1: only a step's own callback adds sub-steps to it, makes
// it wait or completes it while it runs. A C sub-step (or a C step under
// a parallel branch of one) that makes one of those calls through the
// pointer of its parent, a loop's body that waits for it, raises
// InternalError in its own callback, named after the call, as the engine
// does for Go's calls: once that callback has returned, since C cannot be
// unwound. Nothing is added, the loop neither ends nor goes on, the next
// sub-step does not run. Before, the table ignored the call, and the loop
// ran its three iterations.
func TestSubStepCallOnItsParentIsInternalError(t *testing.T) {
	for _, c := range ownCalls {
		for _, where := range []int{ctest.FromSubStep, ctest.FromBranch} {
			name := c.name + map[int]string{ctest.FromSubStep: "/sub-step", ctest.FromBranch: "/branch"}[where]
			t.Run(name, func(t *testing.T) {
				eachCaller(t, func(t *testing.T, _ bool) {
					trace := []string{"iteration 0", "sub returns"}
					if where == ctest.FromBranch {
						trace = []string{"iteration 0", "sibling", "sub returns"}
					}
					runOwnCall(t, c.call, where, asyncsteps.InternalError,
						c.name+" called on the AsyncSteps of a step that waits for its sub-steps", trace...)
				})
			})
		}
	}
}

// Spec section 1: a call that adds sub-steps to a step waiting for a
// completion from outside, or makes it wait, made once its callback has
// returned (from a callback of the tool, from another thread, or from
// the callback of a sibling parallel branch's step), fails the step with
// InternalError, as an error from outside would, and as the engine fails
// it for Go's call: the step's own cancel handler runs (the tool's and
// the sibling's cases set one), and the success that follows has no
// effect. Before, the table ignored the call and the success completed
// the step.
func TestLateCallOnAWaitingStepFailsIt(t *testing.T) {
	names := map[int]string{ctest.FromTool: "/tool", ctest.FromThread: "/thread", ctest.FromSibling: "/sibling"}
	for _, c := range ownCalls[:8] {
		for _, where := range []int{ctest.FromTool, ctest.FromThread, ctest.FromSibling} {
			t.Run(c.name+names[where], func(t *testing.T) {
				eachCaller(t, func(t *testing.T, _ bool) {
					what := "adds sub-steps"
					if c.waits {
						what = "makes it wait"
					}
					trace := []string{"iteration 0", "late returns"}
					if where != ctest.FromThread {
						trace = append(trace, "body cancel handler")
					}
					runOwnCall(t, c.call, where, asyncsteps.InternalError,
						c.name+" called on a step whose callback has returned: only the step's own callback "+what,
						trace...)
				})
			})
		}
	}
}

// breakLoop and continueLoop through the pointer of a loop's body that
// waits for a completion from outside, from a callback of the tool or
// another thread, complete it as Go's Break and Continue do: the loop
// ends, or goes on with its next iteration, after the body's own cancel
// handler (the tool's case sets one), as for any failure of the step; the
// handle_error that follows has no effect. Before, the table ignored
// them, and that error failed the flow.
func TestBreakOfAWaitingBodyFromOutside(t *testing.T) {
	for _, where := range []int{ctest.FromTool, ctest.FromThread} {
		name := map[int]string{ctest.FromTool: "tool", ctest.FromThread: "thread"}[where]
		late := []string{"late returns"}
		if where == ctest.FromTool {
			late = append(late, "body cancel handler")
		}
		iteration := func(i int) []string { return append([]string{fmt.Sprintf("iteration %d", i)}, late...) }
		t.Run("Break/"+name, func(t *testing.T) {
			eachCaller(t, func(t *testing.T, _ bool) {
				runOwnCall(t, ctest.OCBreak, where, "", "", append(iteration(0), "after the loop")...)
			})
		})
		t.Run("Continue/"+name, func(t *testing.T) {
			eachCaller(t, func(t *testing.T, _ bool) {
				trace := slices.Concat(iteration(0), iteration(1), iteration(2), []string{"after the loop"})
				runOwnCall(t, ctest.OCContinue, where, "", "", trace...)
			})
		})
	}
}

// The same through the pointer Binary gives for a Go step that waits for
// its C sub-step: the engine raises the misuse in the sub-step's C
// callback, which gets the abort once it has returned, so that the
// sub-step fails as an error of its own callback does, its stack memory
// kept for its error handler. Before, the abort was kept for the Go
// step's pointer, where nothing raised it: the sub-step was released as
// if it had succeeded, its stack memory with it, which its handler then
// read (a VIOLATION of the "ri" caller, which checks it).
func TestSubStepCallOnItsGoParentIsInternalError(t *testing.T) {
	for _, c := range []struct {
		call int
		name string
	}{
		{ctest.OCAdd, "Add"},
		{ctest.OCTimeout, "SetTimeout"},
		{ctest.OCCancel, "SetCancel"},
		{ctest.OCWait, "WaitExternal"},
		{ctest.OCSuccess, "Success"},
		{ctest.OCError, "Error(Lost)"},
		{ctest.OCBreak, "Break"},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachCaller(t, func(t *testing.T, _ bool) {
				r, _ := newRoot(t)
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					ctest.OwnCallSub(cabi.Binary(as), c.call)
				})
				_, err := run(t, r)
				info := c.name + " called on the AsyncSteps of a step that waits for its sub-steps"
				if e := asyncsteps.ErrorFrom(err); e == nil || e.Code != asyncsteps.InternalError || e.Info != info {
					t.Errorf("the flow ended with %v, want InternalError: %s", err, info)
				}
				checkTrace(t, "sub returns", "sub handler InternalError: "+info)
			})
		})
	}
}
