//go:build cgo

package cabi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// wrapRun is a flow of a root made by C, on a TestTool, whose first step
// is a C step that calls hook with its pointer in its callback; a Go
// step after it ends the flow with "ok".
type wrapRun struct {
	tt     *asyncsteps.TestTool
	ptr    unsafe.Pointer
	st     *asyncsteps.State
	before ctest.Counters
	trace  []string
	ended  string
}

// freeClean frees the flow's Root and runs the tool, and fails t unless
// the registry keeps no node of the flow and the C side saw no violation.
func (w *wrapRun) freeClean(t *testing.T) {
	t.Helper()
	ctest.FlowFree(w.ptr)
	w.tt.Run()
	if n := nodesOf(w.st); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	if n := ctest.FlowCounters().Violations - w.before.Violations; n != 0 {
		t.Errorf("%d violations of the C side", n)
	}
}

// startWrapRun executes the flow and runs the tool until it is idle.
func startWrapRun(t *testing.T, hook func(w *wrapRun, step unsafe.Pointer)) *wrapRun {
	t.Helper()
	w := &wrapRun{tt: asyncsteps.NewTestTool(), before: ctest.FlowCounters()}
	ctest.LoadFlow([]ctest.Node{{Kind: ctest.CFGo}})
	ctest.FlowHook = func(step unsafe.Pointer, _ int) { hook(w, step) }
	t.Cleanup(func() { ctest.FlowHook = nil })
	w.ptr = New(w.tt)
	r := Wrap(w.ptr).(*asyncsteps.Root)
	w.st = r.State()
	ctest.FlowAdd(w.ptr, 0)
	r.Add(func(asyncsteps.AsyncSteps, ...any) { w.ended = "ok" })
	r.ExecuteWith(func(err *asyncsteps.Error) { w.ended = err.Code })
	w.tt.Run()
	return w
}

// log adds to the trace what the flow's C step looks like now: its nodes
// in the registry, whether its pointer is stale, and how many of its
// blocks of stack memory were cleaned up.
func (w *wrapRun) log(what string, step unsafe.Pointer) {
	c := ctest.FlowCounters()
	w.trace = append(w.trace, fmt.Sprintf("%s: nodes=%d stale=%v cleaned=%d",
		what, nodesOf(w.st), Wrap(step) == nil, c.StackCleanups-w.before.StackCleanups))
}

// awaitEnd runs the tool until the flow has ended: an Await function
// completes its step from its own goroutine, which a TestTool does not
// wait for. It gives up after a few seconds on the wall clock: the test
// then fails on the outcome.
func (w *wrapRun) awaitEnd() {
	deadline := time.Now().Add(5 * time.Second)
	for w.ended == "" && time.Now().Before(deadline) {
		w.tt.Run()
		runtime.Gosched()
	}
}

// check frees the root and fails the test unless the flow ended with
// ended and trace, C's cancel handlers ran cancels times, and nothing of
// the flow is left: no node, every block of stack memory cleaned up.
func (w *wrapRun) check(t *testing.T, ended string, trace []string, cancels int) {
	t.Helper()
	if ended != "" {
		w.awaitEnd()
	}
	ctest.FlowFree(w.ptr)
	w.tt.Run()
	if w.ended != ended {
		t.Errorf("the flow ended with %q, want %q", w.ended, ended)
	}
	if !slices.Equal(w.trace, trace) {
		t.Errorf("trace\n%q\nwant\n%q", w.trace, trace)
	}
	c := ctest.FlowCounters()
	if n := nodesOf(w.st); n != 0 {
		t.Errorf("%d nodes of the flow in the registry, want 0", n)
	}
	allocs, cleanups := c.StackAllocs-w.before.StackAllocs, c.StackCleanups-w.before.StackCleanups
	if allocs != 1 || cleanups != 1 {
		t.Errorf("%d stack allocations, %d cleanups; want 1 and 1", allocs, cleanups)
	}
	if n := c.Cancels - w.before.Cancels; n != cancels {
		t.Errorf("the cancel handler ran %d times, want %d", n, cancels)
	}
	if n := c.Violations - w.before.Violations; n != 0 {
		t.Errorf("%d violations of the C side", n)
	}
}

