//go:build cgo

package cabi_test

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// stepCall is a call that only a step's callback makes on its step: its
// name and ctest.Idle* number, the end of the info that reports it
// through a root's pointer, where it has no step to act on, and the
// engine's info that fails a step that makes it on a parallel of its own.
type stepCall struct {
	name         string
	call         int
	info         string
	parallelInfo string
}

// stepCalls are all the step calls.
var stepCalls = []stepCall{
	{"setTimeout", ctest.IdleSetTimeout, ": it has no step to time", "SetTimeout called on the value returned by Parallel"},
	{"setCancel", ctest.IdleSetCancel, ": it has no step to cancel", "SetCancel called on the value returned by Parallel"},
	{"waitExternal", ctest.IdleWaitExternal, ": it has no step to make wait", "WaitExternal called on the value returned by Parallel"},
	{"success", ctest.IdleSuccess, ": it has no step to complete", "Success called on the value returned by Parallel"},
	{"handle_error", ctest.IdleHandleError, ": it has no step to fail", "Error called on the value returned by Parallel"},
	{"breakLoop", ctest.IdleBreakLoop, ": it has no loop to break", "Break called on the value returned by Parallel"},
	{"continueLoop", ctest.IdleContinueLoop, ": it has no loop to continue", "Continue called on the value returned by Parallel"},
}

// onRootInfo is the info that reports call made on a root, or on a
// parallel made on one.
func onRootInfo(name, end string, parallel bool) string {
	if parallel {
		return name + " called on a parallel made on a root" + end
	}
	return name + " called on a root" + end
}

// forStepCallsOnRootAndParallel runs f as a subtest for each step call,
// made on an idle root, then on a parallel made on it while idle.
func forStepCallsOnRootAndParallel(t *testing.T, f func(t *testing.T, c stepCall, parallel bool)) {
	for _, c := range stepCalls {
		for _, parallel := range []bool{false, true} {
			name := c.name
			if parallel {
				name += " on a parallel made idle"
			}
			t.Run(name, func(t *testing.T) { f(t, c, parallel) })
		}
	}
}

// setTimeout, setCancel, waitExternal, success, handle_error, breakLoop
// and continueLoop on an idle root, or on a parallel made on it, are
// misuse: the root's next execute fails at once with InternalError naming
// the first such call, through its unhandled_error, and runs no step; the
// execute after it runs normally, so each is reported once. The cancel
// handler given is never called. Before, all but success and handle_error
// were ignored, while success there was reported (as the engine's
// "Success called on a Root"): a C programmer who used the wrong pointer
// got no sign of it.
func TestStepCallsOnAnIdleRootAreReported(t *testing.T) {
	forStepCallsOnRootAndParallel(t, func(t *testing.T, c stepCall, parallel bool) {
		root := newCRoot(t)
		defer ctest.Free(root)
		p := root
		if parallel {
			ctest.ParallelOfIdle(root)
			p = ctest.IdleParallel()
		}
		ctest.IdleCall(p, c.call)
		ctest.IdleCall(p, ctest.IdleSetTimeout) // a second one is not reported
		want := "unhandled InternalError: " + onRootInfo(c.name, c.info, parallel) + "\n"
		executeAndCheck(t, root, want)
		executeAndCheck(t, root, "next step ran\n")
	})
}

// waitHeld waits until the step of Hold runs: the execution's first
// step. An execution that a misuse ended at once never runs it, and
// WaitHeld, on a C condition, would wait for good.
func waitHeld(t *testing.T) {
	t.Helper()
	held := make(chan struct{})
	go func() {
		ctest.WaitHeld()
		close(held)
	}()
	select {
	case <-held:
	case <-time.After(5 * time.Second): // a bound on a hang, not a wait
		t.Fatal("the execution's first step never ran")
	}
}

