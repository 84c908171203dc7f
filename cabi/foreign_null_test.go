//go:build cgo

package cabi_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The tests here run Go steps on a foreign table (cabi.Wrap) that lacks
// some of its 25 functions: each NULL either has a sound fallback or
// fails the Go call that needs it, clearly, never leaving a step to hang
// nor changing what the flow means. The Tool's own (sched_*,
// is_same_thread) are in foreign_sched_test.go too.

// nullRun is a flow of Go steps on a fake table: step, with an error
// handler eh (by default one that logs the code and returns, so that the
// error goes on), then a step that logs "go: next step".
type nullRun struct {
	name    string
	missing []int // the functions the table gives its steps lack
	step    asyncsteps.StepFunc
	eh      asyncsteps.ErrorFunc
	want    []string // the trace between the fake's first line and its last
	end     string   // how the flow ends, in the fake's words: success when ""
}

// How a flow of the fake ends: with InternalError, or with the empty code
// of a waiting step the fake gave up.
const (
	endInternal = "failed=1 InternalError"
	endGivenUp  = "failed=1 "
)

// failsWith is the trace of a step that fails with InternalError, info.
func failsWith(info string) []string {
	return []string{"fake: handle_error InternalError: " + info, "go: error handler InternalError"}
}

// logError is the default error handler of a nullRun.
func logError(_ asyncsteps.AsyncSteps, code string) { ctest.Log("go: error handler " + code) }

func logf(format string, args ...any) { ctest.Log(fmt.Sprintf(format, args...)) }

// run runs the flow on a root whose own table has every function, so
// that Wrap and the flow's first Add work, and whose steps are given a
// table without those of r.missing.
func (r nullRun) run(t *testing.T) {
	t.Helper()
	ctest.Reset()
	root := ctest.StepsTableRoot(r.missing...)
	t.Cleanup(func() {
		ctest.SchedRun() // callbacks the step queued: before the free
		ctest.FakeFree(root)
	})
	eh := r.eh
	if eh == nil {
		eh = logError
	}
	as := cabi.Wrap(root)
	as.Add(r.step, eh)
	as.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: next step") })
	ctest.FakeRun(root)
	end := cmp.Or(r.end, "failed=0 ")
	want := append([]string{"fake: running root valid=0"}, r.want...)
	checkTrace(t, append(want, "fake: end "+end+" string cleanups=1")...)
}

// busyStep uses much of the Go API (State, NewInstance, Sync on a Mutex,
// whose section has a cancel handler, Loop, Repeat, Add, Success), none
// of which needs stack, execute, cancel, addSync, rootId, newInstance or
// free: the fake logs a VIOLATION for a call of one of those but rootId,
// and the flow runs the same without any of them.
func busyStep(as asyncsteps.AsyncSteps, _ ...any) {
	as.State().Set("k", "v")
	as.NewInstance()
	as.Sync(asyncsteps.NewMutex(1), func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: in the section") })
	as.Loop(func(as asyncsteps.AsyncSteps) {
		ctest.Log("go: loop")
		as.Break()
	})
	as.Repeat(1, func(as asyncsteps.AsyncSteps, i int) { logf("go: repeat %d", i) })
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		logf("go: %v", as.State().Get("k"))
		as.Success()
	})
}

var busyTrace = []string{"fake: setCancel", "go: in the section", "fake: loop label=NULL", "go: loop",
	"fake: repeat 1 label=NULL", "go: repeat 0", "go: v", "go: next step"}

// heldMutex returns a Mutex that a flow of a TestTool holds, waiting
// inside for good.
func heldMutex() *asyncsteps.Mutex {
	m := asyncsteps.NewMutex(1)
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	r.Execute()
	tt.Run()
	return m
}

