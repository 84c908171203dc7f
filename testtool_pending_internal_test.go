package asyncsteps

import (
	"iter"
	"runtime"
	"testing"
)

// A continuation queued in front (a ForEach over a sequence whose
// goroutine ended with Goexit goes on from there) is counted as one
// queued behind: taking it out again must not take another continuation
// of the flow out of the count, which dropContinuations relies on.
func TestTestToolCountsContinuationsQueuedInFront(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	seq := iter.Seq2[int, int](func(func(int, int) bool) { runtime.Goexit() })
	r.ForEach(seq, func(AsyncSteps, any, any) {})
	r.Execute()
	done := make(chan struct{})
	go func() { // the Goexit ends the driving goroutine
		defer close(done)
		tt.NextEvent()
		tt.NextEvent()
	}()
	<-done

	tt.mu.Lock()
	defer tt.mu.Unlock()
	queued := 0
	for n := tt.queue.len(); n > 0; n-- {
		tk, _ := tt.queue.pop()
		if continuationOf(tk) == &r.fl {
			queued++
		}
		tt.queue.push(tk)
	}
	if counted := tt.continuations[&r.fl]; queued != counted {
		t.Errorf("continuations of the flow: %d queued, %d counted", queued, counted)
	}
}
