//go:build cgo

package main

import (
	"math"
	"strconv"
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps/cabi"
)

// The constructors of the library's syncs refuse, with NULL, a count that
// a Go int cannot hold, where int(n) would turn it negative: where an int
// has 32 bits, a count past INT32_MAX made NewMutex and NewThrottle panic
// (the panic ended the C program) and NewLimiter take a negative Burst
// for no limit. Only an int of 32 bits meets such a count; the limit is
// lowered here.
func TestConstructorsRefuseACountPastAGoInt(t *testing.T) {
	old := maxInt
	maxInt = 5
	defer func() { maxInt = old }()
	for _, c := range []struct {
		name string
		made bool
		new  func() bool
	}{
		{"mutex max 5", true, func() bool { return made(unsafe.Pointer(futoin_mutex_new(5, 0))) }},
		{"mutex max 6", false, func() bool { return made(unsafe.Pointer(futoin_mutex_new(6, 0))) }},
		{"throttle max 5", true, func() bool { return made(unsafe.Pointer(futoin_throttle_new(5, 10, 0))) }},
		{"throttle max 6", false, func() bool { return made(unsafe.Pointer(futoin_throttle_new(6, 10, 0))) }},
		{"limiter of 5", true, func() bool { return made(unsafe.Pointer(futoin_limiter_new(5, 0, 5, 10, 5))) }},
		{"limiter concurrent 6", false, func() bool { return made(unsafe.Pointer(futoin_limiter_new(6, 0, 0, 0, 0))) }},
		{"limiter rate 6", false, func() bool { return made(unsafe.Pointer(futoin_limiter_new(0, 0, 6, 10, 0))) }},
		{"limiter burst 6", false, func() bool { return made(unsafe.Pointer(futoin_limiter_new(0, 0, 1, 10, 6))) }},
	} {
		if got := c.new(); got != c.made {
			t.Errorf("%s: made %v, want %v", c.name, got, c.made)
		}
	}
}

// Where an int has 64 bits, every uint32_t count is a Go int: the
// constructors take the largest.
func TestConstructorsTakeEveryUint32WithA64BitInt(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("an int of 32 bits: such counts are refused, see TestConstructorsRefuseACountPastAGoInt")
	}
	const max = math.MaxUint32
	if !made(unsafe.Pointer(futoin_mutex_new(max, 0))) || !made(unsafe.Pointer(futoin_throttle_new(max, max, 0))) ||
		!made(unsafe.Pointer(futoin_limiter_new(max, 0, max, max, max))) {
		t.Error("a constructor refused a count of UINT32_MAX")
	}
}

// made reports whether s is a sync, and frees it.
func made(s unsafe.Pointer) bool {
	if s == nil {
		return false
	}
	cabi.FreeSync(s)
	return true
}
