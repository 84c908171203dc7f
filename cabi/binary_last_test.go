//go:build cgo

package cabi_test

import (
	"testing"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

// Binary on the loop, in the flow's last Go step, with no C step or other
// Binary of the flow after it: the pointer is released once the step is
// over. Before, only a later Binary or C step of the flow swept it, so a
// server that gave each request's last step to C leaked one per request.
func TestBinaryInTheLastStepIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	var valid bool
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		given = cabi.Binary(as)
		valid = cabi.Wrap(given) == as
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if !valid {
		t.Fatal("the pointer was not the step's while the step ran")
	}
	afterPostsRan(loop)
	if cabi.Wrap(given) != nil {
		t.Error("the pointer given in the flow's last step is still valid after the flow ended")
	}
}

// The same through a decorator without Unwrap, through which the engine
// cannot watch the flow's end: the sweep that Binary posts then releases
// the pointer once the step is over.
func TestBinaryThroughAnOpaqueDecoratorInTheLastStepIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { given = cabi.Binary(opaque{as}) })
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	afterPostsRan(loop)
	if cabi.Wrap(given) != nil {
		t.Error("the pointer given through an opaque decorator in the flow's last step is still valid after the flow ended")
	}
}

// The sweep that Binary posts for a decorator without Unwrap keeps the
// pointer of a step that waits: it stays valid until the step is over.
func TestBinaryOfAWaitingStepOutlivesTheSweep(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	validAfterSweep := make(chan bool, 1)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		step := opaque{as}
		given := cabi.Binary(step)
		go func() {
			afterPostsRan(loop) // the sweep posted by Binary has run
			validAfterSweep <- cabi.Wrap(given) == step
			as.Success()
		}()
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if !<-validAfterSweep {
		t.Error("the pointer of a step that waits was released by the sweep after its callback")
	}
}