// Sub-steps that Go adds through Wrap of a C step's pointer, in the
// step's C callback, keep the step live until they are over, as those C
// adds through the table do: its pointer stays valid and its stack
// memory is not cleaned up while they run. Before, the node learnt
// nothing of them and released both as the C callback returned.
func TestCStepSubStepsAddedThroughWrapKeepItLive(t *testing.T) {
	tests := []struct {
		name string
		add  func(w asyncsteps.AsyncSteps, live func())
	}{
		{"Add", func(w asyncsteps.AsyncSteps, live func()) {
			w.Add(func(asyncsteps.AsyncSteps, ...any) { live() })
		}},
		{"Parallel", func(w asyncsteps.AsyncSteps, live func()) {
			w.Parallel().Add(func(asyncsteps.AsyncSteps, ...any) { live() })
		}},
		{"Loop", func(w asyncsteps.AsyncSteps, live func()) {
			w.Loop(func(as asyncsteps.AsyncSteps) { live(); as.Break() })
		}},
		{"Repeat", func(w asyncsteps.AsyncSteps, live func()) {
			w.Repeat(1, func(asyncsteps.AsyncSteps, int) { live() })
		}},
		{"ForEach", func(w asyncsteps.AsyncSteps, live func()) {
			w.ForEach([]int{7}, func(asyncsteps.AsyncSteps, any, any) { live() })
		}},
		{"Sync", func(w asyncsteps.AsyncSteps, live func()) {
			w.Sync(asyncsteps.NewMutex(1), func(asyncsteps.AsyncSteps, ...any) { live() })
		}},
		{"Await", func(w asyncsteps.AsyncSteps, live func()) {
			// The function runs on a goroutine of its own: its error
			// handler, on the loop, looks at the step.
			w.Await(func(context.Context) (any, error) { return nil, errors.New("looked at") },
				func(as asyncsteps.AsyncSteps, _ string) { live(); as.Success() })
		}},
		{"CopyFrom", func(w asyncsteps.AsyncSteps, live func()) {
			model := asyncsteps.New()
			model.Add(func(asyncsteps.AsyncSteps, ...any) { live() })
			w.CopyFrom(model)
		}},
		{"SuccessStep", func(w asyncsteps.AsyncSteps, live func()) {
			w.SuccessStep(int32(5)).Add(func(_ asyncsteps.AsyncSteps, args ...any) {
				if !slices.Equal(args, []any{int32(5)}) {
					panic(fmt.Sprintf("args %v after SuccessStep", args))
				}
				live()
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWrapRun(t, func(w *wrapRun, step unsafe.Pointer) {
				ctest.FlowStack(step, 0)
				tc.add(Wrap(step), func() { w.log("sub-step", step) })
			})
			w.check(t, "ok", []string{"sub-step: nodes=1 stale=false cleaned=0"}, 0)
		})
	}
}

// SetCancel, WaitExternal and SetTimeout that Go calls through Wrap of a
// C step's pointer, in the step's C callback, make the step wait as
// setCancel, waitExternal and setTimeout through the table do: its
// pointer stays valid, so that success or handle_error through it
// completes the step, its stack memory stays until then, and a Go cancel
// handler runs once, before the memory goes, when the step is cancelled
// or fails (the failing step's own cancel handler runs, as the engine
// runs a Go step's). Before, the node was released as the C callback
// returned: a completion through the pointer was ignored, and the flow
// waited for good.
func TestCStepWaitsThroughWrap(t *testing.T) {
	tests := []struct {
		name string
		wait func(w asyncsteps.AsyncSteps, cancelled func())
		// complete runs on the loop after the callback; nil: the test
		// cancels the root instead.
		complete func(step unsafe.Pointer)
		ended    string
		trace    []string
		cancels  int
	}{
		{
			name:     "SetCancel, success through the table",
			wait:     func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 0) },
			ended:    "ok",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:     "SetCancel, Success through Wrap",
			wait:     func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			complete: func(step unsafe.Pointer) { Wrap(step).Success() },
			ended:    "ok",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:     "SetCancel, handle_error through the table",
			wait:     func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 3) },
			ended:    "E3",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0", "Go cancel: nodes=1 stale=false cleaned=0"},
			cancels:  1,
		},
		{
			name:     "SetCancel, Error through Wrap",
			wait:     func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			complete: func(step unsafe.Pointer) { Wrap(step).Error("E3") },
			ended:    "E3",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0", "Go cancel: nodes=1 stale=false cleaned=0"},
			cancels:  1,
		},
		{
			name:    "SetCancel, the root cancelled",
			wait:    func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			trace:   []string{"Go cancel: nodes=1 stale=false cleaned=0"},
			cancels: 1,
		},
		{
			name: "SetCancel with a handler that panics, handle_error through the table",
			wait: func(w asyncsteps.AsyncSteps, _ func()) {
				w.SetCancel(func(asyncsteps.AsyncSteps) { panic("boom") })
			},
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 3) },
			ended:    asyncsteps.InternalError, // the panic replaces the error it unwinds
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:     "WaitExternal, success through the table",
			wait:     func(w asyncsteps.AsyncSteps, _ func()) { w.WaitExternal() },
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 0) },
			ended:    "ok",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:     "WaitExternal, handle_error through the table",
			wait:     func(w asyncsteps.AsyncSteps, _ func()) { w.WaitExternal() },
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 4) },
			ended:    "E4",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			// Only the step's own callback adds sub-steps: Add through
			// Wrap once the C callback has returned fails the step, as
			// the engine fails a Go step, and the success after it
			// comes too late. The node and the memory go as for any
			// error of the step.
			name: "SetCancel, Add through Wrap, then success through the table",
			wait: func(w asyncsteps.AsyncSteps, c func()) { w.SetCancel(func(asyncsteps.AsyncSteps) { c() }) },
			complete: func(step unsafe.Pointer) {
				Wrap(step).Add(func(asyncsteps.AsyncSteps, ...any) { panic("the late step ran") })
				ctest.FlowComplete(step, 0)
			},
			ended:   asyncsteps.InternalError,
			trace:   []string{"complete: nodes=1 stale=false cleaned=0", "Go cancel: nodes=1 stale=false cleaned=0"},
			cancels: 1,
		},
		{
			name:     "WaitExternal, SetTimeout through Wrap",
			wait:     func(w asyncsteps.AsyncSteps, _ func()) { w.WaitExternal() },
			complete: func(step unsafe.Pointer) { Wrap(step).SetTimeout(time.Second) },
			ended:    asyncsteps.InternalError,
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:     "SetTimeout, success through the table before it",
			wait:     func(w asyncsteps.AsyncSteps, _ func()) { w.SetTimeout(time.Hour) },
			complete: func(step unsafe.Pointer) { ctest.FlowComplete(step, 0) },
			ended:    "ok",
			trace:    []string{"complete: nodes=1 stale=false cleaned=0"},
		},
		{
			name:  "SetTimeout expires",
			wait:  func(w asyncsteps.AsyncSteps, _ func()) { w.SetTimeout(time.Hour) },
			ended: asyncsteps.Timeout,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWrapRun(t, func(w *wrapRun, step unsafe.Pointer) {
				mem := ctest.FlowStack(step, 0)
				tc.wait(Wrap(step), func() {
					w.log("Go cancel", step)
					ctest.FlowCancelled(mem)
				})
				if tc.complete != nil {
					w.tt.Immediate(func() {
						w.log("complete", step)
						tc.complete(step)
					})
				}
			})
			if tc.complete == nil && tc.ended == "" {
				ctest.FlowCancel(w.ptr)
				w.tt.Run()
			}
			w.check(t, tc.ended, tc.trace, tc.cancels)
		})
	}
}

