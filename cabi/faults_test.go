//go:build cgo

package cabi_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// childEnv names the test that a re-executed test binary runs as a child.
const childEnv = "CABI_FAULT_CHILD"

// inChild runs body in a child process (the test binary run again for
// this test only), for a fault that may crash the process, and returns the
// child's combined output; the test fails if the child does not exit 0.
// In the child, inChild runs body and exits.
func inChild(t *testing.T, body func()) string {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		body()
		if t.Failed() {
			t.FailNow() // ends the child's test as failed, with its output
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count", "1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v; output:\n%s", err, out)
	}
	return string(out)
}

// A Go callback that a foreign table's Tool runs (sched_immediate) and that
// panics is logged, as on a Loop; the panic never unwinds the foreign
// table's C frames, and the table's loop goes on.
func TestForeignToolCallbackPanicIsLogged(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		tool := cabi.Wrap(root).Tool()
		tool.Immediate(func() { panic("boom in sched") })
		ran := ctest.FakeRunSched()
		tool.Immediate(func() { fmt.Println("second callback ran") })
		ctest.FakeRunSched()
		fmt.Printf("ran=%v trace=%q\n", ran, ctest.Trace())
	})
	for _, want := range []string{
		"asyncsteps: panic in loop callback",
		"boom in sched",
		"second callback ran\n",
		`ran=true trace="fake: sched callback returned\nfake: sched callback returned\n"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

// badPrint is a panic value whose Error method panics with a value that
// panics when printed in turn: fmt gives up on it.
type badPrint struct{ depth int }

func (b badPrint) Error() string { panic(badPrint{b.depth + 1}) }

// A Go step on a foreign table that panics with a value that cannot be
// printed still fails with InternalError, naming the value's type; the
// panic never unwinds the table's C frames.
func TestForeignStepPanicWithUnprintableValue(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		as := cabi.Wrap(root)
		as.Add(func(asyncsteps.AsyncSteps, ...any) { panic(badPrint{}) })
		ctest.FakeRun(root)
		fmt.Printf("trace=%q\n", ctest.Trace())
	})
	want := `trace="fake: running root valid=0\nfake: handle_error InternalError: a cabi_test.badPrint that panics when printed\n` +
		`fake: end failed=1 InternalError string cleanups=1\n"`
	if !strings.Contains(out, want) {
		t.Errorf("child output lacks %s:\n%s", want, out)
	}
}

// exitingPrint is a panic value whose Error method calls runtime.Goexit.
type exitingPrint struct{}

func (exitingPrint) Error() string { runtime.Goexit(); return "" }

// A Go step on a foreign table that panics with a value whose printing
// calls runtime.Goexit fails with InternalError, naming the value's type,
// and its flow ends. Printing it on the table's thread ended that
// goroutine in the middle of recovering the panic: no error was handled
// and the flow never ended.
func TestForeignStepPanicWithAValueThatExitsWhenPrinted(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		as := cabi.Wrap(root)
		as.Add(func(asyncsteps.AsyncSteps, ...any) { panic(exitingPrint{}) })
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctest.FakeRun(root)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			fmt.Println("the flow did not end")
		}
		fmt.Printf("trace=%q\n", ctest.Trace())
	})
	want := `trace="fake: running root valid=0\nfake: handle_error InternalError: a cabi_test.exitingPrint that calls runtime.Goexit when printed\n` +
		`fake: end failed=1 InternalError string cleanups=1\n"`
	if !strings.Contains(out, want) {
		t.Errorf("child output lacks %s:\n%s", want, out)
	}
}

// A Go callback that calls runtime.Goexit ends the loop's goroutine, and
// the loop goes on with a new one, on another OS thread: the C interface
// follows it there. Its C callbacks still see is_same_thread 1 and their
// calls (here setTimeout and stack) still take effect.
// (In a child process: a C step that finds its calls ignored may crash.)
func TestLoopThreadAfterGoexit(t *testing.T) {
	inChild(t, func() {
		r, root := newRoot(t)
		r.Add(func(asyncsteps.AsyncSteps, ...any) { runtime.Goexit() },
			func(as asyncsteps.AsyncSteps, code string) { as.Success() })
		ctest.Timeout(root)
		if _, err := run(t, r); err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "timeout cancel", "timeout eh Timeout mem=8", "stack cleanup 8", "after timeout")
	})
}

