//go:build cgo

package cabi_test

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// free on the pointer of a step that waits for its sub-steps, from a
// sub-step's callback, does nothing, as the header says of root functions
// on a step's pointer outside its own callback: for a C step, and for a
// Go step given by Binary. Before, the Go step's pointer, which stays in
// its callback for the C calls its Go callback makes, failed the sub-step
// with the engine's "Error(InternalError) called on the AsyncSteps of a
// step that waits for its sub-steps".
func TestFreeOnAParentsPointerFromASubStepDoesNothing(t *testing.T) {
	want := []string{"sub: free on the parent returned"}
	t.Run("C parent", func(t *testing.T) {
		ctest.ReviewReset()
		r, root := newRoot(t)
		ctest.CParentFree(root)
		runReview(t, r, want)
	})
	t.Run("Go parent", func(t *testing.T) {
		ctest.ReviewReset()
		r, _ := newRoot(t)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ctest.FreeOnParent(cabi.Binary(as)) })
		runReview(t, r, want)
	})
}

// free on a Go step's pointer from Binary, in the Go step's own callback,
// fails the step with InternalError naming the misuse, as in a C step's;
// so does futoin_asyncsteps_free_wait (FreeWait), which ignored it.
func TestFreeOnAGoStepsPointerInItsCallbackFailsIt(t *testing.T) {
	for _, tc := range []struct {
		call string
		free func(unsafe.Pointer)
	}{
		{"free", ctest.Free},
		{"futoin_asyncsteps_free_wait", cabi.FreeWait},
	} {
		t.Run(tc.call, func(t *testing.T) {
			r, _ := newRoot(t)
			var trace []string
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tc.free(cabi.Binary(as))
				trace = append(trace, "returned")
			}, func(as asyncsteps.AsyncSteps, code string) {
				trace = append(trace, "eh "+code+" "+as.State().ErrorInfo)
				as.Success()
			})
			if _, err := run(t, r); err != nil {
				t.Fatal(err)
			}
			want := []string{"returned", "eh InternalError " + tc.call + " called on a step's pointer: it is for a root's"}
			if !slices.Equal(trace, want) {
				t.Errorf("trace %q, want %q", trace, want)
			}
		})
	}
}
