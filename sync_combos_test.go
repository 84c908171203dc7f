package asyncsteps_test

// Tests of where the rules of locks and limits (docs/DESIGN.md#locks-and-limits)
// meet those of parallel branches, loops, cancels and completions.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// comboPause is a step that waits for d on its tool, then succeeds.
func comboPause(d time.Duration) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(d, func() { as.Success() })
	}
}

// docs/DESIGN.md#locks-and-limits and #parallel-branches: a cancel of a
// flow inside a critical section, while a Parallel runs there, runs the
// branches' cancel handlers (innermost first, in the order the branches
// were added), then the section's step's, and gives the lock back: the
// flow queued on it enters.
func TestCancelOfAParallelInsideASectionGivesTheLockBack(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	m := asyncsteps.NewMutex(1)
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("section:cancel"))
		p := as.Parallel(tr.handler("parallel:onerror"))
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(tr.cancel("one:cancel")) })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetCancel(tr.cancel("two/sub:cancel")) })
			as.SetCancel(tr.cancel("two:cancel"))
		})
	}, tr.handler("section:onerror"))
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(m, tr.step("B:in"))
	aRes, bRes := a.Promise(), b.Promise()
	drive(t, tt)
	noResult(t, aRes)
	noResult(t, bRes)

	a.Cancel()
	drive(t, tt)
	if res := result(t, aRes); !errors.Is(res.Err, context.Canceled) {
		t.Errorf("A's Result.Err = %v, want one matching context.Canceled", res.Err)
	}
	wantSuccess(t, result(t, bRes))
	wantTrace(t, &tr, "one:cancel,two/sub:cancel,two:cancel,section:cancel,B:in")
	syncWantIdle(t, tt)
}

// docs/DESIGN.md#locks-and-limits: a Limiter is a Mutex followed by a
// Throttle, so a flow that enters it again from inside passes the Mutex
// (reentrant) but is counted by the Throttle: it waits for the next
// period in the Throttle's queue, or, with no room there (Burst 0), is
// rejected with the Throttle's info, which the handler given to Sync sees.
func TestLimiterEnteredAgainFromInsideWaitsForItsRate(t *testing.T) {
	cases := []struct {
		burst int
		trace string
	}{
		{0, "outer@0s,inner:onerror:DefenseRejected:Throttle queue limit"},
		{1, "outer@0s,inner@1s"},
	}
	for _, c := range cases {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		elapsed := stopwatch(tt)
		l := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, Rate: 1, Period: time.Second, Burst: c.burst})
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(l, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("outer@%v", elapsed())
			as.Sync(l, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("inner@%v", elapsed()) },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("inner:onerror:%s:%s", code, as.State().ErrorInfo)
					as.Success()
				})
		})
		wantSuccess(t, run(t, r, tt))
		wantTrace(t, &tr, c.trace)
		tt.Advance(time.Second)
		syncWantIdle(t, tt)
	}
}

// docs/DESIGN.md#locks-and-limits and #break-and-continue: a Break out of
// a critical section gives the lock back; a Continue does too, and the
// next iteration queues behind the flow that waited meanwhile (FIFO).
func TestBreakAndContinueOutOfASectionGiveTheLockBack(t *testing.T) {
	t.Run("Break", func(t *testing.T) {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		m := asyncsteps.NewMutex(1)
		a := asyncsteps.New(asyncsteps.WithTool(tt))
		a.Loop(func(as asyncsteps.AsyncSteps) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("A:break"); as.Break() })
			}, tr.handler("section:onerror"))
		})
		a.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("A:after"); as.WaitExternal() })
		aRes := a.Promise()
		drive(t, tt)
		noResult(t, aRes)
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		b.Sync(m, tr.step("B:in"))
		wantSuccess(t, run(t, b, tt))
		wantTrace(t, &tr, "A:break,section:onerror:LoopBreak,A:after,B:in")
	})
	t.Run("Continue", func(t *testing.T) {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		elapsed := stopwatch(tt)
		m := asyncsteps.NewMutex(1)
		a := asyncsteps.New(asyncsteps.WithTool(tt))
		a.Repeat(2, func(as asyncsteps.AsyncSteps, i int) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.addf("A%d@%v", i, elapsed())
				as.Add(comboPause(10 * time.Millisecond))
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Continue() })
			})
		})
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("B@%v", elapsed())
			as.Add(comboPause(10 * time.Millisecond))
		})
		aRes := a.Promise()
		tt.Advance(5 * time.Millisecond)
		bRes := b.Promise()
		drive(t, tt)
		wantSuccess(t, result(t, aRes))
		wantSuccess(t, result(t, bRes))
		wantTrace(t, &tr, "A0@0s,B@10ms,A1@20ms")
	})
}

