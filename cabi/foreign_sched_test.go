//go:build cgo

package cabi_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// The tests here give a foreign table an event loop of its own
// (ctest.TableRoot) with one of its functions NULL, and use the table's
// Tool (cabi.Wrap(p).Tool()) as a Go Root does.

// schedTool returns a fake root whose table lacks the entries missing,
// freed when the test ends, and its Tool.
func schedTool(t *testing.T, missing ...int) (asyncsteps.Tool, unsafe.Pointer) {
	t.Helper()
	ctest.Reset()
	root := ctest.TableRoot(missing...)
	t.Cleanup(func() {
		ctest.SchedRun() // what the test left queued: run now, before the free
		ctest.FakeFree(root)
	})
	return cabi.Wrap(root).Tool(), root
}

// runOn starts r with start (Execute, Promise), then runs the fake
// table's event loop until it has nothing more to run; it returns the
// panic of start, if any.
func runOn(r *asyncsteps.Root, start func(r *asyncsteps.Root)) (panicked any) {
	func() {
		defer func() { panicked = recover() }()
		start(r)
	}()
	for ctest.SchedRun() > 0 {
	}
	return panicked
}

// promised returns the Result in ch, or one with an error saying that
// the flow still runs.
func promised(ch <-chan asyncsteps.Result) asyncsteps.Result {
	select {
	case res := <-ch:
		return res
	default:
		return asyncsteps.Result{Err: errors.New("no result: the flow still runs")}
	}
}

// A table whose loop runs flows, with every scheduling function: a Go
// Root on its Tool runs to its end, its step timeout armed (and given
// back) through sched_deferred and sched_cancel. The other tests take
// one function away from this table.
func TestForeignToolRunsAFlow(t *testing.T) {
	tool, _ := schedTool(t)
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Minute)
		as.Success("done")
	})
	var ch <-chan asyncsteps.Result
	if p := runOn(r, func(r *asyncsteps.Root) { ch = r.Promise() }); p != nil {
		t.Fatalf("the start panicked: %v", p)
	}
	if res := promised(ch); res.Err != nil || !reflect.DeepEqual(res.Args, []any{"done"}) {
		t.Errorf("result %v %v, want [done] <nil>", res.Args, res.Err)
	}
	checkTrace(t, "fake sched: deferred 60000 ms")
}

// A table without sched_immediate, or without is_same_thread, has an
// event loop that cannot run a flow: NewInstance in a Go step of the
// table fails the step with InternalError naming the missing function,
// and a Go Root made on the table's Tool panics as it starts, naming it,
// and stays not running (a Tool whose Immediate panics, as the engine
// documents). Before, without sched_immediate, the start was dropped: the
// Root stayed Running for good, its Promise never answered; without
// is_same_thread the flow ran with a loop that never knew its own thread
// (a waiting step's Error in its own callback did not end the callback,
// whose code after the Error ran).
func TestForeignToolWithoutAFunctionToRunAFlow(t *testing.T) {
	for _, missing := range []int{ctest.FnSchedImmediate, ctest.FnIsSameThread} {
		name := ctest.Funcs[missing]
		t.Run(name, func(t *testing.T) {
			t.Run("NewInstance", func(t *testing.T) {
				_, root := schedTool(t, missing)
				var got []string
				cabi.Wrap(root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.NewInstance()
					got = append(got, "NewInstance returned")
				}, func(as asyncsteps.AsyncSteps, code string) {
					got = append(got, code, as.State().ErrorInfo)
					as.Success()
				})
				ctest.FakeRun(root)
				want := []string{asyncsteps.InternalError,
					"NewInstance: the foreign table has no " + name + ": a Root on its Tool cannot run"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %q, want %q", got, want)
				}
			})
			t.Run("Root on its Tool", func(t *testing.T) {
				tool, _ := schedTool(t, missing)
				for _, start := range []struct {
					name string
					f    func(r *asyncsteps.Root)
				}{
					{"Execute", func(r *asyncsteps.Root) { r.Execute() }},
					{"Promise", func(r *asyncsteps.Root) { r.Promise() }},
				} {
					r := asyncsteps.New(asyncsteps.WithTool(tool))
					r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Errorf("%s: the step ran", start.name) })
					p := runOn(r, start.f)
					want := "cabi: the foreign table has no " + name + ": its Tool cannot run a callback"
					if p != want {
						t.Errorf("%s panicked with %v, want %q", start.name, p, want)
					}
					if r.Running() {
						t.Errorf("%s: the Root runs, and never will", start.name)
					}
				}
			})
		})
	}
}

