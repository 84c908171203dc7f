//go:build cgo

package cabi_test

// This file is long on purpose: one test per rule of the C interface
// (docs/DESIGN.md), driven through the C test program.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// newRoot returns a Go root on a loop of its own and its C pointer.
func newRoot(t *testing.T) (*asyncsteps.Root, unsafe.Pointer) {
	t.Helper()
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	return r, cabi.Binary(r)
}

// newCRoot returns a root owned by C on a loop of its own.
func newCRoot(t *testing.T) unsafe.Pointer {
	t.Helper()
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	return cabi.New(loop)
}

func run(t *testing.T, r *asyncsteps.Root) ([]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Run(ctx)
}

// checkTrace compares the C trace with want, line by line. Some lines come
// from the loop's thread after the flow has reported, so a trace that is not
// complete yet is read again, for up to 5 s, before the test fails.
func checkTrace(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := ctest.Lines()
		violation := strings.Contains(ctest.Trace(), "VIOLATION")
		if !violation && reflect.DeepEqual(got, want) {
			return
		}
		if violation || time.Now().After(deadline) {
			t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			return
		}
		time.Sleep(time.Millisecond)
	}
}

type goThing struct{ name string }

// success copies strings and arrays, resets the caller's args
// and calls each cleanup once; INT32 stays int32 across Go; a string's
// length counts code units; a Go value crosses C as itself.
func TestSuccessTakesValuesOverAndKeepsTypes(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		thing := &goThing{"thing"}
		ctest.Args(root)
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			want := []any{int32(42), "h\u00e9llo", []int32{1, 2, 3}, cabi.String16{'h', 0xe9, 'l', 'l', 'o'}}
			if !reflect.DeepEqual(args, want) {
				t.Errorf("Go step got %#v, want %#v", args, want)
			}
			as.Success(int32(7), "go", []string{"a", "b"}, thing)
		})
		ctest.GoValue(root)
		res, err := run(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if want := []any{thing, uint8(200), 1.5, true}; !reflect.DeepEqual(res, want) || res[0] != thing {
			t.Errorf("result %#v, want %#v", res, want)
		}
		checkTrace(t,
			"args1 in=1",
			"args1 reset=1 cleanups=4",
			"args2 8:7 2:go/2 18:2:a,b 1",
		)
	})
}

// A value keeps its type: an empty slot (a NULL type) is a Go
// nil, and a Go nil reaches C as an empty slot, not as a custom object.
func TestEmptySlotIsNil(t *testing.T) {
	eachCaller(t, func(t *testing.T, ri bool) {
		r, root := newRoot(t)
		ctest.EmptySlot(root)
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			want := []any{nil, uint8(5)}
			if ri { // the caller's placeholders in the unused slots
				want = []any{nil, uint8(5), nil, nil}
				for _, k := range []int{0, 2, 3} {
					if c, ok := args[k].(*cabi.Custom); ok && c != nil {
						args[k] = nil
					}
				}
			}
			if !reflect.DeepEqual(args, want) {
				t.Errorf("Go step got %#v, want %#v", args, want)
			}
			as.Success(nil, uint8(6))
		})
		ctest.EmptySlotBack(root)
		dropLastResult(r, ri)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "empty2 arg0=NULL arg1=10:6")
	})
}

// A custom object is passed on as is; its cleanup runs once,
// when the step that receives it completes; passed on again it belongs to
// the next receiver; dropped by the Go side, the GC cleans it up.
func TestCustomObjectCleanedUpOnceByItsReceiver(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Custom(root)
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			if c, ok := args[0].(*cabi.Custom); !ok || *(*int32)(c.Pointer()) != 5 {
				t.Errorf("Go step got %#v, want a *cabi.Custom", args)
			}
			// Dropped here: no C step receives it.
		})
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for ctest.Cleanups() < 2 && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
		}
		checkTrace(t,
			"custom1 reset=1 cleanups=0",
			"custom2 5 same=1 cleanups=0",
			"custom3 5 cleanups=0",
			"custom cleanup 5",
			"custom4 cleanups=1",
			"custom1 reset=1 cleanups=1",
			"custom cleanup 5",
		)
	})
}