// The failing step's own cancel handler runs when it fails, as the engine
// runs a Go step's: handle_error through the pointer of a C step, or of a
// Go step given by Binary, runs the C cancel handler set through that
// pointer once, before the step's memory goes, whether it is called in
// the step's callback, later on the loop or from another thread, as Go's
// Error does through Wrap (for a C step) or on the Go step. A success
// runs none. Before, only the engine's Error on the Go step ran it.
func TestHandleErrorRunsTheStepsOwnCancelHandler(t *testing.T) {
	type when int
	const (
		inCallback when = iota
		later
		fromThread
	)
	completions := []struct {
		name     string
		complete func(step unsafe.Pointer, goStep asyncsteps.AsyncSteps)
		ended    string
		cancels  int
	}{
		{"handle_error through the table", func(step unsafe.Pointer, _ asyncsteps.AsyncSteps) { ctest.FlowComplete(step, 3) }, "E3", 1},
		{"success through the table", func(step unsafe.Pointer, _ asyncsteps.AsyncSteps) { ctest.FlowComplete(step, 0) }, "ok", 0},
		{"Go's Error", func(step unsafe.Pointer, goStep asyncsteps.AsyncSteps) {
			if goStep == nil {
				Wrap(step).Error("E3")
				return
			}
			goStep.Error("E3")
		}, "E3", 1},
	}
	for _, goStep := range []bool{false, true} {
		for _, wh := range []when{inCallback, later, fromThread} {
			for _, c := range completions {
				name := fmt.Sprintf("%s of a C step %s", c.name, []string{"in its callback", "later on the loop", "from another thread"}[wh])
				if goStep {
					name = fmt.Sprintf("%s of a Go step given by Binary %s", c.name, []string{"in its callback", "later on the loop", "from another thread"}[wh])
				}
				t.Run(name, func(t *testing.T) {
					var step unsafe.Pointer
					var gs asyncsteps.AsyncSteps
					guarded := func(w *wrapRun, p unsafe.Pointer, as asyncsteps.AsyncSteps) {
						step, gs = p, as
						ctest.FlowGuard(p, 0)
						switch wh {
						case inCallback:
							c.complete(p, as)
						case later:
							w.tt.Immediate(func() { c.complete(p, as) })
						}
					}
					w := startWrapRun(t, func(w *wrapRun, p unsafe.Pointer) {
						if !goStep {
							guarded(w, p, nil)
							return
						}
						Wrap(p).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							as.WaitExternal()
							guarded(w, Binary(as), as)
						})
					})
					if wh == fromThread {
						done := make(chan struct{})
						go func() {
							defer close(done)
							c.complete(step, gs)
						}()
						<-done
						w.tt.Run()
					}
					w.check(t, c.ended, nil, c.cancels)
				})
			}
		}
	}
}

