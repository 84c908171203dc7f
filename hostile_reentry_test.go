package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// flippedDeadline is a context whose deadline passes when the test says
// so: Run's deadline without the wall clock.
type flippedDeadline struct {
	context.Context
	passed atomic.Bool
}

func (c *flippedDeadline) Deadline() (time.Time, bool) { return asyncsteps.TestToolEpoch, true }

func (c *flippedDeadline) Err() error {
	if c.passed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// The tasks that time a flow out at Run's deadline are the flow's own
// events too: a step that drives its TestTool (a misuse) must not run them
// inside itself, where they would unwind the flow under the step's feet.
// They wait until the step returns; the step fails with the InternalError
// of the misuse, as for its other events.
func TestHostileTestToolDrivenPastRunsDeadline(t *testing.T) {
	const info = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer)
		trace string
	}{
		{"the timeout of the running step", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				ctx.passed.Store(true)
				tt.Immediate(func() {}) // the flow yields: Run sees the deadline before B
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B")
				tt.NextEvent() // the only event queued: the deadline's
				tr.add("B returns")
			})
		}, "B,B returns"},
		{"the timeout of a step that waits after the deadline", func(r *asyncsteps.Root, tt *asyncsteps.TestTool, ctx *flippedDeadline, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					ctx.passed.Store(true)
					as.SetTimeout(time.Hour) // waits: Run's deadline times it out
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("recovered " + code)
				as.Success()
			})
			p := r.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B waits")
				as.WaitExternal() // past the deadline: its timeout is queued
			})
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("C")
				tt.NextEvent() // the only event queued: B's timeout
				tr.add("C returns")
			})
		}, "recovered Timeout,B waits,C,C returns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				ctx := &flippedDeadline{Context: context.Background()}
				var tr tracer
				c.build(r, tt, ctx, &tr)
				_, err := r.Run(ctx)
				wantError(t, err, asyncsteps.InternalError, info)
				wantTrace(t, &tr, c.trace)
			})
		})
	}
}

// A StepError hook that drives its TestTool into its own flow (a misuse)
// runs none of the flow's events inside itself: they wait until the hook
// returns, and the error it was told of unwinds as if the hook had
// returned at once. Before, a step timeout that the hook's Advance
// reached ran under it: it timed out the step around the error, whose
// unwinding then went on from frames that timeout had recycled, a nil
// dereference that the tool logged.
func TestHostileStepErrorHookDrivesItsTestTool(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
			tr.addf("steperror %s", err.Code)
			tt.Advance(time.Second)
		}})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Millisecond)
			as.SetCancel(tr.cancel("outer cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("inner cancel"))
				as.Tool().Deferred(5*time.Millisecond, func() { as.Error("E") })
			}, tr.handler("inner onerror"))
		}, tr.handler("outer onerror"))
		r.Add(tr.step("not reached"))
		wantError(t, run(t, r, tt).Err, "E", "")
		wantTrace(t, &tr, "steperror E,inner cancel,inner onerror:E,outer cancel,outer onerror:E")
		syncWantIdle(t, tt)
	})
}

// reentryInfo is the info of the InternalError of a callback, or of a
// hook run as one, that drove its TestTool into its own flow.
const reentryInfo = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"