// handle_error copies code and info; error_info and
// last_exception are state variables; a Go error handler sees them too.
func TestHandleErrorReachesCAndGoHandlers(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, _ := newRoot(t)
		var got []string
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			ctest.Errors(cabi.Binary(as)) // a C step added to a Go step
		}, func(as asyncsteps.AsyncSteps, code string) {
			got = append(got, code, as.State().ErrorInfo)
			as.Success("recovered")
		})
		res, err := run(t, r)
		if err != nil || !reflect.DeepEqual(res, []any{"recovered"}) {
			t.Fatalf("Run: %v, %v", res, err)
		}
		if want := []string{"MyError", "my info"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Go handler saw %q, want %q", got, want)
		}
		checkTrace(t,
			"err1 last_exception=(null)",
			"err1 returns",
			"err1_eh MyError info=my info last_exception=MyError unknown=(nil)",
		)
	})
}

// success after add is an InternalError and
// the added step does not run.
func TestSuccessAfterAddIsInternalError(t *testing.T) {
	eachCaller(t, func(t *testing.T, ri bool) {
		r, root := newRoot(t)
		ctest.Misuse(root)
		dropLastResult(r, ri)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t,
			"misuse1 returns",
			"misuse_eh InternalError: Success called after Add in the same callback",
		)
	})
}

// runAndFree executes the C root, waits for its flow to end, frees it and
// waits for a cleanup to run.
func runAndFree(t *testing.T, root unsafe.Pointer) {
	t.Helper()
	ctest.Execute(root, "x")
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("the flow did not end")
	}
	ctest.Free(root)
	if !ctest.WaitFor("cleanup", 5*time.Second) {
		t.Fatal("no cleanup after free")
	}
}

// Allocate runs once per name, the value is shared by
// the flow, and its cleanup runs once, when the root is freed.
func TestStateVariableCleanedUpByFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.State(root)
		runAndFree(t, root)
		checkTrace(t,
			"alloc counter",
			"state1 missing=(nil)",
			"state2 counter=2 same=1",
			"end",
			"cleanup counter=2",
		)
	})
}

// An allocate that returns NULL makes a variable holding NULL: later calls
// return NULL without calling allocate again, and free still calls its
// cleanup, with NULL.
func TestStateVariableAllocateReturnsNull(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.StateNull(root)
		runAndFree(t, root)
		checkTrace(t,
			"null1 value=(nil) allocs=1 existing=(nil)",
			"null2 value=(nil) allocs=1 existing=(nil)",
			"end",
			"cleanup none value=(nil)",
		)
	})
}

// Stack memory is zeroed and aligned; its cleanup runs once
// when the step completes in any way, after the step's own error handler
// has returned.
func TestStackCleanupWhenTheStepCompletes(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		for _, tc := range []struct {
			name string
			mode int
			want []string
		}{
			{"success", 0, []string{"stack cleanup 0", "stack2"}},
			{"sub-steps", 1, []string{"stack sub", "stack cleanup 1", "stack2"}},
			// The failing step's own error handler still reads its stack memory.
			{"error", 2, []string{"stack eh Fail mem=2", "stack cleanup 2", "stack2"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r, root := newRoot(t)
				ctest.Stack(root, tc.mode)
				if _, err := run(t, r); err != nil {
					t.Fatal(err)
				}
				checkTrace(t, append([]string{"stack1 zeroed=1 aligned=1", "stack1 returns"}, tc.want...)...)
			})
		}
		t.Run("cancel", func(t *testing.T) {
			r, root := newRoot(t)
			ctest.Stack(root, 3)
			ch := r.Promise()
			if !ctest.WaitFor("waiting", 5*time.Second) {
				t.Fatal("the step did not start")
			}
			cabiCancel(root)
			if res := <-ch; !errors.Is(res.Err, context.Canceled) {
				t.Fatalf("Err %v, want context.Canceled", res.Err)
			}
			checkTrace(t, "stack1 zeroed=1 aligned=1", "waiting", "stack1 returns", "stack cancel", "stack cleanup 3")
		})
	})
}

func cabiCancel(root unsafe.Pointer) { ctest.Cancel(root) }

func cabiIsValid(root unsafe.Pointer) int { return ctest.IsValid(root) }

// setTimeout from C: the cancel handler runs, then the error handler sees
// Timeout and still reads the step's stack memory, cleaned up after it.
func TestSetTimeoutExpires(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Timeout(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "timeout cancel", "timeout eh Timeout mem=8", "stack cleanup 8", "after timeout")
	})
}

