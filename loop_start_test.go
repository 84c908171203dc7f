package asyncsteps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Flows started on a Loop go through its lock-free stack of starts
// (Loop.startFlow) rather than its inbox. These tests pin what that stack
// must keep: the order of starts, the order against tasks queued before a
// start, wake-ups, and a Cancel that overtakes its flow's start.

// tracedRoot returns a root on l whose one step records name.
func tracedRoot(l *Loop, tr *trace, name string) *Root {
	r := New(WithTool(l))
	r.Add(func(AsyncSteps, ...any) { tr.add("%s", name) })
	return r
}

func TestLoopStartsFlowsInExecuteOrder(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	var want []string
	onLoop(t, l, func() { // every start is taken by the same drain
		for i := range 100 {
			tracedRoot(l, &tr, fmt.Sprint(i)).Execute()
			want = append(want, fmt.Sprint(i))
		}
	})
	for i := 100; i < 200; i++ { // and from another goroutine, drained as they come
		tracedRoot(l, &tr, fmt.Sprint(i)).Execute()
		want = append(want, fmt.Sprint(i))
	}
	drainFlows(t, l)
	if got, want := tr.String(), strings.Join(want, " "); got != want {
		t.Fatalf("flows ran in the order\n%s\nwant\n%s", got, want)
	}
}

// drainFlows waits until the flows started on l so far have run their
// first step: a flow started now runs after them.
func drainFlows(t *testing.T, l *Loop) {
	t.Helper()
	done := make(chan struct{})
	r := New(WithTool(l))
	r.Add(func(AsyncSteps, ...any) { close(done) })
	r.Execute()
	wait(t, done, "the flows to start")
}

func TestLoopRunsTasksQueuedBeforeAStartFirst(t *testing.T) {
	l := newTestLoop(t)
	var tr trace
	onLoop(t, l, func() {
		l.Immediate(func() { tr.add("immediate") })
		tracedRoot(l, &tr, "flow").Execute()
		l.inject(taskFunc(func() { tr.add("injected") }))
	})
	drainFlows(t, l)
	// A task queued after a start may overtake it (Loop's doc says so);
	// one queued before never does.
	if got := tr.String(); got != "immediate injected flow" {
		t.Fatalf("trace = %q, want %q", got, "immediate injected flow")
	}
}

func TestLoopIsBusyWithAFlowToStart(t *testing.T) {
	l := newTestLoop(t)
	var busy []bool
	onLoop(t, l, func() {
		busy = append(busy, l.busy())
		New(WithTool(l)).Execute()
		busy = append(busy, l.busy())
	})
	if fmt.Sprint(busy) != "[false true]" {
		t.Fatalf("busy() = %v, want [false true]", busy)
	}
}

// A Cancel right after Execute may reach the loop before the flow's start
// does. The flow must still end once, cancelled, with no step run: a
// cancel that finds the flow not begun leaves it to the start, which sees
// the stop before the first step.
func TestCancelThatOvertakesTheStart(t *testing.T) {
	logged := captureLog(t)
	l := newTestLoop(t)
	var tr trace
	r := tracedRoot(l, &tr, "step")
	for run := range 3 { // a fresh Root, then the same Root again
		var promise <-chan Result
		onLoop(t, l, func() {
			promise = r.Promise()
			r.Cancel()
		})
		select {
		case res := <-promise:
			if !errors.Is(res.Err, context.Canceled) {
				t.Fatalf("run %d: Result.Err = %v, want context.Canceled", run, res.Err)
			}
		case <-time.After(guard):
			t.Fatalf("run %d: no Result", run)
		}
		drainFlows(t, l)
		select {
		case res := <-promise:
			t.Fatalf("run %d: a second Result %+v", run, res)
		default:
		}
		r.Add(func(AsyncSteps, ...any) { tr.add("step") })
	}
	if got := tr.String(); got != "" {
		t.Errorf("steps ran: %q", got)
	}
	if out := logged.String(); out != "" {
		t.Errorf("the loop logged:\n%s", out)
	}
}

// Like TestLoopNeverMissesAWakeUp, for starts: each producer starts a flow
// and waits for it, so the loop sleeps between most starts, and a start
// racing the loop's way to sleep must wake it.
func TestLoopNeverMissesAStart(t *testing.T) {
	l := newTestLoop(t)
	roundTrips(t, func(_ int, reply chan<- struct{}) {
		r := New(WithTool(l))
		r.Add(func(AsyncSteps, ...any) { reply <- struct{}{} })
		r.Execute()
	})
}
