//go:build cgo

package cabi

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// recordCount is the number of records of Go functions given to foreign
// tables.
func recordCount() int {
	frecs.mu.Lock()
	defer frecs.mu.Unlock()
	return len(frecs.m)
}

// A Go step on a foreign table that sets a cancel handler, or waits, and
// adds sub-steps (a Sync on a Mutex does both, for its section) completes
// with its sub-steps, and its records go then: that of its cancel handler
// and that of its error handler. Before, the step counted as waiting, and
// nothing dropped them: they stayed for good, with all they held (the
// section's args, here placeholders of the fake).
func TestForeignStepThatWaitsAndAddsKeepsNoRecord(t *testing.T) {
	var trace []string
	log := func(s string) { trace = append(trace, s) }
	sub := func(asyncsteps.AsyncSteps, ...any) { log("sub-step") }
	cancel := func(asyncsteps.AsyncSteps) { log("VIOLATION: cancel handler") }
	for _, c := range []struct {
		name string
		step asyncsteps.StepFunc
		want []string
	}{
		{"SetCancel then Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(cancel)
			as.Add(sub)
		}, []string{"sub-step", "next step"}},
		{"Add then SetCancel", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(sub)
			as.SetCancel(cancel)
		}, []string{"sub-step", "next step"}},
		{"WaitExternal then Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			as.Add(sub)
		}, []string{"sub-step", "next step"}},
		{"Sync on a Mutex", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(asyncsteps.NewMutex(1), sub)
		}, []string{"sub-step", "next step"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			trace = nil
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(c.step, func(_ asyncsteps.AsyncSteps, code string) { log("error handler " + code) })
			as.Add(func(asyncsteps.AsyncSteps, ...any) { log("next step") })
			ctest.FakeRun(root)
			if !reflect.DeepEqual(trace, c.want) {
				t.Errorf("trace %q, want %q", trace, c.want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// goObject is a Go value a foreign table carries as a custom object.
type goObject struct{ name string }

// A Go step on a foreign table that keeps records (an error handler, a
// cancel handler: a Sync's section has one) and adds sub-steps completes
// with the result of its last sub-step, as on the package's own flows:
// the last sub-step that drops its records passes on what it receives.
// Before, that sub-step completed with no args, and the next step got
// the fake's placeholders in place of the values. The values are of
// each kind a table carries: copied (an int, a string), a custom object
// of C's (a placeholder of the fake, which must be cleaned up once: run
// with -asan) and a Go value.
func TestForeignStepWithRecordsPassesItsSubStepsResult(t *testing.T) {
	obj := &goObject{"obj"}
	var custom unsafe.Pointer // the custom_data of the placeholder passed on
	succeed := func(as asyncsteps.AsyncSteps, args ...any) {
		custom = args[0].(*Custom).Data()
		as.Success(42, "text", args[0], obj)
	}
	cancel := func(asyncsteps.AsyncSteps) {}
	for _, c := range []struct {
		name string
		eh   bool
		step asyncsteps.StepFunc
	}{
		{"error handler and Add", true, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(succeed)
		}},
		{"SetCancel and Add", false, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(cancel)
			as.Add(succeed)
		}},
		{"Sync on a Mutex", false, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(asyncsteps.NewMutex(1), succeed)
		}},
		{"Sync on a Mutex with an error handler", true, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(asyncsteps.NewMutex(1), succeed)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			var got []any
			as := Wrap(root)
			if c.eh {
				as.Add(c.step, func(_ asyncsteps.AsyncSteps, code string) { got = append(got, "error handler "+code) })
			} else {
				as.Add(c.step)
			}
			as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { got = args })
			ctest.FakeRun(root)
			if len(got) != 4 {
				t.Fatalf("next step got %d args %v, want 4", len(got), got)
			}
			if got[0] != int64(42) || got[1] != "text" || got[3] != obj {
				t.Errorf("next step got %#v, %#v, %#v; want int64(42), \"text\", %p", got[0], got[1], got[3], obj)
			}
			if cv, ok := got[2].(*Custom); !ok || cv.Data() != custom {
				t.Errorf("next step got %#v as arg2, want the *Custom passed on (custom_data %p)", got[2], custom)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
	// Every placeholder is cleaned up once: the one passed on too, by
	// the library once the last Go step has dropped it.
	deadline := time.Now().Add(5 * time.Second)
	for ctest.FakePlaceholders() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if n := ctest.FakePlaceholders(); n != 0 {
		t.Errorf("%d placeholders alive, want 0", n)
	}
}

// A Go step on a foreign table that fails after adding sub-steps (a
// misplaced Error or Success, a panic) keeps no record of them: the table
// never runs the sub-steps of a failed step, so nothing else would drop
// the records of their functions (and of a loop's, a parallel's error
// handler), with all they hold. Before, they stayed for good. The step's
// own cancel handler runs, on a table that runs the failing step's (see
// TestForeignFailingStepRunsItsGoCancelHandler), and its record goes so.
func TestForeignStepThatFailsAfterAddKeepsNoRecord(t *testing.T) {
	var trace []string
	log := func(s string) { trace = append(trace, s) }
	sub := func(asyncsteps.AsyncSteps, ...any) { log("VIOLATION: sub-step") }
	adds := func(as asyncsteps.AsyncSteps) {
		as.Add(sub, func(asyncsteps.AsyncSteps, string) {})
		as.Sync(asyncsteps.NewMutex(1), sub)
		as.Repeat(2, func(asyncsteps.AsyncSteps, int) { log("VIOLATION: loop") })
	}
	for _, c := range []struct {
		name   string
		step   asyncsteps.StepFunc
		code   string
		cancel bool // the step sets a cancel handler, which the table runs
	}{
		{"Error after Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			adds(as)
			as.Error("E1")
		}, "InternalError", false},
		{"Success after Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			adds(as)
			as.Success()
		}, "InternalError", false},
		{"panic after Add", func(as asyncsteps.AsyncSteps, _ ...any) {
			adds(as)
			panic("boom")
		}, "InternalError", false},
		{"SetCancel, Add and Error", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { log("cancel handler") })
			adds(as)
			as.Error("E1")
		}, "InternalError", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			trace = nil
			ctest.Reset()
			root := ctest.TableRoot()
			ctest.CancelOnError(root)
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(c.step, func(as asyncsteps.AsyncSteps, code string) {
				log("error handler " + code)
				as.Success()
			})
			as.Add(func(asyncsteps.AsyncSteps, ...any) { log("next step") })
			ctest.FakeRun(root)
			want := []string{"error handler " + c.code, "next step"}
			if c.cancel {
				want = append([]string{"cancel handler"}, want...)
			}
			if !reflect.DeepEqual(trace, want) {
				t.Errorf("trace %q, want %q", trace, want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// An Add, a loop or a Parallel on a Go step of a foreign table that has
// completed (Success earlier in the callback, or in its cancel handler)
// has no effect, as on the engine's flows: it reaches no table, which
// could run the sub-steps after the step (the fake ran them, and the
// step's result became theirs) or abort, and it keeps no record. Before,
// the fake logged a VIOLATION for each, and the next step got the
// sub-steps' result, not the step's.
func TestForeignAddOnACompletedStepHasNoEffect(t *testing.T) {
	var trace []string
	log := func(s string) { trace = append(trace, s) }
	sub := func(asyncsteps.AsyncSteps, ...any) { log("VIOLATION: sub-step") }
	adds := func(as asyncsteps.AsyncSteps) {
		as.Add(sub)
		as.Sync(asyncsteps.NewMutex(1), sub)
		as.Repeat(1, func(asyncsteps.AsyncSteps, int) { log("VIOLATION: loop") })
		as.Parallel().Add(sub)
	}
	for _, c := range []struct {
		name string
		step asyncsteps.StepFunc
		want []string
		left int // records left
	}{
		{"after Success", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("ok")
			adds(as)
		}, []string{`next step ["ok"]`}, 0},
		// The fake gives up a waiting step: the flow ends there, and the
		// records of the step's error handler and of the next step stay,
		// as the table never calls them.
		{"in a cancel handler", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(as asyncsteps.AsyncSteps) {
				adds(as)
				log("cancel handler")
			})
		}, []string{"cancel handler"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			trace = nil
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(c.step, func(as asyncsteps.AsyncSteps, code string) {
				log("error handler " + code)
				as.Success()
			})
			as.Add(func(_ asyncsteps.AsyncSteps, args ...any) {
				var s []string
				for _, a := range args {
					if str, ok := a.(string); ok {
						s = append(s, str)
					}
				}
				log(fmt.Sprintf("next step %q", s))
			})
			ctest.FakeRun(root)
			if !reflect.DeepEqual(trace, c.want) {
				t.Errorf("trace %q, want %q", trace, c.want)
			}
			if strings.Contains(ctest.Trace(), "VIOLATION") {
				t.Errorf("fake's trace:\n%s", ctest.Trace())
			}
			if n := recordCount() - before; n != c.left {
				t.Errorf("%d records left, want %d", n, c.left)
			}
		})
	}
}