// success from another thread, while the callback still
// runs, completes the step once, on the loop thread; later calls on the
// stale pointer are ignored, their values still cleaned up once.
func TestWaitExternalSuccessFromAnotherThread(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Wait(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "thread: is_same_thread=0", "wait1 returns", "wait2 7 cleanups=2")
	})
}

// Loops: labels, NULL == "", continue and break of an
// outer loop from an inner one; loops give no args to the next step.
func TestLoopsWithLabels(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Loops(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t,
			"outer 1", "inner 1.0", "inner 1.1",
			"outer 2", "inner 2.0", "inner 2.1",
			"after loops args=0",
		)
	})
}

// The parallel pointer is the library's; each branch has
// its own rootId, shared by its sub-steps; the flow's steps share one.
func TestParallelBranchesHaveTheirOwnRootID(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Parallel(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t,
			"branch 0 args=0", "branch 1 args=0", "branch 2 args=0",
			"nested 0 same=1", "nested 1 same=1", "nested 2 same=1",
			"par2 flow same=1 step same=1 branches distinct=1",
		)
	})
}

// sched_is_valid is false once the callback ran or was
// cancelled; sched_cancel is harmless then; sched_immediate works from
// another thread and its callback runs on the loop.
func TestSchedHandles(t *testing.T) {
	eachCaller(t, func(t *testing.T, ri bool) {
		r, root := newRoot(t)
		ctest.Sched(root)
		dropLastResult(r, ri)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t,
			"sched1 valid=111",
			"sched1 cancelled valid=0",
			"sched imm imm=0 def=1 cancelled=0",
			"sched def imm=0 def=0 cancelled=0",
			"sched from thread",
		)
	})
}

// addSync with our Mutex from C: one flow at a time in the
// critical section, the lock given back also when f fails.
func TestAddSyncWithOurMutex(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		t.Cleanup(loop.Close)
		m := cabi.Sync(asyncsteps.NewMutex(1))
		defer cabi.FreeSync(m)
		a, b := cabi.New(loop), cabi.New(loop)
		ctest.Sync(a, m, "A", true)
		ctest.Sync(b, m, "B", false)
		ctest.Execute(a, "a")
		ctest.Execute(b, "b")
		if !ctest.WaitDone(2, 5*time.Second) {
			t.Fatalf("flows did not end:\n%s", ctest.Trace())
		}
		ctest.Free(a)
		ctest.Free(b)
		// A's failing section gives the lock back to B, which waits on the same
		// loop: B resumes before A's next step ("end"), as on a TestTool.
		checkTrace(t, "A enter", "A leave", "A eh Fail", "B enter", "end", "B leave", "end")
	})
}

// addSync with a foreign FutoInSync: lock may make the step
// wait; f runs once it is held; unlock is called once when f's step ends.
func TestAddSyncWithForeignSync(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		for _, fail := range []bool{false, true} {
			root := newCRoot(t)
			ctest.Sync(root, ctest.FakeSync(), "F", fail)
			ctest.Execute(root, "f")
			if !ctest.WaitDone(1, 5*time.Second) {
				t.Fatalf("flow did not end:\n%s", ctest.Trace())
			}
			ctest.Free(root)
			if fail {
				checkTrace(t, "lock", "locked", "F enter", "F leave", "F eh Fail", "unlock", "end")
			} else {
				checkTrace(t, "lock", "locked", "F enter", "F leave", "unlock", "end")
			}
		}
	})
}

// A foreign FutoInSync without a table, a lock or an unlock fails the
// addSync step with an InternalError its error handler sees; the section
// does not run. It ran unguarded (lock NULL: as if held at once).
func TestAddSyncWithBrokenForeignSync(t *testing.T) {
	for which := range 3 {
		root := newCRoot(t)
		ctest.Sync(root, ctest.BrokenSync(which), "B", false)
		ctest.Execute(root, "b")
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatalf("sync %d: flow did not end:\n%s", which, ctest.Trace())
		}
		ctest.Free(root)
		checkTrace(t, "B eh InternalError", "end")
	}
}

// Once free returns, the root is invalid: isValid is 0 and add is
// ignored, also before the loop has released it. isValid said 1 and add
// queued a step on the freed root until the loop ran the release.
func TestFreedRootIsInvalidAtOnce(t *testing.T) {
	root := newCRoot(t)
	ctest.Free(root)
	if v := ctest.IsValid(root); v != 0 {
		t.Fatalf("isValid after free %d, want 0", v)
	}
}

