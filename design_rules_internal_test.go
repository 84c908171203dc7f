package asyncsteps

// Tests of rules of docs/DESIGN.md that need the package's internals: each
// names the rule it checks.

import (
	"testing"
)

// docs/DESIGN.md#closing-a-loop: a closing loop gives back the Mutex slots
// its flows hold, and takes its flows out of the Mutex's queue, before it
// reports the flows ended: the Promise of the holder receives its Result
// while Close may still run, and the Mutex is clean by then.
func TestClosingLoopFreesItsMutexBeforeReportingTheFlows(t *testing.T) {
	m := NewMutex(1)
	doomed := NewLoop()
	entered := make(chan struct{})
	holder := New(WithTool(doomed))
	holder.Sync(m, func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		close(entered)
	})
	held := holder.Promise()
	<-entered
	waiter := New(WithTool(doomed))
	waiter.Sync(m, func(as AsyncSteps, _ ...any) { t.Error("a flow of the closed loop entered") })
	queuedOne := waiter.Promise()
	waitUntil(t, "the waiter queued", func() bool { return queued(&m.mu, &m.queue) == 1 })

	closed := make(chan struct{})
	go func() { doomed.Close(); close(closed) }()

	for _, ch := range []<-chan Result{held, queuedOne} {
		res := awaitResult(t, ch)
		syncMutexClean(t, m) // at once: before Close has returned, perhaps
		if e, ok := res.Err.(*Error); !ok || e.Info != "the flow's loop is closed" {
			t.Errorf("Result %+v, want the closed loop's error", res)
		}
	}
	<-closed
}
