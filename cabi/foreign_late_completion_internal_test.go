//go:build cgo

package cabi

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// lateCompletions are the calls that complete a step, as a test makes
// them on a step of a foreign flow from another goroutine.
var lateCompletions = []struct {
	name string
	call func(as asyncsteps.AsyncSteps)
	info string // the misuse's info when the callback still runs
}{
	{"Success", func(as asyncsteps.AsyncSteps) { as.Success("late") },
		"Success called after Add in the same callback"},
	{"Error", func(as asyncsteps.AsyncSteps) { as.Error("Late", "info") },
		"Error(Late) called after Add in the same callback"},
}

// A Go step on a foreign table that added sub-steps and returned
// completes with them, as on the engine's flows: a Success or Error that
// another goroutine calls on it then (here while its sub-step runs, the
// step's pointer alive) has no effect, and IsValid is false there. Before,
// the Success reached the table as success after add, which the C++
// reference implementation answers by aborting the process (the fake
// logs a VIOLATION), and the Error failed the step under its running
// sub-step; IsValid was the table's, true.
func TestForeignLateCompletionOfAStepWithSubStepsHasNoEffect(t *testing.T) {
	for _, c := range lateCompletions {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s wait=%v", c.name, wait), func(t *testing.T) {
				ctest.Reset()
				root := ctest.TableRoot()
				defer ctest.FakeFree(root)
				before := recordCount()
				as := Wrap(root)
				as.Add(func(step asyncsteps.AsyncSteps, _ ...any) {
					if wait {
						step.SetCancel(func(asyncsteps.AsyncSteps) { ctest.Log("go: cancel handler") })
					}
					step.Add(func(sub asyncsteps.AsyncSteps, _ ...any) {
						fromGoroutine(func() {
							ctest.Log(fmt.Sprint("go: valid ", step.IsValid()))
							c.call(step)
							ctest.Log(fmt.Sprint("go: valid after ", step.IsValid()))
						})
						sub.Success("sub")
					})
				}, func(_ asyncsteps.AsyncSteps, code string) { ctest.Log("go: error handler " + code) })
				as.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: next step") })
				ctest.FakeRun(root)
				want := []string{"fake: running root valid=0"}
				if wait {
					want = append(want, "fake: setCancel")
				}
				want = append(want, "go: valid false", "go: valid after false", "go: next step",
					"fake: end failed=0  string cleanups=1")
				if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
					t.Errorf("trace:\n%q\nwant:\n%q", got, want)
				}
				if n := recordCount() - before; n != 0 {
					t.Errorf("%d records left, want 0", n)
				}
			})
		}
	}
}

