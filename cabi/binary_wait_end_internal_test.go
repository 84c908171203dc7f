//go:build cgo

package cabi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The tests here give C a Go step that waits (Binary), then end the step
// from Go, in a flow with no later C step or Binary to sweep the pointer:
// the node must go with the flow's end. Before, it stayed in the registry
// for good, and with it the flow's State: one node leaked per flow.

// nodesOf counts the nodes in the registry of the steps of the flow whose
// State is st.
func nodesOf(st *asyncsteps.State) int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	n := 0
	for _, v := range registry.m {
		if nd, ok := v.(*node); ok && nd.kind == kindStep && nd.st == st {
			n++
		}
	}
	return n
}

// checkTraceLeavesNoNode checks that the C trace is want, exactly, and
// that no node of a step of r's flow is left in the registry.
func checkTraceLeavesNoNode(t *testing.T, r *asyncsteps.Root, want string) {
	t.Helper()
	if got := ctest.Trace(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
}

// waitingGoStep adds to r a Go step that waits and gives itself to C on
// the loop, then calls end with its AsyncSteps from another goroutine,
// once the loop has run the sweep that Binary posts (which must keep the
// pointer: the step waits). given receives the pointer. A Go step with
// nothing of C follows it.
func waitingGoStep(r asyncsteps.AsyncSteps, loop *asyncsteps.Loop, given *unsafe.Pointer, end func(as asyncsteps.AsyncSteps)) {
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		*given = Binary(as)
		go func() {
			afterLoopRan(loop)
			end(as)
		}()
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
}

// afterLoopRan returns once the loop has run what was posted to it before.
func afterLoopRan(loop *asyncsteps.Loop) {
	ran := make(chan struct{})
	loop.Immediate(func() { close(ran) })
	<-ran
}

// checkReleased fails the test unless the flow of st has no node left and
// p is stale.
func checkReleased(t *testing.T, st *asyncsteps.State, p unsafe.Pointer) {
	t.Helper()
	if n := nodesOf(st); n != 0 {
		t.Errorf("%d nodes of the ended flow are left in the registry, want 0", n)
	}
	if Wrap(p) != nil {
		t.Error("the pointer Binary gave to the waiting step is still valid after its flow ended")
	}
}

func runFlow(t *testing.T, r *asyncsteps.Root) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Run(ctx)
	return err
}

func TestBinaryWaitingStepSucceededByGoIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	waitingGoStep(r, loop, &given, func(as asyncsteps.AsyncSteps) { as.Success() })
	if err := runFlow(t, r); err != nil {
		t.Fatal(err)
	}
	afterLoopRan(loop)
	checkReleased(t, r.State(), given)
}

func TestBinaryWaitingStepFailedByGoIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	waitingGoStep(r, loop, &given, func(as asyncsteps.AsyncSteps) { as.Error("Failed", "by Go") })
	err := runFlow(t, r)
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != "Failed" || e.Info != "by Go" {
		t.Fatalf("the flow ended with %v, want Failed: by Go", err)
	}
	afterLoopRan(loop)
	checkReleased(t, r.State(), given)
}

func TestBinaryWaitingStepOfACancelledFlowIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	waitingGoStep(r, loop, &given, func(asyncsteps.AsyncSteps) { r.Cancel() })
	if err := runFlow(t, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("the flow ended with %v, want context.Canceled", err)
	}
	afterLoopRan(loop)
	checkReleased(t, r.State(), given)
}

// A step that an error handler of the flow takes over: the flow goes on
// with Go steps after the error, and the node goes at its end.
func TestBinaryWaitingStepFailedAndHandledIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		waitingGoStep(as, loop, &given, func(as asyncsteps.AsyncSteps) { as.Error("Failed") })
	}, func(as asyncsteps.AsyncSteps, code string) { as.Success("handled") })
	args, err := r.Run(context.Background())
	if err != nil || len(args) != 1 || args[0] != "handled" {
		t.Fatalf("the flow ended with %v, %v; want [handled], nil", args, err)
	}
	afterLoopRan(loop)
	checkReleased(t, r.State(), given)
}

