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

// docs/DESIGN.md#await: only the flow's own Await functions come to the
// goroutine waiting in RunHelping: one of another flow of the same loop,
// started while that goroutine waits idle, runs on a goroutine of the
// loop's.
func TestRunHelpingTakesNoOtherFlowsAwait(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var caller int64
	parked := make(chan AsyncSteps, 1)
	helped := New(WithTool(l))
	helped.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		parked <- as
	})
	helped.Await(awaitOn(&tr, "own", &caller))
	done := make(chan error, 1)
	go func() {
		_, err := runHelpingOn(ctxFor(t), helped, &caller)
		done <- err
	}()
	waiting := <-parked // the caller now waits idle for its flow

	other := New(WithTool(l))
	other.Await(awaitOn(&tr, "other flow's", &caller))
	if _, err := other.Run(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	waiting.Success()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := tr.String(), "other flow's@other own@caller"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}