// Each function of the table, NULL in the table a Go step is given, and
// what the step's Go calls that need it do. Before, a NULL success,
// breakLoop or continueLoop did nothing and the step was left to hang
// (the fake logged a step that returned without completing); a NULL
// setTimeout, setCancel or waitExternal did nothing either, so that the
// step completed with an implicit success as its callback returned (the
// next step ran; a Sync on a Mutex held elsewhere ran its section); a
// NULL stateVariable gave each callback a fresh State
// of its own, and a NULL isValid made a step that runs read as over; a
// NULL parallel, loop or repeat failed the step with an info that did not
// say which. add, and the Tool's functions, already failed; stack,
// execute, cancel, addSync, rootId, newInstance and free are not used. A
// NULL handle_error: TestWrapRefusesATableWithoutHandleError and
// TestForeignStepWithoutHandleError.
func TestForeignTableWithoutAFunction(t *testing.T) {
	keyed := asyncsteps.NewKeyedMutex[string](1)
	for _, r := range []nullRun{
		{name: "none", step: busyStep, want: busyTrace},
		{name: "add", missing: []int{ctest.FnAdd}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: the sub-step ran") })
		}, want: failsWith("Add: the foreign table has no add"), end: endInternal},
		{name: "parallel", missing: []int{ctest.FnParallel}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Parallel()
		}, want: failsWith("Parallel: the foreign table has no parallel"), end: endInternal},
		{name: "parallel that gives NULL", step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Parallel()
		}, want: append([]string{"fake: parallel: not supported"}, failsWith("Parallel: the foreign table gave no parallel")...),
			end: endInternal},
		{name: "stateVariable", missing: []int{ctest.FnStateVariable}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.State().Set("k", "v")
		}, want: failsWith("State: the foreign table has no stateVariable"), end: endInternal},
		{name: "stateVariable, in an error handler", missing: []int{ctest.FnStateVariable},
			step: func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("MyError", "my info") },
			eh: func(as asyncsteps.AsyncSteps, code string) {
				logf("go: error handler %s: %q", code, as.State().ErrorInfo)
			}, want: []string{"fake: handle_error MyError: my info",
				"fake: handle_error InternalError: State: the foreign table has no stateVariable"},
			end: endInternal},
		{name: "stack", missing: []int{ctest.FnStack}, step: busyStep, want: busyTrace},
		{name: "success", missing: []int{ctest.FnSuccess}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("done")
		}, want: failsWith("Success: the foreign table has no success"), end: endInternal},
		{name: "success, implicit", missing: []int{ctest.FnSuccess}, step: func(asyncsteps.AsyncSteps, ...any) {},
			want: failsWith("implicit success: the foreign table has no success"), end: endInternal},
		{name: "success, implicit, info for the handler", missing: []int{ctest.FnSuccess},
			step: func(asyncsteps.AsyncSteps, ...any) {},
			eh: func(as asyncsteps.AsyncSteps, code string) {
				logf("go: error handler %s: %q", code, as.State().ErrorInfo)
			}, want: []string{"fake: handle_error InternalError: implicit success: the foreign table has no success",
				`go: error handler InternalError: "implicit success: the foreign table has no success"`},
			end: endInternal},
		{name: "setTimeout", missing: []int{ctest.FnSetTimeout}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
		}, want: failsWith("SetTimeout: the foreign table has no setTimeout"), end: endInternal},
		{name: "setCancel", missing: []int{ctest.FnSetCancel}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { ctest.Log("go: VIOLATION: cancel handler") })
		}, want: failsWith("SetCancel: the foreign table has no setCancel"), end: endInternal},
		{name: "setCancel, for an Await", missing: []int{ctest.FnSetCancel}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { return nil, nil })
		}, want: failsWith("SetCancel: the foreign table has no setCancel"), end: endInternal},
		// The spec's own way to wait before waitExternal: a cancel handler
		// that does nothing. The fake gives the waiting step up, running
		// the handler, and the flow ends with the fake's empty code.
		{name: "waitExternal", missing: []int{ctest.FnWaitExternal}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
		}, want: []string{"fake: setCancel", "fake: the step waits: not supported", "fake: cancel handler returned"},
			end: endGivenUp},
		{name: "waitExternal after SetCancel", missing: []int{ctest.FnWaitExternal}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { ctest.Log("go: cancel handler") })
			as.WaitExternal() // keeps the handler
		}, want: []string{"fake: setCancel", "fake: the step waits: not supported", "go: cancel handler",
			"fake: cancel handler returned"}, end: endGivenUp},
		{name: "waitExternal and setCancel", missing: []int{ctest.FnWaitExternal, ctest.FnSetCancel},
			step: func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() },
			want: failsWith("WaitExternal: the foreign table has no waitExternal"), end: endInternal},
		{name: "waitExternal and setCancel, for a Mutex's queue", missing: []int{ctest.FnWaitExternal, ctest.FnSetCancel},
			step: func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(heldMutex(), func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: in the section") })
			}, want: failsWith("SetCancel: the foreign table has no setCancel"), end: endInternal},
		// The step that enters counts itself in the key before it sets
		// the section's cancel handler: it lets go of the key as the
		// table refuses the handler.
		{name: "setCancel, for a KeyedMutex's key", missing: []int{ctest.FnSetCancel},
			step: func(as asyncsteps.AsyncSteps, _ ...any) {
				keyed.Sync(as, "a", func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: in the section") })
			}, eh: func(_ asyncsteps.AsyncSteps, code string) {
				logf("go: error handler %s, %d keys in use", code, keyed.Len())
			}, want: []string{"fake: handle_error InternalError: SetCancel: the foreign table has no setCancel",
				"go: error handler InternalError, 0 keys in use"}, end: endInternal},
		{name: "loop", missing: []int{ctest.FnLoop}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Loop(func(as asyncsteps.AsyncSteps) { as.Break() })
		}, want: failsWith("Loop: the foreign table has no loop"), end: endInternal},
		{name: "repeat", missing: []int{ctest.FnRepeat}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Repeat(2, func(asyncsteps.AsyncSteps, int) {})
		}, want: failsWith("Repeat: the foreign table has no repeat"), end: endInternal},
		{name: "repeat, for a ForEach", missing: []int{ctest.FnRepeat}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) {})
		}, want: failsWith("ForEach: the foreign table has no repeat"), end: endInternal},
		{name: "breakLoop", missing: []int{ctest.FnBreakLoop}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Repeat(2, func(as asyncsteps.AsyncSteps, _ int) { as.Break() })
		}, want: append([]string{"fake: repeat 2 label=NULL"}, failsWith("Break: the foreign table has no breakLoop")...),
			end: endInternal},
		{name: "continueLoop", missing: []int{ctest.FnContinueLoop}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Repeat(2, func(as asyncsteps.AsyncSteps, _ int) { as.Continue() })
		}, want: append([]string{"fake: repeat 2 label=NULL"}, failsWith("Continue: the foreign table has no continueLoop")...),
			end: endInternal},
		{name: "execute", missing: []int{ctest.FnExecute}, step: busyStep, want: busyTrace},
		{name: "cancel", missing: []int{ctest.FnCancel}, step: busyStep, want: busyTrace},
		{name: "addSync", missing: []int{ctest.FnAddSync}, step: busyStep, want: busyTrace},
		{name: "rootId", missing: []int{ctest.FnRootID}, step: busyStep, want: busyTrace},
		{name: "isValid", missing: []int{ctest.FnIsValid}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			logf("go: valid %v", as.IsValid())
		}, want: failsWith("IsValid: the foreign table has no isValid"), end: endInternal},
		{name: "isValid, once the step has completed", missing: []int{ctest.FnIsValid},
			step: func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success()
				logf("go: valid %v", as.IsValid())
			}, want: []string{"go: valid false", "go: next step"}},
		{name: "newInstance", missing: []int{ctest.FnNewInstance}, step: busyStep, want: busyTrace},
		{name: "free", missing: []int{ctest.FnFree}, step: busyStep, want: busyTrace},
		{name: "sched_immediate", missing: []int{ctest.FnSchedImmediate}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.NewInstance()
		}, want: failsWith("NewInstance: the foreign table has no sched_immediate: a Root on its Tool cannot run"),
			end: endInternal},
		{name: "sched_deferred", missing: []int{ctest.FnSchedDeferred}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Tool().Deferred(time.Hour, func() {})
		}, want: failsWith("cabi: the foreign table has no sched_deferred: its Tool cannot time a callback"),
			end: endInternal},
		{name: "sched_cancel", missing: []int{ctest.FnSchedCancel}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			h := as.Tool().Immediate(func() { ctest.Log("go: VIOLATION: a cancelled callback ran") })
			h.Cancel()
			logf("go: handle valid %v", h.IsValid())
		}, want: []string{"go: handle valid false", "go: next step"}},
		{name: "sched_is_valid", missing: []int{ctest.FnSchedIsValid}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			logf("go: handle valid %v", as.Tool().Immediate(func() {}).IsValid())
		}, want: []string{"go: handle valid true", "go: next step"}},
		{name: "is_same_thread", missing: []int{ctest.FnIsSameThread}, step: func(as asyncsteps.AsyncSteps, _ ...any) {
			as.NewInstance()
		}, want: failsWith("NewInstance: the foreign table has no is_same_thread: a Root on its Tool cannot run"),
			end: endInternal},
	} {
		t.Run(r.name, r.run)
	}
}

