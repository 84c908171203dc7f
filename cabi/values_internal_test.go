//go:build cgo

package cabi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// goLen keeps every length a FutoInBinaryValue holds (a uint32_t): C.int,
// which the string conversion used, made those past math.MaxInt32
// negative.
func TestGoLenKeepsEveryUint32(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("an int of 32 bits: such lengths are refused, see TestLengthTooLongForGo")
	}
	for _, n := range []uint64{0, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32} {
		if got, ok := goLen(n); !ok || uint64(got) != n {
			t.Errorf("goLen(%d) = %d, %v; want %d, true", n, got, ok, n)
		}
	}
	if got, ok := goLen(math.MaxInt + 1); ok {
		t.Errorf("goLen(MaxInt+1) = %d, true; want false", got)
	}
}

// tooLongForC names more than 4 values, which a FutoInArgs cannot hold,
// or the first value whose length a FutoInBinaryValue cannot hold, and
// reads no other value. Before, a fifth value was dropped silently.
func TestTooLongForC(t *testing.T) {
	lowerLimit(t, &maxCLen, 3)
	for _, tc := range []struct {
		vals []any
		want string
	}{
		{[]any{"abc", []int32{1, 2, 3}, String16{1, 2, 3}, struct{ s string }{"long"}}, ""},
		{[]any{"abc", []int32{1, 2, 3, 4}, "abcd"}, "arg1: []int32 of length 4 is longer than a FutoInBinaryValue holds (3)"},
		{[]any{nil, String32{1, 2, 3, 4}}, "arg1: cabi.String32 of length 4 is longer than a FutoInBinaryValue holds (3)"},
		{[]any{[]string{"a", "b", "c", "d"}}, "arg0: []string of length 4 is longer than a FutoInBinaryValue holds (3)"},
		{[]any{1, 2, 3, 4, "abcd"}, "5 values, more than the 4 a FutoInArgs holds"},
		{[]any{1, 2, 3, 4, nil}, "5 values, more than the 4 a FutoInArgs holds"},
	} {
		if got := tooLongForC(tc.vals); got != tc.want {
			t.Errorf("tooLongForC(%v) = %q, want %q", tc.vals, got, tc.want)
		}
	}
}

// tooLongForC also names a value whose C copy makeArgs could not size: a
// block of more bytes than a Go int holds (a string with its terminator,
// an array, an item of an array of strings, the array of its items'
// pointers). Before, makeArgs counted such a size in an int, which where
// an int has 32 bits a Go value of 2 GiB or more overflowed: it allocated
// a block of one byte, or of the size cut short, and copied the whole
// value into it. The limit is lowered here.
func TestTooBigForCMemory(t *testing.T) {
	lowerLimit(t, &maxCBytes, 8)
	ptr := int(unsafe.Sizeof(uintptr(0)))
	for _, tc := range []struct {
		vals []any
		want string
	}{
		{[]any{"abcdefg", String16{1, 2, 3}, []int64{1}, []string{"abcdefg"}}, ""},
		{[]any{struct{ s [64]byte }{}}, ""}, // a Go value: not copied
		{[]any{"abcdefgh"}, "arg0: string of length 8 needs 9 bytes of C memory, more than a Go int holds (8)"},
		{[]any{nil, String16{1, 2, 3, 4}}, "arg1: cabi.String16 of length 4 needs 10 bytes of C memory, more than a Go int holds (8)"},
		{[]any{String32{1, 2}}, "arg0: cabi.String32 of length 2 needs 12 bytes of C memory, more than a Go int holds (8)"},
		{[]any{[]int64{1, 2}}, "arg0: []int64 of length 2 needs 16 bytes of C memory, more than a Go int holds (8)"},
		{[]any{[]string{"abcdefgh"}}, "arg0: []string of length 1 needs 9 bytes of C memory, more than a Go int holds (8)"},
		{[]any{make([]string, 9/ptr+1)}, fmt.Sprintf("arg0: []string of length %d needs %d bytes of C memory, more than a Go int holds (8)", 9/ptr+1, (9/ptr+1)*ptr)},
	} {
		if got := tooLongForC(tc.vals); got != tc.want {
			t.Errorf("tooLongForC(%v) = %q, want %q", tc.vals, got, tc.want)
		}
	}
	t.Run("C step", func(t *testing.T) {
		r, root := newTestRoot(t)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success([]float64{1, 2}) })
		ctest.Errors(root) // its step fails at once, its handler logs
		const info = "args of a C step: arg0: []float64 of length 2 needs 16 bytes of C memory, more than a Go int holds (8)"
		wantRunError(t, r, info)
		wantLines(t, "err1_eh InternalError info="+info+" last_exception=InternalError unknown=(nil)")
	})
}