// A loop, a Sync, an Await or a wait (SetCancel, SetTimeout,
// WaitExternal) on a Go step of a foreign table that has completed has
// no effect whatever its arguments, as an Add there and as on the
// engine's flows, where the step's state is looked at first: a nil
// function, a label too many, a collection ForEach cannot iterate, a
// function the table lacks. The callback goes on, ForEach iterates
// nothing, and the table sees no call. Before, each was a misuse, which
// aborted the callback on a completed step (and ForEach took its
// snapshot first); SetCancel reached the table, and the record of its
// function stayed. So does an Error, a Break or a Continue after the
// Success, which aborted the callback (each still does after the step's
// own failure).
func TestForeignCallOnACompletedStepHasNoEffect(t *testing.T) {
	body := func(asyncsteps.AsyncSteps) {}
	each := func(asyncsteps.AsyncSteps, any, any) {}
	for _, c := range []struct {
		name    string
		missing []int // the table's functions that are NULL
		call    func(as asyncsteps.AsyncSteps, log func(string))
	}{
		{"Loop(nil)", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Loop(nil) }},
		{"Loop with two labels", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Loop(body, "a", "b") }},
		{"Loop on a table without loop", []int{ctest.FnLoop}, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Loop(body) }},
		{"Repeat(1, nil)", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Repeat(1, nil) }},
		{"Repeat on a table without repeat", []int{ctest.FnRepeat}, func(as asyncsteps.AsyncSteps, _ func(string)) {
			as.Repeat(1, func(asyncsteps.AsyncSteps, int) {})
		}},
		{"ForEach(42)", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.ForEach(42, each) }},
		{"ForEach with a nil function", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.ForEach([]int{1}, nil) }},
		{"ForEach over an iterator", nil, func(as asyncsteps.AsyncSteps, log func(string)) {
			as.ForEach(func(func(int, int) bool) { log("VIOLATION: iterated") }, each)
		}},
		{"Sync(nil)", nil, func(as asyncsteps.AsyncSteps, _ func(string)) {
			as.Sync(nil, func(asyncsteps.AsyncSteps, ...any) {})
		}},
		{"Sync with a nil function", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Sync(asyncsteps.NewMutex(1), nil) }},
		{"Await(nil)", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Await(nil) }},
		{"SetCancel", nil, func(as asyncsteps.AsyncSteps, log func(string)) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { log("VIOLATION: cancel handler") })
		}},
		{"SetCancel on a table without setCancel", []int{ctest.FnSetCancel}, func(as asyncsteps.AsyncSteps, _ func(string)) {
			as.SetCancel(func(asyncsteps.AsyncSteps) {})
		}},
		{"SetTimeout", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.SetTimeout(time.Second) }},
		{"SetTimeout on a table without setTimeout", []int{ctest.FnSetTimeout}, func(as asyncsteps.AsyncSteps, _ func(string)) {
			as.SetTimeout(time.Second)
		}},
		{"WaitExternal", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.WaitExternal() }},
		{"Error", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Error("E1", "late") }},
		{"Error with two infos", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Error("E1", "a", "b") }},
		{"Break", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Break() }},
		{"Continue", nil, func(as asyncsteps.AsyncSteps, _ func(string)) { as.Continue() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var trace []string
			log := func(s string) { trace = append(trace, s) }
			ctest.Reset()
			root := ctest.TableRoot(c.missing...)
			defer ctest.FakeFree(root)
			before := recordCount()
			as := Wrap(root)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success("ok")
				c.call(as, log)
				log("callback goes on")
			}, func(_ asyncsteps.AsyncSteps, code string) { log("error handler " + code) })
			as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { log(fmt.Sprint("next step ", args[0])) })
			ctest.FakeRun(root)
			if want := []string{"callback goes on", "next step ok"}; !reflect.DeepEqual(trace, want) {
				t.Errorf("trace %q, want %q", trace, want)
			}
			want := []string{"fake: running root valid=0", "fake: end failed=0  string cleanups=1"}
			if got := ctest.Lines(); !reflect.DeepEqual(got, want) {
				t.Errorf("fake's trace:\n%q\nwant:\n%q", got, want)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left, want 0", n)
			}
		})
	}
}

