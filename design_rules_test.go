package asyncsteps_test

// Tests of rules of docs/DESIGN.md and of the package documentation that no
// other test pinned down: each names the rule it checks.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// docs/DESIGN.md#new-instances: a new instance keeps the unhandled-error
// function of the root it came from, whether made from the Root or from a
// running step.
func TestNewInstanceKeepsTheUnhandledErrorFunction(t *testing.T) {
	var tr tracer
	r, tt := newFlow(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		tr.addf("unhandled:%s:%s", err.Code, err.Info)
	}))
	var fromStep *asyncsteps.Root
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { fromStep = as.NewInstance() })
	fromRoot := r.NewInstance()
	r.Execute()
	drive(t, tt)

	for _, c := range []struct {
		name string
		n    *asyncsteps.Root
	}{{"root", fromRoot}, {"step", fromStep}} {
		c.n.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed", c.name) })
		c.n.Execute()
		drive(t, tt)
	}
	wantTrace(t, &tr, "unhandled:Failed:root,unhandled:Failed:step")
}

// docs/DESIGN.md#virtual-time: the clock never goes back; Advance with a
// negative duration is Advance(0): it runs the immediates and the deferred
// callbacks already due, and nothing later.
func TestTestToolNegativeAdvanceIsAdvanceZero(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	tt.Advance(time.Second)
	tt.Deferred(time.Nanosecond, func() { tr.add("later") })
	tt.Deferred(0, func() { tr.add("due") })
	tt.Immediate(func() { tr.add("immediate") })

	tt.Advance(-time.Minute)

	wantTrace(t, &tr, "immediate,due")
	if got := tt.Now().Sub(asyncsteps.TestToolEpoch); got != time.Second {
		t.Errorf("clock at %v after a negative Advance, want 1s", got)
	}
	if n := tt.Pending(); n != 1 {
		t.Errorf("%d events pending, want the later callback", n)
	}
}

// docs/DESIGN.md#locks-and-limits: a Throttle reads time from the tool of
// the flow that enters it. A period opened by a flow on one tool ends on
// that tool's clock only, however far another tool's clock moves; the flow
// of the other tool that the period's end lets in opens the next period on
// its own tool.
func TestThrottlePeriodIsTimedOnTheToolOfTheFlowThatOpensIt(t *testing.T) {
	var tr tracer
	th := asyncsteps.NewThrottle(1, 100*time.Millisecond)
	one, two := asyncsteps.NewTestTool(), asyncsteps.NewTestTool()
	enter := func(tt *asyncsteps.TestTool, name string) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("%s@%v", name, tt.Now().Sub(asyncsteps.TestToolEpoch))
		})
		r.Execute()
	}
	enter(one, "a")
	one.Advance(0) // a opens a period timed on one
	enter(two, "b")
	enter(two, "c")
	two.Advance(time.Second) // two's clock does not end one's period
	wantTrace(t, &tr, "a@0s")

	one.Advance(100 * time.Millisecond) // the period ends: b enters
	two.Advance(0)
	wantTrace(t, &tr, "a@0s,b@1s")
	if n := one.Pending(); n != 0 {
		t.Errorf("%d events left on the first tool: the next period is timed there", n)
	}
	two.Advance(99 * time.Millisecond)
	wantTrace(t, &tr, "a@0s,b@1s")
	two.Advance(time.Millisecond) // b's period, timed on two, ends: c enters
	wantTrace(t, &tr, "a@0s,b@1s,c@1.1s")
	two.Advance(time.Second)
	syncWantIdle(t, one)
	syncWantIdle(t, two)
}

