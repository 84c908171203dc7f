//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go step of a foreign flow that calls Error after Add, with more than
// one info, fails with the misplaced call named with the code it gave, as
// the engine names it: not as Error(InternalError), the code that stands
// for the call with too many infos.
func TestForeignErrorAfterAddNamesTheUsersCode(t *testing.T) {
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	as := cabi.Wrap(root)
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) {})
		as.Error("E1", "a", "b")
	})
	ctest.FakeRun(root)
	checkTrace(t,
		"fake: running root valid=0",
		"fake: handle_error InternalError: Error(E1) called after Add in the same callback",
		"fake: end failed=1 InternalError string cleanups=1",
	)
}