// A table without sched_deferred runs flows, but cannot time a callback:
// a step's SetTimeout fails the step with InternalError naming the
// function, and Deferred itself panics, naming it. Before, the timer was
// dropped: the step waited for good, its timeout never came.
func TestForeignToolWithoutSchedDeferred(t *testing.T) {
	tool, _ := schedTool(t, ctest.FnSchedDeferred)
	const info = "cabi: the foreign table has no sched_deferred: its Tool cannot time a callback"
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Millisecond)
	})
	var ch <-chan asyncsteps.Result
	if p := runOn(r, func(r *asyncsteps.Root) { ch = r.Promise() }); p != nil {
		t.Fatalf("the start panicked: %v", p)
	}
	var e *asyncsteps.Error
	if res := promised(ch); !errors.As(res.Err, &e) || e.Code != asyncsteps.InternalError || e.Info != info {
		t.Errorf("result %v, want %s: %s", res.Err, asyncsteps.InternalError, info)
	}
	p := func() (p any) {
		defer func() { p = recover() }()
		tool.Deferred(time.Second, func() {})
		return nil
	}()
	if p != info {
		t.Errorf("Deferred panicked with %v, want %q", p, info)
	}
}

// A table without sched_cancel, or without sched_is_valid, still gives
// handles that work: a cancelled callback does not run when the table
// runs it (its record is gone), and a handle is valid until its callback
// has run or been cancelled, as the record says. Before, without
// sched_is_valid, every handle was invalid from the start.
func TestForeignToolHandlesWithoutCancelOrIsValid(t *testing.T) {
	for _, missing := range []int{ctest.FnSchedCancel, ctest.FnSchedIsValid} {
		t.Run(ctest.Funcs[missing], func(t *testing.T) {
			tool, _ := schedTool(t, missing)
			var got []string
			var ran []string
			for _, schedule := range []struct {
				name string
				f    func(f func()) asyncsteps.Handle
			}{
				{"Immediate", tool.Immediate},
				{"Deferred", func(f func()) asyncsteps.Handle { return tool.Deferred(time.Hour, f) }},
			} {
				kept := schedule.f(func() { ran = append(ran, schedule.name+" kept") })
				cancelled := schedule.f(func() { ran = append(ran, schedule.name+" cancelled") })
				cancelled.Cancel()
				got = append(got, fmt.Sprintf("%s: valid %v %v", schedule.name, kept.IsValid(), cancelled.IsValid()))
				ctest.SchedRun()
				got = append(got, fmt.Sprintf("%s: valid once run %v", schedule.name, kept.IsValid()))
			}
			want := []string{
				"Immediate: valid true false", "Immediate: valid once run false",
				"Deferred: valid true false", "Deferred: valid once run false",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("handles: %q, want %q", got, want)
			}
			if want := []string{"Immediate kept", "Deferred kept"}; !reflect.DeepEqual(ran, want) {
				t.Errorf("ran %q, want %q", ran, want)
			}
		})
	}
}

// keptTool is what a Go step of a foreign table keeps of itself to use
// once the step is over: its Tool, a Root NewInstance made on it, and a
// handle of a callback it scheduled.
type keptTool struct {
	tool asyncsteps.Tool
	inst *asyncsteps.Root
	h    asyncsteps.Handle
}

// keep takes as's Tool and the rest; the tool works while the step runs.
func (k *keptTool) keep(t *testing.T, as asyncsteps.AsyncSteps) {
	k.tool, k.inst = as.Tool(), as.NewInstance()
	k.h = k.tool.Deferred(time.Hour, func() { t.Error("a cancelled callback ran") })
	if !k.h.IsValid() {
		t.Error("a callback scheduled while the step runs is not valid")
	}
}

// check uses what keep kept, the step over, and reports what it saw.
func (k *keptTool) check() string {
	panicOf := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	k.inst.Add(func(asyncsteps.AsyncSteps, ...any) { ctest.Log("go: VIOLATION: the instance ran") })
	k.h.Cancel()
	return fmt.Sprintf("Immediate: %v; Deferred: %v; IsSameThread %v; handle valid %v; Execute: %v, running %v",
		panicOf(func() { k.tool.Immediate(func() {}) }),
		panicOf(func() { k.tool.Deferred(time.Second, func() {}) }),
		k.tool.IsSameThread(), k.h.IsValid(), panicOf(k.inst.Execute), k.inst.Running())
}