// executeAndCheck executes root with ExecuteReporting, waits until it
// has ended, and checks the trace it left.
func executeAndCheck(t *testing.T, root unsafe.Pointer, want string) {
	t.Helper()
	ctest.Reset()
	ctest.ExecuteReporting(root)
	if !ctest.WaitFor("\n", 5*time.Second) {
		t.Fatal("the execution did not end")
	}
	waitCIdle(t, root)
	if got := ctest.Trace(); got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// The same calls on a running root, from another thread (as the flow
// starts, or while a step waits) or from a step's callback on the loop
// (the wrong pointer in a step), have no effect on the running flow, and
// the root's next execute reports them as on an idle root. Before,
// success and handle_error from another thread recorded the misuse in the
// engine's Root, beside the loop that reads it as the flow starts: a data
// race under -race.
func TestStepCallsOnARunningRootAreReportedByTheNextExecute(t *testing.T) {
	for _, c := range stepCalls {
		for _, starting := range []bool{true, false} {
			name := c.name + " from another thread while a step waits"
			if starting {
				name = c.name + " from another thread as the flow starts"
			}
			t.Run(name, func(t *testing.T) {
				root := newCRoot(t)
				defer ctest.Free(root)
				ctest.Hold(root)
				ctest.ExecuteOnly(root, "x", 1)
				if starting {
					ctest.IdleCall(root, c.call)
				}
				waitHeld(t)
				if !starting {
					ctest.IdleCall(root, c.call)
				}
				ctest.ReleaseHeld()
				waitCIdle(t, root)
				if got := ctest.Trace(); got != "" {
					t.Errorf("the running flow traced %q, want nothing", got)
				}
				executeAndCheck(t, root, "unhandled InternalError: "+onRootInfo(c.name, c.info, false)+"\n")
			})
		}
		t.Run(c.name+" in a step's callback", func(t *testing.T) {
			root := newCRoot(t)
			defer ctest.Free(root)
			cabi.Wrap(root).Add(func(asyncsteps.AsyncSteps, ...any) { ctest.IdleCall(root, c.call) })
			executeAndCheck(t, root, "next step ran\n")
			executeAndCheck(t, root, "unhandled InternalError: "+onRootInfo(c.name, c.info, false)+"\n")
		})
	}
}

// Such a call that no execute follows is logged with log/slog when the
// root is freed, as an add dropped on a running root is.
func TestStepCallOnAnIdleRootThenFreeIsLogged(t *testing.T) {
	for _, c := range stepCalls {
		t.Run(c.name, func(t *testing.T) {
			logs := withLogs(t)
			root := newCRoot(t)
			ctest.IdleCall(root, c.call)
			ctest.Free(root)
			want := []string{`asyncsteps: unhandled error code="InternalError" info="` + onRootInfo(c.name, c.info, false) + `"`}
			if got := waitLogs(logs, 1); !reflect.DeepEqual(got, want) {
				t.Errorf("logged %q, want %q", got, want)
			}
		})
	}
}

// The same calls on a step's own pointer, in its callback, still act on
// the step: setTimeout times it out, setCancel's handler runs when the
// flow is cancelled, and waitExternal makes it wait for a success from
// outside. Nothing is recorded in the root: its next execute runs.
func TestStepCallsInARunningStepStillWork(t *testing.T) {
	for _, c := range []struct {
		name  string
		call  int
		end   func(tt *asyncsteps.TestTool, root unsafe.Pointer)
		trace string
	}{
		{"setTimeout", ctest.IdleSetTimeout, func(tt *asyncsteps.TestTool, _ unsafe.Pointer) {
			tt.Advance(999 * time.Millisecond)
			ctest.Log("999 ms")
			tt.Advance(time.Millisecond)
		}, "step called\n999 ms\nstep error Timeout: \nunhandled Timeout: \n"},
		{"setCancel", ctest.IdleSetCancel, func(_ *asyncsteps.TestTool, root unsafe.Pointer) {
			ctest.Cancel(root)
		}, "step called\nidle cancel handler ran\n"},
		{"waitExternal", ctest.IdleWaitExternal, func(*asyncsteps.TestTool, unsafe.Pointer) {
			ctest.IdleCall(ctest.CalledStep(), ctest.IdleSuccess)
		}, "step called\nnext step ran\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			root := cabi.New(tt)
			defer cabi.FreeWait(root)
			ctest.StepCall(root, c.call, false)
			ctest.ExecuteReporting(root)
			tt.Advance(0) // what is due now: the step's timer is not
			if got := ctest.Trace(); got != "step called\n" {
				t.Fatalf("trace %q, want the step waiting", got)
			}
			c.end(tt, root)
			tt.Run()
			if got := ctest.Trace(); got != c.trace {
				t.Errorf("trace %q, want %q", got, c.trace)
			}
			ctest.Reset()
			ctest.ExecuteReporting(root)
			tt.Run()
			if got := ctest.Trace(); got != "next step ran\n" {
				t.Errorf("the next execution: trace %q, want %q", got, "next step ran\n")
			}
		})
	}
}

// The same calls on the pointer of a parallel made in a step, in the
// step's callback, fail the step with InternalError naming the call, as
// success and handle_error there do: a parallel is no step. Before, they
// were ignored.
func TestStepCallsOnAStepsParallelFailTheStep(t *testing.T) {
	for _, c := range stepCalls {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			tt := asyncsteps.NewTestTool()
			root := cabi.New(tt)
			defer cabi.FreeWait(root)
			ctest.StepCall(root, c.call, true)
			ctest.ExecuteReporting(root)
			tt.Run()
			want := "step called\nstep error InternalError: " + c.parallelInfo + "\nunhandled InternalError: " + c.parallelInfo + "\n"
			if got := ctest.Trace(); got != want {
				t.Errorf("trace %q, want %q", got, want)
			}
		})
	}
}

