//go:build cgo

package cabi_test

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
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

// Binary called off the loop, on a Go step that waits (a goroutine gives
// it to a C library that completes it), while the flow's loop gives other
// steps of the flow to C: the pointer given off the loop is the step's,
// and is released once the step is over.
func TestBinaryOffTheLoopBesideTheLoop(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	const rounds = 200
	var given []unsafe.Pointer
	var done atomic.Bool
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		// On the loop first: the flow's State is made on first use, which
		// is the loop's to do.
		given = append(given, cabi.Binary(as))
		go func() {
			for range rounds {
				ptr := cabi.Binary(as)
				if cabi.Wrap(ptr) != as {
					t.Error("Binary off the loop gave a pointer that is not the step's")
				}
				given = append(given, ptr)
			}
			done.Store(true)
			as.Success()
		}()
	})
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Loop(func(as asyncsteps.AsyncSteps) {
			if p := cabi.Binary(as); cabi.Wrap(p) != as {
				t.Error("Binary on the loop gave a pointer that is not the step's")
			}
			if done.Load() {
				as.Break()
			}
		})
	})
	// A C flow of the loop's sweeps the pointers of steps that are over.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { cabi.Binary(as) })
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	// The completion may have overtaken the posts that add the pointers
	// to the flow's list (see the next test): the loop runs them first.
	afterPostsRan(loop)
	for i, ptr := range given {
		if cabi.Wrap(ptr) != nil {
			t.Fatalf("pointer %d of %d, given off the loop, is still valid after its step", i, len(given))
		}
	}
}

// Binary called off the loop, on a Go step whose completion comes from
// that goroutine before the step's callback has returned: the loop
// applies the completion as the callback returns, and runs the flow's
// later steps, the last sweep among them, before the post that adds the
// pointer to the flow's list. The pointer is released all the same.
// Before, that post added it to the list after the flow's last sweep, and
// it was never released.
func TestBinaryOffTheLoopCompletedBeforeItsCallbackReturns(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		cabi.Binary(as) // on the loop first: the flow's State is made there
		completed := make(chan struct{})
		go func() {
			defer close(completed)
			given = cabi.Binary(as)
			as.Success()
		}()
		<-completed
	})
	// A C flow of the loop's sweeps the pointers of steps that are over.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { cabi.Binary(as) })
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	afterPostsRan(loop)
	if cabi.Wrap(given) != nil {
		t.Error("the pointer given off the loop is still valid after its step")
	}
}

// afterPostsRan returns once loop has run the callbacks posted to it
// before the call.
func afterPostsRan(loop *asyncsteps.Loop) {
	ran := make(chan struct{})
	loop.Immediate(func() { close(ran) })
	<-ran
}

// A step of a parallel branch given to C off the loop, where its branch
// cannot be told, has a rootId of its own, not the flow's: a sync entered
// through its lock function must not take it for the flow, or for another
// branch. Before, it had the flow's.
func TestBinaryOffTheLoopHasARootIDOfItsOwn(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	flowID := ctest.RootID(cabi.Binary(r))
	var onLoop, offLoop int64
	p := r.Parallel()
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		onLoop = ctest.RootID(cabi.Binary(as))
		go func() {
			offLoop = ctest.RootID(cabi.Binary(as))
			as.Success()
		}()
	})
	p.Add(func(asyncsteps.AsyncSteps, ...any) {})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if onLoop == flowID || offLoop == flowID || offLoop == onLoop || offLoop == 0 {
		t.Errorf("rootIds: flow %d, branch step on the loop %d, off the loop %d; want three apart",
			flowID, onLoop, offLoop)
	}
}

// A C step that passes on, in a success from another thread, the custom
// object it received and left in its slot, while its callback returns:
// the object reaches the next step and is cleaned up once, and the
// step's list of received objects is never written by two threads at
// once. Before, the other thread took the object out of that list while
// the loop read it (go test -race shows it).
func TestSuccessFromAnotherThreadPassesOnAnInput(t *testing.T) {
	r, _ := newRoot(t)
	const rounds = 100
	r.Repeat(rounds, func(as asyncsteps.AsyncSteps, _ int) { ctest.PassAsync(cabi.Binary(as)) })
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if !gcUntil(5*time.Second, func() bool { return ctest.Cleanups() >= rounds }) {
		t.Fatalf("%d cleanups, want %d", ctest.Cleanups(), rounds)
	}
	settleCleanups()
	if n := ctest.Cleanups(); n != rounds {
		t.Errorf("%d cleanups, want %d", n, rounds)
	}
	if strings.Contains(ctest.Trace(), "got no custom object") {
		t.Error("a step did not get the object passed on")
	}
}