// A pointer kept from a completed step is stale: isValid is 0
// and every call is ignored, on the loop and from another thread.
func TestStalePointerIsIgnored(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.Stale(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		ctest.StaleCall() // from another thread, after the flow
		time.Sleep(20 * time.Millisecond)
		checkTrace(t,
			"stale1 valid=1",
			"stale valid=0 reset=1",
			"stale2 cleanups=1",
			"stale valid=0 reset=1",
		)
		if n := ctest.Cleanups(); n != 2 {
			t.Errorf("cleanups %d, want 2", n)
		}
	})
}

// An error that ends the flow calls unhandled_error once,
// on the loop, with the root and data; free cancels a running flow (its
// cancel handler runs, unhandled_error does not).
func TestUnhandledErrorAndFree(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.Errors(root)
		ctest.Execute(root, "data")
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatal("no unhandled error")
		}
		time.Sleep(10 * time.Millisecond)
		checkTrace(t,
			"err1 last_exception=(null)",
			"err1 returns",
			"err1_eh MyError info=my info last_exception=MyError unknown=(nil)",
			"unhandled MyError data=data root=1",
		)
		ctest.Reset()
		ctest.Stack(root, 3)
		ctest.Execute(root, "data")
		if !ctest.WaitFor("waiting", 5*time.Second) {
			t.Fatal("the step did not start")
		}
		ctest.Free(root)
		if !ctest.WaitFor("stack cleanup", 5*time.Second) {
			t.Fatal("free did not cancel the flow")
		}
		time.Sleep(10 * time.Millisecond)
		checkTrace(t, "stack1 zeroed=1 aligned=1", "waiting", "stack1 returns", "stack cancel", "stack cleanup 3")
	})
}

// Execute on a running root starts nothing, and the flow keeps
// the unhandled_error and data it was started with.
func TestExecuteOnARunningRootKeepsItsUnhandledError(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.Held(root)
		ctest.ExecuteOnly(root, "first", 1)
		if !ctest.WaitFor("held", 5*time.Second) {
			t.Fatal("the step did not start")
		}
		ctest.ExecuteOnly(root, "second", 2)
		ctest.FailHeld()
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatal("no unhandled error")
		}
		checkTrace(t, "held", "unhandled Boom data=first root=1")
	})
}

// stack and stateVariable are for the step's own callback: called on a
// waiting step from another thread they give nothing, as the other
// callback-only functions ignore such calls, rather than touch the step's
// memory list and the flow's state beside the loop.
func TestStackAndStateVariableFromAnotherThreadGiveNothing(t *testing.T) {
	root := newCRoot(t)
	checkNothingWhileHeld(t, root, "from another thread", ctest.StackHeld, ctest.StateHeld)
	checkTrace(t, "held", "unhandled Boom data=held root=1")
}

// checkNothingWhileHeld adds a held step to root and runs it; while the
// step waits, it calls stack and state, which call stack and stateVariable
// from the test's thread and report whether they gave memory, and checks
// that neither did (when says how they were called); then it fails the
// step and waits for the root's unhandled error.
func checkNothingWhileHeld(t *testing.T, root unsafe.Pointer, when string, stack, state func() bool) {
	t.Helper()
	ctest.Held(root)
	ctest.ExecuteOnly(root, "held", 1)
	if !ctest.WaitFor("held", 5*time.Second) {
		t.Fatal("the step did not start")
	}
	gotStack, gotState := stack(), state()
	ctest.FailHeld()
	if !ctest.WaitDone(1, 5*time.Second) {
		t.Fatal("no unhandled error")
	}
	if gotStack || gotState {
		t.Errorf("%s: stack gave memory %v, stateVariable %v; want neither", when, gotStack, gotState)
	}
}

// A parallel made on an idle root serves any one thread as the root does:
// a C++ wrapper (the reference implementation's) builds a root's branches
// with stack and stateVariable on the parallel before execute. Once the
// root runs, the parallel gives another thread nothing, as the root does.
func TestParallelOfAnIdleRootGivesMemoryUntilItRuns(t *testing.T) {
	root := newCRoot(t)
	ctest.ParallelIdle(root)
	checkNothingWhileHeld(t, root, "running, from another thread", ctest.StackIdlePar, ctest.StateIdlePar)
	checkTrace(t,
		"alloc counter",
		"idle parallel stack=1 state=1",
		"branch counter=7",
		"held",
		"unhandled Boom data=held root=1",
	)
}

