//go:build cgo

package cabi

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The tests here run a flow of Go's (a Go Root on a Loop, no root pointer
// held by C) whose C steps, added through Binary, wait when the Loop is
// closed. Run reports the closed loop; the C steps must be released once
// the loop has stopped, as the free of a root does for the steps its
// stopped loop left: innermost first, after the cancel handler of each
// (once) and the unlock of a foreign sync held. Before, nothing released
// them: their stack memory was never cleaned up, their nodes stayed in the
// registry, and through them the State and its C state variables.

// leftProgram is a program of cflow.c whose node 0 a Go step adds on its
// own pointer (Binary), with what its release must have done once the
// loop has stopped: the C cancel handlers called, the blocks of stack
// memory cleaned up, the state variables cleaned up (once the State goes).
type leftProgram struct {
	name                   string
	nodes                  []ctest.Node
	triggers               int // CF_TRIGGER steps: all wait when the loop is closed
	cancels, stacks, state int
}

var leftPrograms = []leftProgram{
	{name: "waiting", nodes: []ctest.Node{{Kind: ctest.CFTrigger}},
		triggers: 1, cancels: 1, stacks: 1},
	// A loop whose body waits for a sequence whose sub-step waits: the
	// loop's step has stack memory of its own and waits for sub-steps.
	{name: "nested", nodes: []ctest.Node{
		{Kind: ctest.CFLoop, A: 1, Kids: []int{1}},
		{Kind: ctest.CFSeq, Kids: []int{2}},
		{Kind: ctest.CFTrigger},
	}, triggers: 1, cancels: 1, stacks: 2},
	{name: "state variable", nodes: []ctest.Node{
		{Kind: ctest.CFSeq, Kids: []int{1, 2}},
		{Kind: ctest.CFState},
		{Kind: ctest.CFTrigger},
	}, triggers: 1, cancels: 1, stacks: 1, state: 1},
	{name: "parallel", nodes: []ctest.Node{
		{Kind: ctest.CFPar, Kids: []int{1, 2}},
		{Kind: ctest.CFTrigger},
		{Kind: ctest.CFTrigger},
	}, triggers: 2, cancels: 2, stacks: 2},
}

func TestCStepsOfAGoFlowLeftByAClosedLoopAreReleased(t *testing.T) {
	for _, p := range leftPrograms {
		t.Run(p.name, func(t *testing.T) { checkLeftProgram(t, p) })
	}
}

func checkLeftProgram(t *testing.T, p leftProgram) {
	runtime.GC() // the state variables of earlier tests' flows go first
	before := ctest.FlowCounters()
	registered := registrySize()
	ctest.LoadFlow(p.nodes)
	waiting := triggersHook(p.triggers)
	defer func() { ctest.FlowHook = nil }()

	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ctest.FlowAdd(Binary(as), 0) })
	st := r.State()
	lp := loopFor(loop)
	go func() {
		<-waiting
		loop.Close()
	}()
	checkClosedErr(t, runFlow(t, r))
	afterFallbacks(lp)

	c := ctest.FlowCounters()
	if got := c.Cancels - before.Cancels; got != p.cancels {
		t.Errorf("%d C cancel handlers called, want %d", got, p.cancels)
	}
	allocs, cleanups := c.StackAllocs-before.StackAllocs, c.StackCleanups-before.StackCleanups
	if allocs != p.stacks || cleanups != p.stacks {
		t.Errorf("%d blocks of stack memory taken, %d cleaned up; want %d, %d", allocs, cleanups, p.stacks, p.stacks)
	}
	if n := nodesOf(st); n != 0 {
		t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
	}
	if n := registrySize() - registered; n != 0 {
		t.Errorf("the registry holds %d more entries than before the flow, want 0", n)
	}
	if v := c.Violations - before.Violations; v != 0 {
		t.Errorf("%d violations on the C side (see stderr)", v)
	}

	// Nothing else keeps the State: its variables are cleaned up, once.
	r, st, loop, lp = nil, nil, nil, nil
	allocated := c.StateAllocs - before.StateAllocs
	if allocated != p.state {
		t.Errorf("%d state variables allocated, want %d", allocated, p.state)
	}
	cleaned := func() int { return ctest.FlowCounters().StateCleanups - before.StateCleanups }
	deadline := time.Now().Add(5 * time.Second)
	for cleaned() < allocated && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := cleaned(); got != p.state {
		t.Errorf("%d state variables cleaned up, want %d", got, p.state)
	}
}

