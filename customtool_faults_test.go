package asyncsteps_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// nilHandleTool is a foreign Tool whose Immediate and Deferred schedule
// their callbacks but return no Handle.
type nilHandleTool struct{ *manualTool }

func (t nilHandleTool) Immediate(f func()) asyncsteps.Handle {
	t.manualTool.Immediate(f)
	return nil
}

func (t nilHandleTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	t.manualTool.Deferred(d, f)
	return nil
}

// A Tool may return a nil Handle: the engine cannot cancel that timer, so
// a step timeout whose step completed first still runs when due, and finds
// nothing to time out. Before, disarming it dereferenced the nil Handle.
func TestForeignToolNilHandleIsATimerThatCannotBeCancelled(t *testing.T) {
	inChild(t, func(t *testing.T) {
		tool := &manualTool{}
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(nilHandleTool{tool}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second) // disarmed by the completion: cancels nothing
			as.WaitExternal()
			tool.Immediate(func() { as.Success("done") })
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.add(fmt.Sprint("got ", args[0], " at ", tool.now))
			as.SetTimeout(time.Minute) // fires
			as.WaitExternal()
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add(fmt.Sprint("handler ", code, " at ", tool.now))
			as.Success("recovered")
		})
		ch := r.Promise()
		tool.run()
		wantSuccess(t, result(t, ch), "recovered")
		wantTrace(t, &tr, "got done at 0s,handler Timeout at 1m0s")
	})
}

// stoppedTool is a foreign Tool whose Immediate panics once stopped, as a
// Tool built on a channel does with a send on the closed channel.
type stoppedTool struct {
	*manualTool
	stopped bool
}

func (t *stoppedTool) Immediate(f func()) asyncsteps.Handle {
	if t.stopped {
		panic("send on closed channel")
	}
	return t.manualTool.Immediate(f)
}

// lostCompletionLog is what a Tool whose Immediate panics, called to hand
// it a completion from another goroutine, makes the engine log.
const lostCompletionLog = "asyncsteps: Tool.Immediate panicked: a completion for a flow on that tool is lost panic=send on closed channel"

// wantLogged waits for the next message of logs (see slogRecords), and
// fails the test unless it is want.
func wantLogged(t *testing.T, logs <-chan string, want string) {
	t.Helper()
	select {
	case msg := <-logs:
		if msg != want {
			t.Errorf("logged %q, want %q", msg, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing logged")
	}
}

// slogRecords makes slog's default logger send each message to the
// returned channel (run it in a child process).
func slogRecords() <-chan string {
	ch := make(chan string, 16)
	slog.SetDefault(slog.New(chanHandler(ch)))
	return ch
}

type chanHandler chan string

func (chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h chanHandler) WithGroup(string) slog.Handler          { return h }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "panic" {
			msg += " panic=" + a.Value.String()
		}
		return true
	})
	h <- msg
	return nil
}

// The result of an Await function reaches a foreign Tool through its
// Immediate, called on the function's goroutine, which the engine started:
// a Tool stopped meanwhile that panics there must not end the process.
// The panic is logged and the result lost: the flow, on a tool that runs
// nothing any more, waits for good.
func TestForeignToolPanickingImmediateOffItsLoopIsLogged(t *testing.T) {
	inChild(t, func(t *testing.T) {
		logs := slogRecords()
		tool := &stoppedTool{manualTool: &manualTool{}}
		release := make(chan struct{})
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		r.Await(func(context.Context) (any, error) {
			<-release
			return 1, nil
		})
		ch := r.Promise()
		tool.run() // starts the function, which waits for release
		tool.stopped = true
		close(release)
		wantLogged(t, logs, lostCompletionLog)
		noResult(t, ch)
		if !r.Running() {
			t.Error("the flow has ended; want it waiting for the lost completion")
		}
	})
}

// failingDeferredTool is a foreign Tool whose Deferred panics, as a
// stopped Tool's may.
type failingDeferredTool struct{ *manualTool }

func (failingDeferredTool) Deferred(time.Duration, func()) asyncsteps.Handle {
	panic("timers stopped")
}

// A Throttle times its period with Deferred on the tool of the flow that
// opens it. A Tool whose Deferred panics left the Throttle's period open
// for good: the flow that opened it failed, and every later one waited
// forever. The panic is logged and the period ends at once, as on a
// closed Loop.
func TestThrottlePeriodOnAToolWhoseDeferredPanics(t *testing.T) {
	inChild(t, func(t *testing.T) {
		logs := slogRecords()
		tool := &manualTool{}
		th := asyncsteps.NewThrottle(1, time.Second)
		r := asyncsteps.New(asyncsteps.WithTool(failingDeferredTool{tool}))
		var tr tracer
		for _, name := range []string{"a", "b"} {
			r.Sync(th, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add(name) })
		}
		ch := r.Promise()
		tool.run()
		wantSuccess(t, result(t, ch))
		wantTrace(t, &tr, "a,b")
		want := "asyncsteps: Tool.Deferred panicked: the timer is not armed panic=timers stopped"
		for i := range 2 { // logged as the flow ran: no wait
			select {
			case msg := <-logs:
				if msg != want {
					t.Errorf("logged %q, want %q", msg, want)
				}
			default:
				t.Fatalf("%d messages logged, want 2", i)
			}
		}
	})
}