// The records of the Go functions a foreign flow never runs (a step after
// a sibling that failed, a sub-step after one that failed, a step after a
// step the table gave up, as a cancel of the flow would) go when the flow
// does: when the table cleans up its state variables (the fake, when its
// root is freed). The table gives no other signal that it dropped a step.
// Before, each such record stayed for good, with all it held: a server
// that runs many flows mixing C++ steps and Go steps leaked without bound.
func TestForeignRecordsOfDroppedStepsGoWithTheFlow(t *testing.T) {
	never := func(asyncsteps.AsyncSteps, ...any) { panic("VIOLATION: a dropped step ran") }
	neverEh := func(asyncsteps.AsyncSteps, string) { panic("VIOLATION: a dropped error handler ran") }
	for _, c := range []struct {
		name string
		add  func(as asyncsteps.AsyncSteps)
	}{
		{"a sibling failed", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1") })
			as.Add(never, neverEh)
			as.Repeat(2, func(asyncsteps.AsyncSteps, int) { never(nil) })
		}},
		{"a sibling sub-step failed", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) {})
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("boom") })
				as.Add(never, neverEh)
			})
			as.Add(never)
		}},
		{"a step given up", func(as asyncsteps.AsyncSteps) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, neverEh)
			as.Add(never, neverEh)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := recordCount()
			const flows = 10
			for range flows {
				ctest.Reset()
				root := ctest.TableRoot()
				c.add(Wrap(root))
				ctest.FakeRun(root)
				if strings.Contains(ctest.Trace(), "VIOLATION") {
					t.Fatalf("fake's trace:\n%s", ctest.Trace())
				}
				ctest.FakeFree(root)
			}
			if n := recordCount() - before; n != 0 {
				t.Errorf("%d records left after %d flows, want 0", n, flows)
			}
		})
	}
}