// triggersHook sets the hook of cflow.c's Go steps: the returned channel
// is closed once n CF_TRIGGER steps wait (the other kinds are not used).
func triggersHook(n int) <-chan struct{} {
	waiting := make(chan struct{})
	var mu sync.Mutex
	ctest.FlowHook = func(_ unsafe.Pointer, _ int) {
		mu.Lock()
		defer mu.Unlock()
		if n--; n == 0 {
			close(waiting)
		}
	}
	return waiting
}

// checkClosedErr fails the test unless err is the closed loop's.
func checkClosedErr(t *testing.T, err error) {
	t.Helper()
	var e *asyncsteps.Error
	if !errors.As(err, &e) || e.Code != asyncsteps.InternalError || e.Info != "the flow's loop is closed" {
		t.Fatalf("the flow ended with %v, want InternalError: the flow's loop is closed", err)
	}
}

// afterFallbacks returns once the loop of lp has stopped and every
// fallback queued until then has run: they run in order, on one goroutine.
func afterFallbacks(lp *loopCtx) {
	<-lp.loop.Done()
	for {
		lp.mu.Lock()
		stopped := lp.stopped
		lp.mu.Unlock()
		if stopped {
			break
		}
		time.Sleep(time.Millisecond) // the watcher takes the list
	}
	ran := make(chan struct{})
	dropLater(&posted{dropped: func() { close(ran) }})
	<-ran
}

func registrySize() int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return len(registry.m)
}

// A C step with no cancel handler, and one inside the section of a
// foreign FutoInSync (another implementation's, which C flows of other
// loops may share): both are released once the loop has stopped, the
// sync unlocked once, on the fallbacks' thread.
func TestCStepsOfAGoFlowLeftByAClosedLoopTraced(t *testing.T) {
	cases := []struct {
		name  string
		add   func(step unsafe.Pointer)
		trace string
	}{
		{"no cancel handler", ctest.Held, "held\n"},
		{"foreign sync", func(step unsafe.Pointer) { ctest.SyncHeld(step, ctest.SharedSync(false)) },
			"shared lock\nheld\nheld cancel\nshared unlock held=1 same_thread=0\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			registered := registrySize()
			loop := asyncsteps.NewLoop()
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.add(Binary(as)) })
			lp := loopFor(loop)
			go func() {
				ctest.WaitFor("held", 5*time.Second)
				loop.Close()
			}()
			checkClosedErr(t, runFlow(t, r))
			afterFallbacks(lp)
			if got := ctest.Trace(); got != c.trace {
				t.Errorf("trace:\n%s\nwant:\n%s", got, c.trace)
			}
			if n := nodesOf(r.State()); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
			if n := registrySize() - registered; n != 0 {
				t.Errorf("the registry holds %d more entries than before the flow, want 0", n)
			}
		})
	}
}

