package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// Each item is a parallel branch of its own for toolinfo.BranchID (the
// rootId package cabi gives a branch), kept for all of the item's steps:
// a later item, whose frame may be an earlier one's recycled, keeps its
// own.
func TestForEachLimitItemsKeepBranchIDs(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var got []string
	note := func(as AsyncSteps, give int64) {
		id, known := toolinfo.BranchID(as, give)
		got = append(got, fmt.Sprint(id, known))
	}
	ForEachLimit(r, slices.All([]int64{10, 20, 30}), 2, func(as AsyncSteps, _ int, id int64) {
		note(as, id)
		as.Add(func(as AsyncSteps, _ ...any) { note(as, id+1) })
	})
	if res := <-runTestTool(tt, r); res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []string{"10 true", "20 true", "10 true", "20 true", "30 true", "30 true"}
	if !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}
}

// A ForEachLimit holds the items running, not one per pair: the slice of
// the branches a cancel must reach stays within a few times the limit
// however many items have run.
func TestForEachLimitHoldsTheRunningItemsOnly(t *testing.T) {
	for _, limit := range []int{1, 3, 7, 100} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			tt := NewTestTool()
			r := New(WithTool(tt))
			most, items := 0, 0
			count := func(yield func(int, int) bool) {
				for i := 0; i < 20000 && yield(i, i); i++ {
				}
			}
			ForEachLimit(r, count, limit, func(as AsyncSteps, i, _ int) {
				items++
				lr := as.(*stepAPI).f.parent.impl.(*limitRun)
				most = max(most, cap(lr.branches))
				if i%2 == 0 {
					h := as.Tool().Immediate(func() { as.Success() })
					as.SetCancel(func(AsyncSteps) { h.Cancel() })
				}
			})
			if res := <-runTestTool(tt, r); res.Err != nil {
				t.Fatal(res.Err)
			}
			if items != 20000 {
				t.Errorf("%d items ran, want 20000", items)
			}
			if most > 4*max(limit, 2) {
				t.Errorf("the branches held %d items at most, want at most %d", most, 4*max(limit, 2))
			}
		})
	}
}

// runTestTool starts r on tt and runs tt until no event is left.
func runTestTool(tt *TestTool, r *Root) <-chan Result {
	ch := r.Promise()
	tt.Run()
	return ch
}

// The last Await function of an ended item finds the step running, and
// the step, then the flow, ends before the function queues its slot back
// (a cancel, forced by the hook). The slot is given back to a step that
// is gone: the tool counts nothing for it, as for a function that
// returns once the step has ended.
func TestForEachLimitSlotBackOutrunByTheFlowsEndCountsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := NewTestTool()
		r := New(WithTool(tt))
		release := make(chan struct{})
		ForEachLimit(r, slices.All([]int{0, 1}), 1, func(as AsyncSteps, _, _ int) {
			as.Add(func(as AsyncSteps, _ ...any) {
				as.SetTimeout(time.Millisecond)
				as.Await(func(context.Context) (any, error) {
					<-release // ignores its context
					return nil, nil
				})
			}, func(as AsyncSteps, _ string) { as.Success() })
		})
		ch := r.Promise()
		tt.Advance(time.Millisecond) // item 0 ends; its function keeps the slot
		onceHook(t, &testHookSlotBackChecked, func() {
			r.Cancel()
			tt.Run()
		})
		close(release)
		synctest.Wait() // the function has returned
		if res := <-ch; !errors.Is(res.Err, context.Canceled) {
			t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
		}
		if n := tt.Pending(); n != 0 {
			t.Errorf("Pending() = %d once the function returned, want 0", n)
		}
	})
}

// The step stops (a cancel, forced by the hook) before the goroutine
// that waits for its channel has begun to wait, and a value arrives in
// the channel meanwhile: the goroutine ends without receiving it, and it
// stays in the channel for the next consumer. A select over both, ready
// at once, received it half of the time and dropped it.
func TestForEachChanStoppedBeforeTheWaitReceivesNothing(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			tt := NewTestTool()
			r := New(WithTool(tt))
			ch := make(chan int, 1)
			ForEachChan(r, ch, 1, func(AsyncSteps, int) {})
			proceed := make(chan struct{})
			onceHook(t, &testHookChanWaitBegins, func() { <-proceed })
			res := r.Promise()
			tt.Advance(0) // the step waits for ch, its goroutine held by the hook
			r.Cancel()
			tt.Run()
			ch <- 1
			close(proceed)
			synctest.Wait() // the goroutine has ended
			if res := <-res; !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
			}
			if n := len(ch); n != 1 {
				t.Fatalf("%d values left in the channel, want 1", n)
			}
		})
	}
}