// A foreign flow's state variable keeps only the records still kept: one
// that goes as its function runs leaves it too, so that a long flow (a
// loop that adds a Go step at each iteration) does not make it grow.
func TestForeignFlowKeepsOnlyItsLiveRecords(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	as := Wrap(root)
	ran := 0
	as.Repeat(50, func(as asyncsteps.AsyncSteps, _ int) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) { ran++ }, func(asyncsteps.AsyncSteps, string) {})
	})
	ctest.FakeRun(root)
	if ran != 50 {
		t.Fatalf("%d steps ran, want 50; fake's trace:\n%s", ran, ctest.Trace())
	}
	fv := as.(*foreign).flow()
	frecs.mu.Lock()
	n := len(fv.recs)
	frecs.mu.Unlock()
	if n != 0 {
		t.Errorf("the flow keeps %d records, want 0", n)
	}
}

// A Go step on a foreign table that sets a cancel handler and then fails
// (Error, a misuse, a panic, Break in a loop) has its Go cancel handler
// run when the table runs the failing step's cancel handler, as the C++
// reference implementation does (after the callback, before the error
// handler), and as the engine's rule is (the failing step's own cancel
// handler runs). Before, Error and a misuse dropped the handler's record
// before handle_error: the table found nothing to run, while a panic's
// kept it. A Success drops it: no cancel handler runs after it. On a
// table that never runs it, the record goes with the flow.
func TestForeignFailingStepRunsItsGoCancelHandler(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(as asyncsteps.AsyncSteps)
		want []string
	}{
		{"Error", func(as asyncsteps.AsyncSteps) { as.Error("E1") },
			[]string{"cancel handler", "error handler E1", "next step"}},
		{"misuse", func(as asyncsteps.AsyncSteps) { as.Add(nil) },
			[]string{"cancel handler", "error handler InternalError", "next step"}},
		{"panic", func(asyncsteps.AsyncSteps) { panic("boom") },
			[]string{"cancel handler", "error handler InternalError", "next step"}},
		{"Success", func(as asyncsteps.AsyncSteps) { as.Success() },
			[]string{"next step"}},
	} {
		for _, runs := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/table runs it %v", c.name, runs), func(t *testing.T) {
				var trace []string
				log := func(s string) { trace = append(trace, s) }
				ctest.Reset()
				root := ctest.TableRoot()
				if runs {
					ctest.CancelOnError(root)
				}
				before := recordCount()
				as := Wrap(root)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) { log("cancel handler") })
					c.fail(as)
				}, func(as asyncsteps.AsyncSteps, code string) {
					log("error handler " + code)
					as.Success()
				})
				as.Add(func(asyncsteps.AsyncSteps, ...any) { log("next step") })
				ctest.FakeRun(root)
				want := c.want
				if !runs && want[0] == "cancel handler" {
					want = want[1:]
				}
				if !reflect.DeepEqual(trace, want) {
					t.Errorf("trace %q, want %q", trace, want)
				}
				if runs {
					if n := recordCount() - before; n != 0 {
						t.Errorf("%d records left after the flow, want 0", n)
					}
				}
				ctest.FakeFree(root)
				if n := recordCount() - before; n != 0 {
					t.Errorf("%d records left after the free, want 0", n)
				}
			})
		}
	}
}