// An execution's error goes to the unhandled_error and data of
// the execute that started it, also when it is reported after a later
// execute has started the root again (here the report of a Go root's
// execution waits behind a busy callback on the loop meanwhile).
func TestUnhandledErrorBelongsToItsExecution(t *testing.T) {
	ctest.Reset()
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	root := cabi.Binary(r)
	blocked, gate := make(chan struct{}), make(chan struct{})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		loop.Immediate(func() { close(blocked); <-gate })
		as.Error("First")
	})
	ctest.ExecuteOnly(root, "first", 1)
	<-blocked
	time.Sleep(50 * time.Millisecond) // lets the first report queue behind the busy callback
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Second") })
	ctest.ExecuteOnly(root, "second", 2)
	close(gate)
	if !ctest.WaitDone(2, 5*time.Second) {
		t.Fatalf("not two reports: %q", ctest.Trace())
	}
	got := ctest.Lines()
	slices.Sort(got)
	if want := []string{"unhandled First data=first root=1", "unhandled_other Second data=second"}; !slices.Equal(got, want) {
		t.Errorf("reports %q, want %q", got, want)
	}
}

// On an owned root, the error that ends an execution reaches the
// execute's unhandled_error at once, on the loop, whatever its cause chain
// holds (a cancel is a plain context error, never an *Error), before a
// callback queued meanwhile frees the root, and also when the root's loop
// closes before the flow begins.
func TestOwnedRootReportsEveryErrorThatEndsIt(t *testing.T) {
	closeGate := make(chan struct{})
	for _, tc := range []struct {
		name    string
		setup   func(loop *asyncsteps.Loop, root unsafe.Pointer, as asyncsteps.AsyncSteps)
		want    string
		started func() // if set, called once execute has returned
	}{
		{"error caused by a cancel", func(_ *asyncsteps.Loop, _ unsafe.Pointer, as asyncsteps.AsyncSteps) {
			as.Await(func(ctx context.Context) (any, error) { return nil, fmt.Errorf("fetch: %w", context.Canceled) })
		}, "unhandled InternalError data=first root=1", nil},
		{"freed right after", func(loop *asyncsteps.Loop, root unsafe.Pointer, as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				loop.Immediate(func() { ctest.Free(root) })
				as.Error("Boom")
			})
		}, "unhandled Boom data=first root=1", nil},
		{"loop closed before it began", func(loop *asyncsteps.Loop, _ unsafe.Pointer, as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("a step ran on a closed loop") })
			// The loop is held in a callback until execute has returned, so
			// that Close and the flow are taken in one pass: Close, queued
			// first, runs first and ends the flow on the loop. A loop left
			// free could close before execute, which then ends the flow on
			// the caller's thread, where is_same_thread is rightly 0.
			held := make(chan struct{})
			loop.Immediate(func() { close(held); <-closeGate })
			<-held
			loop.Immediate(loop.Close)
		}, "unhandled InternalError data=first root=1", func() { close(closeGate) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.Reset()
			loop := asyncsteps.NewLoop()
			t.Cleanup(loop.Close)
			root := cabi.New(loop)
			tc.setup(loop, root, cabi.Wrap(root))
			ctest.ExecuteOnly(root, "first", 1)
			if tc.started != nil {
				tc.started()
			}
			if !ctest.WaitDone(1, 5*time.Second) {
				t.Fatalf("unhandled_error not called; trace %q", ctest.Trace())
			}
			checkTrace(t, tc.want)
		})
	}
}

// Under contention: while another thread keeps calling execute
// on a root (refused while it runs, and starting empty executions once it
// has ended), the error of the execution started with "first" is reported
// with "first": an execution keeps its unhandled_error and data, for
// owned roots and Go roots alike.
func TestUnhandledErrorNotTakenByALaterExecute(t *testing.T) {
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	owned := cabi.New(loop)
	goRoot := asyncsteps.New(asyncsteps.WithTool(loop))
	for name, root := range map[string]unsafe.Pointer{"owned": owned, "Go": cabi.Binary(goRoot)} {
		r := cabi.Wrap(root).(*asyncsteps.Root)
		for i := range 100 {
			waitIdle(t, r)
			ctest.Reset()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
			ctest.ExecuteOnly(root, "first", 1)
			stop := make(chan struct{})
			spinning := make(chan struct{})
			go func() {
				defer close(spinning)
				for {
					select {
					case <-stop:
						return
					default:
						ctest.ExecuteOnly(root, "second", 2)
					}
				}
			}()
			if !ctest.WaitFor("Boom", 5*time.Second) {
				t.Fatalf("%s root, round %d: no report: %q", name, i, ctest.Trace())
			}
			close(stop)
			<-spinning
			if tr := ctest.Trace(); !strings.HasPrefix(tr, "unhandled Boom data=first") {
				t.Fatalf("%s root, round %d: trace %q, want the first execution's report", name, i, tr)
			}
		}
	}
}