// Go code that C calls with the pointer of its own step on a foreign
// table (cabi.Wrap of that pointer, no Go callback of the library's
// around it) fails the step as well when a Go call needs a function the
// table lacks; WaitExternal there has no cancel handler to put in the
// place of waitExternal, as C may have set one of its own. Before, each
// call did nothing: the C step returned without completing.
func TestWrappedCStepWithoutAFunction(t *testing.T) {
	for _, c := range []struct {
		missing int
		call    func(as asyncsteps.AsyncSteps)
		info    string
	}{
		{ctest.FnSuccess, func(as asyncsteps.AsyncSteps) { as.Success() }, "Success: the foreign table has no success"},
		{ctest.FnWaitExternal, asyncsteps.AsyncSteps.WaitExternal, "WaitExternal: the foreign table has no waitExternal"},
		{ctest.FnIsValid, func(as asyncsteps.AsyncSteps) { as.IsValid() }, "IsValid: the foreign table has no isValid"},
		{ctest.FnStateVariable, func(as asyncsteps.AsyncSteps) { as.State() }, "State: the foreign table has no stateVariable"},
	} {
		t.Run(ctest.Funcs[c.missing], func(t *testing.T) {
			ctest.Reset()
			root := ctest.StepsTableRoot(c.missing)
			defer ctest.FakeFree(root)
			ctest.FakeCGo(root, func(step unsafe.Pointer) { c.call(cabi.Wrap(step)) })
			ctest.FakeRun(root)
			checkTrace(t, "fake: running root valid=0", "fake: C step calls Go",
				"fake: handle_error InternalError: "+c.info, "fake: C error handler InternalError",
				"fake: end failed=1 InternalError string cleanups=1")
		})
	}
}

