//go:build cgo

package cabi

/*
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// String16 is a FTN_TYPE_STRING16 value: UTF-16 code units, without a
// terminator.
type String16 []uint16

// String32 is a FTN_TYPE_STRING32 value: UTF-32 code units, without a
// terminator.
type String32 []rune

// Custom is a FTN_TYPE_CUSTOM_OBJECT value made by C: its type, pointer,
// custom_data and length, passed on as they are. The library calls its
// type's cleanup once: when the C step that receives it completes or, if no
// C step receives it, some time after the Go side has dropped it (on the
// loop of the flow that received it, or where that loop runs what it
// drops, as the package doc says of a free; for one received from a
// foreign table, on the default loop). A C step that takes a received value over
// (moves it out of its FutoInArgs and resets the slot) owns it from then
// on: the library no longer cleans it up.
type Custom struct {
	v *customVal
}

type customVal struct {
	flat  C.cabi_flat // C pointers only
	owned bool
	done  atomic.Bool
}

// Type returns the value's const FutoInType*.
func (c *Custom) Type() unsafe.Pointer { return unsafe.Pointer(c.v.flat._type) }

// Pointer returns the value's p.
func (c *Custom) Pointer() unsafe.Pointer { return unsafe.Pointer(c.v.flat.p) }

// Data returns the value's custom_data.
func (c *Custom) Data() unsafe.Pointer { return C.cabi_ptr(c.v.flat.custom_data) }

// Len returns the value's length.
func (c *Custom) Len() uint32 { return uint32(c.v.flat.length) }

// release calls the type's cleanup, once.
func (v *customVal) release() {
	if v.owned && v.done.CompareAndSwap(false, true) {
		C.cabi_cleanup_flat(&v.flat)
	}
}

// newCustom takes over the custom value flat; if nothing releases it
// first, its cleanup runs on tool once the Custom is unreachable.
func newCustom(flat *C.cabi_flat, tool asyncsteps.Tool) *Custom {
	c := &Custom{v: &customVal{flat: *flat, owned: true}}
	if tool == nil {
		tool = asyncsteps.DefaultTool()
	}
	runtime.AddCleanup(c, func(v *customVal) {
		if !v.done.Load() {
			releaseOn(tool, v.release)
		}
	}, c.v)
	return c
}

// releaseOn runs release, the cleanup of a custom object no C step
// received, on tool or, if tool drops it, where its fallbacks run (see
// flowCtx.post): a closed Loop, a reset TestTool or a DropReporter loses
// no cleanup. On another tool, one that refuses it at once runs it here.
func releaseOn(tool asyncsteps.Tool, release func()) {
	if l, ok := tool.(*asyncsteps.Loop); ok {
		loopFor(l).post(release, release)
		return
	}
	if reportsDrops(tool) {
		postOn(tool, nil, release, release)
		return
	}
	if h := tool.Immediate(release); !h.IsValid() {
		release() // refused, or run already: release runs once
	}
}

// cArgs is a FutoInArgs made from Go values, in C memory.
type cArgs struct {
	args  *C.FutoInArgs
	owned bool     // handed over: the receiver resets every slot
	ids   []uint64 // Go values to forget afterwards (input args)
	// Input args: the built-in values written, by slot, reset by free
	// unless the C step took them over (moved them out of their slot).
	builtin [4]*C.FutoInType
	payload [4]unsafe.Pointer
}

// makeArgs converts vals for C. Strings and arrays always have types whose
// cleanup frees them: owned args are handed over; of input args (owned
// false), free resets the slots that still hold what makeArgs wrote, and a
// value the C step moved out is the step's to reset.
func makeArgs(vals []any, owned bool) *cArgs {
	a := &cArgs{owned: owned}
	a.args = (*C.FutoInArgs)(C.calloc(1, C.size_t(unsafe.Sizeof(C.FutoInArgs{}))))
	slots := (*[4]C.FutoInBinaryValue)(unsafe.Pointer(a.args))
	for i, v := range vals {
		if i == len(slots) {
			break
		}
		if v == nil {
			continue // an empty slot, as C gave it: calloc left its type NULL
		}
		flat := a.flat(v)
		C.cabi_write_value(&slots[i], &flat)
		if flat._type == a.typ(flat.flags) {
			a.builtin[i], a.payload[i] = flat._type, flat.p
		}
	}
	return a
}

func (a *cArgs) free() {
	if a == nil {
		return
	}
	if !a.owned {
		slots := (*[4]C.FutoInBinaryValue)(unsafe.Pointer(a.args))
		for i, tp := range a.builtin {
			if tp == nil {
				continue
			}
			var f C.cabi_flat
			C.cabi_read_value(&slots[i], &f)
			if f._type == tp && f.p == a.payload[i] {
				C.cabi_reset_value(&slots[i], 1) // still ours: frees the payload
			}
		}
	}
	for _, id := range a.ids {
		dropGoValue(id)
	}
	C.free(unsafe.Pointer(a.args))
	a.args = nil
}

// typ is the type of a built-in value: its cleanup frees its payload.
func (a *cArgs) typ(flags C.uint8_t) *C.FutoInType { return C.cabi_owned_type(flags) }

// alloc returns n bytes of C memory, freed by the value's type cleanup.
func (a *cArgs) alloc(n int) unsafe.Pointer { return C.calloc(C.size_t(max(n, 1)), 1) }

func (a *cArgs) cstring(s string) unsafe.Pointer {
	p := a.alloc(len(s) + 1)
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return p
}

// carray copies s into C memory.
func carray[T any](a *cArgs, s []T) unsafe.Pointer {
	var zero T
	p := a.alloc(len(s) * int(unsafe.Sizeof(zero)))
	copy(unsafe.Slice((*T)(p), len(s)), s)
	return p
}

// cstrings copies strings into a C array of NUL-terminated strings.
func cstrings[T any](a *cArgs, items [][]T) unsafe.Pointer {
	p := a.alloc(len(items) * int(unsafe.Sizeof(uintptr(0))))
	ptrs := unsafe.Slice((*unsafe.Pointer)(p), len(items))
	for i, it := range items {
		ptrs[i] = carray(a, append(append([]T(nil), it...), *new(T)))
	}
	return p
}

func (a *cArgs) flat(v any) C.cabi_flat {
	var f C.cabi_flat
	set := func(flags int) {
		f.flags = C.uint8_t(flags)
		f._type = a.typ(f.flags)
	}
	arr := func(flags int, p unsafe.Pointer, n int) {
		set(flags | C.FTN_TYPE_ARRAY)
		f.p = p
		f.length = C.uint32_t(n)
	}
	switch v := v.(type) {
	case bool:
		set(C.FTN_TYPE_BOOL)
		if v {
			f.i = 1
		}
	case int8:
		set(C.FTN_TYPE_INT8)
		f.i = C.int64_t(v)
	case int16:
		set(C.FTN_TYPE_INT16)
		f.i = C.int64_t(v)
	case int32:
		set(C.FTN_TYPE_INT32)
		f.i = C.int64_t(v)
	case int64:
		set(C.FTN_TYPE_INT64)
		f.i = C.int64_t(v)
	case int:
		set(C.FTN_TYPE_INT64)
		f.i = C.int64_t(v)
	case uint8:
		set(C.FTN_TYPE_UINT8)
		f.u = C.uint64_t(v)
	case uint16:
		set(C.FTN_TYPE_UINT16)
		f.u = C.uint64_t(v)
	case uint32:
		set(C.FTN_TYPE_UINT32)
		f.u = C.uint64_t(v)
	case uint64:
		set(C.FTN_TYPE_UINT64)
		f.u = C.uint64_t(v)
	case uint:
		set(C.FTN_TYPE_UINT64)
		f.u = C.uint64_t(v)
	case float32:
		set(C.FTN_TYPE_FLOAT)
		f.d = C.double(v)
	case float64:
		set(C.FTN_TYPE_DOUBLE)
		f.d = C.double(v)
	case string:
		set(C.FTN_TYPE_STRING)
		f.p = a.cstring(v)
		f.length = C.uint32_t(len(v))
	case String16:
		set(C.FTN_TYPE_STRING16)
		f.p = carray(a, append(append([]uint16(nil), v...), 0))
		f.length = C.uint32_t(len(v))
	case String32:
		set(C.FTN_TYPE_STRING32)
		f.p = carray(a, append(append([]rune(nil), v...), 0))
		f.length = C.uint32_t(len(v))
	case []bool:
		arr(C.FTN_TYPE_BOOL, carray(a, v), len(v))
	case []int8:
		arr(C.FTN_TYPE_INT8, carray(a, v), len(v))
	case []int16:
		arr(C.FTN_TYPE_INT16, carray(a, v), len(v))
	case []int32:
		arr(C.FTN_TYPE_INT32, carray(a, v), len(v))
	case []int64:
		arr(C.FTN_TYPE_INT64, carray(a, v), len(v))
	case []uint8:
		arr(C.FTN_TYPE_UINT8, carray(a, v), len(v))
	case []uint16:
		arr(C.FTN_TYPE_UINT16, carray(a, v), len(v))
	case []uint32:
		arr(C.FTN_TYPE_UINT32, carray(a, v), len(v))
	case []uint64:
		arr(C.FTN_TYPE_UINT64, carray(a, v), len(v))
	case []float32:
		arr(C.FTN_TYPE_FLOAT, carray(a, v), len(v))
	case []float64:
		arr(C.FTN_TYPE_DOUBLE, carray(a, v), len(v))
	case []string:
		items := make([][]byte, len(v))
		for i, s := range v {
			items[i] = []byte(s)
		}
		arr(C.FTN_TYPE_STRING, cstrings(a, items), len(v))
	case []String16:
		items := make([][]uint16, len(v))
		for i, s := range v {
			items[i] = s
		}
		arr(C.FTN_TYPE_STRING16, cstrings(a, items), len(v))
	case []String32:
		items := make([][]rune, len(v))
		for i, s := range v {
			items[i] = s
		}
		arr(C.FTN_TYPE_STRING32, cstrings(a, items), len(v))
	case *Custom:
		f = v.v.flat
		if a.owned {
			// Handed over: the receiver cleans it up now, not us.
			v.v.done.Store(true)
		}
	default:
		id := putGoValue(v)
		if a.owned {
			f._type = &C.cabi_owned_go_value_type
		} else {
			f._type = &C.cabi_go_value_type
			a.ids = append(a.ids, id)
		}
		f.flags = C.FTN_TYPE_CUSTOM_OBJECT
		f.custom_data = C.uintptr_t(id)
	}
	return f
}

// The lengths a value may have: a FutoInBinaryValue's uint32_t going to C,
// a Go int coming from C (C.int, which C.GoStringN takes, would turn one
// past math.MaxInt32 negative); and the bytes of a C copy that makeArgs
// makes, which it counts in a Go int. Variables so that tests can lower
// them.
var (
	maxCLen   uint64 = math.MaxUint32
	maxGoLen  uint64 = math.MaxInt
	maxCBytes uint64 = math.MaxInt
)

// lengthOf returns the length a FutoInBinaryValue gives v: the code units
// of a string, the items of an array; ok is false for other values.
func lengthOf(v any) (n int, ok bool) {
	switch v.(type) {
	case string, String16, String32, []bool, []int8, []int16, []int32,
		[]int64, []uint8, []uint16, []uint32, []uint64, []float32, []float64,
		[]string, []String16, []String32:
		return reflect.ValueOf(v).Len(), true
	}
	return 0, false
}

// maxCArgs is how many values a FutoInArgs holds.
const maxCArgs = 4

// tooLongForC names what of vals a FutoInArgs cannot hold: more values
// than its slots, which would be lost, or the first value whose length a
// FutoInBinaryValue cannot hold, or whose C copy makeArgs could not
// size (see cBytes); "" when every one fits. It reads no value's
// contents, only the lengths of the items of an array of strings.
func tooLongForC(vals []any) string {
	if len(vals) > maxCArgs {
		return fmt.Sprintf("%d values, more than the %d a FutoInArgs holds", len(vals), maxCArgs)
	}
	for i, v := range vals {
		n, ok := lengthOf(v)
		switch {
		case !ok:
		case uint64(n) > maxCLen:
			return fmt.Sprintf("arg%d: %T of length %d is longer than a FutoInBinaryValue holds (%d)", i, v, n, maxCLen)
		case cBytes(v) > maxCBytes:
			return fmt.Sprintf("arg%d: %T of length %d needs %d bytes of C memory, more than a Go int holds (%d)",
				i, v, n, cBytes(v), maxCBytes)
		}
	}
	return ""
}

// cBytes returns the size of the largest block of C memory that makeArgs
// allocates for v, a value of lengthOf: the copy of a string with its
// terminator, of an array, or of an item of an array of strings, or the
// array of an array of strings' pointers. makeArgs counts it in an int,
// which where an int has 32 bits a Go value of 2 GiB or more overflows:
// tooLongForC refuses such a value first. A uint64 holds the size of any
// value in memory.
func cBytes(v any) uint64 {
	switch v := v.(type) {
	case string:
		return uint64(len(v)) + 1
	case String16:
		return (uint64(len(v)) + 1) * 2
	case String32:
		return (uint64(len(v)) + 1) * 4
	case []string:
		return itemBytes(v, 1)
	case []String16:
		return itemBytes(v, 2)
	case []String32:
		return itemBytes(v, 4)
	}
	rv := reflect.ValueOf(v)
	return uint64(rv.Len()) * uint64(rv.Type().Elem().Size())
}

// itemBytes is cBytes for an array of strings whose code units take unit
// bytes each.
func itemBytes[S ~string | ~[]uint16 | ~[]rune](items []S, unit uint64) uint64 {
	n := uint64(len(items)) * uint64(unsafe.Sizeof(uintptr(0)))
	for _, it := range items {
		n = max(n, (uint64(len(it))+1)*unit)
	}
	return n
}

// goLen is a C value's length as a Go int; ok is false when an int cannot
// hold it.
func goLen(n uint64) (int, bool) {
	if n > maxGoLen {
		return 0, false
	}
	return int(n), true
}

// tooLongForGo is what goValue returns for a value whose length goLen
// refuses: the info of the InternalError.
type tooLongForGo string

// takeArgs converts the values of a success call to Go and resets args:
// strings and arrays are copied and their cleanup is called
// now; custom objects are taken over, their cleanup left to the receiving
// step. A custom object that in is one of the values from, the step's own
// input, is passed on without a second cleanup. A value too long for Go
// is dropped (cleaned up) and named by tooLong.
func takeArgs(args *C.FutoInArgs, from *node) (vals []any, tooLong string) {
	if args == nil {
		return nil, ""
	}
	slots := (*[4]C.FutoInBinaryValue)(unsafe.Pointer(args))
	last := -1
	for i := range slots {
		var f C.cabi_flat
		C.cabi_read_value(&slots[i], &f)
		if f._type == nil {
			vals = append(vals, nil)
			continue
		}
		last = i
		v, cleanup := goValue(&f, from)
		if info, ok := v.(tooLongForGo); ok {
			if tooLong == "" {
				tooLong = fmt.Sprintf("arg%d: %s", i, info)
			}
			v = nil
		}
		vals = append(vals, v)
		C.cabi_reset_value(&slots[i], boolInt(cleanup))
	}
	return vals[:last+1], tooLong
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// goSlice copies n elements of C memory at p. A NULL p holds no
// elements, whatever n says: the value is empty, as for every array (see
// goBools, cItems) and string.
func goSlice[T any](p unsafe.Pointer, n int) []T {
	if p == nil || n == 0 {
		return []T{}
	}
	return append([]T(nil), unsafe.Slice((*T)(p), n)...)
}

// goBools reads n C bools at p: any byte but 0 is true. Copied as they
// are, a byte of 2 would make a Go bool that is neither true nor false
// (it equals neither). A NULL p gives an empty slice, as goSlice does.
func goBools(p unsafe.Pointer, n int) []bool {
	if p == nil || n == 0 {
		return []bool{}
	}
	out := make([]bool, n)
	for i, b := range unsafe.Slice((*byte)(p), n) {
		out[i] = b != 0
	}
	return out
}

// cItems reads a C array of n NUL-terminated strings of T; a NULL item
// is an empty string, as an empty item is: an empty slice, not nil, as
// goSlice gives for a string whose p is NULL, so that a STRING16 or
// STRING32 item is the same value whichever way C makes it empty. A
// NULL p gives no items, as goSlice does. An item longer than a Go value
// holds (see goLen) makes the whole array too long: tooLong names it,
// and no item is copied.
func cItems[T comparable](p unsafe.Pointer, n int) (items [][]T, tooLong string) {
	if p == nil {
		return nil, ""
	}
	items = make([][]T, n)
	for i, q := range unsafe.Slice((*unsafe.Pointer)(p), n) {
		if q == nil {
			items[i] = []T{}
			continue
		}
		n := cLen[T](q)
		k, fits := goLen(n)
		if !fits {
			return nil, fmt.Sprintf("item %d: string of length %d is longer than a Go value holds (%d)", i, n, maxGoLen)
		}
		items[i] = append([]T{}, unsafe.Slice((*T)(q), k)...)
	}
	return items, ""
}

// cLen counts the code units of the NUL-terminated string of T at q. The
// count is a uint64: an int of 32 bits would turn negative past
// INT32_MAX.
func cLen[T comparable](q unsafe.Pointer) uint64 {
	var zero T
	k := uint64(0)
	for *(*T)(unsafe.Add(q, uintptr(k)*unsafe.Sizeof(zero))) != zero {
		k++
	}
	return k
}

// stringArray converts a C array of n strings of the base type base at
// p, or returns a tooLongForGo naming an item too long for Go.
func stringArray(base C.uint8_t, p unsafe.Pointer, n int) any {
	switch base {
	case C.FTN_TYPE_STRING16:
		items, tooLong := cItems[uint16](p, n)
		return convertItems(items, tooLong, func(it []uint16) String16 { return it })
	case C.FTN_TYPE_STRING32:
		items, tooLong := cItems[rune](p, n)
		return convertItems(items, tooLong, func(it []rune) String32 { return it })
	}
	items, tooLong := cItems[byte](p, n)
	return convertItems(items, tooLong, func(it []byte) string { return string(it) })
}

// convertItems makes the Go slice of items, each converted by conv, or
// returns tooLong as a tooLongForGo when it is not empty.
func convertItems[T, S any](items [][]T, tooLong string, conv func([]T) S) any {
	if tooLong != "" {
		return tooLongForGo(tooLong)
	}
	s := make([]S, len(items))
	for i, it := range items {
		s[i] = conv(it)
	}
	return s
}

// goValue converts one value; cleanup reports whether its type's cleanup
// is to be called now (a copied value) rather than later (a custom object).
func goValue(f *C.cabi_flat, from *node) (v any, cleanup bool) {
	if f._type == &C.cabi_go_value_type || f._type == &C.cabi_owned_go_value_type {
		return getGoValue(uint64(f.custom_data)), true
	}
	base := f.flags & C.FTN_BASE_TYPE_MASK
	array := f.flags&C.FTN_COMPLEX_TYPE_MASK == C.FTN_TYPE_ARRAY
	str := f.flags&C.FTN_COMPLEX_TYPE_MASK == 0 && base >= C.FTN_TYPE_STRING && base <= C.FTN_TYPE_STRING32
	n, fits := goLen(uint64(f.length))
	if !fits && (array || str) {
		kind := "string"
		if array {
			kind = "array"
		}
		return tooLongForGo(fmt.Sprintf("%s of length %d is longer than a Go value holds (%d)", kind, uint64(f.length), maxGoLen)), true
	}
	if array {
		p := unsafe.Pointer(f.p)
		switch base {
		case C.FTN_TYPE_STRING, C.FTN_TYPE_STRING16, C.FTN_TYPE_STRING32:
			return stringArray(base, p, n), true
		case C.FTN_TYPE_BOOL:
			return goBools(p, n), true
		case C.FTN_TYPE_INT8:
			return goSlice[int8](p, n), true
		case C.FTN_TYPE_INT16:
			return goSlice[int16](p, n), true
		case C.FTN_TYPE_INT32:
			return goSlice[int32](p, n), true
		case C.FTN_TYPE_INT64:
			return goSlice[int64](p, n), true
		case C.FTN_TYPE_UINT8:
			return goSlice[uint8](p, n), true
		case C.FTN_TYPE_UINT16:
			return goSlice[uint16](p, n), true
		case C.FTN_TYPE_UINT32:
			return goSlice[uint32](p, n), true
		case C.FTN_TYPE_UINT64:
			return goSlice[uint64](p, n), true
		case C.FTN_TYPE_FLOAT:
			return goSlice[float32](p, n), true
		case C.FTN_TYPE_DOUBLE:
			return goSlice[float64](p, n), true
		}
	} else if f.flags&C.FTN_COMPLEX_TYPE_MASK == 0 {
		switch base {
		case C.FTN_TYPE_STRING:
			if f.p == nil {
				return "", true
			}
			return string(unsafe.Slice((*byte)(f.p), n)), true
		case C.FTN_TYPE_STRING16:
			return String16(goSlice[uint16](unsafe.Pointer(f.p), n)), true
		case C.FTN_TYPE_STRING32:
			return String32(goSlice[rune](unsafe.Pointer(f.p), n)), true
		case C.FTN_TYPE_BOOL:
			return f.i != 0, true
		case C.FTN_TYPE_INT8:
			return int8(f.i), true
		case C.FTN_TYPE_INT16:
			return int16(f.i), true
		case C.FTN_TYPE_INT32:
			return int32(f.i), true
		case C.FTN_TYPE_INT64:
			return int64(f.i), true
		case C.FTN_TYPE_UINT8:
			return uint8(f.u), true
		case C.FTN_TYPE_UINT16:
			return uint16(f.u), true
		case C.FTN_TYPE_UINT32:
			return uint32(f.u), true
		case C.FTN_TYPE_UINT64:
			return uint64(f.u), true
		case C.FTN_TYPE_FLOAT:
			return float32(f.d), true
		case C.FTN_TYPE_DOUBLE:
			return float64(f.d), true
		}
	}
	// A custom object, or a type we do not know: passed on as it is.
	if from != nil {
		if c := from.forward(f); c != nil {
			return c, false
		}
	}
	var tool asyncsteps.Tool
	if from != nil {
		tool = from.tool
	}
	return newCustom(f, tool), false
}
