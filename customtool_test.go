package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// manualTool is a Tool that is not one of the package's loops: a FIFO of
// callbacks and a list of timers on a virtual clock, run by the test.
type manualTool struct {
	queue  []*manualCall
	timers []*manualCall
	now    time.Duration
}

type manualCall struct {
	f         func()
	due       time.Duration
	cancelled bool
	ran       bool
}

func (c *manualCall) Cancel()       { c.cancelled = true }
func (c *manualCall) IsValid() bool { return !c.cancelled && !c.ran }

func (t *manualTool) Immediate(f func()) asyncsteps.Handle {
	c := &manualCall{f: f}
	t.queue = append(t.queue, c)
	return c
}

func (t *manualTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	c := &manualCall{f: f, due: t.now + d}
	t.timers = append(t.timers, c)
	return c
}

func (t *manualTool) IsSameThread() bool { return true }
func (t *manualTool) Now() time.Time     { return asyncsteps.TestToolEpoch.Add(t.now) }

// run runs queued callbacks, then the earliest timer, until nothing is left.
func (t *manualTool) run() {
	for {
		if len(t.queue) > 0 {
			c := t.queue[0]
			t.queue = t.queue[1:]
			c.fire()
			continue
		}
		t.timers = slices.DeleteFunc(t.timers, func(c *manualCall) bool { return !c.IsValid() })
		if len(t.timers) == 0 {
			return
		}
		slices.SortStableFunc(t.timers, func(a, b *manualCall) int { return int(a.due - b.due) })
		c := t.timers[0]
		t.timers = t.timers[1:]
		t.now = max(t.now, c.due)
		c.fire()
	}
}

func (c *manualCall) fire() {
	if c.IsValid() {
		c.ran = true
		c.f()
	}
}

// A flow runs on any Tool, not only the package's own: steps, parallel
// branches, a timeout that fires and one that is disarmed, an external
// completion, and Tool() gives back the Tool given.
func TestFlowOnAForeignTool(t *testing.T) {
	tool := &manualTool{}
	var tr tracer
	var saved asyncsteps.AsyncSteps
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if as.Tool() != asyncsteps.Tool(tool) {
			t.Errorf("Tool() = %v, want the manual tool", as.Tool())
		}
		p := as.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("a1")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("a2") })
		})
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("b1")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("b2") })
		})
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second) // disarmed by the completion below
		saved = as
		as.WaitExternal()
		tool.Immediate(func() { saved.Success("done") })
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr.add(fmt.Sprint("got ", args[0]))
		as.SetTimeout(time.Minute) // fires
		as.WaitExternal()
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add(fmt.Sprint("handler ", code, " at ", tool.now))
		as.Success()
	})
	ch := r.Promise()
	tool.run()
	res := <-ch
	if res.Err != nil {
		t.Fatalf("flow failed: %v", res.Err)
	}
	wantTrace(t, &tr, "a1,b1,a2,b2,got done,handler Timeout at 1m0s")
	if saved.IsValid() {
		t.Error("a completed step's AsyncSteps is still valid")
	}
}

// Root.Cancel and Run's context reach a flow on a foreign Tool too.
func TestCancelOnAForeignTool(t *testing.T) {
	tool := &manualTool{}
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { tr.add("cancel") })
		tr.add("wait")
	})
	ch := r.Promise()
	tool.run()
	r.Cancel()
	tool.run()
	if res := <-ch; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", res.Err)
	}
	wantTrace(t, &tr, "wait,cancel")
}
