package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// thenRecorder is the function given to ExecuteThen, recording each
// Result it gets, with what tr has traced by then.
type thenRecorder struct {
	tr      *tracer
	mu      sync.Mutex
	results []asyncsteps.Result
	called  chan struct{} // gets a value at each call
}

func newThenRecorder(tr *tracer) *thenRecorder {
	return &thenRecorder{tr: tr, called: make(chan struct{}, 100)}
}

func (rec *thenRecorder) done(res asyncsteps.Result) {
	rec.mu.Lock()
	rec.results = append(rec.results, res)
	rec.mu.Unlock()
	rec.tr.addf("done%v:%v", res.Args, resultErr(res.Err))
	rec.called <- struct{}{}
}

// only returns the one Result recorded, failing the test unless there is
// exactly one.
func (rec *thenRecorder) only(t *testing.T) asyncsteps.Result {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.results) != 1 {
		t.Fatalf("done called %d times, want once: %v", len(rec.results), rec.results)
	}
	return rec.results[0]
}

// resultErr is err as a trace shows it: the code and info of an *Error,
// "canceled" for a cancel, "nil" for none.
func resultErr(err error) string {
	var e *asyncsteps.Error
	switch {
	case err == nil:
		return "nil"
	case errors.As(err, &e):
		return strings.TrimSuffix(e.Code+"("+e.Info+")", "()")
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return err.Error()
}

// newThenFlow returns a Root on a fresh TestTool whose unhandled-error
// function traces what it gets: ExecuteThen must never call it.
func newThenFlow(tr *tracer) (*asyncsteps.Root, *asyncsteps.TestTool) {
	return newFlow(asyncsteps.WithUnhandledError(func(e *asyncsteps.Error) { tr.add("unhandled:" + e.Code) }))
}

// done gets the success args of the last step, once the flow has ended;
// nothing runs inside ExecuteThen.
func TestExecuteThenSuccess(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(tr.step("a"))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("b")
		as.Success("x", 2)
	})
	r.ExecuteThen(rec.done)
	wantTrace(t, tr, "")
	drive(t, tt)
	wantTrace(t, tr, "a,b,done[x 2]:nil")
	wantSuccess(t, rec.only(t), "x", 2)
	if r.Running() {
		t.Error("the flow still runs after done")
	}
}

// done gets the error that ended the flow, after the cancel and error
// handlers on its way; the unhandled-error function gets nothing.
func TestExecuteThenError(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("cancel"))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed", "why") })
	}, tr.handler("handler"))
	r.Add(tr.step("never"))
	r.ExecuteThen(rec.done)
	drive(t, tt)
	wantTrace(t, tr, "cancel,handler:Failed,done[]:Failed(why)")
	wantError(t, rec.only(t).Err, "Failed", "why")
}

// A wrong use of the Root recorded before the start fails the execution
// at once, as with Promise: done gets that InternalError.
func TestExecuteThenMisuse(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(nil)
	r.ExecuteThen(rec.done)
	drive(t, tt)
	wantTrace(t, tr, "done[]:InternalError(Add: nil step function)")
}

// A cancel asked before the flow begins, while it waits for its start
// on the tool, ends it before its first step; one asked while a step
// waits runs the cancel handlers first. done gets an error matching
// context.Canceled either way, once.
func TestExecuteThenCancel(t *testing.T) {
	t.Run("before the start", func(t *testing.T) {
		tr := new(tracer)
		r, tt := newThenFlow(tr)
		rec := newThenRecorder(tr)
		r.Add(tr.step("never"))
		r.ExecuteThen(rec.done)
		r.Cancel()
		drive(t, tt)
		wantTrace(t, tr, "done[]:canceled")
		if err := rec.only(t).Err; !errors.Is(err, context.Canceled) {
			t.Errorf("done got %v, want context.Canceled", err)
		}
	})
	t.Run("mid-flow", func(t *testing.T) {
		tr := new(tracer)
		r, tt := newThenFlow(tr)
		rec := newThenRecorder(tr)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("outer cancel"))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("waits")
				as.SetCancel(tr.cancel("inner cancel"))
			}, tr.handler("never"))
		})
		r.ExecuteThen(rec.done)
		drive(t, tt)
		r.Cancel()
		drive(t, tt)
		wantTrace(t, tr, "waits,inner cancel,outer cancel,done[]:canceled")
		rec.only(t)
	})
}

