package asyncsteps

import (
	"context"
	"time"
)

// Tool is the event loop a flow runs on (the spec's AsyncTool). Every callback
// of a flow runs from a Tool callback, one at a time.
//
// The library provides two: [Loop], a real loop on its own goroutine, and
// [TestTool], a deterministic loop on virtual time driven by a test.
type Tool interface {
	Immediate(f func()) Handle
	Deferred(d time.Duration, f func()) Handle
	IsSameThread() bool // true when called on the loop's own goroutine
	Now() time.Time     // the loop's clock (virtual in TestTool)
}

// Handle refers to a callback scheduled on a [Tool].
type Handle interface {
	Cancel()       // no error if it already ran or was cancelled
	IsValid() bool // still scheduled
}

// task is a unit of work queued on a loop without an allocation: flows queue
// their own records.
type task interface{ run() }

// scheduler is what the engine needs beyond Tool from the loops of this
// package. Both methods are called only on the loop's goroutine, from inside
// a callback the loop is running.
type scheduler interface {
	Tool
	// post queues t behind every task already queued, without a lock.
	post(t task)
	// busy reports whether another task is queued, i.e. whether a flow that
	// could go on should yield for fairness.
	busy() bool
	// inject queues t behind every task already queued, from any goroutine.
	inject(t task)
	// startFlow queues the first task of a flow like inject.
	startFlow(fl *flow)
	// engineState is the engine state that the flows on the loop share; only
	// the loop's goroutine uses it.
	engineState() *loopLocal
	// deferTask arms a step's timeout, on the loop's goroutine: the engine's
	// timers need no closure. It returns nil on a closed loop.
	deferTask(d time.Duration, t task) *timerEntry
	// tool is the Tool the user gave.
	tool() Tool
	// lifetime is cancelled when the tool stops running tasks for good;
	// nil for a tool that never does.
	lifetime() context.Context
}

// foreignTool makes a Tool that is not one of this package's loops a
// scheduler: the engine then has one code path. Such a tool gets no pools,
// and a flow on it yields to the tool after every step.
type foreignTool struct{ Tool }

func (t foreignTool) post(tk task)            { t.Immediate(tk.run) }
func (t foreignTool) busy() bool              { return true }
func (t foreignTool) inject(tk task)          { t.Immediate(tk.run) }
func (t foreignTool) startFlow(fl *flow)      { t.inject(fl) }
func (t foreignTool) engineState() *loopLocal { return nil }
func (t foreignTool) tool() Tool              { return t.Tool }

func (foreignTool) lifetime() context.Context { return nil }

func (t foreignTool) deferTask(d time.Duration, tk task) *timerEntry {
	return &timerEntry{t: foreignTimer{t.Deferred(d, tk.run)}}
}

// foreignTimer is the entry of a timeout armed on a foreignTool: Cancel
// goes to the tool's own handle.
type foreignTimer struct{ Handle }

func (foreignTimer) run() {}

// schedulerOf returns t as a scheduler. The package's own loops are
// matched by type first: cheaper than asserting to the interface, once per
// flow.
func schedulerOf(t Tool) scheduler {
	switch s := t.(type) {
	case *Loop:
		return s
	case *TestTool:
		return s
	}
	return foreignTool{t}
}