// A flow cancelled on its running loop has its C cancel handlers run by
// the engine; a close of the loop after its end calls none again.
func TestCStepsOfACancelledGoFlowAreNotCancelledAgainByTheClose(t *testing.T) {
	before := ctest.FlowCounters()
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFTrigger}})
	waiting := triggersHook(1)
	defer func() { ctest.FlowHook = nil }()
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ctest.FlowAdd(Binary(as), 0) })
	lp := loopFor(loop)
	go func() {
		<-waiting
		r.Cancel()
	}()
	if err := runFlow(t, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("the flow ended with %v, want context.Canceled", err)
	}
	loop.Close()
	afterFallbacks(lp)
	c := ctest.FlowCounters()
	if got := c.Cancels - before.Cancels; got != 1 {
		t.Errorf("%d C cancel handlers called, want 1", got)
	}
	if got := c.StackCleanups - before.StackCleanups; got != 1 {
		t.Errorf("%d blocks of stack memory cleaned up, want 1", got)
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
	}
}

// A Go Root given to C (Binary of the Root), its C step added through the
// root pointer: while C holds that pointer, its free releases what the
// stopped loop left, as documented; once C has freed it, on the running
// loop, the loop's stop does. And a copy of such a Root (Clone), for
// which C holds no pointer, has its C steps released by the stop.
func TestCStepsOfAGoRootGivenToCLeftByAClosedLoop(t *testing.T) {
	for _, c := range []struct {
		name      string
		clone     bool
		freeFirst bool // C frees the root pointer while the step waits
	}{
		{name: "pointer held"},
		{name: "pointer freed before the close", freeFirst: true},
		{name: "clone", clone: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := ctest.FlowCounters()
			ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFTrigger}})
			waiting := triggersHook(1)
			defer func() { ctest.FlowHook = nil }()
			loop := asyncsteps.NewLoop()
			model := asyncsteps.New(asyncsteps.WithTool(loop))
			given := Binary(model)
			ctest.FlowAdd(given, 0)
			r := model
			if c.clone {
				r = model.Clone()
			}
			lp := loopFor(loop)
			go func() {
				<-waiting
				if c.freeFirst {
					ctest.FlowFree(given)
					afterLoopRan(loop) // the free's release has run
				}
				loop.Close()
			}()
			checkClosedErr(t, runFlow(t, r))
			afterFallbacks(lp)
			cancels := func() int { return ctest.FlowCounters().Cancels - before.Cancels }
			if !c.freeFirst && !c.clone {
				if got := cancels(); got != 0 {
					t.Fatalf("%d C cancel handlers called before the free of the root pointer, want 0", got)
				}
				if n := nodesOf(r.State()); n != 1 {
					t.Fatalf("%d nodes of the flow in the registry before the free, want 1", n)
				}
			}
			if !c.freeFirst {
				ctest.FlowFree(given)
				afterFallbacks(lp)
			}
			if got := cancels(); got != 1 {
				t.Errorf("%d C cancel handlers called, want 1", got)
			}
			if got := ctest.FlowCounters().StackCleanups - before.StackCleanups; got != 1 {
				t.Errorf("%d blocks of stack memory cleaned up, want 1", got)
			}
			if n := nodesOf(r.State()); n != 0 {
				t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
			}
		})
	}
}

// A loop closed by a C step inside the section of a foreign FutoInSync,
// which then returns: the flow stops between two steps of the section,
// with no C step left waiting, and the section is left all the same: the
// sync is unlocked once, on the fallbacks' thread.
func TestForeignSyncOfAGoFlowStoppedInsideTheSectionIsUnlocked(t *testing.T) {
	ctest.Reset()
	registered := registrySize()
	shared := ctest.SharedSync(false)
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		ctest.SyncGo(Binary(as), shared, func(unsafe.Pointer) { loop.Close() })
	})
	lp := loopFor(loop)
	checkClosedErr(t, runFlow(t, r))
	afterFallbacks(lp)
	if got, want := ctest.Trace(), "shared lock\nshared unlock held=1 same_thread=0\n"; got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
	if n := nodesOf(r.State()); n != 0 {
		t.Errorf("%d nodes of the flow are left in the registry, want 0", n)
	}
	if n := registrySize() - registered; n != 0 {
		t.Errorf("the registry holds %d more entries than before the flow, want 0", n)
	}
}