// A foreign table without handle_error cannot fail a Go call's step (a
// misuse, a panic in a Go callback, Error itself): Wrap refuses it by a
// panic naming the function, there being no step to fail yet; and a
// pointer with no table at all. Every other single function may be NULL
// in a table Wrap takes. Before, Wrap took them all, and a Go step's error
// on such a table was dropped: the step never completed.
func TestWrapRefusesATableWithoutHandleError(t *testing.T) {
	wrap := func(p unsafe.Pointer) (panicked any) {
		defer func() { panicked = recover() }()
		cabi.Wrap(p)
		return nil
	}
	for i := range ctest.Funcs {
		root := ctest.TableRoot(i)
		p := wrap(root)
		ctest.FakeFree(root)
		want := any(nil)
		if i == ctest.FnHandleError {
			want = "cabi: Wrap: the foreign table has no handle_error: no Go call on it could fail its step"
		}
		if p != want {
			t.Errorf("Wrap of a table without %s panicked with %v, want %v", ctest.Funcs[i], p, want)
		}
	}
	var noTable uintptr // a FutoInAsyncSteps whose api is NULL
	if p, want := wrap(unsafe.Pointer(&noTable)), "cabi: Wrap: the FutoInAsyncSteps has no table (its api is NULL)"; p != want {
		t.Errorf("Wrap of a pointer without a table panicked with %v, want %q", p, want)
	}
}