// waitIdle waits until r runs no execution.
func waitIdle(t *testing.T, r *asyncsteps.Root) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		started := func() (ok bool) {
			defer func() { ok = recover() == nil }()
			<-r.Promise() // an empty execution: it ends at once
			return
		}()
		if started {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the root never became idle")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// With a closed loop, a Go root given to C reports the
// closed loop's error to the execute's unhandled_error, and free on a
// closed loop still cleans up the state variables, on the calling thread.
func TestClosedLoopStillReportsAndCleansUp(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		root := cabi.Binary(r)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("a step ran on a closed loop") })
		loop.Close()
		ctest.ExecuteOnly(root, "first", 1)
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatalf("no unhandled_error; trace %q", ctest.Trace())
		}
		// Called on another thread (cabi's doc), which the C side logs.
		if !slices.Contains(ctest.Lines(), "unhandled InternalError data=first root=1") {
			t.Errorf("trace %q, want the closed loop's error for the first execute", ctest.Trace())
		}

		ctest.Reset()
		loop = asyncsteps.NewLoop()
		owned := cabi.New(loop)
		ctest.State(owned)
		ctest.Execute(owned, "x")
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatal("the flow did not end")
		}
		loop.Close()
		ctest.Free(owned)
		if !ctest.WaitFor("cleanup", 5*time.Second) {
			t.Errorf("free on a closed loop cleaned up nothing: %q", ctest.Trace())
		}
		if cabi.Wrap(owned) != nil {
			t.Error("the root is still valid after free")
		}
	})
}

// free from another thread while the loop is closing but still runs a step
// of the flow: the cleanups wait for the loop's goroutine to exit, and then
// run.
func TestFreeOnAClosingLoopWaitsForItsLastStep(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		ctest.Reset()
		loop := asyncsteps.NewLoop()
		owned := cabi.New(loop)
		r := cabi.Wrap(owned).(*asyncsteps.Root)
		ctest.State(owned) // two C steps that allocate the state variable "counter"
		in, resume := make(chan struct{}), make(chan struct{})
		var traceInStep string
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			close(in)
			<-resume
			traceInStep = ctest.Trace() // a C step would still read *counter here
		})
		ctest.ExecuteOnly(owned, "x", 1)
		<-in
		closed := make(chan struct{})
		go func() { loop.Close(); close(closed) }()
		for loop.Deferred(time.Hour, func() {}).IsValid() { // until the loop refuses callbacks
			time.Sleep(time.Millisecond)
		}
		ctest.Free(owned) // returns at once
		time.Sleep(50 * time.Millisecond)
		close(resume)
		<-closed
		if strings.Contains(traceInStep, "cleanup") {
			t.Errorf("state variables cleaned up while a step of the flow ran:\n%s", traceInStep)
		}
		if !ctest.WaitFor("cleanup", 5*time.Second) {
			t.Errorf("no cleanup after the loop exited: %q", ctest.Trace())
		}
	})
}

// Wrap gives back the Go value behind one of our pointers.
func TestWrapOurs(t *testing.T) {
	r, root := newRoot(t)
	if got := cabi.Wrap(root); got != asyncsteps.AsyncSteps(r) {
		t.Errorf("Wrap(Binary(r)) = %v, want r", got)
	}
	if cabi.Binary(r) != root {
		t.Error("Binary(r) changed")
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := cabi.Binary(as)
		if cabi.Wrap(p) != as || cabi.Binary(as) != p {
			t.Error("Wrap(Binary(step)) is not the step")
		}
	})
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	if cabi.Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

// kinds names the Go types of vals.
func kinds(vals []any) string {
	var ks []string
	for _, v := range vals {
		ks = append(ks, fmt.Sprintf("%T", v))
	}
	return strings.Join(ks, ",")
}