// docs/DESIGN.md#loop-order: a flow runs at most 256 steps in a row, so that
// the loop counts it as a callback every 256 steps and looks at its due
// timers after at most 256 callbacks: a timer due at once, armed by a flow
// that never waits, runs after 256 × 256 of its steps, not after its end.
func TestTimerDueDuringALongFlowRunsAfter256TimesItsBurst(t *testing.T) {
	const burst, batch = 256, 256
	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	steps, firedAt, seen := 0, -1, -1
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		loop.Deferred(0, func() { firedAt = steps })
	})
	for range 2 * burst * batch {
		r.Add(func(asyncsteps.AsyncSteps, ...any) { steps++ })
	}
	r.Add(func(asyncsteps.AsyncSteps, ...any) { seen = firedAt }) // -1 if not yet
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The step that arms the timer is the first of the 256 × 256.
	if want := burst*batch - 1; seen != want {
		t.Errorf("the timer ran after %d steps, want %d", seen, want)
	}
}

// docs/DESIGN.md#cancel-handlers: a panic in a cancel handler does not stop
// the cancelling of the other levels: under Root.Cancel, every level's
// cancel handler runs once, innermost first, the flow ends cancelled and
// the panic is in LastException.
func TestPanicInACancelHandlerCancelsTheOtherLevels(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("c0"))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("c1"); panic("in c1") })
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("c2"))
			}, tr.handler("e2"))
		}, tr.handler("e1"))
	}, tr.handler("e0"))
	ch := r.Promise()
	drive(t, tt)
	r.Cancel()
	drive(t, tt)

	res := result(t, ch)
	wantTrace(t, &tr, "c2,c1,c0")
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
	}
	var p *asyncsteps.PanicError
	if !errors.As(r.State().LastException, &p) || p.Value != "in c1" {
		t.Errorf("LastException = %v, want the panic of c1", r.State().LastException)
	}
}

// docs/DESIGN.md#cancel-handlers and #timeouts: when a timeout cancels the
// sub-steps, a panic in one of their cancel handlers does not stop the
// others, nor replace the Timeout, which the step's error handler sees
// (with the Timeout in LastException); a panic in the step's own cancel
// handler, which the Timeout unwinds through, replaces it (with the panic
// in LastException).
func TestPanicInACancelHandlerUnderATimeout(t *testing.T) {
	for _, c := range []struct {
		panics, trace, code, info, last string
	}{
		{"c1", "c2,c1,c0,e0:Timeout:", asyncsteps.Timeout, "", "Timeout"},
		{"c0", "c2,c1,c0,e0:InternalError:in c0", asyncsteps.InternalError, "in c0", "panic: in c0"},
	} {
		t.Run("panic in "+c.panics, func(t *testing.T) {
			var tr tracer
			cancel := func(name string) asyncsteps.CancelFunc {
				return func(asyncsteps.AsyncSteps) {
					tr.add(name)
					if name == c.panics {
						panic("in " + name)
					}
				}
			}
			var last error
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.SetCancel(cancel("c0"))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(cancel("c1"))
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetCancel(cancel("c2"))
					}, tr.handler("e2"))
				}, tr.handler("e1"))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("e0:%s:%s", code, as.State().ErrorInfo)
				last = as.State().LastException
			})

			res := run(t, r, tt)

			wantTrace(t, &tr, c.trace)
			wantError(t, res.Err, c.code, c.info)
			if last == nil || last.Error() != c.last {
				t.Errorf("LastException = %v, want %s", last, c.last)
			}
		})
	}
}

// docs/DESIGN.md#stale-steps: while its callback runs, a step has not
// completed, even after its own Success: an Error that another goroutine
// makes then, on a step that does not wait, fails the step with the
// InternalError of a call from another goroutine, and the Success is lost.
func TestForeignErrorAfterTheCallbacksOwnSuccess(t *testing.T) {
	onForeignTools(t, func(t *testing.T, r *asyncsteps.Root, tr *tracer, run func() asyncsteps.Result) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("mine")
			done := make(chan struct{})
			go func() {
				defer close(done)
				as.Error("Boom", "from another goroutine")
				tr.add("call returned")
			}()
			<-done
			tr.add("callback returns")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("handler:" + code)
		})
		r.Add(tr.stepArgs("next"))
		wantError(t, run().Err, asyncsteps.InternalError, foreignInfo("Error(Boom)"))
		wantTrace(t, tr, "call returned,callback returns,handler:InternalError")
	})
}

