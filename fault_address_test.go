//go:build linux

package asyncsteps_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// faultSink keeps the read of an unmapped page from being optimised away.
var faultSink byte

// A Loop's goroutine runs with panic-on-fault set (the package doc, "What
// a callback may do to the loop"): a read at an address that is no longer
// mapped, as of a memory-mapped file another process truncated, panics
// rather than crashing the process, and the panic is an InternalError of
// the callback's step; the loop goes on serving. In a child process: a
// regression would crash it.
func TestFaultAtAnUnmappedAddressInACallbackIsAnInternalError(t *testing.T) {
	inChild(t, func(t *testing.T) {
		page, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Skipf("mmap: %v", err)
		}
		if err := syscall.Munmap(page); err != nil {
			t.Fatalf("munmap: %v", err)
		}
		l := asyncsteps.NewLoop()
		defer l.Close()
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			faultSink = page[0]
			t.Error("the read of an unmapped page returned")
		})
		res := runOn(t, r, l, nil)
		wantError(t, res.Err, asyncsteps.InternalError,
			"runtime error: invalid memory address or nil pointer dereference")
		wantServing(t, l)
	})
}