// The step's timeout ends it, in virtual time.
func TestBinaryWaitingStepTimedOutIsReleased(t *testing.T) {
	tool := asyncsteps.NewTestTool()
	var ended *asyncsteps.Error
	r := asyncsteps.New(asyncsteps.WithTool(tool), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { ended = err }))
	var given unsafe.Pointer
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second)
		given = Binary(as)
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
	r.Execute()
	tool.Advance(999 * time.Millisecond)
	if Wrap(given) == nil {
		t.Fatal("the pointer of the waiting step was released before its timeout")
	}
	tool.Advance(time.Millisecond)
	tool.Run()
	if ended == nil || ended.Code != asyncsteps.Timeout {
		t.Fatalf("the flow ended with %v, want Timeout", ended)
	}
	checkReleased(t, r.State(), given)
}

// The flow's Loop is closed while the step waits: the flow will never go
// on, and the node goes once the loop has stopped.
func TestBinaryWaitingStepOfAClosedLoopIsReleased(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
	var given unsafe.Pointer
	waiting := make(chan struct{})
	waitingGoStep(r, loop, &given, func(asyncsteps.AsyncSteps) { close(waiting) })
	r.Execute()
	<-waiting
	loop.Close()
	deadline := time.Now().Add(5 * time.Second)
	for nodesOf(r.State()) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the release runs after the loop's stop, on another goroutine
	}
	checkReleased(t, r.State(), given)
}

type unwrapping struct{ asyncsteps.AsyncSteps }

func (u unwrapping) Unwrap() asyncsteps.AsyncSteps { return u.AsyncSteps }

// A Root run again and again (its steps added again: they run once), each
// run giving C a waiting step: no node of an ended run is left, and the
// live one keeps its pointer.
func TestBinaryWaitingStepsOfRunsOfOneRoot(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	var stale atomic.Bool
	for range 3 {
		waitingGoStep(r, loop, &given, func(as asyncsteps.AsyncSteps) {
			if Wrap(given) != as {
				stale.Store(true)
			}
			as.Success()
		})
		if err := runFlow(t, r); err != nil {
			t.Fatal(err)
		}
		if stale.Load() {
			t.Fatal("the pointer of the waiting step was not the step's while it waited")
		}
		afterLoopRan(loop)
		checkReleased(t, r.State(), given)
	}
}

// Binary of a waiting step called in each place it may be: in the step's
// callback, on the loop after the callback has returned, or off the loop
// by the goroutine that then completes the step (the loop adopts the
// node while the step waits); on the step or through a decorator that
// unwraps; in the flow's last step or followed by a Go step with nothing
// of C. The pointer is the step's while it waits, and goes with the
// flow's end.
func TestBinaryWaitingStepIsReleasedWhereverBinaryIsCalled(t *testing.T) {
	cases := []struct {
		name     string
		where    binaryWhere
		decorate bool
	}{
		{"in the callback through a decorator", inTheCallback, true},
		{"later on the loop through a decorator", laterOnTheLoop, true},
		{"off the loop", offTheLoop, false},
		{"off the loop through a decorator", offTheLoop, true},
	}
	for _, c := range cases {
		for _, followed := range []bool{false, true} {
			name := c.name + map[bool]string{false: ", last step", true: ", followed"}[followed]
			t.Run(name, func(t *testing.T) { checkBinaryCalled(t, c.where, c.decorate, followed) })
		}
	}
}

// Where a test calls Binary for a step that waits.
type binaryWhere int

const (
	inTheCallback  binaryWhere = iota
	laterOnTheLoop             // in a callback of the loop, after the step's
	offTheLoop                 // by the goroutine that completes the step
)

func checkBinaryCalled(t *testing.T, where binaryWhere, decorate, followed bool) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var given unsafe.Pointer
	var valid atomic.Bool
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.State() // Binary off the loop reads it: the loop makes it
		var step asyncsteps.AsyncSteps = as
		if decorate {
			step = unwrapping{as}
		}
		complete := func() {
			afterLoopRan(loop) // the loop has run what Binary posted, and adopted the node
			valid.Store(Wrap(given) == step)
			as.Success()
		}
		switch where {
		case inTheCallback:
			given = Binary(step)
			go complete()
		case laterOnTheLoop:
			loop.Immediate(func() {
				given = Binary(step)
				go complete()
			})
		case offTheLoop:
			go func() {
				given = Binary(step)
				complete()
			}()
		}
	})
	if followed {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
	}
	if err := runFlow(t, r); err != nil {
		t.Fatal(err)
	}
	if !valid.Load() {
		t.Fatal("the pointer was not the step's while it waited")
	}
	afterLoopRan(loop)
	checkReleased(t, r.State(), given)
}
