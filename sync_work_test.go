package asyncsteps_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// These tests pin down that a critical section counts the work really
// running in it: an Await function that outlives its step keeps its Mutex
// slot until it returns, while its flow moves on at once. They use
// testing/synctest to know when the Await goroutines are blocked or done,
// and a TestTool (or Loops inside the bubble) for the flows' time, so that
// every trace is exact.

// slowCall is an Await function that ignores its context: it records its
// call, blocks until release is closed, then records its return.
func slowCall(tr *tracer, name string, release <-chan struct{}) asyncsteps.AwaitFunc {
	return func(context.Context) (any, error) {
		tr.add(name + ":call")
		<-release
		tr.add(name + ":return")
		return "late", nil
	}
}

// A flow whose step is timed out or cancelled inside a section leaves it at
// once, but the slot comes back only when its Await function returns; a
// Throttle holds nothing, so its next period is not delayed.
func TestSectionSlotHeldUntilAwaitReturns(t *testing.T) {
	syncers := []struct {
		name string
		obj  func() asyncsteps.Syncer
		// held: B waits for A's call to return; a Throttle's next entry
		// waits only for the next period.
		held bool
	}{
		{"Mutex", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) }, true},
		{"KeyedMutex", func() asyncsteps.Syncer { return asyncsteps.NewKeyedMutex[string](1).Key("a") }, true},
		{"Limiter", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited})
		}, true},
		{"Throttle", func() asyncsteps.Syncer { return asyncsteps.NewThrottle(1, 100*time.Millisecond) }, false},
		{"KeyedThrottle", func() asyncsteps.Syncer { return asyncsteps.NewKeyedThrottle[string](1, 100*time.Millisecond).Key("a") }, false},
		{"KeyedLimiter", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited}).Key("a")
		}, true},
	}
	endings := []struct {
		name string
		// end ends A's section; trace is what A records, bIn when B enters
		// once A's call returns, a second after the end.
		end        func(a *asyncsteps.Root, tt *asyncsteps.TestTool)
		trace, bIn string
	}{
		{"timeout", func(_ *asyncsteps.Root, tt *asyncsteps.TestTool) { tt.Advance(20 * time.Millisecond) },
			"A:call,A:onerror:Timeout@20ms,A:after", "B:in@1.02s"},
		{"Root.Cancel", func(a *asyncsteps.Root, tt *asyncsteps.TestTool) {
			tt.Advance(10 * time.Millisecond)
			a.Cancel()
			tt.Advance(0)
		}, "A:call", "B:in@1.01s"},
	}
	for _, s := range syncers {
		for _, e := range endings {
			t.Run(s.name+"/"+e.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tt := asyncsteps.NewTestTool()
					elapsed := stopwatch(tt)
					obj := s.obj()
					tr := &tracer{}
					release := make(chan struct{})

					a := asyncsteps.New(asyncsteps.WithTool(tt))
					a.Sync(obj, func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetTimeout(20 * time.Millisecond)
						as.Await(slowCall(tr, "A", release))
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("A:onerror:%s@%v", code, elapsed())
						as.Success()
					})
					a.Add(tr.step("A:after"))
					b := asyncsteps.New(asyncsteps.WithTool(tt))
					b.Sync(obj, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", elapsed()) })
					aRes, bRes := a.Promise(), b.Promise()

					tt.Advance(0)
					synctest.Wait() // A's call has started and blocks
					e.end(a, tt)
					result(t, aRes) // A has ended, its call still runs
					tt.Advance(time.Second)
					wantTrace(t, tr, e.trace+map[bool]string{true: "", false: ",B:in@100ms"}[s.held])
					// The call holds a KeyedMutex's key, B waits; a
					// KeyedThrottle's goes as B's period ends.
					wantKeysInUse(t, obj, map[bool]int{true: 1, false: 0}[s.held])

					close(release)
					synctest.Wait() // the call has returned
					drive(t, tt)
					want := e.trace + ",A:return," + e.bIn
					if !s.held {
						want = e.trace + ",B:in@100ms,A:return"
					}
					wantTrace(t, tr, want)
					wantSuccess(t, result(t, bRes))
					syncWantIdle(t, tt)
					wantKeysInUse(t, obj, 0)
				})
			})
		}
	}
}

