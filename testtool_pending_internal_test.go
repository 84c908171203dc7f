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
		e, _ := tt.queue.pop()
		if continuationOf(e.tk) == &r.fl && e.seq >= tt.ended[&r.fl].before {
			queued++ // neither dropped nor another flow's
		}
		tt.queue.push(e)
	}
	if counted := tt.continuations[&r.fl]; queued != counted {
		t.Errorf("continuations of the flow: %d queued, %d counted", queued, counted)
	}
}

// endingWithContinuations starts n flows on tt that each end, with
// Boom, as a failed Parallel cancels the branch that had queued a
// continuation (to run the sub-step it added): each leaves one
// continuation queued as it ends. ended counts their ends.
func endingWithContinuations(tt *TestTool, n int, ended *int) {
	for range n {
		r := New(WithTool(tt), WithUnhandledError(func(err *Error) {
			if err.Code == "Boom" {
				*ended++
			}
		}))
		p := r.Parallel()
		p.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(AsyncSteps, ...any) { panic("a cancelled branch went on") })
		})
		p.Add(func(as AsyncSteps, _ ...any) { as.Error("Boom") })
		r.Execute()
	}
}

// Thousands of flows that end at once, each leaving a continuation
// queued behind the others' tasks, cost the tool a look at each queued
// task once: a flow that ends takes nothing out of the queue, and its
// continuation is skipped as it comes out. Before, each end took every
// queued task out and put the others back: 1000 flows cost 1,003,000
// takes for 4000 tasks queued.
// Pending stays exact meanwhile: the dropped continuations run as no
// event.
func TestTestToolFlowsEndingTogetherTakeEachTaskOnce(t *testing.T) {
	const flows = 1000
	tt := NewTestTool()
	ended := 0
	endingWithContinuations(tt, flows, &ended)
	events := 0
	for tt.NextEvent() {
		events++
	}
	if ended != flows || tt.Pending() != 0 {
		t.Fatalf("%d flows ended with Boom, Pending() = %d; want %d, 0", ended, tt.Pending(), flows)
	}
	if tt.queue.len() != 0 || len(tt.ended) != 0 || len(tt.continuations) != 0 {
		t.Errorf("left: %d queued, %d flows with dropped continuations, %d with counted ones; want none",
			tt.queue.len(), len(tt.ended), len(tt.continuations))
	}
	if tt.taken != tt.posted {
		t.Errorf("%d takes from the queue for %d tasks queued, want one each", tt.taken, tt.posted)
	}
	if dropped := int(tt.posted) - events; dropped != flows {
		t.Errorf("%d events ran of %d tasks queued: %d dropped, want %d (one continuation a flow)",
			events, tt.posted, dropped, flows)
	}
}

// BenchmarkTestToolFlowsEndingTogether runs 8000 flows that end at once,
// each leaving a continuation queued (see endingWithContinuations).
func BenchmarkTestToolFlowsEndingTogether(b *testing.B) {
	const flows = 8000
	for b.Loop() {
		tt := NewTestTool()
		ended := 0
		endingWithContinuations(tt, flows, &ended)
		tt.Run()
		if ended != flows {
			b.Fatalf("%d flows ended with Boom, want %d", ended, flows)
		}
	}
}