// Against a strict foreign table that behaves as the C++
// reference implementation: the library passes no NULL callback and no
// NULL args (an implicit success passes an empty FutoInArgs), never calls
// success after adding sub-steps, takes over and cleans up every value the
// table gives a Go step (its placeholders in the unused slots included),
// keeps a loop label alive for the loop's life, and a Go step's
// Error(code, info) reaches the Go error handlers' State().ErrorInfo.
func TestWrapForeignTable(t *testing.T) {
	ctest.Reset()
	root := ctest.FakeRoot()
	defer ctest.FakeFree(root)
	as := cabi.Wrap(root)
	var trace []string
	log := func(s string) { trace = append(trace, s) }
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		log(fmt.Sprintf("g1 %q %s", args[0], kinds(args[1:])))
		as.State().Set("k", "v")
		as.Success(int32(5), "x")
	})
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		log(fmt.Sprintf("g2 %v %q %s", args[0], args[1], kinds(args[2:])))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { log("g2.1") }) // implicit success
		as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
			log(fmt.Sprint("repeat ", i))
			if i == 1 {
				as.Break(strings.ToLower("R")) // a label made at run time
			}
		}, strings.ToLower("R"))
	}, func(as asyncsteps.AsyncSteps, code string) { log("g2 eh " + code) })
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		log("g3 " + as.State().Get("k").(string))
		as.Error("MyError", "my info")
	}, func(as asyncsteps.AsyncSteps, code string) {
		log("g3 eh " + code + " info=" + as.State().ErrorInfo)
		as.Success()
	})
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) { log("VIOLATION: ran") })
		as.Success() // after Add: an InternalError, not a success
	}, func(as asyncsteps.AsyncSteps, code string) {
		log("g4 eh " + code)
		as.Success()
	})
	ctest.FakeRun(root)
	custom := "*cabi.Custom"
	want := []string{
		`g1 "from the fake" ` + strings.Join([]string{custom, custom, custom}, ","),
		"g2 5 \"x\" " + custom + "," + custom,
		"g2.1", "repeat 0", "repeat 1",
		"g3 v", "g3 eh MyError info=my info",
		"g4 eh InternalError",
	}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("Go trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
	checkTrace(t,
		"fake: running root valid=0",
		"fake: repeat 3 label=r",
		"fake: handle_error MyError: my info",
		"fake: handle_error InternalError: Success called after Add in the same callback",
		"fake: end failed=0  string cleanups=1",
	)
	// The placeholders given to Go steps are the library's to clean up
	// once the Go side has dropped them.
	deadline := time.Now().Add(5 * time.Second)
	for ctest.FakePlaceholders() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if n := ctest.FakePlaceholders(); n != 0 {
		t.Errorf("%d placeholders of the foreign table never cleaned up", n)
	}
}

// The receiver owns what it is given: a C step that takes a
// custom object over (moves it out and resets its slot, calling its
// cleanup, as the C++ reference implementation does with every value) has
// its cleanup called once, by itself; the library does not call it again
// when the step completes, at once or after waiting.
func TestCStepTakesAValueOver(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprint("wait=", wait), func(t *testing.T) {
				r, root := newRoot(t)
				ctest.TakeOver(root, wait)
				ch := r.Promise()
				if wait {
					if !ctest.WaitFor("take2", 5*time.Second) {
						t.Fatal("the step did not start")
					}
					ctest.SucceedHeld()
				}
				if res := <-ch; res.Err != nil {
					t.Fatal(res.Err)
				}
				checkTrace(t, "taken cleanup 9", "take2 cleanups=1", "take3 cleanups=1")
				runtime.GC()
				time.Sleep(20 * time.Millisecond)
				if n := ctest.Cleanups(); n != 1 {
					t.Errorf("cleanups %d, want 1", n)
				}
			})
		}
	})
}

// A loop body that calls success and then breakLoop in one callback (the
// C++ reference implementation's await does so): the break wins, and the
// success's args reach the step after the loop.
func TestSuccessThenBreakCarriesArgsPastTheLoop(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		ctest.AwaitLike(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "await body 0", "await body 1", "after await typed 5")
	})
}

// A root's isValid is false while its flow runs, true while it
// is idle (as on the C++ reference implementation).
func TestRunningRootIsNotValid(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		r, root := newRoot(t)
		if v := cabiIsValid(root); v != 1 {
			t.Errorf("idle root isValid %d, want 1", v)
		}
		ctest.Running(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "running root valid=0 step valid=1")
		if v := cabiIsValid(root); v != 1 {
			t.Errorf("ended root isValid %d, want 1", v)
		}
	})
}