// A flow that comes back to the Mutex while an Await function it started
// inside still runs is not let in by reentrance: the running call holds the
// slot, not the flow, which waits in the queue like any other (behind B).
func TestMutexFlowComingBackWaitsForItsRunningCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		elapsed := stopwatch(tt)
		m := asyncsteps.NewMutex(1)
		tr := &tracer{}
		release := make(chan struct{})

		a := asyncsteps.New(asyncsteps.WithTool(tt))
		a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(20 * time.Millisecond)
			as.Await(slowCall(tr, "A", release))
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("A:onerror:%s@%v", code, elapsed())
			as.Success()
		})
		a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("A:again@%v", elapsed()) })
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", elapsed()) })
		aRes, bRes := a.Promise(), b.Promise()

		tt.Advance(0)
		synctest.Wait()
		tt.Advance(time.Second)
		wantTrace(t, tr, "A:call,A:onerror:Timeout@20ms")

		close(release)
		synctest.Wait()
		drive(t, tt)
		wantTrace(t, tr, "A:call,A:onerror:Timeout@20ms,A:return,B:in@1s,A:again@1s")
		wantSuccess(t, result(t, aRes))
		wantSuccess(t, result(t, bRes))
		syncWantIdle(t, tt)
	})
}

// Sections nested in one flow, on one Mutex or on two, keep their slots
// for an Await function started in the inner one until it returns, even
// when both sections have been left; no slot is counted twice once the
// call has returned.
func TestNestedSectionsHoldForInnerCall(t *testing.T) {
	for _, same := range []bool{true, false} {
		name := map[bool]string{true: "same Mutex", false: "two Mutexes"}[same]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				elapsed := stopwatch(tt)
				outer := asyncsteps.NewMutex(1)
				inner := outer
				if !same {
					inner = asyncsteps.NewMutex(1)
				}
				tr := &tracer{}
				release := make(chan struct{})
				a := asyncsteps.New(asyncsteps.WithTool(tt))
				a.Sync(outer, func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Sync(inner, func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetTimeout(20 * time.Millisecond)
						as.Await(slowCall(tr, "A", release))
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("A:onerror:%s@%v", code, elapsed())
						as.Success()
					})
				})
				aRes := a.Promise()
				tt.Advance(0)
				synctest.Wait() // A is in both sections, its call blocks
				var waiters []<-chan asyncsteps.Result
				for _, m := range []*asyncsteps.Mutex{outer, inner} {
					b := asyncsteps.New(asyncsteps.WithTool(tt))
					b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", elapsed()) })
					waiters = append(waiters, b.Promise())
				}
				tt.Advance(time.Second)
				wantSuccess(t, result(t, aRes))
				wantTrace(t, tr, "A:call,A:onerror:Timeout@20ms")

				close(release)
				synctest.Wait()
				drive(t, tt)
				wantTrace(t, tr, "A:call,A:onerror:Timeout@20ms,A:return,B:in@1s,B:in@1s")
				for _, w := range waiters {
					wantSuccess(t, result(t, w))
				}
				syncWantIdle(t, tt)
			})
		})
	}
}

// A Loop that closes ends its flows at once and cancels their Await
// contexts, but does not wait for functions that ignore them: a Mutex
// shared with another loop gets the slot back when the call returns.
func TestClosedLoopGivesSlotBackWhenCallReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer other.Close()
		m := asyncsteps.NewMutex(1)
		tr := &tracer{}
		release := make(chan struct{})
		var cancelled atomic.Bool

		a := asyncsteps.New(asyncsteps.WithTool(closing))
		a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(ctx context.Context) (any, error) {
				tr.add("A:call")
				<-release
				cancelled.Store(ctx.Err() != nil)
				tr.add("A:return")
				return nil, nil
			})
		})
		aRes := a.Promise()
		synctest.Wait()
		b := asyncsteps.New(asyncsteps.WithTool(other))
		b.Sync(m, tr.step("B:in"))
		bRes := b.Promise()
		synctest.Wait()

		closing.Close()
		synctest.Wait()
		wantError(t, result(t, aRes).Err, asyncsteps.InternalError, "the flow's loop is closed")
		wantTrace(t, tr, "A:call")

		close(release)
		synctest.Wait()
		wantSuccess(t, result(t, bRes))
		wantTrace(t, tr, "A:call,A:return,B:in")
		if !cancelled.Load() {
			t.Error("the closed loop did not cancel the Await function's context")
		}
	})
}