// A step has one cancel handler, as an engine's step has: the one set
// last, C's setCancel through the table or Go's SetCancel through Wrap,
// runs when the step is cancelled, and the other never does.
func TestCStepCancelHandlerSetLastRuns(t *testing.T) {
	for _, goLast := range []bool{false, true} {
		t.Run(fmt.Sprintf("Go's last=%v", goLast), func(t *testing.T) {
			w := startWrapRun(t, func(w *wrapRun, step unsafe.Pointer) {
				goCancel := func(asyncsteps.AsyncSteps) { w.log("Go cancel", step) }
				if goLast {
					ctest.FlowGuard(step, 0) // C's setCancel, with its stack memory
					Wrap(step).SetCancel(goCancel)
					return
				}
				Wrap(step).SetCancel(goCancel)
				ctest.FlowGuard(step, 0)
			})
			ctest.FlowCancel(w.ptr)
			w.tt.Run()
			if goLast {
				w.check(t, "", []string{"Go cancel: nodes=1 stale=false cleaned=0"}, 0)
				return
			}
			w.check(t, "", nil, 1)
		})
	}
}

// completeFromThread completes step through the C table from another
// thread (0: success, else E<code>), and returns once it has.
func completeFromThread(step unsafe.Pointer, code int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctest.FlowComplete(step, code)
	}()
	<-done
}