// A C step owns what it takes over: a string it moves out of its slot
// stays valid after its callback returns, until it resets its copy (which
// frees it). (In a child process: reading freed memory may crash, and does
// under -asan.)
func TestTakenStringOutlivesTheCallback(t *testing.T) {
	inChild(t, func() {
		r, root := newRoot(t)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("a string the next step takes over") })
		ctest.TakeString(root)
		done := make(chan error, 1)
		go func() {
			_, err := run(t, r)
			done <- err
		}()
		if !ctest.WaitFor("taken", 5*time.Second) {
			t.Fatal("the step did not take the string")
		}
		ctest.FinishTaken()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		checkTrace(t, "taken", "later: a string the next step takes over")
	})
}

// panicSeen is what a Go error handler read after a panic: the code, the
// State's ErrorInfo, LastException's type and, for a *PanicError, the
// panic's value and whether its stack holds the function that panicked.
type panicSeen struct {
	code, info, exc string
	value           any
	stackHasPanic   bool
}

// A panic in a Go step or error handler on a foreign table fails the
// step with InternalError, and the Go error handlers see it as on the
// library's own flows: the printed value in ErrorInfo, a *PanicError with
// the value and the stack of the panic in LastException. Before, the
// error was raised once the callback counted as over, which no longer
// records it: ErrorInfo was empty and LastException nil.
func TestForeignPanicIsRecordedForTheErrorHandlers(t *testing.T) {
	boom := func() { panic("boom") }
	for _, c := range []struct {
		name string
		step asyncsteps.StepFunc
	}{
		{"step", func(asyncsteps.AsyncSteps, ...any) { boom() }},
		{"error handler", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("MyError", "mine") },
				func(asyncsteps.AsyncSteps, string) { boom() })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var own, foreign panicSeen
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
			r.Add(c.step, recordPanic(&own))
			r.Execute()
			tt.Run()

			ctest.Reset()
			root := ctest.FakeRoot()
			defer ctest.FakeFree(root)
			cabi.Wrap(root).Add(c.step, recordPanic(&foreign))
			ctest.FakeRun(root)

			want := panicSeen{code: asyncsteps.InternalError, info: "boom", exc: "*asyncsteps.PanicError",
				value: "boom", stackHasPanic: true}
			if own != want {
				t.Errorf("on the library's own flow the error handler saw %+v, want %+v", own, want)
			}
			if foreign != want {
				t.Errorf("on a foreign table the error handler saw %+v, want %+v", foreign, want)
			}
		})
	}
}

// recordPanic returns an error handler that records in seen what it read.
func recordPanic(seen *panicSeen) asyncsteps.ErrorFunc {
	return func(as asyncsteps.AsyncSteps, code string) {
		st := as.State()
		*seen = panicSeen{code: code, info: st.ErrorInfo, exc: fmt.Sprintf("%T", st.LastException)}
		if p, ok := st.LastException.(*asyncsteps.PanicError); ok {
			seen.value = p.Value
			seen.stackHasPanic = strings.Contains(string(p.Stack), "TestForeignPanicIsRecordedForTheErrorHandlers.func1")
		}
	}
}

// A Go step on a foreign table that calls runtime.Goexit cannot be made
// an InternalError: the Goexit goes on through the table's C frames. On a
// Go thread, as here, it skips them and the flow never ends (on a thread
// of C's the runtime aborts the process); the library logs it, with the
// stack that names the caller, before either happens. Before, nothing
// said why the flow stopped, or why the process aborted.
func TestForeignStepGoexitIsLogged(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		as := cabi.Wrap(root)
		as.Add(func(asyncsteps.AsyncSteps, ...any) { goexitingStep() })
		as.Add(func(asyncsteps.AsyncSteps, ...any) { fmt.Println("VIOLATION: next step ran") })
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctest.FakeRun(root)
		}()
		<-done
		fmt.Printf("trace=%q\n", ctest.Trace())
	})
	for _, want := range []string{
		"cabi: runtime.Goexit in a Go callback of a foreign table",
		"goexitingStep",
		`trace="fake: running root valid=0\n"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "VIOLATION") {
		t.Errorf("child output:\n%s", out)
	}
}

//go:noinline
func goexitingStep() { runtime.Goexit() }

// So is one in a callback that a foreign table's Tool runs.
func TestForeignToolCallbackGoexitIsLogged(t *testing.T) {
	out := inChild(t, func() {
		ctest.Reset()
		root := ctest.FakeRoot()
		defer ctest.FakeFree(root)
		cabi.Wrap(root).Tool().Immediate(goexitingStep)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctest.FakeRunSched()
		}()
		<-done
		fmt.Printf("trace=%q\n", ctest.Trace())
	})
	for _, want := range []string{
		"cabi: runtime.Goexit in a Go callback of a foreign table",
		"goexitingStep",
		`trace=""`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
