//go:build cgo

package cabi_test

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C BOOL array {2, 1, 0} reaches Go as {true, true, false}: any byte but
// 0 is true, as for a single BOOL. Before, the bytes were copied as they
// were, and the first element was a Go bool equal to neither true nor
// false.
func TestCBoolArrayBytesBecomeGoBools(t *testing.T) {
	r, root := newRoot(t)
	ctest.Bools(root)
	var got []bool
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		got, _ = args[0].([]bool)
		as.Success()
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Errorf("got %v (bytes %v), want %v", got, boolBytes(got), want)
	}
}

// boolBytes returns the bytes that hold v's bools.
func boolBytes(v []bool) []byte {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)))
}