// A FlowStart hook that drives its TestTool into its own flow (a misuse)
// runs none of the flow's events inside itself: they wait until the hook
// returns, and the start fails with the InternalError of the misuse, as
// after a panic of the hook, but with the context the hook returned. A
// cancel requested before wins over that error, as over a panic's: the
// flow ends cancelled. Before, the cancel ran inside the hook, which saw
// the flow end (FlowEnd, with Run's context, not the one it was about to
// return) before it had begun. A hook that drives the tool while its
// flow has no event queued runs the other flows' events: no misuse. A
// hook that drives the tool, then panics or calls runtime.Goexit, fails
// the start with its fault, as without the drive.
func TestHostileFlowStartHookDrivesItsTestTool(t *testing.T) {
	nothing := func(*asyncsteps.Root, *asyncsteps.TestTool, *tracer) {}
	cases := []struct {
		name   string
		before func(r *asyncsteps.Root, tt *asyncsteps.TestTool, tr *tracer) // before the hook drives the tool
		then   func()                                                        // after it
		err    string
		info   string // of the State's error, if the flow fails
		trace  string
	}{
		{"a cancel requested before the start", nothing, func() {}, "context canceled", reentryInfo,
			"flowstart,flowstart returns,steperror InternalError,flowend(span) context canceled"},
		{"a cancel the hook requests", func(r *asyncsteps.Root, _ *asyncsteps.TestTool, _ *tracer) { r.Cancel() }, func() {},
			"context canceled", reentryInfo, "flowstart,flowstart returns,steperror InternalError,flowend(span) context canceled"},
		{"another flow's event", func(_ *asyncsteps.Root, tt *asyncsteps.TestTool, tr *tracer) {
			tt.Immediate(func() { tr.add("other") })
		}, func() {}, "<nil>", "", "flowstart,other,flowstart returns,A,flowend(span) <nil>"},
		{"a cancel requested before the start, then a panic", nothing, func() { panic("hook") }, "context canceled", "hook",
			"flowstart,steperror InternalError,flowend(<nil>) context canceled"},
		{"a cancel requested before the start, then runtime.Goexit", nothing, runtime.Goexit, "context canceled", goexitInfo,
			"flowstart,steperror InternalError,flowend(<nil>) context canceled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				var tr tracer
				r, tt := newFlow()
				tt.SetHooks(&asyncsteps.Hooks{
					FlowStart: func(ctx context.Context) context.Context {
						tr.add("flowstart")
						c.before(r, tt, &tr)
						tt.Run()
						c.then()
						tr.add("flowstart returns")
						return context.WithValue(ctx, flowCtxKey{}, "span")
					},
					StepError: func(_ context.Context, err *asyncsteps.Error) { tr.addf("steperror %s", err.Code) },
					FlowEnd: func(ctx context.Context, err error) {
						tr.addf("flowend(%v) %v", ctx.Value(flowCtxKey{}), err)
					},
				})
				r.Add(tr.step("A"))
				ch := r.Promise()
				if strings.HasPrefix(c.name, "a cancel requested before the start") {
					r.Cancel()
				}
				driveDying(t, tt)
				res := result(t, ch)
				if got := fmt.Sprint(res.Err); got != c.err {
					t.Errorf("Result.Err = %s, want %s", got, c.err)
				}
				if st := r.State(); st.ErrorInfo != c.info {
					t.Errorf("ErrorInfo = %q, want %q", st.ErrorInfo, c.info)
				}
				wantTrace(t, &tr, c.trace)
				syncWantIdle(t, tt)
			})
		})
	}
}

// A SyncWait hook that drives its TestTool into its own flow (a misuse)
// runs none of the flow's events inside itself: they wait until the hook
// returns, and the step let in fails with the InternalError of the
// misuse, as after a panic of the hook; its slot comes back as the flow
// unwinds, and the next waiter enters. Before, the flow went on inside
// the hook: a timeout that the hook's Advance reached timed the waiting
// step out and ended its flow (FlowEnd included) before the hook
// returned, or a sibling branch of a Parallel went on. A hook that drives
// the tool while its flow has no event queued runs the other flows'
// events (A's): no misuse. A hook that drives the tool, then panics or
// calls runtime.Goexit, fails the step with its fault, as without the
// drive.
func TestHostileSyncWaitHookDrivesItsTestTool(t *testing.T) {
	cases := []struct {
		name  string
		flow  func(b *asyncsteps.Root, tt *asyncsteps.TestTool, m *asyncsteps.Mutex, tr *tracer)
		err   string
		trace string
	}{
		{"a timeout around the waiting step", func(b *asyncsteps.Root, _ *asyncsteps.TestTool, m *asyncsteps.Mutex, tr *tracer) {
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Millisecond)
				m.Sync(as, tr.step("B in"))
			}, tr.handler("B onerror"))
		}, reentryInfo, "A in,A leaves,syncwait B 5ms,A ends,flowend A <nil>,syncwait returns," +
			"steperror B InternalError,B onerror:InternalError,flowend B InternalError,syncwait C 1.005s,C in,flowend C <nil>"},
		{"a sibling branch", func(b *asyncsteps.Root, tt *asyncsteps.TestTool, m *asyncsteps.Mutex, tr *tracer) {
			p := b.Parallel(tr.handler("B onerror"))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { m.Sync(as, tr.step("B in")) })
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("B2 cancel"))
					as.WaitExternal()
					tt.Deferred(7*time.Millisecond, func() { tr.add("B2 completed"); as.Success() })
				})
				as.Add(tr.step("B2 goes on"))
			})
		}, reentryInfo, "A in,A leaves,syncwait B 5ms,A ends,flowend A <nil>,B2 completed,syncwait returns," +
			"steperror B InternalError,B onerror:InternalError,flowend B InternalError,syncwait C 1.005s,C in,flowend C <nil>"},
		{"no event of its own", func(b *asyncsteps.Root, _ *asyncsteps.TestTool, m *asyncsteps.Mutex, tr *tracer) {
			b.Add(func(as asyncsteps.AsyncSteps, _ ...any) { m.Sync(as, tr.step("B in")) })
		}, "", "A in,A leaves,syncwait B 5ms,A ends,flowend A <nil>,syncwait returns," +
			"B in,syncwait C 1.005s,C in,flowend B <nil>,flowend C <nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) { syncWaitDrivesItsTool(t, c.flow, func() {}, c.err, c.trace) })
		})
	}
	timeout := cases[0].flow
	faults := []struct {
		name  string
		fault func()
		info  string
	}{
		{"panic", func() { panic("hook") }, "panic: hook"},
		{"Goexit", runtime.Goexit, goexitInfo},
	}
	for _, f := range faults {
		t.Run("a timeout around the waiting step, then a "+f.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				syncWaitDrivesItsTool(t, timeout, f.fault, f.info, "A in,A leaves,syncwait B 5ms,A ends,flowend A <nil>,"+
					"steperror B InternalError,B onerror:InternalError,flowend B InternalError,syncwait C 1.005s,C in,flowend C <nil>")
			})
		})
	}
}

