//go:build cgo

package cabi

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// A flow that met cabi on a TestTool, or on a Tool of another package
// that keeps its callbacks, and was then dropped, goes: its entry in the
// table flows, the tool, the State and with it the C state variables it
// holds, whose cleanups run once. Before, the entry held the tool, which
// reaches the flow's State (a TestTool through the engine's pools, which
// keep its last flows; the keeping tool through its callbacks): the weak
// key never died, and neither did the entry, the tool, nor the variables.
// Run twice, the Root finds its variable in its State again.
func TestDroppedFlowLeavesTheFlowsTable(t *testing.T) {
	tools := map[string]func() (asyncsteps.Tool, *asyncsteps.TestTool){
		"TestTool": func() (asyncsteps.Tool, *asyncsteps.TestTool) {
			tt := asyncsteps.NewTestTool()
			return tt, tt
		},
		"keeping tool": func() (asyncsteps.Tool, *asyncsteps.TestTool) {
			tt := asyncsteps.NewTestTool()
			return &keepingTool{tt: tt}, tt
		},
	}
	flows := map[string]func(r *asyncsteps.Root) (add, free func()){
		// C steps in a Go root given to C, which frees its pointer after.
		"C steps": func(r *asyncsteps.Root) (add, free func()) {
			root := Binary(r)
			return func() { ctest.State(root) }, func() { ctest.Free(root) }
		},
		// A Go step given to C, which adds C steps on it.
		"Binary of a Go step": func(r *asyncsteps.Root) (add, free func()) {
			return func() {
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { ctest.State(Binary(as)) })
			}, func() {}
		},
	}
	for toolName, newTool := range tools {
		for flowName, newFlow := range flows {
			for _, runs := range []int{1, 2} {
				name := fmt.Sprintf("%s/%s/%d runs", toolName, flowName, runs)
				t.Run(name, func(t *testing.T) { checkDroppedFlowGoes(t, newTool, newFlow, runs) })
			}
		}
	}
}

// keepingTool is a Tool of another package's kind that keeps every
// callback given to it, and so the flows they belong to. It holds its
// TestTool in a field: a type that embeds one is that TestTool to the
// engine, which then gives none of its callbacks to the methods here.
type keepingTool struct {
	tt   *asyncsteps.TestTool
	kept []func()
}

func (k *keepingTool) IsSameThread() bool { return k.tt.IsSameThread() }
func (k *keepingTool) Now() time.Time     { return k.tt.Now() }

func (k *keepingTool) Immediate(f func()) asyncsteps.Handle {
	k.kept = append(k.kept, f)
	return k.tt.Immediate(f)
}

func (k *keepingTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	k.kept = append(k.kept, f)
	return k.tt.Deferred(d, f)
}

func checkDroppedFlowGoes(t *testing.T, newTool func() (asyncsteps.Tool, *asyncsteps.TestTool),
	newFlow func(*asyncsteps.Root) (add, free func()), runs int) {
	settleCollector()
	before := flowsLen()
	tool, key := runDroppedFlow(t, newTool, newFlow, runs)
	collected := collectUntil(func() bool {
		return tool.Value() == nil && !inFlows(key) && flowsLen() <= before &&
			strings.Count(ctest.Trace(), "cleanup counter=") == 1
	})
	settleCollector() // a second cleanup of the variable would show now
	if !collected {
		t.Errorf("after the collector ran: tool collected %v, flow in the table %v, table size %d (before %d)",
			tool.Value() == nil, inFlows(key), flowsLen(), before)
	}
	want := []string{"alloc counter"}
	for i := range runs {
		want = append(want, "state1 missing=(nil)", fmt.Sprintf("state2 counter=%d same=1", 2*(i+1)))
	}
	want = append(want, fmt.Sprintf("cleanup counter=%d", 2*runs))
	if got := ctest.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("C trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// runDroppedFlow runs runs times, to its end, a Go root on a tool made by
// newTool, with the C side that newFlow adds, then frees that, runs what
// the free posts, and drops the tool and the root: it returns them
// weakly, the root by the key of its State in flows.
func runDroppedFlow(t *testing.T, newTool func() (asyncsteps.Tool, *asyncsteps.TestTool),
	newFlow func(*asyncsteps.Root) (add, free func()), runs int) (weak.Pointer[asyncsteps.TestTool], weak.Pointer[asyncsteps.State]) {
	runtime.LockOSThread() // the C steps check that they run on one thread
	defer runtime.UnlockOSThread()
	ctest.Reset()
	tool, tt := newTool()
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	add, free := newFlow(r)
	for range runs {
		add()
		var err error
		r.ExecuteWith(func(e *asyncsteps.Error) { err = e })
		tt.Run()
		if err != nil || r.Running() {
			t.Fatalf("the flow: error %v, running %v", err, r.Running())
		}
	}
	free()
	tt.Run()
	if k, ok := tool.(*keepingTool); ok && len(k.kept) == 0 {
		t.Fatal("the keeping tool was given no callback to keep")
	}
	if strings.Contains(ctest.Trace(), "cleanup") {
		t.Fatalf("the state variable was cleaned up while its State lives: %q", ctest.Trace())
	}
	return weak.Make(tt), weak.Make(r.State())
}

func flowsLen() int {
	flows.mu.Lock()
	defer flows.mu.Unlock()
	return len(flows.m)
}

// inFlows reports whether the State of key has an entry in flows; a weak
// pointer equals those made of the same object, also once it is gone.
func inFlows(key weak.Pointer[asyncsteps.State]) bool {
	flows.mu.Lock()
	defer flows.mu.Unlock()
	_, ok := flows.m[key]
	return ok
}

// collectUntil runs the collector, and lets the cleanups it queued run,
// until cond holds: false if it does not after 20 rounds. An object
// that is collected goes in one round; its runtime cleanup runs in the
// round, and what only that cleanup kept goes in the next.
func collectUntil(cond func() bool) bool {
	for range 20 {
		settleCollector()
		if cond() {
			return true
		}
	}
	return false
}

// settleCollector runs the collector and returns once the cleanup of an
// object dropped before it has run: cleanups queued by that collection
// have had their turn (they run one after another, in no promised order,
// so a round of collectUntil checks again).
func settleCollector() {
	ran := make(chan struct{})
	runtime.AddCleanup(new([4]*byte), func(ch chan struct{}) { close(ch) }, ran)
	runtime.GC()
	select {
	case <-ran:
	case <-time.After(5 * time.Second): // the round fails, and collectUntil with it
	}
}