// The same calls through the pointer of a Go root given by Binary, or of
// a parallel made on it, are reported by the Root's next execution,
// which Go starts (or C, through the pointer): from the idle root, from
// a step's callback on the loop, or from another thread while the flow
// runs, which goes on without them. Nothing is logged at the free of the
// pointer then: each is reported once. Before, they stayed in the root
// object, which only an execute or a free through the pointer reads:
// Go's executions ran on as if nothing was wrong.
func TestStepCallsOnAGoRootAreReportedByItsNextExecution(t *testing.T) {
	for _, c := range stepCalls {
		for _, where := range []string{"idle", "idle parallel", "in a step", "from another thread"} {
			t.Run(c.name+" "+where, func(t *testing.T) {
				logs := withLogs(t)
				ctest.Reset()
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				p := cabi.Binary(r)
				info := onRootInfo(c.name, c.info, where == "idle parallel")
				switch where {
				case "idle":
					ctest.IdleCall(p, c.call)
				case "idle parallel":
					ctest.ParallelOfIdle(p)
					ctest.IdleCall(ctest.IdleParallel(), c.call)
				case "in a step":
					r.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.IdleCall(p, c.call) })
					checkGoRootRun(t, r, "")
				default:
					called := make(chan struct{})
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.WaitExternal()
						go func() {
							ctest.IdleCall(p, c.call)
							close(called)
							as.Success()
						}()
					})
					checkGoRootRun(t, r, "")
					<-called
				}
				checkGoRootRun(t, r, "InternalError: "+info)
				checkGoRootRun(t, r, "")
				cabi.FreeWait(p)
				if got := waitLogs(logs, 0); len(got) != 0 {
					t.Errorf("logged %q, want nothing", got)
				}
			})
		}
	}
}

// checkGoRootRun runs r to its end and checks the error that ended it
// ("" for none).
func checkGoRootRun(t *testing.T, r *asyncsteps.Root, want string) {
	t.Helper()
	_, err := run(t, r)
	got := ""
	if err != nil {
		got = err.Error()
	}
	if got != want {
		t.Errorf("the execution ended with %q, want %q", got, want)
	}
}

// An add through the pointer of a Go root given by Binary, from another
// thread while the flow runs, has no effect, as on a root owned by C, and
// the Root's next execution, which Go starts, reports it. Before, only an
// execute or a free through the pointer did.
func TestAddOnARunningGoRootIsReportedByItsNextExecution(t *testing.T) {
	logs := withLogs(t)
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	p := cabi.Binary(r)
	added := make(chan struct{})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		go func() {
			ctest.AddOnRunning(p, 0)
			close(added)
			as.Success()
		}()
	})
	checkGoRootRun(t, r, "")
	<-added
	checkGoRootRun(t, r, "InternalError: add called from another thread on a running root: the step was not added")
	checkGoRootRun(t, r, "")
	cabi.FreeWait(p)
	if got := ctest.Trace(); got != "" {
		t.Errorf("trace %q, want nothing: the add had no effect", got)
	}
	if got := waitLogs(logs, 0); len(got) != 0 {
		t.Errorf("logged %q, want nothing", got)
	}
}

// Through the pointer of an idle Go root, the calls are recorded in the
// Root before they return, as an add there adds at once: a Clone made by
// Go right after has the misuse too, as a Clone of a Root misused by Go
// has. Before, the record was posted to the Root's loop, which wrote it
// into the idle Root at its next turn: a clone made meanwhile missed it,
// and the loop's write raced with the Clone's read. The loop is kept busy
// here until the clone is made, so that a posted record cannot have run.
func TestStepCallsOnAnIdleGoRootAreRecordedAtOnce(t *testing.T) {
	forStepCallsOnRootAndParallel(t, func(t *testing.T, c stepCall, parallel bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		p := cabi.Binary(r)
		busy, release := make(chan struct{}), make(chan struct{})
		loop.Immediate(func() { close(busy); <-release })
		<-busy
		if parallel {
			ctest.ParallelOfIdle(p)
			ctest.IdleCall(ctest.IdleParallel(), c.call)
		} else {
			ctest.IdleCall(p, c.call)
		}
		clone := r.Clone()
		close(release)
		want := "InternalError: " + onRootInfo(c.name, c.info, parallel)
		checkGoRootRun(t, clone, want)
		checkGoRootRun(t, r, want)
		checkGoRootRun(t, r, "")
		cabi.FreeWait(p)
	})
}