// "error_info" and "last_exception" are reserved only without
// allocate; with one they are ordinary variables, cleaned up by free.
func TestReservedNamesWithAllocateAreVariables(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		root := newCRoot(t)
		ctest.Reserved(root)
		ctest.Execute(root, "x")
		if !ctest.WaitDone(1, 5*time.Second) {
			t.Fatalf("the flow did not end: %q", ctest.Trace())
		}
		ctest.Free(root)
		if !ctest.WaitFor("cleanup last_exception", 5*time.Second) {
			t.Fatalf("no cleanup after free: %q", ctest.Trace())
		}
		checkTrace(t,
			"alloc error_info",
			"alloc last_exception",
			"reserved error_info=41 last_exception=42 same=1",
			"reserved eh Reserved info=the info last_exception=Reserved",
			"end",
			"cleanup error_info=41",
			"cleanup last_exception=42",
		)
	})
}

// eachCaller runs body twice: with C steps that call the library as its
// documentation allows ("doc"), and with C steps that call it as the C++
// reference implementation does ("ri", ri true: every received value taken
// over and its slot reset, args always dereferenced, no NULL args to
// success and placeholder custom objects in its unused slots, labels freed
// right after each call, stack memory read by the step's error handler).
// In "ri", every placeholder and stack memory must then be cleaned up
// exactly once.
func eachCaller(t *testing.T, body func(t *testing.T, ri bool)) {
	t.Helper()
	for _, ri := range []bool{false, true} {
		name := "doc"
		if ri {
			name = "ri"
		}
		t.Run(name, func(t *testing.T) {
			ctest.SetStrict(ri)
			defer ctest.SetStrict(false)
			before := ctest.StrictAlive() // what an earlier failure left
			body(t, ri)
			if !ri || t.Failed() {
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for ctest.StrictAlive() > before && time.Now().Before(deadline) {
				runtime.GC() // placeholders given to Go steps are the GC's
				time.Sleep(5 * time.Millisecond)
			}
			if n := ctest.StrictAlive() - before; n != 0 {
				t.Errorf("%d placeholders or stack memories of the caller cleaned up %s", n,
					map[bool]string{true: "never", false: "twice (negative)"}[n > 0])
			}
		})
	}
}

// dropLastResult adds to r, for the "ri" caller, a last Go step that
// drops the args of the C step before it: a Root keeps its flow's result
// until its next execution, and the placeholders of that result would
// otherwise outlive the test.
func dropLastResult(r *asyncsteps.Root, ri bool) {
	if ri {
		r.Add(func(asyncsteps.AsyncSteps, ...any) {})
	}
}

// A second handle_error in the callback that failed its step, or one after
// its success, has no effect: the flow goes on with the first outcome, and
// error_info is still the first error's (as a Go step's Error after its
// Success).
func TestHandleErrorAfterTheStepCompletedHasNoEffect(t *testing.T) {
	eachCaller(t, func(t *testing.T, _ bool) {
		t.Run("after handle_error", func(t *testing.T) {
			r, root := newRoot(t)
			ctest.ErrorTwice(root, 0)
			_, err := run(t, r)
			var e *asyncsteps.Error
			if !errors.As(err, &e) || e.Code != "First" || e.Info != "first info" {
				t.Fatalf("Run: %v, want First: first info", err)
			}
			checkTrace(t,
				"err_twice returns",
				"err_twice_eh First info=first info last_exception=First",
			)
		})
		t.Run("after success", func(t *testing.T) {
			r, root := newRoot(t)
			ctest.ErrorTwice(root, 1)
			if _, err := run(t, r); err != nil {
				t.Fatalf("Run: %v, want success", err)
			}
			checkTrace(t,
				"err_twice returns",
				"err_twice_next info=",
			)
		})
		t.Run("after success in a loop body", func(t *testing.T) {
			r, root := newRoot(t)
			ctest.ErrorTwice(root, 2)
			if _, err := run(t, r); err != nil {
				t.Fatalf("Run: %v, want success", err)
			}
			checkTrace(t,
				"err_twice_body 0 returns",
				"err_twice_body 1 returns",
				"err_twice_next info=",
			)
		})
	})
}