// The Tool of a Go step of a foreign table calls the table with the
// step's pointer, which the table frees as the step ends (the C++
// reference implementation's sched_* and is_same_thread read it; the
// fake's steps are locals of its loop). Kept and used once the step is
// over (it completed, or its sub-steps ended, or, an error handler's,
// it returned with the error going on), it calls the table no more:
// Immediate and Deferred panic, IsSameThread is false, a handle it gave
// is cancelled without the table, and a Root that NewInstance made on
// the step panics as it starts, and does not run. While the step runs,
// under its sub-steps too, the tool schedules through the table. Before,
// every call went to the table through the freed pointer.
func TestForeignToolOfAStepThatIsOver(t *testing.T) {
	const over = "cabi: the Tool of a foreign step used after the step ended: the table may have freed it"
	want := fmt.Sprintf("Immediate: %s; Deferred: %s; IsSameThread false; handle valid false; Execute: %s, running false",
		over, over, over)
	for _, c := range []struct {
		name  string
		build func(t *testing.T, w asyncsteps.AsyncSteps, k *keptTool, got *string)
	}{
		{"success", func(t *testing.T, w asyncsteps.AsyncSteps, k *keptTool, got *string) {
			w.Add(func(as asyncsteps.AsyncSteps, _ ...any) { k.keep(t, as); as.Success() })
			w.Add(func(asyncsteps.AsyncSteps, ...any) { *got = k.check() })
		}},
		{"implicit success", func(t *testing.T, w asyncsteps.AsyncSteps, k *keptTool, got *string) {
			w.Add(func(as asyncsteps.AsyncSteps, _ ...any) { k.keep(t, as) })
			w.Add(func(asyncsteps.AsyncSteps, ...any) { *got = k.check() })
		}},
		{"sub-steps", func(t *testing.T, w asyncsteps.AsyncSteps, k *keptTool, got *string) {
			w.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				k.keep(t, as)
				as.Add(func(asyncsteps.AsyncSteps, ...any) {
					if h := k.tool.Immediate(func() {}); !h.IsValid() {
						t.Error("the tool does not work under the step's sub-steps")
					}
				})
			})
			w.Add(func(asyncsteps.AsyncSteps, ...any) { *got = k.check() })
		}},
		{"error handler", func(t *testing.T, w asyncsteps.AsyncSteps, k *keptTool, got *string) {
			w.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") },
					func(as asyncsteps.AsyncSteps, _ string) { k.keep(t, as) }) // the error goes on
			}, func(as asyncsteps.AsyncSteps, _ string) {
				*got = k.check()
				as.Success()
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, root := schedTool(t)
			var k keptTool
			var got string
			c.build(t, cabi.Wrap(root), &k, &got)
			ctest.FakeRun(root)
			if got != want {
				t.Errorf("once the step is over:\n got %s\nwant %s", got, want)
			}
			ctest.SchedRun()
			for _, l := range ctest.Lines() {
				if strings.Contains(l, "VIOLATION") {
					t.Error(l)
				}
			}
		})
	}
}

// A Go step of a foreign table that arms a timer on its Tool and cancels
// it in its cancel handler (what a cancel handler is for: the step's
// external jobs) cancels it in the table: the table runs the handler with
// the step's pointer, which it frees only once the handler has returned,
// so the step is not over for its Tool yet. Here the fake times the
// waiting step out: its cancel handler runs, then its error handler.
// Before, the step counted as over as its cancel began, and Cancel left
// the table's timer armed, an hour long here, to run nothing when it came:
// a table whose loop runs until nothing is left waited for it.
func TestForeignToolCancelsItsTimerInTheStepsCancelHandler(t *testing.T) {
	_, root := schedTool(t)
	ctest.TimeOutWaiting(root)
	var got []string
	cabi.Wrap(root).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		h := as.Tool().Deferred(time.Hour, func() { t.Error("a cancelled callback ran") })
		as.SetCancel(func(asyncsteps.AsyncSteps) {
			h.Cancel()
			got = append(got, fmt.Sprintf("cancelled, handle valid %v", h.IsValid()))
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		got = append(got, "error handler "+code)
		as.Success()
	})
	ctest.FakeRun(root)
	if n := ctest.SchedRun(); n != 0 {
		t.Errorf("the table's loop ran %d callbacks, want none: the timer is cancelled", n)
	}
	if want := []string{"cancelled, handle valid false", "error handler Timeout"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// BenchmarkForeignToolImmediate measures a callback scheduled through a
// foreign table's Tool; the table's loop runs them 32 at a time (the
// fake's queue holds 64), off the clock.
func BenchmarkForeignToolImmediate(b *testing.B) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	tool := cabi.Wrap(root).Tool()
	ran := 0
	f := func() { ran++ }
	for i := range b.N {
		tool.Immediate(f)
		if i%32 == 31 {
			b.StopTimer()
			ctest.SchedRun()
			b.StartTimer()
		}
	}
	ctest.SchedRun()
	if ran != b.N {
		b.Fatalf("%d callbacks ran, want %d", ran, b.N)
	}
}