// recordedLogs collects the records logged through slog while a test
// runs.
type recordedLogs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordedLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordedLogs) WithGroup(string) slog.Handler            { return l }
func (l *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%q", a.Key, a.Value.String())
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}

// A table that gives its steps another table than the one Wrap saw, one
// without handle_error, leaves a Go step's error nowhere to go: it is
// logged, naming the function, code and info, rather than dropped in
// silence (the step does not complete: the fake says so).
func TestForeignStepWithoutHandleError(t *testing.T) {
	logs := &recordedLogs{}
	old := slog.Default()
	slog.SetDefault(slog.New(logs))
	defer slog.SetDefault(old)
	ctest.Reset()
	root := ctest.StepsTableRoot(ctest.FnHandleError)
	defer ctest.FakeFree(root)
	cabi.Wrap(root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error("MyError", "my info")
	})
	ctest.FakeRun(root)
	want := []string{`cabi: the foreign table has no handle_error: the error of a Go step is lost, and the step does not complete code="MyError" info="my info"`}
	if !reflect.DeepEqual(logs.msgs, want) {
		t.Errorf("logged %q, want %q", logs.msgs, want)
	}
	wantTrace := "fake: running root valid=0\nVIOLATION: a step returned without completing (no implicit success here)\n" +
		"fake: end failed=1  string cleanups=1\n"
	if got := ctest.Trace(); got != wantTrace {
		t.Errorf("trace:\n%s\nwant:\n%s", got, wantTrace)
	}
}

// enters reports, failing the test if not, whether a Go flow on a loop of
// its own enters m within 10 s: no holder the lock function made is left.
func enters(t *testing.T, m *asyncsteps.Mutex) {
	t.Helper()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success() })
	if _, err := run(t, r); err != nil {
		t.Errorf("a Go flow did not enter the Mutex: %v", err)
	}
}

// withLogs records what slog logs while the test runs.
func withLogs(t *testing.T) *recordedLogs {
	logs := &recordedLogs{}
	old := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(old) })
	return logs
}

// waitLogs returns what logs holds once it holds n records, or after 5 s.
func waitLogs(logs *recordedLogs, n int) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs.mu.Lock()
		msgs := slices.Clone(logs.msgs)
		logs.mu.Unlock()
		if len(msgs) >= n || time.Now().After(deadline) {
			return msgs
		}
		time.Sleep(time.Millisecond)
	}
}