// A flow cancelled while its Await function runs ends without waiting
// for the function, whose context is cancelled: done gets the cancel.
func TestExecuteThenCancelDuringAwait(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	started, returned := make(chan struct{}), make(chan struct{})
	r.Await(func(ctx context.Context) (any, error) {
		close(started)
		<-ctx.Done()
		defer close(returned)
		return nil, ctx.Err()
	})
	results := make(chan asyncsteps.Result, 2)
	r.ExecuteThen(func(res asyncsteps.Result) { results <- res })
	waitFor(t, started)
	r.Cancel()
	select {
	case res := <-results:
		if !errors.Is(res.Err, context.Canceled) || res.Args != nil {
			t.Errorf("done got %+v, want no args and context.Canceled", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called")
	}
	waitFor(t, returned)
	syncOnLoop(t, loop)
	if len(results) != 0 {
		t.Errorf("done called again: %+v", <-results)
	}
}

// syncOnLoop waits until loop has run what was queued on it before.
func syncOnLoop(t *testing.T, loop *asyncsteps.Loop) {
	t.Helper()
	ran := make(chan struct{})
	loop.Immediate(func() { close(ran) })
	waitFor(t, ran)
}

// A step's timeout that ends the flow: done gets Timeout once the
// cancel handlers have run, at the timeout's time.
func TestExecuteThenTimeout(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	elapsed := stopwatch(tt)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(50 * time.Millisecond)
		as.SetCancel(tr.cancel("cancel"))
	})
	r.ExecuteThen(func(res asyncsteps.Result) {
		tr.addf("at %v", elapsed())
		rec.done(res)
	})
	drive(t, tt)
	wantTrace(t, tr, "cancel,at 50ms,done[]:Timeout")
	rec.only(t)
}

// A flow that waits as its Loop is closed ends there, on the loop's
// goroutine, before Done is closed and Close returns: done gets "the
// flow's loop is closed", once; its cancel handler does not run.
func TestExecuteThenLoopClosedMidFlow(t *testing.T) {
	loop := asyncsteps.NewLoop()
	tr := new(tracer)
	rec := newThenRecorder(tr)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	parked := make(chan struct{})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(tr.cancel("cancel"))
		close(parked)
	})
	var beforeDone atomic.Bool
	r.ExecuteThen(func(res asyncsteps.Result) {
		select {
		case <-loop.Done():
		default:
			beforeDone.Store(true)
		}
		rec.done(res)
	})
	waitFor(t, parked)
	loop.Close()
	wantTrace(t, tr, "done[]:InternalError(the flow's loop is closed)")
	rec.only(t)
	if !beforeDone.Load() {
		t.Error("done ran once the loop's Done was closed")
	}
}

// A flow whose Loop is closed before it begins: queued before the stop,
// it ends on the loop's goroutine as the loop stops; started after it,
// on a goroutine of its own once ExecuteThen has returned (it would wait
// for ever for release inside ExecuteThen).
func TestExecuteThenLoopClosedBeforeStart(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		tr := new(tracer)
		rec := newThenRecorder(tr)
		unblock := make(chan struct{})
		loop.Immediate(func() {
			<-unblock
			loop.Close() // the loop stops once this returns
		})
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(tr.step("never"))
		var beforeDone atomic.Bool
		r.ExecuteThen(func(res asyncsteps.Result) {
			select {
			case <-loop.Done():
			default:
				beforeDone.Store(true)
			}
			rec.done(res)
		})
		close(unblock)
		<-loop.Done()
		wantTrace(t, tr, "done[]:InternalError(the flow's loop is closed)")
		rec.only(t)
		if !beforeDone.Load() {
			t.Error("done ran once the loop's Done was closed")
		}
	})
	t.Run("after the stop", func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		loop.Close()
		tr := new(tracer)
		rec := newThenRecorder(tr)
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(tr.step("never"))
		release := make(chan struct{})
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			r.ExecuteThen(func(res asyncsteps.Result) {
				<-release
				rec.done(res)
			})
		}()
		waitFor(t, returned)
		close(release)
		select {
		case <-rec.called:
		case <-time.After(10 * time.Second):
			t.Fatal("done was not called")
		}
		wantTrace(t, tr, "done[]:InternalError(the flow's loop is closed)")
		rec.only(t)
	})
}

