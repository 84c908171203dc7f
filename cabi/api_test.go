package cabi_test

import (
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

// The public API of package cabi, checked by the compiler.
var (
	_ func(asyncsteps.AsyncSteps) unsafe.Pointer = cabi.Binary
	_ func(unsafe.Pointer) asyncsteps.AsyncSteps = cabi.Wrap
)