// docs/DESIGN.md#foreach-collections: the keys of a map whose key type is
// not ordered are visited in the order of their printed form, so that runs
// are reproducible.
func TestForEachVisitsUnorderedKeysByTheirPrintedForm(t *testing.T) {
	type point struct{ X, Y int }
	var tr tracer
	r, tt := newFlow()
	r.ForEach(map[point]int{{5, 5}: 1, {10, 0}: 2, {1, 2}: 3, {0, 0}: 4}, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v=%v", k, v)
	})
	r.ForEach(map[any]int{"b": 1, 10: 2, 9: 3, "a": 4}, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v=%v", k, v)
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "{0 0}=4,{1 2}=3,{10 0}=2,{5 5}=1,10=2,9=3,a=4,b=1")
}

// docs/DESIGN.md#foreach-collections: distinct keys that order alike,
// NaN keys or keys of an interface type that print alike, are visited in
// one order on every run (by their type, their Go syntax, then their
// values'), not in the order the map happened to give them. Each map is
// made afresh, so that its random iteration order has many chances to
// show.
func TestForEachVisitsKeysThatOrderAlikeInOneOrder(t *testing.T) {
	for n := range 50 {
		nan := map[float64]string{1: "one"}
		for _, v := range []string{"c", "a", "d", "b"} {
			nan[math.NaN()] = v
		}
		mixed := map[any]string{1: "int", "1": "string", 1.0: "float", int8(1): "int8"}
		var tr tracer
		r, tt := newFlow()
		each := func(as asyncsteps.AsyncSteps, k, v any) { tr.addf("%v", v) }
		r.ForEach(nan, each).ForEach(mixed, each)
		wantSuccess(t, run(t, r, tt))
		if got, want := tr.String(), "a,b,c,d,one,float,int,int8,string"; got != want {
			t.Fatalf("run %d: visited %s, want %s", n, got, want)
		}
	}
}

// docs/DESIGN.md#virtual-time: virtual time does not wait for other
// goroutines. Root.Run on a TestTool waits for a completion from another
// goroutine while no timer is scheduled; with a timeout armed, the clock
// moves to it at once and the timeout wins, however soon the goroutine
// would have completed the step.
func TestVirtualTimeDoesNotWaitForGoroutines(t *testing.T) {
	completeFrom := func(as asyncsteps.AsyncSteps, release <-chan struct{}) {
		go func() {
			<-release
			as.Success("from the goroutine")
		}()
	}
	t.Run("no timer", func(t *testing.T) {
		r, tt := newFlow()
		release := make(chan struct{})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			completeFrom(as, release)
			close(release) // the callback still runs: the tool is idle after it
		})
		args, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wantArgs(t, "Run", args, "from the goroutine")
		if moved := tt.Now().Sub(asyncsteps.TestToolEpoch); moved != 0 {
			t.Errorf("the clock moved by %v", moved)
		}
	})
	t.Run("a timeout armed", func(t *testing.T) {
		r, tt := newFlow()
		release := make(chan struct{})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			completeFrom(as, release)
		})
		_, err := r.Run(context.Background())
		close(release) // too late: the flow has ended
		wantError(t, err, asyncsteps.Timeout, "")
		if moved := tt.Now().Sub(asyncsteps.TestToolEpoch); moved != time.Hour {
			t.Errorf("the clock moved by %v, want the timeout's hour", moved)
		}
	})
}