// The lock function of a Sync, called with the step of a table that
// lacks a function it needs, fails the step with InternalError naming it,
// and does not enter the sync: without success the step could never be
// completed once inside; without setCancel a cancel of the waiting step
// would go unseen (the hidden flow would enter for a flow that left, and
// complete a step that may be gone), and without waitExternal as well the
// step would not wait at all: the table takes a lock step that returns as
// the lock held, while the hidden flow has not entered. Without
// waitExternal alone, setCancel makes the step wait. Where the table has
// no handle_error either, the error is logged and the step made to wait
// for good, which the table cannot take for a held lock; a table that can
// neither fail nor wait is told so in the log. Before, lock called the
// four without checking them: the step hung without success, and lock
// returned without making it wait without both waitExternal and setCancel.
func TestSyncLockOnATableWithoutAFunction(t *testing.T) {
	const noHandleError = "cabi: the foreign table has no handle_error: the error of a FutoInSync lock is lost, and "
	for _, c := range []struct {
		name    string
		missing []int
		want    []string // the trace
		logs    []string
	}{
		{"success", []int{ctest.FnSuccess}, []string{"bare locks",
			"bare lock: InternalError: FutoInSync lock: the foreign table has no success", "bare lock returned"}, nil},
		{"setCancel", []int{ctest.FnSetCancel}, []string{"bare locks",
			"bare lock: InternalError: FutoInSync lock: the foreign table has no setCancel", "bare lock returned"}, nil},
		{"waitExternal and setCancel", []int{ctest.FnWaitExternal, ctest.FnSetCancel}, []string{"bare locks",
			"bare lock: InternalError: FutoInSync lock: the foreign table has no setCancel", "bare lock returned"}, nil},
		{"success and handle_error", []int{ctest.FnSuccess, ctest.FnHandleError},
			[]string{"bare locks", "bare waits", "bare lock returned"},
			[]string{noHandleError + `the lock step waits for good code="InternalError" info="FutoInSync lock: the foreign table has no success"`}},
		{"setCancel and handle_error, waiting with waitExternal", []int{ctest.FnSetCancel, ctest.FnHandleError},
			[]string{"bare locks", "bare waits", "bare lock returned"},
			[]string{noHandleError + `the lock step waits for good code="InternalError" info="FutoInSync lock: the foreign table has no setCancel"`}},
		{"success, handle_error and waitExternal, waiting with setCancel",
			[]int{ctest.FnSuccess, ctest.FnHandleError, ctest.FnWaitExternal},
			[]string{"bare locks", "bare setCancel", "bare lock returned"},
			[]string{noHandleError + `the lock step waits for good code="InternalError" info="FutoInSync lock: the foreign table has no success"`}},
		{"waitExternal, setCancel and handle_error", []int{ctest.FnWaitExternal, ctest.FnSetCancel, ctest.FnHandleError},
			[]string{"bare locks", "bare lock returned"},
			[]string{noHandleError + `the lock step cannot wait either: the table may take the lock as held code="InternalError" info="FutoInSync lock: the foreign table has no setCancel"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := withLogs(t)
			ctest.Reset()
			m := asyncsteps.NewMutex(1)
			s := cabi.Sync(m)
			defer cabi.FreeSync(s)
			ctest.BareLock(s, c.missing...)
			checkTrace(t, c.want...)
			enters(t, m)
			checkTrace(t, c.want...) // the step was never completed
			if got := waitLogs(logs, len(c.logs)); !reflect.DeepEqual(got, c.logs) {
				t.Errorf("logged %q, want %q", got, c.logs)
			}
		})
	}
}

// Without waitExternal, the lock function of a Sync makes the step wait
// with its cancel handler alone, and completes it once inside. The
// completion comes from the hidden flow's loop, another thread than the
// caller's, which nothing orders with the return of lock: the step's
// success may come before or after lock returns, and the test forces each
// order in turn. Before, it asserted the return first, and failed when a
// loaded machine ran the loop first.
func TestSyncLockOnATableWithoutWaitExternal(t *testing.T) {
	for _, c := range []struct {
		name  string
		order int
		want  []string // the trace once locked
	}{
		{"completed after lock returned", ctest.BareReturnedFirst,
			[]string{"bare locks", "bare setCancel", "bare lock returned", "bare locked"}},
		{"completed before lock returned", ctest.BareLockedFirst,
			[]string{"bare locks", "bare setCancel", "bare locked", "bare lock returned"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			ctest.BareOrder(c.order)
			m := asyncsteps.NewMutex(1)
			s := cabi.Sync(m)
			defer cabi.FreeSync(s)
			ctest.BareLock(s, ctest.FnWaitExternal)
			checkTrace(t, c.want...)
			ctest.BareUnlock(s)
			enters(t, m)
			checkTrace(t, append(c.want, "bare unlocks")...)
		})
	}
}

// A Sync that rejects the lock of a step whose table has no handle_error
// (a full queue) leaves the error nowhere to go: it is logged with its
// code and info, and the step, which waits, does not complete. Before, the
// error was dropped in silence.
func TestSyncLockRejectedOnATableWithoutHandleError(t *testing.T) {
	logs := withLogs(t)
	ctest.Reset()
	m := asyncsteps.NewMutex(1, 0)
	tt := asyncsteps.NewTestTool()
	holder := asyncsteps.New(asyncsteps.WithTool(tt))
	holder.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	holder.Execute()
	tt.Run()
	s := cabi.Sync(m)
	defer cabi.FreeSync(s)
	ctest.BareLock(s, ctest.FnHandleError)
	want := []string{`cabi: the foreign table has no handle_error: the error of a FutoInSync lock is lost, and the lock step does not complete code="DefenseRejected" info="Mutex queue limit"`}
	if got := waitLogs(logs, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
	checkTrace(t, "bare locks", "bare waits", "bare setCancel", "bare lock returned")
}
