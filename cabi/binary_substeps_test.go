//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Go step given to C takes stack memory through its pointer and adds a C
// sub-step that reads it through its data, the spec's way to hand a step's
// memory to its sub-steps. The memory lives until those sub-steps have
// ended, as a C step's does. Before, the sweep that Binary posts released
// the pointer, and cleaned up the memory, once the Go step's callback had
// returned, before the sub-step read it.
func TestBinaryStackMemoryOutlivesItsSubSteps(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ctest.StackData(cabi.Binary(as))
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	afterPostsRan(loop)
	checkTrace(t, "stack data sub mem=7", "stack cleanup 7")
}