// A Go value too long for a FutoInBinaryValue fails the C step that would
// receive it, and a Go step's success to a foreign table, with an
// InternalError saying which value; the C step does not run.
func TestLengthTooLongForC(t *testing.T) {
	lowerLimit(t, &maxCLen, 3)
	t.Run("C step", func(t *testing.T) {
		r, root := newTestRoot(t)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("abcd") })
		ctest.Errors(root) // its step fails at once, its handler logs
		wantRunError(t, r, "args of a C step: arg0: string of length 4 is longer than a FutoInBinaryValue holds (3)")
		wantLines(t, "err1_eh InternalError info=args of a C step: arg0: string of length 4 is longer than a FutoInBinaryValue holds (3) last_exception=InternalError unknown=(nil)")
	})
	t.Run("foreign table", func(t *testing.T) {
		wantForeignError(t, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success([]uint8{1, 2, 3, 4})
		}, "Success: arg0: []uint8 of length 4 is longer than a FutoInBinaryValue holds (3)")
	})
}

// More than 4 Go values, which a FutoInArgs cannot hold, fail the C step
// that would receive them, and a Go step's success to a foreign table,
// with an InternalError naming the limit; the C step does not run. Before,
// the values past the fourth were dropped silently.
func TestTooManyValuesForC(t *testing.T) {
	const info = "5 values, more than the 4 a FutoInArgs holds"
	t.Run("C step", func(t *testing.T) {
		r, root := newTestRoot(t)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(1, 2, 3, 4, 5) })
		ctest.Errors(root) // its step fails at once, its handler logs
		wantRunError(t, r, "args of a C step: "+info)
		wantLines(t, "err1_eh InternalError info=args of a C step: "+info+" last_exception=InternalError unknown=(nil)")
	})
	t.Run("foreign table", func(t *testing.T) {
		wantForeignError(t, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("a", "b", "c", "d", nil)
		}, "Success: "+info)
	})
}

// A C value too long for a Go int fails the step that gives it (success)
// or the Go step that would receive it (a foreign table's args) with an
// InternalError saying which value; every value is still cleaned up once.
// Only an int of 32 bits meets such a length; the limit is lowered here.
func TestLengthTooLongForGo(t *testing.T) {
	lowerLimit(t, &maxGoLen, 5)
	t.Run("success", func(t *testing.T) {
		r, root := newTestRoot(t)
		ctest.Args(root) // success(42, "h\u00e9llo" of 6 bytes, {1,2,3}, a STRING16 of 5)
		r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("the next step ran") })
		wantRunError(t, r, "success: arg1: string of length 6 is longer than a Go value holds (5)")
		wantLines(t, "args1 in=1", "args1 reset=1 cleanups=4")
	})
	t.Run("foreign table", func(t *testing.T) {
		wantForeignError(t, func(asyncsteps.AsyncSteps, ...any) {
			t.Error("the step ran") // the fake gives it "from the fake"
		}, "args of a Go step: arg0: string of length 13 is longer than a Go value holds (5)")
	})
}

// An item of a C array of strings longer than a Go int holds fails the
// step that gives it, as a string that long does, for the three kinds of
// strings. Before, the item's length was counted in an int, which where
// an int has 32 bits turned negative past INT32_MAX: the copy of the
// item (unsafe.Slice of a negative length) panicked inside success,
// called from C. The limit is lowered here.
func TestArrayItemTooLongForGo(t *testing.T) {
	lowerLimit(t, &maxGoLen, 5)
	for _, base := range []int{0x02, 0x03, 0x04} { // STRING, STRING16, STRING32
		t.Run(strconv.Itoa(base), func(t *testing.T) {
			r, root := newTestRoot(t)
			ctest.LongItem(root, base) // success({"abcdef"})
			r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("the next step ran") })
			wantRunError(t, r, "success: arg0: item 0: string of length 6 is longer than a Go value holds (5)")
		})
	}
}

// wantForeignError runs step, with an error handler, on the fake foreign
// table of ctest, and checks that the handler saw InternalError and info.
func wantForeignError(t *testing.T, step asyncsteps.StepFunc, info string) {
	t.Helper()
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	var got []string
	Wrap(root).Add(step, func(as asyncsteps.AsyncSteps, code string) {
		got = append(got, code, as.State().ErrorInfo)
		as.Success()
	})
	ctest.FakeRun(root)
	if want := []string{asyncsteps.InternalError, info}; !reflect.DeepEqual(got, want) {
		t.Errorf("error handler saw %q, want %q", got, want)
	}
}

// lowerLimit sets *limit to n for the test; the loops of the test are
// closed before it is restored (cleanups run last registered first).
func lowerLimit(t *testing.T, limit *uint64, n uint64) {
	old := *limit
	*limit = n
	t.Cleanup(func() { *limit = old })
}

// newTestRoot returns a Go root on a loop of its own and its C pointer.
func newTestRoot(t *testing.T) (*asyncsteps.Root, unsafe.Pointer) {
	t.Helper()
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	return r, Binary(r)
}

// wantRunError runs r and checks that it fails with InternalError and info.
func wantRunError(t *testing.T, r *asyncsteps.Root, info string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Run(ctx)
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.InternalError || e.Info != info {
		t.Errorf("Run: %v, want %s: %s", err, asyncsteps.InternalError, info)
	}
}

// wantLines checks the C trace, complete once the flow has ended.
func wantLines(t *testing.T, want ...string) {
	t.Helper()
	if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
		t.Errorf("C trace %q, want %q", got, want)
	}
}