// docs/DESIGN.md#foreach-collections: a slice is read in place, keyed by
// index over the length it had when the loop started: a body that changes
// a later element is seen by the later iteration, one that appends is not.
// A map is collected in full when the loop starts: changes made by a body
// are not seen.
func TestForEachReadsASliceInPlaceAndAMapAtTheStart(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	s := []string{"a", "b", "c"}
	r.ForEach(s, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v=%v", k, v)
		if k == 0 {
			s[1] = "changed"
			s = append(s, "appended")
		}
	})
	m := map[string]int{"a": 1, "b": 2}
	r.ForEach(m, func(as asyncsteps.AsyncSteps, k, v any) {
		tr.addf("%v=%v", k, v)
		delete(m, "b")
		m["c"] = 3
	})

	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "0=a,1=changed,2=c,a=1,b=2")
}

// The zero values of Mutex and Throttle are, as their documentation says,
// NewMutex(1) and NewThrottle(1, time.Second), each with an unlimited
// queue: one flow at a time inside, one entry per second.
func TestZeroMutexAndThrottleAreTheirDefaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		obj     asyncsteps.Syncer
		entered string
		most    int
	}{
		{"Mutex", &asyncsteps.Mutex{}, "[0s 10ms 20ms 30ms]", 1},
		{"KeyedMutex", (&asyncsteps.KeyedMutex[string]{}).Key("a"), "[0s 10ms 20ms 30ms]", 1},
		{"Throttle", &asyncsteps.Throttle{}, "[0s 1s 2s 3s]", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			crowd := newSyncCrowd(tt, c.obj)
			crowd.start(4, syncHoldFor(10*time.Millisecond))
			drive(t, tt)
			crowd.wantCounts(t, "the end", 4, 0)
			if got := fmt.Sprint(crowd.entered); got != c.entered {
				t.Errorf("entered at %s, want %s", got, c.entered)
			}
			if crowd.maxInside != c.most {
				t.Errorf("%d flows inside at once, want %d", crowd.maxInside, c.most)
			}
			syncWantIdle(t, tt)
		})
	}
}

// The zero Option changes nothing: alone it leaves New's defaults, and
// after other options it undoes none of them.
func TestZeroOptionChangesNothing(t *testing.T) {
	if asyncsteps.New(asyncsteps.Option{}).Tool() != asyncsteps.DefaultTool() {
		t.Error("the zero Option changed the tool")
	}
	var reported []string
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		reported = append(reported, err.Code)
	}), asyncsteps.Option{})
	if r.Tool() != asyncsteps.Tool(tt) {
		t.Error("the zero Option undid WithTool")
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
	r.Execute()
	drive(t, tt)
	if fmt.Sprint(reported) != "[Failed]" {
		t.Errorf("reported %v, want [Failed]: the zero Option undid WithUnhandledError", reported)
	}
}

// Then and Run[T] read no args as the zero T, so that an error handler may
// recover with a plain Success(); Run[T] fails a result of another type
// with InternalError, naming both types.
func TestTypedHelpersReadNoArgsAsTheZeroValue(t *testing.T) {
	var tr tracer
	r, _ := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") },
		func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
	asyncsteps.Then(r, func(as asyncsteps.AsyncSteps, n int) { tr.addf("then:%d", n) })
	s, err := asyncsteps.Run[string](context.Background(), r)
	if err != nil || s != "" {
		t.Errorf("Run[string] = %q, %v; want \"\", nil", s, err)
	}
	wantTrace(t, &tr, "then:0")

	r, _ = newFlow()
	r.SuccessStep(3.5)
	n, err := asyncsteps.Run[int](context.Background(), r)
	if n != 0 {
		t.Errorf("Run[int] gave %d with its error", n)
	}
	wantError(t, err, asyncsteps.InternalError, "Run: the flow's result is float64, want int")
}

// docs/DESIGN.md#execute-only-schedules, for the start methods that
// TestExecuteOnlySchedules leaves out: ExecuteWith runs nothing until the
// tool is driven, and Run on a Loop runs the flow's steps on the loop's
// goroutine, never on its caller's.
func TestExecuteWithAndRunOnlySchedule(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(tr.step("1"))
	r.ExecuteWith(func(*asyncsteps.Error) { t.Error("the flow failed") })
	wantTrace(t, &tr, "")
	drive(t, tt)
	wantTrace(t, &tr, "1")

	loop := asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	onLoop := asyncsteps.New(asyncsteps.WithTool(loop))
	onLoop.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(loop.IsSameThread()) })
	args, err := onLoop.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantArgs(t, "Run", args, true)
}