// docs/DESIGN.md#completing-after-add and #locks-and-limits: a Sync on a
// real gate followed by Success in the same callback raises InternalError
// and its steps do not run: the gate is not taken, so the next flow enters
// at once (a Throttle's period was not opened).
func TestSyncThenSuccessTakesNoGate(t *testing.T) {
	gates := []struct {
		name string
		obj  asyncsteps.Syncer
	}{
		{"Mutex", asyncsteps.NewMutex(1)},
		{"Throttle", asyncsteps.NewThrottle(1, time.Second)},
		{"KeyedThrottle", asyncsteps.NewKeyedThrottle[string](1, time.Second).Key("a")},
		{"Limiter", asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, Rate: 1})},
	}
	for _, g := range gates {
		t.Run(g.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			elapsed := stopwatch(tt)
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(g.obj, tr.step("A:in"))
				as.Success()
			}, tr.handler("A:onerror"))
			wantError(t, run(t, a, tt).Err, asyncsteps.InternalError, "Success called after Add in the same callback")
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			b.Sync(g.obj, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B@%v", elapsed()) })
			wantSuccess(t, run(t, b, tt))
			wantTrace(t, &tr, "A:onerror:InternalError,B@0s")
		})
	}
}

// docs/DESIGN.md#completing-after-add: an Await followed by Success in the
// same callback raises InternalError, and its function is never started.
func TestAwaitThenSuccessStartsNoFunction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		r, tt := newFlow()
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { tr.add("called"); return nil, nil })
			as.Success()
		}, tr.handler("onerror"))
		res := run(t, r, tt)
		synctest.Wait() // a function started would have run by now
		drive(t, tt)
		wantCode(t, res.Err, asyncsteps.InternalError)
		wantTrace(t, &tr, "onerror:InternalError")
	})
}

// docs/DESIGN.md#locks-and-limits: a parallel branch is a flow of its own
// for a Mutex: it enters again the section it holds at once, ahead of a
// sibling queued on it, and the sibling enters only once the branch's
// outer section has ended, not when the inner one does.
func TestBranchReentersItsSectionAheadOfItsSibling(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	elapsed := stopwatch(tt)
	m := asyncsteps.NewMutex(1)
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.addf("one@%v", elapsed())
			as.Add(comboPause(10 * time.Millisecond))
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("one/inner@%v", elapsed()) })
			as.Add(comboPause(10 * time.Millisecond))
		})
		p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("two@%v", elapsed()) })
	})
	wantSuccess(t, run(t, r, tt))
	wantTrace(t, &tr, "one@0s,one/inner@10ms,two@20ms")
}

// docs/DESIGN.md#locks-and-limits: a reentrant entry that ends by an error,
// a timeout or a Break gives back its own entry only: the outer section
// still holds the Mutex, and another flow enters once that one ends.
func TestInnerReentrantEntryEndingLeavesTheOuterHeld(t *testing.T) {
	cases := []struct {
		name  string
		inner func(m *asyncsteps.Mutex) asyncsteps.StepFunc
		trace string
	}{
		{"error", func(m *asyncsteps.Mutex) asyncsteps.StepFunc {
			return func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
			}
		}, "inner:onerror:Failed@0s,B@10ms"},
		{"timeout", func(m *asyncsteps.Mutex) asyncsteps.StepFunc {
			return func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Millisecond) })
			}
		}, "inner:onerror:Timeout@1ms,B@11ms"},
		{"Break", func(m *asyncsteps.Mutex) asyncsteps.StepFunc {
			return func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Repeat(1, func(as asyncsteps.AsyncSteps, _ int) {
					as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { as.Break() })
				})
			}
		}, "B@10ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			tt := asyncsteps.NewTestTool()
			elapsed := stopwatch(tt)
			m := asyncsteps.NewMutex(1)
			a := asyncsteps.New(asyncsteps.WithTool(tt))
			a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(c.inner(m), func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("inner:onerror:%s@%v", code, elapsed())
					as.Success()
				})
				as.Add(comboPause(10 * time.Millisecond))
			})
			b := asyncsteps.New(asyncsteps.WithTool(tt))
			b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B@%v", elapsed()) })
			aRes, bRes := a.Promise(), b.Promise()
			drive(t, tt)
			wantSuccess(t, result(t, aRes))
			wantSuccess(t, result(t, bRes))
			wantTrace(t, &tr, c.trace)
		})
	}
}
