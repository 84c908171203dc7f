//go:build cgo

package cabi_test

import (
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

// The first C use of a Loop from another goroutine, which waits for the
// loop to pin itself to its thread, and a callback of the loop that gives
// a step to C meanwhile both get their pointer, and the loop goes on.
// Before, the callback waited for the other goroutine, which waited for
// the loop: the loop hung for good.
func TestFirstCUseOffTheLoopBesideOneOnTheLoop(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	offLoop := make(chan unsafe.Pointer)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		go func() { offLoop <- cabi.New(loop) }() // the loop's first C root
		if !waitForStack("cabi.(*loopCtx).pinLoop(", 5*time.Second) {
			t.Error("the C root off the loop never waited for the loop")
		}
		if p := cabi.Binary(as); cabi.Wrap(p) != as {
			t.Error("Binary on the loop gave a pointer that is not the step's")
		}
	})
	select {
	case res := <-r.Promise():
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop hangs") // and so would Close: the loop leaks
	}
	select {
	case owned := <-offLoop:
		if cabi.Wrap(owned) == nil {
			t.Error("the C root made off the loop is not valid")
		}
		cabi.FreeWait(owned)
	case <-time.After(5 * time.Second):
		t.Fatal("the C root off the loop was never made")
	}
	loop.Close()
}

// waitForStack waits until some goroutine's stack holds fn.
func waitForStack(fn string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if strings.Contains(string(buf[:n]), fn) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