// docs/DESIGN.md#loop-order: on a Tool of another package a flow yields
// after every step, even with nothing else to run: each step is a callback
// of the tool of its own.
func TestFlowOnAForeignToolYieldsAfterEveryStep(t *testing.T) {
	tool := &manualTool{}
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	for range 3 {
		r.Add(func(asyncsteps.AsyncSteps, ...any) { tr.addf("queued:%d", len(tool.queue)) })
	}
	r.Add(func(asyncsteps.AsyncSteps, ...any) {
		tool.Immediate(func() { tr.add("callback") })
	})
	r.Add(tr.step("last"))
	r.Execute()
	for n := 0; len(tool.queue) > 0; n++ {
		if n > 100 {
			t.Fatal("the flow never ends")
		}
		c := tool.queue[0]
		tool.queue = tool.queue[1:]
		tr.add("|")
		c.fire()
	}
	// Each step runs in a callback of its own ("|"), with nothing else
	// queued; the callback queued by the fourth step runs before the last.
	wantTrace(t, &tr, "|,queued:0,|,queued:0,|,queued:0,|,|,callback,|,last,|")
}

// docs/DESIGN.md#panics-and-misuse: Success on a Root, called from a step
// of that Root's running flow, does not affect that execution: it is
// recorded, and the next execution fails with it before any step runs.
func TestRootSuccessFromItsOwnFlowFailsTheNextExecution(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		r.Success(1)
		tr.add("s1 goes on")
	}, tr.handler("h1"))
	r.Add(tr.step("s2"))
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "s1 goes on,s2")

	r.Add(tr.step("s3"))
	wantError(t, run(t, r, tt).Err, asyncsteps.InternalError,
		"Success called on a Root: it is valid only inside a step")
	wantTrace(t, &tr, "s1 goes on,s2")
}

// docs/DESIGN.md#error-info-and-last-exception: a panic in a step is an
// InternalError whose info, in ErrorInfo, is the printed panic value, and
// whose LastException is a *PanicError holding the value.
func TestPanicInfoIsThePrintedValue(t *testing.T) {
	for _, value := range []any{"boom", 42, errors.New("failed")} {
		var info string
		var last error
		r, tt := newFlow()
		r.Add(func(asyncsteps.AsyncSteps, ...any) { panic(value) },
			func(as asyncsteps.AsyncSteps, code string) {
				info, last = as.State().ErrorInfo, as.State().LastException
			})
		wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, fmt.Sprint(value))
		var p *asyncsteps.PanicError
		if info != fmt.Sprint(value) || !errors.As(last, &p) || p.Value != value {
			t.Errorf("panic(%v): ErrorInfo %q, LastException %#v", value, info, last)
		}
	}
}

// LoopGroup.Close, called from a callback on one of the group's loops,
// does not wait for the loops' goroutines to exit (it would wait for its
// own): it returns, the step that called it is the last its flow runs, and
// every loop of the group is closed. In a child process: a Close that
// waited would hang.
func TestLoopGroupCloseFromItsOwnLoop(t *testing.T) {
	inChildFor(t, 20*time.Second, func(t *testing.T) {
		g := asyncsteps.NewLoopGroup(2)
		returned := make(chan struct{})
		r := g.New()
		r.Add(func(asyncsteps.AsyncSteps, ...any) {
			g.Close()
			close(returned)
		})
		r.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("a step ran after Close") })
		res := r.Promise()
		<-returned
		wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		for i, l := range g.Loops() {
			if h := l.Immediate(func() {}); h.IsValid() {
				t.Errorf("loop %d still accepts callbacks", i)
			}
		}
	})
}