// ResetEvents drops the test's callbacks, not the flow's start, nor a
// cancel requested of the flow: the flow begins, waits with its timeout
// dropped, and the cancel ends it. done is called once, with the cancel.
func TestExecuteThenResetEvents(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("waits")
		as.SetTimeout(time.Second)
		as.SetCancel(tr.cancel("cancel"))
	})
	r.ExecuteThen(rec.done)
	tt.ResetEvents()
	if !tt.NextEvent() {
		t.Fatal("ResetEvents dropped the flow's start")
	}
	tt.ResetEvents() // the step's timeout
	drive(t, tt)
	wantTrace(t, tr, "waits")
	r.Cancel()
	tt.ResetEvents()
	drive(t, tt)
	wantTrace(t, tr, "waits,cancel,done[]:canceled")
	rec.only(t)
}

// done may execute the Root again, with new steps, by any start method:
// the flow has stopped, and each execution's done gets its own Result.
func TestExecuteThenRestartFromDone(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	var then func(asyncsteps.Result)
	runs := 0
	then = func(res asyncsteps.Result) {
		tr.addf("done%v:%v running=%v", res.Args, resultErr(res.Err), r.Running())
		if runs++; runs == 3 {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
			r.Execute() // to the unhandled-error function
			return
		}
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("run%d", runs+1) })
		r.SuccessStep(runs + 1)
		r.ExecuteThen(then)
	}
	r.SuccessStep(1)
	r.ExecuteThen(then)
	drive(t, tt)
	wantTrace(t, tr, "done[1]:nil running=false,run2,done[2]:nil running=false,run3,done[3]:nil running=false,unhandled:Failed")
}

// A panic in done is logged, as one in an unhandled-error function, and
// the loop goes on serving flows.
func TestExecuteThenPanicIsLogged(t *testing.T) {
	logs := asyncsteps.CaptureLog(t)
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.SuccessStep()
	called := make(chan struct{})
	r.ExecuteThen(func(asyncsteps.Result) {
		close(called)
		panic("done boom")
	})
	waitFor(t, called)
	r2 := asyncsteps.New(asyncsteps.WithTool(loop))
	r2.SuccessStep("alive")
	wantSuccess(t, result(t, awaitResult(t, r2.Promise())), "alive")
	if got := logs.String(); !strings.Contains(got, `msg="asyncsteps: panic in loop callback" panic="done boom"`) {
		t.Errorf("logged %q, want the panic", got)
	}
}

// On a Tool of the caller's, a panic in done is the tool's: it reaches
// the code that runs the tool's callback, as one in an unhandled-error
// function does, once the flow has stopped; done is not called again, and
// the Root runs again.
func TestExecuteThenPanicOnACustomToolIsTheTools(t *testing.T) {
	tool := &manualTool{}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.SuccessStep()
	calls := 0
	r.ExecuteThen(func(asyncsteps.Result) {
		calls++
		panic("done boom")
	})
	if p := startPanic(tool.run); p != "done boom" {
		t.Errorf("the tool's callback panicked with %v, want done's panic", p)
	}
	tool.run()
	if calls != 1 || r.Running() {
		t.Errorf("done called %d times, Running %v; want once, and not running", calls, r.Running())
	}
	r.SuccessStep("again")
	var again []asyncsteps.Result
	r.ExecuteThen(func(res asyncsteps.Result) { again = append(again, res) })
	tool.run()
	if len(again) != 1 {
		t.Fatalf("the next execution's done called %d times, want once", len(again))
	}
	wantSuccess(t, again[0], "again")
}

