package asyncsteps

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// On a Loop, a cancel of a Sleep takes its timer off the loop's heap at
// once: the heap holds it while the step sleeps, and nothing after.
func TestSleepCancelledOnALoopLeavesNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop()
		defer l.Close()
		timers := func() int {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.timers.len()
		}
		r := New(WithTool(l))
		Sleep(r, time.Hour)
		res := r.Promise()
		synctest.Wait()
		during := timers()
		r.Cancel()
		got := <-res
		synctest.Wait()
		if during != 1 || timers() != 0 || !errors.Is(got.Err, context.Canceled) {
			t.Errorf("%d timers while it slept, %d after the cancel, ended with %v; want 1, 0, context.Canceled",
				during, timers(), got.Err)
		}
	})
}
