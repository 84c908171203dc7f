package asyncsteps_test

import (
	"context"
	"errors"
	"iter"
	"runtime/debug"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// seqOnce returns an iter.Seq2 of one pair that calls inside before it
// yields: the ForEach pulls it on a goroutine of its own (iter.Pull2),
// while its Loop's goroutine waits for the pair.
func seqOnce(inside func()) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		inside()
		yield(0, 0)
	}
}

// An iter.Seq2 that ForEach pulls is a callback of the flow's Loop, as a
// step is (docs/DESIGN.md#what-a-callback-may-do-to-its-loop), though it runs
// on the goroutine of iter.Pull2: Run and RunHelping called from it return
// an InternalError at once, for a flow on any Loop, rather than block the
// loop until that flow ends (the flow's own loop never would), and its
// goroutine panics at a fault, as the loop's does.
func TestForEachSeqRunsAsACallbackOfItsLoop(t *testing.T) {
	loop, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	t.Cleanup(loop.Close)
	t.Cleanup(other.Close)

	var runErr, helpingErr error
	var panicOnFault bool
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.ForEach(seqOnce(func() {
		panicOnFault = debug.SetPanicOnFault(true)
		debug.SetPanicOnFault(panicOnFault)
		inner := asyncsteps.New(asyncsteps.WithTool(other))
		inner.SuccessStep("inner")
		_, runErr = inner.Run(context.Background())
		inner.SuccessStep("inner")
		_, helpingErr = inner.RunHelping(context.Background())
	}), func(asyncsteps.AsyncSteps, any, any) {})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("the flow failed: %v", err)
	}
	wantError(t, runErr, asyncsteps.InternalError,
		"Run called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow")
	wantError(t, helpingErr, asyncsteps.InternalError,
		"RunHelping called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow")
	if !panicOnFault {
		t.Error("the sequence ran without SetPanicOnFault: a fault in it crashes the process")
	}
}

// Close called from the iter.Seq2 of a ForEach on the flow's own Loop does
// not wait for the loop, which waits for the sequence: the loop stops once
// the pull has returned, and the flow ends as a flow of a closed loop.
// Before, Close waited there for ever, and the loop with it; the timer
// only bounds that failure.
func TestForEachSeqClosesItsOwnLoop(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.ForEach(seqOnce(loop.Close), func(asyncsteps.AsyncSteps, any, any) {})
	select {
	case res := <-r.Promise():
		wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
	case <-time.After(10 * time.Second):
		t.Fatal("Close from the sequence waits for its own loop: the loop is stuck")
	}
	<-loop.Done()
}

// On a TestTool, the iter.Seq2 of a ForEach is a callback of the tool as
// a step is, though iter.Pull2 runs it on a goroutine of its own while the
// goroutine driving the tool waits for the pair: Run of a flow of the
// tool called from it returns the InternalError it returns in a step, and
// NextEvent from it is a nested call that runs another flow's event.
// Both waited for ever for the turn that the driving goroutine held.
func TestForEachSeqRunsAsACallbackOfItsTestTool(t *testing.T) {
	inChildFor(t, 10*time.Second, func(t *testing.T) {
		tool := asyncsteps.NewTestTool()
		var tr tracer
		var runErr error
		other := asyncsteps.New(asyncsteps.WithTool(tool))
		other.Add(tr.step("other"))
		var otherRes <-chan asyncsteps.Result
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.ForEach(seqOnce(func() {
			inner := asyncsteps.New(asyncsteps.WithTool(tool))
			inner.SuccessStep("inner")
			_, runErr = inner.Run(context.Background())
			otherRes = other.Promise()
			tr.addf("same thread %v", tool.IsSameThread())
			tr.addf("event %v", tool.NextEvent())
		}), func(_ asyncsteps.AsyncSteps, k, v any) { tr.addf("body %v:%v", k, v) })
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatalf("the flow failed: %v", err)
		}
		wantError(t, runErr, asyncsteps.InternalError,
			"Run called from a callback of the flow's TestTool: it would drive the tool inside itself")
		wantTrace(t, &tr, "same thread true,other,event true,body 0:0")
		wantSuccess(t, result(t, otherRes))
		if tool.IsSameThread() {
			t.Error("IsSameThread is true on the test's goroutine after Run returned")
		}
	})
}

// A sequence that drives its TestTool into its own flow (NextEvent,
// Advance), or its cleanup at a Break that does, is a callback of the
// flow that does, as a step is: the flow's own events wait, and the loop
// fails with the reentry's InternalError before they run; a cancel
// requested before wins over it. Before, they ran under the pull, inside
// the loop step that pulled: a timeout ended a ForEach under its own
// iteration, which then ran its body again, and a ForEachLimit's item and
// cancel ran in the middle of its take, either flow lost with nothing
// left to end it; under the cleanup, the loop's catch went on with a
// recycled frame, a nil dereference that the tool logged.
func TestSequenceDrivingItsTestToolIsAReentry(t *testing.T) {
	const info = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	inChildFor(t, 10*time.Second, func(t *testing.T) {
		t.Run("ForEach past its timeout", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			seq := func(yield func(int, int) bool) {
				defer tr.add("cleanup")
				yield(0, 0)
				tt.Advance(time.Second)
				yield(1, 1)
			}
			r.Add(func(as steps, _ ...any) {
				as.SetTimeout(10 * msec)
				as.SetCancel(tr.cancel("cancel"))
				as.ForEach(seq, func(_ steps, k, _ any) { tr.addf("body %v", k) })
			}, func(as steps, code string) {
				tr.addf("onerror %s: %s", code, as.State().ErrorInfo)
			})
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, info)
			wantTrace(t, &tr, "body 0,cleanup,cancel,onerror InternalError: "+info)
			syncWantIdle(t, tt)
		})
		t.Run("ForEach's cleanup at a Break past its timeout", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			seq := func(yield func(int, int) bool) {
				defer func() {
					tr.add("cleanup")
					tt.Advance(time.Second)
				}()
				yield(0, 0)
				yield(1, 1)
			}
			r.Add(func(as steps, _ ...any) {
				as.SetTimeout(10 * msec)
				as.SetCancel(tr.cancel("cancel"))
				as.ForEach(seq, func(as steps, k, _ any) {
					tr.addf("body %v", k)
					as.Break()
				})
			}, func(as steps, code string) {
				tr.addf("onerror %s: %s", code, as.State().ErrorInfo)
			})
			wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, info)
			wantTrace(t, &tr, "body 0,cleanup,cancel,onerror InternalError: "+info)
			syncWantIdle(t, tt)
		})
		t.Run("ForEachLimit after a Cancel", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			seq := func(yield func(int, int) bool) {
				defer tr.add("cleanup")
				if yield(0, 0) {
					r.Cancel()
					tt.NextEvent()
					yield(1, 1)
				}
			}
			r.Add(func(as steps, _ ...any) {
				as.SetCancel(tr.cancel("cancel"))
				asyncsteps.ForEachLimit(as, seq, 2, func(_ steps, i, _ int) { tr.addf("item %d", i) },
					tr.handler("limit onerror"))
			}, tr.handler("onerror"))
			res := run(t, r, tt)
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
			}
			wantTrace(t, &tr, "cleanup,cancel")
			syncWantIdle(t, tt)
		})
	})
}
