//go:build cgo

package cabi_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// add, loop, repeat and parallel on a root owned by C, from another thread
// while its flow runs (a misuse: a root is built before it is executed or
// while it is idle), have no effect, as on the pointer of a parallel made
// in a step: the flow's queue is the loop's.
func TestAddOnARunningRootFromAnotherThread(t *testing.T) {
	for which, call := range []string{"add", "loop", "repeat", "parallel"} {
		t.Run(call, func(t *testing.T) {
			root := newCRoot(t)
			ctest.Hold(root)
			ctest.ExecuteOnly(root, "x", 1)
			ctest.WaitHeld()
			ctest.AddOnRunning(root, which)
			releaseAndCheckNothingRan(t, root)
		})
	}
}

// addSync on a running root, and add on a parallel made on the root while
// it was idle, from another thread while the flow runs, have no effect
// either.
func TestAddSyncAndIdleParallelOnARunningRoot(t *testing.T) {
	for _, call := range []string{"addSync", "parallel made idle"} {
		t.Run(call, func(t *testing.T) {
			root := newCRoot(t)
			ctest.Hold(root)
			if call != "addSync" {
				ctest.ParallelOfIdle(root)
			}
			ctest.ExecuteOnly(root, "x", 1)
			ctest.WaitHeld()
			if call == "addSync" {
				sync := cabi.Sync(asyncsteps.NewMutex(1))
				defer cabi.FreeSync(sync)
				ctest.AddSyncOnRunning(root, sync)
			} else {
				ctest.AddOnIdleParallel()
			}
			releaseAndCheckNothingRan(t, root)
		})
	}
}

// releaseAndCheckNothingRan completes the step of Hold on root, waits
// until the root is idle again, and checks that nothing logged meanwhile;
// then it frees root.
func releaseAndCheckNothingRan(t *testing.T, root unsafe.Pointer) {
	t.Helper()
	ctest.ReleaseHeld()
	deadline := time.Now().Add(5 * time.Second)
	for ctest.IsValid(root) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := ctest.Trace(); got != "" {
		t.Errorf("trace %q, want none", got)
	}
	ctest.Free(root)
}

// An add that has no effect (on a running root, or on a parallel made on
// it while it was idle) is reported as a misuse on an engine Root is: the
// root's next execute fails at once with an InternalError that names the
// first such call, through its unhandled_error, and no step runs; the one
// after runs normally. The calls come from a pthread of C's own.
func TestAddOnARunningRootIsReportedByTheNextExecute(t *testing.T) {
	const info = " called from another thread on a running root: the step was not added"
	infos := []string{"add" + info, "loop" + info, "repeat" + info, "parallel" + info, "addSync" + info,
		"add called from another thread on a parallel made on a running root: the branch was not added"}
	for which, call := range []string{"add", "loop", "repeat", "parallel", "addSync", "parallel made idle"} {
		t.Run(call, func(t *testing.T) {
			root := newCRoot(t)
			sync := cabi.Sync(asyncsteps.NewMutex(1))
			defer cabi.FreeSync(sync)
			ctest.Hold(root)
			if which == 5 {
				ctest.ParallelOfIdle(root)
			}
			ctest.ExecuteOnly(root, "x", 1)
			ctest.WaitHeld()
			ctest.DropOnThread(root, sync, which)
			ctest.DropOnThread(root, sync, 0) // the first is reported
			ctest.ReleaseHeld()
			waitCIdle(t, root)
			ctest.ExecuteReporting(root)
			if !ctest.WaitFor("\n", 5*time.Second) {
				t.Fatal("the next execution did not end")
			}
			waitCIdle(t, root)
			if got, want := ctest.Trace(), "unhandled InternalError: "+infos[which]+"\n"; got != want {
				t.Errorf("next execution: trace %q, want %q", got, want)
			}
			// The failed execution dropped its step, as any execution
			// that a misuse fails at once does.
			ctest.Reset()
			ctest.ExecuteReporting(root)
			ctest.WaitFor("\n", 5*time.Second)
			waitCIdle(t, root)
			if got, want := ctest.Trace(), "next step ran\n"; got != want {
				t.Errorf("the execution after: trace %q, want %q", got, want)
			}
			ctest.Free(root)
		})
	}
}

// waitCIdle waits until root's flow is not running.
func waitCIdle(t *testing.T, root unsafe.Pointer) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ctest.IsValid(root) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the root still runs")
		}
		time.Sleep(time.Millisecond)
	}
}

// An add dropped on a running root that no execute follows is logged with
// log/slog when the root is freed, as an error of a freed root is: the C
// producer that lost the step learns of it nowhere else.
func TestAddOnARunningRootThenFreeIsLogged(t *testing.T) {
	out := inChild(t, func() {
		root := newCRoot(t)
		logged := make(chan string, 1)
		slog.SetDefault(slog.New(&recordHandler{logged}))
		ctest.Hold(root)
		ctest.ExecuteOnly(root, "x", 1)
		ctest.WaitHeld()
		ctest.DropOnThread(root, nil, 1)
		ctest.ReleaseHeld()
		waitCIdle(t, root)
		ctest.Free(root)
		select {
		case line := <-logged:
			fmt.Println(line)
		case <-time.After(10 * time.Second):
			fmt.Println("nothing logged")
		}
	})
	want := "ERROR asyncsteps: unhandled error code=InternalError info=loop called from another thread on a running root: the step was not added\n"
	if out != want {
		t.Errorf("child printed:\n%s\nwant:\n%s", out, want)
	}
}