// awaitResult waits for the Result of ch and hands it back on a channel
// of its own, for result to check.
func awaitResult(t *testing.T, ch <-chan asyncsteps.Result) <-chan asyncsteps.Result {
	t.Helper()
	out := make(chan asyncsteps.Result, 1)
	select {
	case res := <-ch:
		out <- res
	case <-time.After(10 * time.Second):
		t.Fatal("the flow did not end")
	}
	return out
}

// A panic or a Goexit in done, on every tool, in a flow that succeeds,
// fails, is cancelled or whose Loop is closed under it: done is called
// once, and the tool goes on serving flows (the hostile suite's other
// loop callbacks are in TestHostileLoopCallbacks).
func TestHostileExecuteThenDone(t *testing.T) {
	for _, tool := range hostileTools {
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) { hostileExecuteThen(t, tool) })
		})
	}
}

func hostileExecuteThen(t *testing.T, tool hostileTool) {
	ends := []struct {
		name string
		add  func(r *asyncsteps.Root, parked chan<- struct{})
	}{
		{"success", func(r *asyncsteps.Root, _ chan<- struct{}) { r.SuccessStep() }},
		{"error", func(r *asyncsteps.Root, _ chan<- struct{}) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
		}},
		{"cancel", func(r *asyncsteps.Root, parked chan<- struct{}) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				close(parked)
			})
		}},
	}
	for _, m := range misdeeds {
		for _, end := range ends {
			t.Run(m.name+"/"+end.name, func(t *testing.T) {
				tl, release := tool.open(t)
				defer release()
				var calls atomic.Int32
				called := make(chan struct{})
				parked := make(chan struct{})
				r := asyncsteps.New(asyncsteps.WithTool(tl), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {
					t.Error("the unhandled-error function was called")
				}))
				end.add(r, parked)
				r.ExecuteThen(func(asyncsteps.Result) {
					if calls.Add(1) == 1 {
						close(called)
					}
					m.do()
				})
				tt, _ := tl.(*asyncsteps.TestTool)
				if tt != nil {
					driveAway(tt)
				}
				if end.name == "cancel" {
					waitFor(t, parked)
					r.Cancel()
					if tt != nil {
						driveAway(tt)
					}
				}
				waitFor(t, called)
				wantServing(t, tl)
				if n := calls.Load(); n != 1 {
					t.Errorf("done called %d times, want once", n)
				}
			})
		}
		if tool.name == "Loop" {
			t.Run(m.name+"/loop closed", func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				var calls atomic.Int32
				parked := make(chan struct{})
				for range 3 {
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.WaitExternal()
						parked <- struct{}{}
					})
					r.ExecuteThen(func(asyncsteps.Result) {
						calls.Add(1)
						m.do()
					})
					<-parked
				}
				loop.Close() // each flow's done, the next after a Goexit on the next goroutine
				if n := calls.Load(); n != 3 {
					t.Errorf("done called %d times for 3 flows, want 3", n)
				}
			})
		}
	}
}

// Hooks see the flow end before done gets its Result: StepError, then
// FlowEnd, then done.
func TestExecuteThenAfterFlowEnd(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	tt.SetHooks(&asyncsteps.Hooks{
		StepError: func(_ context.Context, err *asyncsteps.Error) { tr.add("StepError:" + err.Code) },
		FlowEnd:   func(_ context.Context, err error) { tr.add("FlowEnd:" + resultErr(err)) },
	})
	rec := newThenRecorder(tr)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
	r.ExecuteThen(rec.done)
	drive(t, tt)
	r.SuccessStep("ok")
	r.ExecuteThen(rec.done)
	drive(t, tt)
	wantTrace(t, tr, "StepError:Failed,FlowEnd:Failed,done[]:Failed,FlowEnd:nil,done[ok]:nil")
}

