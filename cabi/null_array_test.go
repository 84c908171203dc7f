//go:build cgo

package cabi_test

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A C array whose p is NULL holds no items, whatever its length says: it
// reaches Go as an empty slice of its kind, for every base type, as the
// arrays of numbers always did. Before, a BOOL array gave length false
// values and an array of strings length empty strings.
func TestCNullArrayIsEmpty(t *testing.T) {
	for _, tc := range []struct {
		base int // FTN_TYPE_*
		want any
	}{
		{0x02, []string{}},
		{0x03, []cabi.String16{}},
		{0x04, []cabi.String32{}},
		{0x05, []bool{}},
		{0x06, []int8{}},
		{0x07, []int16{}},
		{0x08, []int32{}},
		{0x09, []int64{}},
		{0x0A, []uint8{}},
		{0x0B, []uint16{}},
		{0x0C, []uint32{}},
		{0x0D, []uint64{}},
		{0x0E, []float32{}},
		{0x0F, []float64{}},
	} {
		t.Run(fmt.Sprintf("%T", tc.want), func(t *testing.T) {
			checkCSuccess(t, tc.want, func(root unsafe.Pointer) { ctest.NullArray(root, tc.base) })
		})
	}
}

// A NULL item of a C array of strings is an empty string, as an empty
// item is, for the three kinds of strings: "" for STRING, and for
// STRING16 and STRING32 the empty value that a string of theirs with a
// NULL p or a length of 0 gives, not nil. Before, both items of a
// STRING16 or STRING32 array were nil.
func TestCNullItemIsEmptyString(t *testing.T) {
	for _, tc := range []struct {
		base int // FTN_TYPE_*
		want any
	}{
		{0x02, []string{"ab", "", ""}},
		{0x03, []cabi.String16{{'a', 'b'}, {}, {}}},
		{0x04, []cabi.String32{{'a', 'b'}, {}, {}}},
	} {
		t.Run(fmt.Sprintf("%T", tc.want), func(t *testing.T) {
			checkCSuccess(t, tc.want, func(root unsafe.Pointer) { ctest.NullItem(root, tc.base) })
		})
	}
}

// checkCSuccess runs a flow whose first step is the C step that add adds
// to its root, and checks that the step succeeds with want alone.
func checkCSuccess(t *testing.T, want any, add func(root unsafe.Pointer)) {
	t.Helper()
	r, root := newRoot(t)
	add(root)
	var got []any
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		got = args
		as.Success()
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if want := []any{want}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}