// The load test of the rule: 40 flows on two Loops share a Mutex(4) around
// an upstream call that takes 40 ms and ignores its context, while each
// flow's step times out after 5 to 14 ms and its error handler falls back.
// The upstream's own count of calls running at once never exceeds 4 (a
// slot given back at the timeout let 15 run at once). On a loaded machine
// a loop may see a call's result before its late timer: that flow takes
// the fresh value, which changes nothing to the count.
func TestMutexCapsAwaitCallsOutlivingTheirTimeout(t *testing.T) {
	loops := []*asyncsteps.Loop{asyncsteps.NewLoop(), asyncsteps.NewLoop()}
	for _, l := range loops {
		defer l.Close()
	}
	const flows = 40
	const limit = 4
	m := asyncsteps.NewMutex(limit)
	var running, peak, calls, fallbacks, fresh atomic.Int32
	upstream := func(context.Context) (any, error) {
		n := running.Add(1)
		for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
		}
		time.Sleep(40 * time.Millisecond) // ignores its context on purpose
		calls.Add(1)
		running.Add(-1)
		return "fresh", nil
	}
	var wg sync.WaitGroup
	for i := range flows {
		r := asyncsteps.New(asyncsteps.WithTool(loops[i%len(loops)]))
		r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Duration(5+i%10) * time.Millisecond)
			as.Await(upstream)
		}, func(as asyncsteps.AsyncSteps, code string) {
			if code == asyncsteps.Timeout {
				fallbacks.Add(1)
				as.Success("cached")
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, err := r.Run(context.Background())
			if err != nil {
				t.Errorf("flow %d: %v", i, err)
			}
			if len(args) == 1 && args[0] == "fresh" {
				fresh.Add(1)
			}
		}()
	}
	wg.Wait()
	// Every flow has ended; the calls of the last ones may still run.
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < flows && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	t.Logf("peak %d calls at once, %d calls, %d fallbacks, %d fresh", peak.Load(), calls.Load(), fallbacks.Load(), fresh.Load())
	if p := peak.Load(); p > limit {
		t.Errorf("%d upstream calls ran at once through a Mutex(%d)", p, limit)
	}
	if c := calls.Load(); c != flows {
		t.Errorf("%d upstream calls returned, want %d", c, flows)
	}
	if f, n := fallbacks.Load(), fresh.Load(); f == 0 || f+n != flows {
		t.Errorf("%d flows fell back on a timeout and %d got the fresh value, want %d in all, most on a timeout", f, n, flows)
	}
}

// An Await function started in a parallel branch inside the section counts
// too: a failed sibling cancels the branch and the flow recovers and ends,
// but the slot waits for the call.
func TestSectionHoldsForCallOfCancelledBranch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		elapsed := stopwatch(tt)
		m := asyncsteps.NewMutex(1)
		tr := &tracer{}
		release := make(chan struct{})
		a := asyncsteps.New(asyncsteps.WithTool(tt))
		a.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			p := as.Parallel()
			p.Await(slowCall(tr, "A", release))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				as.Tool().Deferred(20*time.Millisecond, func() { as.Error("Boom") })
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("A:onerror:%s@%v", code, elapsed())
			as.Success()
		})
		b := asyncsteps.New(asyncsteps.WithTool(tt))
		b.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("B:in@%v", elapsed()) })
		aRes, bRes := a.Promise(), b.Promise()

		tt.Advance(0)
		synctest.Wait()
		tt.Advance(time.Second)
		wantSuccess(t, result(t, aRes))
		wantTrace(t, tr, "A:call,A:onerror:Boom@20ms")

		close(release)
		synctest.Wait()
		drive(t, tt)
		wantTrace(t, tr, "A:call,A:onerror:Boom@20ms,A:return,B:in@1s")
		wantSuccess(t, result(t, bRes))
		syncWantIdle(t, tt)
	})
}