// A success or handle_error from another thread through the pointer of a
// step whose sub-steps run is ignored, as the engine ignores Go's on such
// a step, and leaves the step's pointer and stack memory to the
// sub-steps' end: they may use both. Before, it released them at once,
// under the running sub-steps.
func TestLateCompletionOfAStepWithSubStepsKeepsIt(t *testing.T) {
	for _, tc := range []struct {
		goStep bool // the step is a Go step given by Binary, not a C step
		code   int
	}{{false, 0}, {false, 3}, {true, 0}, {true, 3}} {
		t.Run(fmt.Sprintf("Go step=%v code=%d", tc.goStep, tc.code), func(t *testing.T) {
			code := tc.code
			w := startWrapRun(t, func(w *wrapRun, cstep unsafe.Pointer) {
				parent, step := Wrap(cstep), cstep
				// A sub-step of step that waits while a completion of
				// step comes from another thread, then ends.
				subStep := func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					w.tt.Immediate(func() {
						completeFromThread(step, code) // posts to the loop
						w.tt.Immediate(func() {        // after that post
							w.log("ignored", step)
							as.Success()
						})
					})
				}
				if tc.goStep {
					parent.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						step = Binary(as)
						ctest.FlowStack(step, 0)
						as.Add(subStep)
					})
					return
				}
				ctest.FlowStack(step, 0)
				parent.Add(subStep)
			})
			nodes := 1
			if tc.goStep {
				nodes = 2 // the C step's too, whose Go sub-step the Go step is
			}
			w.check(t, "ok", []string{fmt.Sprintf("ignored: nodes=%d stale=false cleaned=0", nodes)}, 0)
		})
	}
}

// Go's Success, Error and Add through Wrap of a C step's pointer, from a
// Go sub-step of that step, which waits for it, raise InternalError in
// the sub-step's callback and unwind it, as on a Go step; the step's
// pointer and stack memory go with the failure. Before, Success and
// Error there were posted to the loop and ignored, and the flow went on
// as if nothing had been called (Add went to the engine already).
func TestWrapCallFromASubStepIsInternalError(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(parent asyncsteps.AsyncSteps)
	}{
		{"Success", func(p asyncsteps.AsyncSteps) { p.Success() }},
		{"Error(Lost)", func(p asyncsteps.AsyncSteps) { p.Error("Lost") }},
		{"Add", func(p asyncsteps.AsyncSteps) { p.Add(func(asyncsteps.AsyncSteps, ...any) {}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkCallFromSubstep(t, c.name, c.call, func(unsafe.Pointer) {})
		})
	}
}

// checkCallFromSubstep runs a C step that wraps its own pointer, runs
// before on it, and adds a Go sub-step that makes call, named name, on the
// wrapped parent; the call must raise, in the sub-step, the InternalError
// of a call on a step that waits for its sub-steps, which ends the flow.
func checkCallFromSubstep(t *testing.T, name string, call func(parent asyncsteps.AsyncSteps), before func(cstep unsafe.Pointer)) {
	t.Helper()
	w := startWrapRun(t, func(w *wrapRun, cstep unsafe.Pointer) {
		parent := Wrap(cstep)
		ctest.FlowStack(cstep, 0)
		before(cstep)
		parent.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			call(parent)
			w.trace = append(w.trace, "not aborted")
		})
	})
	info := name + " called on the AsyncSteps of a step that waits for its sub-steps"
	if w.st.ErrorInfo != info {
		t.Errorf("error info %q, want %q", w.st.ErrorInfo, info)
	}
	w.check(t, asyncsteps.InternalError, nil, 0)
}
