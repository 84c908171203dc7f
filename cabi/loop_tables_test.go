//go:build cgo

package cabi_test

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A Loop that ran C flows, a C root's and a Go root's, is forgotten by
// cabi once it has stopped: nothing of cabi's keeps it reachable, so a
// program that makes and closes loops (one per test, one per tenant) does
// not keep every closed one. Before, the table of pinned loops kept each
// for good.
func TestClosedLoopBecomesUnreachable(t *testing.T) {
	ctest.Reset()
	gone := weak.Make(runClosedLoop(t))
	deadline := time.Now().Add(5 * time.Second)
	for gone.Value() != nil && time.Now().Before(deadline) {
		runtime.GC() // the flows' entries go in a GC cleanup, the Loop in the next GC
		time.Sleep(5 * time.Millisecond)
	}
	if gone.Value() != nil {
		t.Fatal("the closed Loop is still reachable")
	}
}

// runClosedLoop runs a C root and a Go root given to C on a new Loop,
// frees both, closes the loop and returns it.
func runClosedLoop(t *testing.T) *asyncsteps.Loop {
	t.Helper()
	loop := asyncsteps.NewLoop()
	owned := cabi.New(loop)
	ctest.State(owned)
	ctest.ExecuteOnly(owned, "x", 1)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	given := cabi.Binary(r)
	ctest.Loops(given)
	if _, err := run(t, r); err != nil {
		t.Fatalf("Go root: %v", err)
	}
	ctest.Free(owned)
	ctest.Free(given)
	loop.Close()
	return loop
}
