//go:build cgo

// Command golib is a C shared library of Go steps for the interop check
// with the FutoIn C++ reference implementation (scripts/cpp-interop.sh):
// each case adds Go steps, through [cabi.Wrap], to a root of the C++
// implementation, and then checks what they saw. It is not part of the
// library.
//
//	go build -buildmode=c-shared -o libinterop_go.so ./cabi/interop/golib
package main

/*
#include <stdlib.h>
#include "../../futoin_asyncsteps.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/cabi"
)

func main() {}

type trace struct {
	mu    sync.Mutex
	lines []string
}

func (t *trace) log(f string, args ...any) {
	t.mu.Lock()
	t.lines = append(t.lines, fmt.Sprintf(f, args...))
	t.mu.Unlock()
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "|")
}

type goCase struct {
	name string
	add  func(as asyncsteps.AsyncSteps, t *trace)
	want string
}

// first logs the values the C++ step before the Go steps succeeded with.
func first(t *trace, args []any) {
	if len(args) >= 2 {
		t.log("in %v %v", args[0], args[1])
	} else {
		t.log("in %v", args)
	}
}

var cases = []goCase{
	{"success_args", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			first(t, args)
			as.Success(int32(5), "x")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("got %v %v", args[0], args[1]) })
	}, "in from c++ 42|got 5 x"},
	{"implicit_success", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("one") })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("two") })
	}, "one|two"},
	{"nested", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			t.log("outer")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("inner1") })
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("inner2"); as.Success("up") })
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("next %v", args[0]) })
	}, "outer|inner1|inner2|next up"},
	{"error_info", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("MyError", "my info") })
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s %s", code, as.State().ErrorInfo)
			as.Success("recovered")
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("%v", args[0]) })
	}, "eh MyError my info|recovered"},
	{"error_unhandled", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") },
			func(as asyncsteps.AsyncSteps, code string) { t.log("eh %s", code) })
	}, "eh Boom|unhandled Boom"},
	{"state", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.State().Set("k", 41) })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("k %v", as.State().Get("k").(int)+1) })
	}, "k 42"},
	{"repeat_label_break", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Repeat(5, func(as asyncsteps.AsyncSteps, i int) {
			t.log("i %d", i)
			if i == 2 {
				as.Break(strings.ToUpper("lbl"))
			}
		}, strings.ToUpper("lbl"))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("after") })
	}, "i 0|i 1|i 2|after"},
	{"loop_continue_break", func(as asyncsteps.AsyncSteps, t *trace) {
		n := 0
		as.Loop(func(as asyncsteps.AsyncSteps) {
			n++
			t.log("n %d", n)
			if n < 3 {
				as.Continue()
			}
			as.Break()
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("after") })
	}, "n 1|n 2|n 3|after"},
	{"foreach", func(as asyncsteps.AsyncSteps, t *trace) {
		as.ForEach([]string{"a", "b"}, func(as asyncsteps.AsyncSteps, k, v any) { t.log("%v=%v", k, v) })
	}, "0=a|1=b"},
	{"parallel", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			p := as.Parallel()
			for i := range 3 {
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("branch %d", i) })
			}
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("after") })
	}, "branch 0|branch 1|branch 2|after"},
	{"timeout", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { t.log("cancel") })
			as.SetTimeout(150 * time.Millisecond) // the RI's AsyncTool refuses under 100 ms
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
	}, "cancel|eh Timeout"},
	{"success_from_goroutine", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			go func() {
				time.Sleep(5 * time.Millisecond)
				as.Success(int32(7))
			}()
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("got %v", args[0]) })
	}, "got 7"},
	{"await", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Await(func(ctx context.Context) (any, error) { return int32(9), nil })
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("awaited %v", args[0]) })
	}, "awaited 9"},
	// A Go step timed out: once the RI has run its cancel handler, an
	// Error from another goroutine (an Await's, its context cancelled)
	// has no effect; the RI has ended the step, and aborted on it.
	{"await_after_timeout", func(as asyncsteps.AsyncSteps, t *trace) {
		late := make(chan struct{})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			cancelled := make(chan struct{})
			as.SetCancel(func(asyncsteps.AsyncSteps) { close(cancelled) })
			as.SetTimeout(150 * time.Millisecond) // the RI's AsyncTool refuses under 100 ms
			go func() {
				<-cancelled
				as.Error("Late")
				close(late)
			}()
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			go func() {
				<-late
				t.log("late error returned")
				as.Success()
			}()
		})
	}, "eh Timeout|late error returned"},
	{"await_error", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Await(func(ctx context.Context) (any, error) {
			return nil, &asyncsteps.Error{Code: asyncsteps.NotImplemented, Info: "later"}
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
	}, "eh NotImplemented"},
	{"mutex", func(as asyncsteps.AsyncSteps, t *trace) {
		m := asyncsteps.NewMutex(1)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			p := as.Parallel()
			for i := range 2 {
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
						t.log("enter %d", i)
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("leave %d", i) })
					})
				})
			}
		})
	}, "enter 0|leave 0|enter 1|leave 1"},
	{"success_after_add", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(asyncsteps.AsyncSteps, ...any) { t.log("VIOLATION") })
			as.Success()
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
	}, "eh InternalError"},
	{"panic", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("oops") },
			func(as asyncsteps.AsyncSteps, code string) {
				t.log("eh %s", code)
				as.Success()
			})
	}, "eh InternalError"},
	// The RI runs the cancel handler of a failing step before its error
	// handler: a Go step's too.
	{"cancel_on_error", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { t.log("cancel") })
			as.Error("E1")
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
	}, "cancel|eh E1"},
	// A Go step's Tool works while the step runs, under its sub-steps
	// too, and in its cancel handler, which cancels a timer of the step's
	// through the RI (its sched_cancel) before the RI frees the step.
	{"tool_in_step", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tool := as.Tool()
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				tool.Immediate(func() { t.log("immediate"); as.Success() })
			})
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			h := as.Tool().Deferred(time.Hour, func() { t.log("VIOLATION: a cancelled timer ran") })
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				h.Cancel()
				t.log("cancel valid %v", h.IsValid())
			})
			as.SetTimeout(150 * time.Millisecond) // the RI's AsyncTool refuses under 100 ms
		}, func(as asyncsteps.AsyncSteps, code string) {
			t.log("eh %s", code)
			as.Success()
		})
	}, "immediate|cancel valid false|eh Timeout"},
	// A Go Root that NewInstance makes on a Go step runs on the RI's
	// tool while the step waits for it.
	{"new_instance", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			r := as.NewInstance()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("inner"); as.Success(int32(3)) })
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) { as.Success(args[0].(int32) + 1) })
			as.WaitExternal()
			res := r.Promise()
			go func() { as.Success((<-res).Args...) }()
		})
		as.Add(func(as asyncsteps.AsyncSteps, args ...any) { t.log("got %v", args[0]) })
	}, "inner|got 4"},
	// A Throttle shared by Parallel branches of the RI: each period is
	// timed on the tool of the branch that opens it, its timer run by the
	// RI after that branch's steps are over.
	{"throttle", func(as asyncsteps.AsyncSteps, t *trace) {
		th := asyncsteps.NewThrottle(1, 120*time.Millisecond)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			p := as.Parallel()
			for i := range 3 {
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) { t.log("enter %d", i) })
				})
			}
		})
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.log("after") })
	}, "enter 0|enter 1|enter 2|after"},
	// The Go step after a failed one never runs: what its function holds
	// is let go once the RI has destroyed the root (and with it the
	// flow's state variables).
	{"dropped_step_released", func(as asyncsteps.AsyncSteps, t *trace) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
		held := new([64]byte)
		runtime.AddCleanup(held, func(t *trace) { t.log("released") }, t)
		as.Add(func(asyncsteps.AsyncSteps, ...any) { t.log("VIOLATION %d", held[0]) })
	}, "unhandled Boom|released"},
}

// before runs, by case name, before interop_go_check looks at the trace,
// once the RI's root is destroyed.
var before = map[string]func(t *trace){"dropped_step_released": waitReleased}

// waitReleased collects garbage until the cleanup of the case has logged
// "released", for up to 5 s.
func waitReleased(t *trace) {
	for range 100 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
		if strings.HasSuffix(t.String(), "released") {
			return
		}
	}
}

var traces = make([]trace, len(cases))

//export interop_go_cases
func interop_go_cases() C.int { return C.int(len(cases)) }

//export interop_go_case_name
func interop_go_case_name(i C.int) *C.char { return C.CString(cases[i].name) } // the caller frees it

// interop_go_add adds case i's Go steps to the foreign root bsi.
//
//export interop_go_add
func interop_go_add(i C.int, bsi *C.FutoInAsyncSteps) {
	cases[i].add(cabi.Wrap(unsafe.Pointer(bsi)), &traces[i])
}

// interop_go_unhandled records the code that ended case i's flow.
//
//export interop_go_unhandled
func interop_go_unhandled(i C.int, code *C.char) {
	traces[i].log("unhandled %s", C.GoString(code))
}

// interop_go_check returns NULL when case i saw what it should, else what
// it saw (the caller frees it).
//
//export interop_go_check
func interop_go_check(i C.int) *C.char {
	if f := before[cases[i].name]; f != nil {
		f(&traces[i])
	}
	got := traces[i].String()
	if got == cases[i].want || (cases[i].name == "parallel" && sameLines(got, cases[i].want)) {
		return nil
	}
	return C.CString(fmt.Sprintf("trace %q, want %q", got, cases[i].want))
}

// sameLines compares traces whose order the spec leaves open.
func sameLines(a, b string) bool {
	x, y := strings.Split(a, "|"), strings.Split(b, "|")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
