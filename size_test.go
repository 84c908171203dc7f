package asyncsteps

import (
	"context"
	"testing"
	"unsafe"
)

// A parked flow is its Root, the frame of its waiting step and that step's
// handle (328 bytes), and with a Promise its channel (160 more: a 112-byte
// channel and the 48-byte buffer of its one Result). The Root holds where
// the flow takes its step APIs from (flow.nextAPI): the handle is in a
// chunk of the flow's own, a 24-byte one for a flow of one step. Each size
// below fills its size class of the heap exactly (the Root's, within a
// byte): a field added to frame or Root must be paid for elsewhere, or it
// costs 16 bytes a flow or more.
func TestParkedFlowFitsItsBudget(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"frame", unsafe.Sizeof(frame{}), 112},
		{"Root", unsafe.Sizeof(Root{}), 192},
		{"handle", unsafe.Sizeof(stepAPI{}), 24},
	}
	total := uintptr(0)
	for _, s := range sizes {
		if s.got > s.want {
			t.Errorf("%s is %d bytes, want at most %d", s.name, s.got, s.want)
		}
		total += s.got
	}
	if total > 328 {
		t.Errorf("a parked flow is %d bytes, want at most 328", total)
	}
}

// A flow's first four steps share one 64-byte array (Root.push), which a
// field added to step would make 96: workloads c and g allocate it once
// per flow.
func TestStepFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(step{}); got > 16 {
		t.Errorf("step is %d bytes, want at most 16", got)
	}
}

// A critical section holds the array of its steps, which its frame would
// otherwise allocate (64 bytes): at 320 bytes, section and array fill the
// 320-byte size class exactly, which is what a flow inside a section, or
// waiting to enter, costs (workload f reuses the sections of its loop).
func TestSectionFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(section{}); got > 320 {
		t.Errorf("section is %d bytes, want at most 320", got)
	}
}

// A flow started by Promise that waits once allocates its Root, its step
// array, the chunk of its step's API and its channel (two objects: the
// buffer of a channel of pointers is apart), and nothing else: the Promise
// needs no record of its own, nor a set's entry in the Loop. Allocations
// of the loop's that do not come with every flow (a queue or the slice of
// awaited flows that grows) average out over the runs.
func TestPromiseFlowAllocates5Objects(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	parked := make(chan AsyncSteps, 1)
	step := func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		parked <- as
	}
	got := testing.AllocsPerRun(1000, func() {
		r := New(WithTool(loop))
		r.Add(step)
		p := r.Promise()
		(<-parked).Success()
		if res := <-p; res.Err != nil {
			t.Fatal(res.Err)
		}
	})
	if got != 5 {
		t.Errorf("a Promise flow that waits once allocates %v objects, want 5", got)
	}
}

// Run, ExecuteWith and hooks give an execution a waiter, which fills the
// 96-byte size class exactly: a field added to it must be paid for
// elsewhere, or it costs each such execution 16 bytes, also one that
// never meets what the field is for.
func TestWaiterFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(waiter{}); got > 96 {
		t.Errorf("waiter is %d bytes, want at most 96", got)
	}
}

// ExecuteThen's waiter, which holds its function and the flag of
// ExecuteThenContext's refused start beside a waiter, fills the 112-byte
// size class: a field added to it costs each such execution 16 bytes.
func TestThenWaiterFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(thenWaiter{}); got > 112 {
		t.Errorf("thenWaiter is %d bytes, want at most 112", got)
	}
}

// A frame's rare part (an error handler, a cancel handler, a timeout, an
// Await call) fills the 80-byte size class: a field added to it costs
// every such step 16 bytes, so fields that few kinds of frame use share
// frameSide instead.
func TestFrameRareFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(frameRare{}); got > 80 {
		t.Errorf("frameRare is %d bytes, want at most 80", got)
	}
}

// A flow started by ExecuteThen that waits once allocates its Root, its
// step array, the chunk of its step's API and its waiter, which holds
// the function: one object fewer than with a Promise. Each ended flow
// leaves the loop's awaited flows, which keep it while it runs.
func TestExecuteThenFlowAllocates4Objects(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	step, parked := parkingStep()
	ended := make(chan Result, 1)
	done := func(res Result) { ended <- res }
	got := waitOnceAllocs(t, loop, step, parked, func(r *Root) <-chan Result {
		r.ExecuteThen(done)
		return ended
	})
	if got != 4 {
		t.Errorf("an ExecuteThen flow that waits once allocates %v objects, want 4", got)
	}
	wantNoAwaitedFlows(t, loop)
}

// parkingStep returns a step that waits and hands its AsyncSteps to
// parked, for the test to end it.
func parkingStep() (step StepFunc, parked <-chan AsyncSteps) {
	ch := make(chan AsyncSteps, 1)
	return func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		ch <- as
	}, ch
}

// waitOnceAllocs returns how many objects a flow of step on loop
// allocates, started by start, which returns where its Result comes.
func waitOnceAllocs(t *testing.T, loop *Loop, step StepFunc, parked <-chan AsyncSteps, start func(r *Root) <-chan Result) float64 {
	t.Helper()
	return testing.AllocsPerRun(1000, func() {
		r := New(WithTool(loop))
		r.Add(step)
		ch := start(r)
		(<-parked).Success()
		if res := <-ch; res.Err != nil {
			t.Fatal(res.Err)
		}
	})
}

// wantNoAwaitedFlows fails the test if loop keeps a flow among its
// awaited ones: each ended flow must have left them.
func wantNoAwaitedFlows(t *testing.T, loop *Loop) {
	t.Helper()
	awaited := make(chan int)
	loop.Immediate(func() { awaited <- len(loop.awaited) })
	if n := <-awaited; n != 0 {
		t.Errorf("the loop keeps %d ended flows among its awaited ones, want none", n)
	}
}

// A flow started by ExecuteThenContext costs what one of PromiseContext
// under the same context does, less the channel (two objects): under a
// context that can end, the watch of it (context.AfterFunc's record, its
// stop function, and the function it runs) on top of ExecuteThen's 4;
// under one that cannot, nothing on top of them. With or without a
// function, the loop keeps none of the ended flows among its awaited ones.
func TestExecuteThenContextAllocatesPromiseContextsLessTheChannel(t *testing.T) {
	loop := NewLoop()
	defer loop.Close()
	step, parked := parkingStep()
	ended := make(chan Result, 1)
	done := func(res Result) { ended <- res }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := func(start func(r *Root) <-chan Result) float64 {
		return waitOnceAllocs(t, loop, step, parked, start)
	}
	then := func(ctx context.Context) func(r *Root) <-chan Result {
		return func(r *Root) <-chan Result {
			r.ExecuteThenContext(ctx, done)
			return ended
		}
	}
	promise := allocs(func(r *Root) <-chan Result { return r.PromiseContext(ctx) })
	if got := allocs(then(ctx)); got != 7 || got != promise-2 {
		t.Errorf("an ExecuteThenContext flow that waits once allocates %v objects, want 7, PromiseContext's %v less 2", got, promise)
	}
	if got := allocs(then(context.Background())); got != 4 {
		t.Errorf("under a context that cannot end it allocates %v objects, want 4, as ExecuteThen", got)
	}
	r := New(WithTool(loop))
	r.Add(step)
	r.Add(func(AsyncSteps, ...any) { ended <- Result{} }) // its last callback: the loop ends it next
	r.ExecuteThenContext(ctx, nil)
	(<-parked).Success()
	<-ended
	wantNoAwaitedFlows(t, loop)
}