// faultyStartTool is a foreign Tool whose next Immediate fails as set in
// fault: "before" panics without queueing its callback, "queued" panics
// once it has queued it, "ran" once it has run it. The calls after it
// work, on the manualTool.
type faultyStartTool struct {
	*manualTool
	fault string
}

func (t *faultyStartTool) Immediate(f func()) asyncsteps.Handle {
	fault := t.fault
	t.fault = ""
	switch fault {
	case "before":
		panic("tool stopped")
	case "queued":
		t.manualTool.Immediate(f)
		panic("tool stopped")
	case "ran":
		f()
		panic("tool stopped")
	}
	return t.manualTool.Immediate(f)
}

// startPanic calls start and returns what it panicked with.
func startPanic(start func()) (p any) {
	defer func() { p = recover() }()
	start()
	return nil
}

// A start whose Tool's Immediate panics before the tool began the flow is
// undone: the panic reaches the caller, the Root is not running and keeps
// its steps, a callback the tool queued before panicking begins nothing,
// and the Root starts again, reporting to the next start's caller only.
func TestForeignToolPanickingImmediateUndoesTheStart(t *testing.T) {
	for _, fault := range []string{"before", "queued"} {
		t.Run(fault, func(t *testing.T) {
			var tr tracer
			tool := &faultyStartTool{manualTool: &manualTool{}}
			r := asyncsteps.New(asyncsteps.WithTool(tool))
			r.Add(tr.step("s1")).Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })

			tool.fault = fault
			p := startPanic(func() {
				r.ExecuteWith(func(e *asyncsteps.Error) { tr.add("first caller's " + e.Code) })
			})
			if p != "tool stopped" {
				t.Fatalf("ExecuteWith panicked with %v, want the tool's panic", p)
			}
			if r.Running() {
				t.Error("Running after a start whose Immediate panicked")
			}
			tool.run()
			wantTrace(t, &tr, "")

			tool.fault = fault
			if p := startPanic(func() { r.Promise() }); p != "tool stopped" {
				t.Fatalf("Promise panicked with %v, want the tool's panic", p)
			}
			ch := r.Promise()
			if !r.Running() {
				t.Error("not Running once started again")
			}
			tool.run()
			wantError(t, result(t, ch).Err, "Boom", "")
			wantTrace(t, &tr, "s1")
			if r.Running() {
				t.Error("Running after the flow ended")
			}
		})
	}
}

// A start whose Tool's Immediate ran the flow's first callback before it
// panicked stands: the flow has begun and cannot be taken back, so it
// runs to its end, reported as the start asked.
func TestForeignToolImmediatePanickingAfterTheFlowBeganKeepsTheStart(t *testing.T) {
	var tr tracer
	tool := &faultyStartTool{manualTool: &manualTool{}, fault: "ran"}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(tr.step("s1")).Add(tr.step("s2")).Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Boom") })
	p := startPanic(func() { r.ExecuteWith(func(e *asyncsteps.Error) { tr.add("unhandled " + e.Code) }) })
	if p != "tool stopped" {
		t.Fatalf("ExecuteWith panicked with %v, want the tool's panic", p)
	}
	if !r.Running() {
		t.Error("not Running: the flow had begun")
	}
	tool.run()
	wantTrace(t, &tr, "s1,s2,unhandled Boom")
	if r.Running() {
		t.Error("Running after the flow ended")
	}
}

// A start made while an earlier start's Immediate is still on the stack
// (here from the unhandled-error function of the execution that
// Immediate ran inline) is its caller's: when that Immediate then
// panics, only the earlier start is in question, and it stands, the flow
// having begun. The later start is not undone: its Promise gets the
// Result of its execution.
func TestForeignToolPanickingImmediateLeavesALaterStartAlone(t *testing.T) {
	var tr tracer
	tool := &faultyStartTool{manualTool: &manualTool{}, fault: "ran"}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("step")
		as.Error("Boom")
	})
	var again <-chan asyncsteps.Result
	p := startPanic(func() {
		r.ExecuteWith(func(e *asyncsteps.Error) {
			tr.add("unhandled " + e.Code)
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("again")
				as.Success("ok")
			})
			again = r.Promise() // queued on the manualTool: the fault is used up
		})
	})
	if p != "tool stopped" {
		t.Fatalf("ExecuteWith panicked with %v, want the tool's panic", p)
	}
	wantTrace(t, &tr, "step,unhandled Boom")
	if again == nil {
		t.Fatal("the unhandled-error function did not run inside Immediate")
	}
	if !r.Running() {
		t.Error("not Running: the second start was undone by the first one's panic")
	}
	tool.run()
	res := result(t, again)
	if res.Err != nil || !reflect.DeepEqual(res.Args, []any{"ok"}) {
		t.Errorf("second start's Result = %v, %v; want [ok], nil", res.Args, res.Err)
	}
	wantTrace(t, &tr, "step,unhandled Boom,again")
	if r.Running() {
		t.Error("Running after the flow ended")
	}
}