// A Go callback that a foreign table runs belongs to the flow of the
// record it runs from: it finds the flow's state variable there, with no
// stateVariable call, to keep the records of what it adds or sets and to
// read the Go State. Only what adds to the flow outside its callbacks
// (Wrap of the root) calls stateVariable; the first call makes the
// variable. Before, every callback that added a step,
// set a cancel handler (an Await does) or read State made one cgo call
// for it: a loop body that sets a cancel handler and succeeds cost a
// fifth more than before the records joined their flow.
func TestForeignCallbacksFindTheirFlowWithoutStateVariable(t *testing.T) {
	const n = 20
	for _, c := range []struct {
		name string
		body func(as asyncsteps.AsyncSteps, ran *int)
	}{
		{"SetCancel", func(as asyncsteps.AsyncSteps, ran *int) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { panic("VIOLATION: cancel handler") })
			*ran++
			as.Success()
		}},
		{"Add", func(as asyncsteps.AsyncSteps, ran *int) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { *ran++ })
		}},
		{"State", func(as asyncsteps.AsyncSteps, ran *int) {
			*ran++
			as.State().Set("ran", *ran)
		}},
		{"error handler", func(as asyncsteps.AsyncSteps, ran *int) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1") },
				func(as asyncsteps.AsyncSteps, _ string) {
					*ran++
					as.State().Set("ran", *ran)
					as.Success()
				})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			ran := 0
			Wrap(root).Repeat(n, func(as asyncsteps.AsyncSteps, _ int) { c.body(as, &ran) })
			before := ctest.StateVariableCalls() // the Repeat's, the first of which made the variable
			ctest.FakeRun(root)
			if ran != n || strings.Contains(ctest.Trace(), "VIOLATION") {
				t.Fatalf("%d callbacks ran, want %d; fake's trace:\n%s", ran, n, ctest.Trace())
			}
			if got := ctest.StateVariableCalls() - before; got != 0 {
				t.Errorf("%d stateVariable calls in the flow's callbacks, want 0", got)
			}
		})
	}
}