// syncWaitDrivesItsTool runs a flow B made by flow, waiting in a Mutex
// behind A, whose SyncWait hook advances the tool by a second, and C
// behind B, then calls then; it checks B's Result (err: the info of its
// InternalError, or "" for a success) and the trace.
func syncWaitDrivesItsTool(t *testing.T, flow func(b *asyncsteps.Root, tt *asyncsteps.TestTool, m *asyncsteps.Mutex, tr *tracer), then func(), err, trace string) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1)
	name := func(ctx context.Context) any { return ctx.Value(flowCtxKey{}) }
	tt.SetHooks(&asyncsteps.Hooks{
		SyncWait: func(_ asyncsteps.Syncer, waited time.Duration) {
			if tr.String() != "A in,A leaves" {
				tr.addf("syncwait C %v", waited)
				return
			}
			tr.addf("syncwait B %v", waited)
			tt.Advance(time.Second)
			then()
			tr.add("syncwait returns")
		},
		StepError: func(ctx context.Context, err *asyncsteps.Error) { tr.addf("steperror %v %s", name(ctx), err.Code) },
		FlowEnd: func(ctx context.Context, err error) {
			if e, ok := err.(*asyncsteps.Error); ok {
				err = errors.New(e.Code)
			}
			tr.addf("flowend %v %v", name(ctx), err)
		},
	})
	named := func(n string) context.Context { return context.WithValue(context.Background(), flowCtxKey{}, n) }
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A in")
			as.WaitExternal()
			tt.Deferred(5*time.Millisecond, func() { tr.add("A leaves"); as.Success() })
		})
	})
	a.Add(tr.step("A ends"))
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	flow(b, tt, m, &tr)
	cr := asyncsteps.New(asyncsteps.WithTool(tt))
	cr.Add(func(as asyncsteps.AsyncSteps, _ ...any) { m.Sync(as, tr.step("C in")) })
	chA, chB := a.PromiseContext(named("A")), b.PromiseContext(named("B"))
	tt.Advance(0) // A in, B queued behind it
	chC := cr.PromiseContext(named("C"))
	driveDying(t, tt)
	wantSuccess(t, result(t, chA))
	if res := result(t, chB); err == "" {
		wantSuccess(t, res)
	} else {
		wantError(t, res.Err, asyncsteps.InternalError, err)
	}
	wantSuccess(t, result(t, chC))
	wantTrace(t, &tr, trace)
	if got := tt.Now().Sub(asyncsteps.TestToolEpoch); got != time.Second+5*time.Millisecond {
		t.Errorf("the clock is at %v, want 1.005s", got)
	}
	syncWantIdle(t, tt)
}

// A FlowEnd hook that drives its TestTool runs none of its flow's work:
// the flow has ended, and what it left queued (the completion of a branch
// its failed Parallel cancelled, a cancel requested as it ends) does
// nothing; the other flows' events run, as under any callback that drives
// the tool. The Result is delivered once the hook returns, as it ended,
// and nothing of the flow is left queued.
func TestFlowEndHookDrivingItsTestToolRunsNothingOfTheFlow(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		tt.SetHooks(&asyncsteps.Hooks{
			StepError: func(_ context.Context, err *asyncsteps.Error) { tr.addf("steperror %s", err.Code) },
			FlowEnd: func(_ context.Context, err error) {
				tr.addf("flowend %v", err)
				r.Cancel()
				tt.Immediate(func() { tr.add("other") })
				tr.addf("%d queued", tt.Pending()) // B's completion, the cancel and other
				tt.Run()
				tr.add("flowend returns")
			},
		})
		var a, b asyncsteps.AsyncSteps
		p := r.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			a = as
			as.WaitExternal()
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				b = as
				as.SetCancel(tr.cancel("B cancel"))
				as.WaitExternal()
				tt.Immediate(func() {
					a.Error("E")
					b.Success() // B's completion is queued behind E's, as the flow ends
				})
			})
			as.Add(tr.step("B goes on"))
		})
		r.Add(tr.step("not reached"))
		ch := r.Promise()
		drive(t, tt)
		wantError(t, result(t, ch).Err, "E", "")
		wantTrace(t, &tr, "steperror E,flowend E,3 queued,other,flowend returns")
		syncWantIdle(t, tt)
	})
}
