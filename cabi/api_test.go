package cabi_test

import (
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

// The public API of package cabi, which C and Go code outside this
// repository is written against, checked by the compiler.
var (
	_ func(asyncsteps.AsyncSteps) unsafe.Pointer = cabi.Binary
	_ func(unsafe.Pointer) asyncsteps.AsyncSteps = cabi.Wrap
)
