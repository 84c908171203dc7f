//go:build !cgo

package cabi

import (
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
)

// Binary needs cgo: without it, it panics.
func Binary(as asyncsteps.AsyncSteps) unsafe.Pointer { panic(errNoCgo) }

// Wrap needs cgo: without it, it panics.
func Wrap(p unsafe.Pointer) asyncsteps.AsyncSteps { panic(errNoCgo) }

// New needs cgo: without it, it panics.
func New(tool asyncsteps.Tool) unsafe.Pointer { panic(errNoCgo) }

const errNoCgo = "cabi: built without cgo"