// A loop of a long-lived foreign flow whose iterations keep a record past
// their end does not make the flow grow: what an iteration's step keeps
// for the table (the cancel handler of a step that failed, which a table
// like the C++ reference implementation runs, or the record of a
// sub-step the table dropped unrun after a sibling's failure) goes once
// the table is done with the step: as the step's own error handler
// starts, or as its loop goes on to the next iteration or ends. A table
// that runs the failing step's cancel handler has run it by then (the
// C++ one, before the error handler and before the loop goes on), so the
// Go handler still runs once per iteration there. Before, on a table that
// does not run it, each iteration left its records until the table
// cleaned up the flow's state: 50 iterations, 50 records or more.
func TestForeignLoopOfFailingStepsKeepsNoRecord(t *testing.T) {
	const n = 50
	for _, c := range []struct {
		name    string
		body    func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc)
		cancels int // cancel handlers the table runs per iteration when it runs the failing step's
	}{
		{"SetCancel and Continue", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.SetCancel(cancel)
			as.Continue()
		}, 1},
		{"SetCancel and Break of an inner loop", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.Repeat(2, func(as asyncsteps.AsyncSteps, _ int) {
				as.SetCancel(cancel)
				as.Break()
			})
		}, 1},
		{"SetCancel and Error, handled", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(cancel)
				as.Error("E1")
			}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
		}, 1},
		{"SetCancel and a failing sub-step, handled", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(cancel)
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("E1") })
			}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
		}, 1},
		{"SetCancel and Error under a step, handled above", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(cancel)
					as.Error("E1")
				})
			}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
		}, 1},
		{"SetCancel and a sub-step that continues", func(as asyncsteps.AsyncSteps, cancel asyncsteps.CancelFunc) {
			as.SetCancel(cancel)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Continue() })
		}, 1},
		{"a sub-step that continues before a sibling", func(as asyncsteps.AsyncSteps, _ asyncsteps.CancelFunc) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Continue() })
				as.Add(func(asyncsteps.AsyncSteps, ...any) { panic("VIOLATION: a dropped step ran") })
			})
		}, 0},
	} {
		for _, runs := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/table runs it %v", c.name, runs), func(t *testing.T) {
				ctest.Reset()
				root := ctest.TableRoot()
				if runs {
					ctest.CancelOnError(root)
				}
				defer ctest.FakeFree(root)
				before := recordCount()
				cancels, iterations := 0, 0
				cancel := func(asyncsteps.AsyncSteps) { cancels++ }
				as := Wrap(root)
				as.Repeat(n, func(as asyncsteps.AsyncSteps, _ int) {
					iterations++
					c.body(as, cancel)
				})
				as.Add(func(asyncsteps.AsyncSteps, ...any) {})
				ctest.FakeRun(root)
				if strings.Contains(ctest.Trace(), "VIOLATION") || iterations != n {
					t.Fatalf("%d iterations, want %d; fake's trace:\n%s", iterations, n, ctest.Trace())
				}
				want := 0
				if runs {
					want = n * c.cancels
				}
				if cancels != want {
					t.Errorf("%d cancel handlers ran, want %d", cancels, want)
				}
				if left := recordCount() - before; left != 0 {
					t.Errorf("%d records left after %d iterations, want 0", left, n)
				}
			})
		}
	}
}

