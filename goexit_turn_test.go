package asyncsteps_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A callback that calls runtime.Goexit leaves its flow to go on from the
// next goroutine, and in the same turn as after a panic: where the
// callback ran between two steps of the flow's drive, other queued work
// runs before the next step; where it ran in the task that took the flow
// up again (a timeout, a completion), before its first step, the flow
// goes on at once. "other" is a callback queued on the tool before the
// flow goes on; each case's trace is the one a panic gives.
func TestGoexitKeepsTheFlowsTurn(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) // the cancel handler's fault
	cases := []struct {
		name  string
		flow  func(tt *asyncsteps.TestTool, tr *tracer, fault func()) *asyncsteps.Root
		trace string
	}{{
		// The error handler of a step that times out runs in the timeout's
		// task, before the flow's drive: no turn between it and the next step.
		name: "error handler at a timeout",
		flow: func(tt *asyncsteps.TestTool, tr *tracer, fault func()) *asyncsteps.Root {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(10 * time.Millisecond)
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("cancel")
						tt.Immediate(func() { tr.add("other") })
					})
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.add("handler:" + code)
					fault()
				})
			}, recoverTo(tr))
			r.Add(tr.step("next"))
			return r
		},
		trace: "cancel,handler:Timeout,outer:InternalError,next,other",
	}, {
		// A branch's error cancels its sibling in the flow's drive: the
		// turn comes between the failed Parallel and the next step.
		name: "cancel handler of a branch",
		flow: func(tt *asyncsteps.TestTool, tr *tracer, fault func()) *asyncsteps.Root {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(func(asyncsteps.AsyncSteps) {
						tr.add("cancel")
						fault()
					})
					as.WaitExternal()
				}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					tt.Immediate(func() { tr.add("other") })
					as.Error("E1")
				})
			}, recoverTo(tr))
			r.Add(tr.step("next"))
			return r
		},
		trace: "cancel,outer:E1,other,next",
	}, {
		// A ForEach pulls its sequence in the flow's drive: the turn comes
		// before the iteration that raises the sequence's fault.
		name: "ForEach sequence",
		flow: func(tt *asyncsteps.TestTool, tr *tracer, fault func()) *asyncsteps.Root {
			seq := iter.Seq2[int, int](func(yield func(int, int) bool) {
				if yield(0, 0) {
					fault()
				}
			})
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.ForEach(seq, func(as asyncsteps.AsyncSteps, _, _ any) {
					tr.add("body")
					tt.Immediate(func() {
						tr.add("other")
						tt.Immediate(func() { tr.add("other2") })
					})
				})
			}, recoverTo(tr))
			r.Add(tr.step("next"))
			return r
		},
		trace: "body,other,other2,outer:InternalError,next",
	}, {
		// The slot that the Await function of an ended item gives back
		// comes in a task that, like a step, takes a turn before the flow
		// goes on: the pull it makes is cut off in that turn. Item 0
		// times out and ends, its function holding its slot until 2ms;
		// item 1 waits, and is cancelled as the pull fails the step.
		name: "ForEachLimit sequence at a slot given back",
		flow: func(tt *asyncsteps.TestTool, tr *tracer, fault func()) *asyncsteps.Root {
			release := make(chan struct{})
			tt.Deferred(2*time.Millisecond, func() { close(release) })
			seq := iter.Seq2[int, int](func(yield func(int, int) bool) {
				if yield(0, 0) && yield(1, 1) {
					fault()
				}
			})
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				asyncsteps.ForEachLimit(as, seq, 2, func(as asyncsteps.AsyncSteps, i, _ int) {
					if i == 1 {
						as.SetCancel(func(asyncsteps.AsyncSteps) {
							tr.add("cancel")
							tt.Immediate(func() { tr.add("other") })
						})
						as.WaitExternal()
						return
					}
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetTimeout(time.Millisecond)
						as.Await(func(context.Context) (any, error) {
							<-release // ignores its context
							return nil, nil
						})
					}, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
				})
			}, recoverTo(tr))
			r.Add(tr.step("next"))
			return r
		},
		trace: "cancel,outer:InternalError,other,next",
	}}
	faults := []struct {
		name string
		fn   func()
	}{
		{"panic", func() { panic(errors.New("fault")) }},
		{"Goexit", runtime.Goexit},
	}
	for _, c := range cases {
		for _, fault := range faults {
			t.Run(c.name+"/"+fault.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tt := asyncsteps.NewTestTool()
					tr := &tracer{}
					ch := c.flow(tt, tr, fault.fn).Promise()
					driveThroughGoexits(t, tt)
					wantSuccess(t, result(t, ch))
					wantTrace(t, tr, c.trace)
				})
			})
		}
	}
}

// driveThroughGoexits runs tt's events, each on a goroutine of its own
// that a Goexit may end, until none is left once the goroutines of Await
// functions are blocked or gone. Called inside a synctest bubble.
func driveThroughGoexits(t *testing.T, tt *asyncsteps.TestTool) {
	t.Helper()
	for n := 0; ; n++ {
		if n > maxEvents {
			t.Fatalf("still running after %d events", maxEvents)
		}
		if !nextEvent(tt) {
			synctest.Wait() // what the Await functions that returned queued
			if !nextEvent(tt) {
				return
			}
		}
	}
}

// recoverTo returns an error handler that records the error's code and
// recovers from it.
func recoverTo(tr *tracer) asyncsteps.ErrorFunc {
	return func(as asyncsteps.AsyncSteps, code string) {
		tr.add("outer:" + code)
		as.Success()
	}
}

// The error of a ForEach's sequence (a panic, a Goexit) is raised by the
// iteration that its pull queues, a turn later: it is told to the
// StepError hook, and kept in the State, then, as any error raised. A
// branch whose sibling fails in that turn is cancelled before it raises
// the error: nobody is told of it.
func TestForEachSeqFaultIsToldAsItsIterationRaisesIt(t *testing.T) {
	faults := []struct {
		name string
		fn   func()
	}{
		{"panic", func() { panic("boom") }},
		{"Goexit", runtime.Goexit},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			tt := asyncsteps.NewTestTool()
			tr := &tracer{}
			tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
				tr.add("StepError:" + err.Code)
			}})
			seq := iter.Seq2[int, int](func(func(int, int) bool) {
				tr.add("pull")
				fault.fn()
			})
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Parallel().Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
							tr.add("fail")
							as.Error("E1", "i1")
						})
					})
				}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.ForEach(seq, func(as asyncsteps.AsyncSteps, _, _ any) { tr.add("body") })
				})
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("outer:" + code + ":" + as.State().ErrorInfo)
				as.Success()
			})
			ch := r.Promise()
			for n := 0; nextEvent(tt); n++ {
				if n > maxEvents {
					t.Fatalf("still running after %d events", maxEvents)
				}
			}
			wantSuccess(t, result(t, ch))
			wantTrace(t, tr, "pull,fail,StepError:E1,outer:E1:i1")
		})
	}
}