// A nil done is Execute: the error goes to the unhandled-error function.
// A start of a running flow panics, leaving it running (a nil *Root:
// TestHostileNilRoot).
func TestExecuteThenNilAndMisuse(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed") })
	r.ExecuteThen(nil)
	drive(t, tt)
	wantTrace(t, tr, "unhandled:Failed")

	rec := newThenRecorder(tr)
	r.Add(tr.step("a"))
	r.ExecuteThen(rec.done)
	wantPanic(t, "ExecuteThen", "asyncsteps: ExecuteThen called on a running flow", func() { r.ExecuteThen(rec.done) })
	drive(t, tt)
	wantTrace(t, tr, "unhandled:Failed,a,done[]:nil")
}

// Many flows at once on a LoopGroup, each ending one way (a success, an
// error, a cancel from another goroutine, the close of the group): each
// flow's done is called once, with its own Result, and those of the
// flows the close ends before Close returns. Run with -race.
func TestExecuteThenOnLoopGroup(t *testing.T) {
	const flows = 400
	g := asyncsteps.NewLoopGroup(4)
	calls := make([]atomic.Int32, flows)
	got := make([]string, flows)
	var ended sync.WaitGroup // the flows that end before the close
	type parkedFlow struct {
		r *asyncsteps.Root
		i int
	}
	parked := make(chan parkedFlow, flows)
	for i := range flows {
		r := g.New()
		switch i % 4 {
		case 0:
			r.SuccessStep(i)
		case 1:
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Failed", fmt.Sprint(i)) })
		default: // 2: cancelled, 3: ended by the close
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				parked <- parkedFlow{r, i}
			})
		}
		if i%4 != 3 {
			ended.Add(1)
		}
		r.ExecuteThen(func(res asyncsteps.Result) {
			got[i] = fmt.Sprintf("%v:%v", res.Args, resultErr(res.Err))
			if calls[i].Add(1) == 1 && i%4 != 3 {
				ended.Done()
			}
		})
	}
	for range flows / 2 {
		if p := <-parked; p.i%4 == 2 {
			p.r.Cancel()
		}
	}
	ended.Wait()
	g.Close()
	for i := range flows {
		want := [...]string{fmt.Sprintf("[%d]:nil", i), fmt.Sprintf("[]:Failed(%d)", i), "[]:canceled",
			"[]:InternalError(the flow's loop is closed)"}[i%4]
		if n := calls[i].Load(); n != 1 || got[i] != want {
			t.Errorf("flow %d: done called %d times, last with %s; want once, with %s", i, n, got[i], want)
		}
	}
}

// The loop holds a waiting flow of ExecuteThen that nothing else refers
// to, as it holds one of Promise: the flow is not collected, and Close
// ends it, calling done. (A waiting flow of Execute is held weakly.)
func TestExecuteThenFlowNothingRefersToIsEndedByClose(t *testing.T) {
	const flows = 20
	loop := asyncsteps.NewLoop()
	var payloads []weak.Pointer[[4096]byte]
	var ended []string
	allParked := make(chan struct{})
	parked := 0 // on the loop
	for range flows {
		payload := new([4096]byte)
		payloads = append(payloads, weak.Make(payload))
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.State().Set("payload", payload)
			as.WaitExternal()
			if parked++; parked == flows {
				close(allParked)
			}
		})
		r.ExecuteThen(func(res asyncsteps.Result) {
			ended = append(ended, resultErr(res.Err)) // on the loop, before Close returns
		})
	}
	<-allParked
	if alive := asyncsteps.AliveAfterGC(loop, payloads); alive != flows {
		t.Errorf("%d of %d waiting flows' State alive, want all", alive, flows)
	}
	loop.Close()
	want := slices.Repeat([]string{"InternalError(the flow's loop is closed)"}, flows)
	if !slices.Equal(ended, want) {
		t.Errorf("Close ended flows with %q, want %q", ended, want)
	}
}