// BenchmarkForeignLoopBody measures a Go loop body on a foreign table,
// the callback path the records of a flow's functions are kept on.
func BenchmarkForeignLoopBody(b *testing.B) {
	for _, c := range []struct {
		name string
		body func(as asyncsteps.AsyncSteps)
	}{
		{"implicit success", func(asyncsteps.AsyncSteps) {}},
		{"SetCancel and Success", func(as asyncsteps.AsyncSteps) {
			as.SetCancel(func(asyncsteps.AsyncSteps) {})
			as.Success()
		}},
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(func(asyncsteps.AsyncSteps, ...any) {}) }},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctest.Reset()
			root := ctest.TableRoot()
			defer ctest.FakeFree(root)
			Wrap(root).Repeat(b.N, func(as asyncsteps.AsyncSteps, _ int) { c.body(as) })
			b.ReportAllocs()
			b.ResetTimer()
			ctest.FakeRun(root)
		})
	}
}

// A Go step of a foreign table is over once its own error handler
// starts: the table is done with it (the C++ reference implementation
// frees it as it goes on), so IsValid is false and a Success on it from
// another goroutine (an Await's, one that kept the step) has no effect,
// as after its cancel handler's run. Before, a step that waited with the
// table's own waitExternal (no Go cancel handler to tell its end) was
// valid for the library still, and the Success reached the table.
func TestForeignStepIsOverOnceItsErrorHandlerStarts(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	ctest.TimeOutWaiting(root)
	defer ctest.FakeFree(root)
	var trace []string
	var step asyncsteps.AsyncSteps
	as := Wrap(root)
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		step = as
		as.WaitExternal()
	}, func(as asyncsteps.AsyncSteps, code string) {
		trace = append(trace, fmt.Sprintf("error handler %q, step valid %v", code, step.IsValid()))
		step.Success("late")
		as.Success("handled")
	})
	as.Add(func(_ asyncsteps.AsyncSteps, args ...any) { trace = append(trace, fmt.Sprint("next step ", args[0])) })
	ctest.FakeRun(root)
	want := []string{`error handler "Timeout", step valid false`, "next step handled"}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
	if strings.Contains(ctest.Trace(), "VIOLATION") {
		t.Errorf("fake's trace:\n%s", ctest.Trace())
	}
}

// A record put as the table cleans up its flow's state variables (from
// another thread: a Go call on another goroutine that adds to the flow,
// or sets a cancel handler, as the table destroys the root) is not kept:
// the flow runs nothing more, and nothing would drop the record. The hook
// forces the cleanup between the call's look-up of the flow and its put.
// Before, the record stayed for good, with all it held.
func TestForeignRecordPutAsTheFlowIsReleasedIsNotKept(t *testing.T) {
	ctest.Reset()
	root := ctest.TableRoot()
	defer ctest.FakeFree(root)
	before := recordCount()
	released := 0
	testHookBeforePutRec = func(fv *flowVar) {
		fv.release()
		released++
	}
	defer func() { testHookBeforePutRec = nil }()
	Wrap(root).Add(func(asyncsteps.AsyncSteps, ...any) { panic("VIOLATION: the step of a released flow ran") })
	testHookBeforePutRec = nil
	if released != 1 {
		t.Fatalf("the hook ran %d times, want 1", released)
	}
	if n := recordCount() - before; n != 0 {
		t.Errorf("%d records kept, want 0", n)
	}
	ctest.FakeRun(root) // the table finds nothing to run
	if strings.Contains(ctest.Trace(), "VIOLATION") {
		t.Errorf("fake's trace:\n%s", ctest.Trace())
	}
}

// The library makes an fcall for every Go callback a foreign table runs:
// at 112 bytes it fills its size class of the heap exactly, and a field
// added to it would cost 16 bytes a callback (a flag costs nothing: it is
// a bit of callFlags). With a word for each flag it was 144 bytes.
func TestFcallFitsItsBudget(t *testing.T) {
	if got := unsafe.Sizeof(fcall{}); got > 112 {
		t.Errorf("fcall is %d bytes, want at most 112", got)
	}
}