// A Success or Error that another goroutine calls on a Go step of a
// foreign table while its callback runs, after the callback's Add, fails
// the step with the InternalError of that misuse in the callback itself,
// as the engine fails one of its own steps that waits: the sub-steps do
// not run. The misuse reaches the table as the callback returns, on the
// loop, and the Go error handler sees its info. Before, the Success
// reached the table as success after add, and the Error failed the step
// with its own code.
func TestForeignOutsideCompletionAfterAddInTheCallbackIsAMisuse(t *testing.T) {
	for _, c := range lateCompletions {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			as := Wrap(root)
			as.Add(func(step asyncsteps.AsyncSteps, _ ...any) {
				step.SetCancel(func(asyncsteps.AsyncSteps) { ctest.Log("go: cancel handler") })
				step.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: sub-step") })
				fromGoroutine(func() { c.call(step) })
				ctest.Log("go: callback returns")
			}, func(as asyncsteps.AsyncSteps, code string) {
				ctest.Log("go: error handler " + code + ": " + as.State().ErrorInfo)
			})
			ctest.FakeRun(root)
			want := []string{"fake: running root valid=0", "fake: setCancel", "go: callback returns",
				"fake: handle_error InternalError: " + c.info, "go: error handler InternalError: " + c.info,
				"fake: end failed=1 InternalError string cleanups=1"}
			if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
				t.Errorf("trace:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

// A Success or Error that another goroutine begins on a Go step of a
// foreign table while its callback runs, after the callback's Add, and
// that the callback's end overtakes, has no effect: the step completes
// with its sub-steps, as for a call made once the callback has returned.
// The hook holds the call, once begun, until the sub-step runs. Before,
// the call acted on what it had seen as it began: the misuse reached the
// table from that goroutine while the step's sub-step ran (here its
// handle_error), which the step's completion after Add was to prevent.
func TestForeignOutsideCompletionOvertakenByTheCallbackEndHasNoEffect(t *testing.T) {
	for _, c := range lateCompletions {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			begun, subRuns, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			testHookOutsideAfterAdd = func() {
				close(begun)
				<-subRuns
			}
			defer func() { testHookOutsideAfterAdd = nil }()
			as := Wrap(root)
			as.Add(func(step asyncsteps.AsyncSteps, _ ...any) {
				step.Add(func(sub asyncsteps.AsyncSteps, _ ...any) {
					close(subRuns)
					<-done
					ctest.Log("go: sub-step")
					sub.Success("sub")
				})
				go func() {
					defer close(done)
					c.call(step)
				}()
				<-begun
				ctest.Log("go: callback returns")
			}, func(_ asyncsteps.AsyncSteps, code string) { ctest.Log("go: error handler " + code) })
			as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { ctest.Log(fmt.Sprint("go: next step ", args[0])) })
			ctest.FakeRun(root)
			want := []string{"fake: running root valid=0", "go: callback returns", "go: sub-step",
				"go: next step sub", "fake: end failed=0  string cleanups=1"}
			if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
				t.Errorf("trace:\n%q\nwant:\n%q", got, want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// A Success or Error on a Go step of a foreign table that has added
// sub-steps, made from the callback of one of them on the loop, has no
// effect either: the library cannot tell the table's sub-steps of the
// step from the other callbacks of its loop (another flow's, say), for
// which the engine's own flows also ignore the call. On those flows the
// call from a sub-step fails that sub-step; here the sub-step goes on.
func TestForeignCompletionFromASubStepHasNoEffect(t *testing.T) {
	for _, c := range lateCompletions {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(func(step asyncsteps.AsyncSteps, _ ...any) {
				step.Add(func(sub asyncsteps.AsyncSteps, _ ...any) {
					c.call(step)
					ctest.Log(fmt.Sprint("go: sub-step goes on, step valid ", step.IsValid()))
					sub.Success("sub")
				})
			}, func(_ asyncsteps.AsyncSteps, code string) { ctest.Log("go: error handler " + code) })
			as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { ctest.Log(fmt.Sprint("go: next step ", args[0])) })
			ctest.FakeRun(root)
			want := []string{"fake: running root valid=0", "go: sub-step goes on, step valid false",
				"go: next step sub", "fake: end failed=0  string cleanups=1"}
			if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
				t.Errorf("trace:\n%q\nwant:\n%q", got, want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// A Go error handler on a foreign table is a callback as a step's is: a
// Success or Error that another goroutine makes on it after its Add,
// while it runs, fails it with the InternalError of that misuse as it
// returns; and one that fails after Add, by its own misuse or a panic,
// keeps no record of what it added, which the table never runs. Before,
// nothing raised the other goroutine's misuse once it was left for the
// handler's end (the sub-step ran, and the error was lost), and the
// records of the sub-steps of a failed handler stayed.
func TestForeignErrorHandlerThatFailsAfterAddKeepsNoRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(as asyncsteps.AsyncSteps)
		info string
	}{
		{"another goroutine's Success", func(as asyncsteps.AsyncSteps) { fromGoroutine(func() { as.Success("late") }) },
			"Success called after Add in the same callback"},
		{"another goroutine's Error", func(as asyncsteps.AsyncSteps) { fromGoroutine(func() { as.Error("Late") }) },
			"Error(Late) called after Add in the same callback"},
		{"its own Success", func(as asyncsteps.AsyncSteps) { as.Success() }, "Success called after Add in the same callback"},
		{"a panic", func(asyncsteps.AsyncSteps) { panic("boom") }, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1") }, func(as asyncsteps.AsyncSteps, _ string) {
				as.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: sub-step") })
				as.Repeat(1, func(asyncsteps.AsyncSteps, int) { ctest.Log("go: VIOLATION: loop") })
				c.fail(as)
				ctest.Log("go: error handler returns")
			})
			ctest.FakeRun(root)
			want := []string{"fake: running root valid=0", "fake: handle_error E1: ", "go: error handler returns",
				"fake: handle_error InternalError: " + c.info, "fake: end failed=1 InternalError string cleanups=1"}
			if c.name == "its own Success" || c.name == "a panic" {
				// Aborted by its own misuse, which reaches the table at once.
				want = []string{"fake: running root valid=0", "fake: handle_error E1: ",
					"fake: handle_error InternalError: " + c.info, "fake: end failed=1 InternalError string cleanups=1"}
			}
			if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
				t.Errorf("trace:\n%q\nwant:\n%q", got, want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// A Go step on a foreign table whose cancel handler the table runs is
// over: a Success or Error on it from another goroutine from then on has
// no effect, as a completion after a cancel on the engine's flows. The
// table has ended the step (the C++ reference implementation frees it,
// and aborts the process on an error for it: "Invalid AsyncSteps
// interface usage!"). An Await does just that when its step is cancelled
// or times out: its cancel handler cancels the function's context, and
// the function then returns, the context's error. Before, the Error here
// reached the table after the cancel handler had begun ("fake:
// handle_error Late"); the C++ interop case await_after_timeout crashed.
func TestForeignCompletionAfterTheCancelHandlerHasNoEffect(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	Wrap(root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		step := as
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			done := make(chan struct{})
			go func() { // as an Await's goroutine, once its context is done
				defer close(done)
				step.Error("Late")
			}()
			<-done
		})
	})
	ctest.FakeRun(root)
	want := "fake: running root valid=0\n" +
		"fake: setCancel\n" +
		"fake: the step waits: not supported\n" +
		"fake: cancel handler returned\n" +
		"fake: end failed=1  string cleanups=1\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("fake's trace:\n%s\nwant:\n%s", got, want)
	}
}

// So IsValid is false on it from then on, as on a cancelled step of the
// engine's, without a call to the table's isValid on a step the table has
// ended (the C++ reference implementation frees it): an Await function,
// or any goroutine that checks IsValid before it completes the step,
// would have been told it still could. Before, IsValid was the table's,
// true in the fake's (the step had not completed).
func TestForeignStepIsInvalidOnceItsCancelHandlerRuns(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	Wrap(root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		step := as
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			done := make(chan struct{})
			go func() { // as an Await's goroutine, once its context is done
				defer close(done)
				ctest.Log(fmt.Sprint("go: valid ", step.IsValid()))
			}()
			<-done
		})
	})
	ctest.FakeRun(root)
	want := "fake: running root valid=0\n" +
		"fake: setCancel\n" +
		"fake: the step waits: not supported\n" +
		"go: valid false\n" +
		"fake: cancel handler returned\n" +
		"fake: end failed=1  string cleanups=1\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("fake's trace:\n%s\nwant:\n%s", got, want)
	}
}

// A Success on a foreign step that is over (a Success before it in the
// callback, a cancel handler that has run) has no effect whatever its
// args, as on the engine's flows: it reads nothing of the table, which
// may have freed the step (an Await function that returns a value after
// its step timed out), and args too many for C are no misuse that aborts
// the callback. Before, the args were checked and the table's success
// looked up first: here the second Success aborted the callback, and
// after a cancel handler it read the step's table.
func TestForeignSuccessOnAStepThatIsOverHasNoEffect(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	as := Wrap(root)
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Success(int32(1))
		as.Success(make([]any, maxCArgs+1)...)
		ctest.Log("go: the callback goes on")
	})
	as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { ctest.Log(fmt.Sprint("go: next step ", args[0])) })
	ctest.FakeRun(root)
	want := "fake: running root valid=0\n" +
		"go: the callback goes on\n" +
		"go: next step 1\n" +
		"fake: end failed=0  string cleanups=1\n"
	if got := ctest.Trace(); got != want {
		t.Errorf("fake's trace:\n%s\nwant:\n%s", got, want)
	}
}
