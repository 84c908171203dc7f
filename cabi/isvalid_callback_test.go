//go:build cgo

package cabi_test

import (
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// isValid from another thread while the step's callback runs, and
// completes the step: 1, the callback has not returned. Before, isValid
// read there what the callback writes as it completes the step, a data
// race under -race (the engine reads it safely only on the loop).
func TestIsValidFromAnotherThreadWhileTheCallbackRuns(t *testing.T) {
	r, _ := newRoot(t)
	got := -1
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := cabi.Binary(as)
		valid := make(chan int)
		go func() { valid <- ctest.IsValid(p) }()
		as.Success()
		got = <-valid
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Errorf("isValid from another thread while the callback runs = %d, want 1", got)
	}
}
