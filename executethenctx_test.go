package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// ExecuteThenContext: ExecuteThen's function, under a context as
// PromiseContext runs a flow.

type traceIDKey struct{}

// done gets the success args once the flow has ended; nothing runs
// inside the call, and the Root runs until done is called.
func TestExecuteThenContextSuccess(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(tr.step("step"))
	r.SuccessStep("v", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	r.ExecuteThenContext(ctx, rec.done)
	wantTrace(t, tr, "")
	if !r.Running() {
		t.Fatal("not Running after ExecuteThenContext")
	}
	drive(t, tt)

	wantTrace(t, tr, "step,done[v 1]:nil")
	wantSuccess(t, rec.only(t), "v", 1)
	if r.Running() {
		t.Error("Running after done")
	}
}

// done gets the error that ended the flow, with its info; the
// unhandled-error function is not called.
func TestExecuteThenContextError(t *testing.T) {
	tr := new(tracer)
	r, tt := newThenFlow(tr)
	rec := newThenRecorder(tr)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Refused", "no stock") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	r.ExecuteThenContext(ctx, rec.done)
	drive(t, tt)

	wantTrace(t, tr, "done[]:Refused(no stock)")
	wantError(t, rec.only(t).Err, "Refused", "no stock")
}

// A cancel of ctx cancels the flow: the cancel handler runs, the error
// handler does not, and done gets ctx.Err() itself (not the cause given
// to the cancel), once. In a bubble, for the goroutine of
// context.AfterFunc, which synctest.Wait lets post the stop before the
// tool is driven.
func TestExecuteThenContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := new(tracer)
		r, tt := newThenFlow(tr)
		rec := newThenRecorder(tr)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("waits")
			as.SetCancel(tr.cancel("cancel"))
		}, tr.handler("handler"))
		ctx, cancel := context.WithCancelCause(context.Background())
		r.ExecuteThenContext(ctx, rec.done)
		drive(t, tt)
		wantTrace(t, tr, "waits")

		cancel(errors.New("client gone"))
		synctest.Wait()
		drive(t, tt)

		wantTrace(t, tr, "waits,cancel,done[]:canceled")
		if res := rec.only(t); res.Err != ctx.Err() {
			t.Errorf("Result.Err = %v, want ctx.Err() (%v)", res.Err, ctx.Err())
		}
	})
}

// ctx's deadline times the whole flow out: the waiting step's error
// handler sees Timeout with the deadline's info and ctx's cause, and may
// recover; unrecovered, done gets that Timeout, which matches
// context.DeadlineExceeded.
func TestExecuteThenContextDeadline(t *testing.T) {
	errBudget := errors.New("order budget spent")
	for _, recovers := range []bool{true, false} {
		t.Run(fmt.Sprintf("recover=%v", recovers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := new(tracer)
				r, tt := newThenFlow(tr)
				rec := newThenRecorder(tr)
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("cancel"))
				}, func(as asyncsteps.AsyncSteps, code string) {
					var e *asyncsteps.Error
					errors.As(as.State().LastException, &e)
					tr.addf("handler:%s(%s) budget=%v", code, e.Info, errors.Is(as.State().LastException, errBudget))
					if recovers {
						as.Success("fallback")
					}
				})
				ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Second, errBudget)
				defer cancel()
				r.ExecuteThenContext(ctx, rec.done)
				drive(t, tt)

				time.Sleep(5 * time.Second) // the bubble's clock: ctx's deadline passes
				synctest.Wait()
				drive(t, tt)

				res := rec.only(t)
				if recovers {
					wantTrace(t, tr, "cancel,handler:Timeout("+deadlineInfo+") budget=true,done[fallback]:nil")
					wantSuccess(t, res, "fallback")
					return
				}
				wantTrace(t, tr, "cancel,handler:Timeout("+deadlineInfo+") budget=true,done[]:Timeout("+deadlineInfo+")")
				wantError(t, res.Err, asyncsteps.Timeout, deadlineInfo)
				if !errors.Is(res.Err, errBudget) || !errors.Is(res.Err, context.DeadlineExceeded) {
					t.Errorf("Result.Err = %v, want one matching ctx's cause and context.DeadlineExceeded", res.Err)
				}
			})
		})
	}
}

// ctx's values reach the Await functions (with its deadline) and the
// hooks: a trace id put in the request's context.
func TestExecuteThenContextPassesValuesToAwaitAndHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		tr := new(tracer)
		loop.SetHooks(&asyncsteps.Hooks{
			FlowStart: func(ctx context.Context) context.Context {
				tr.addf("FlowStart:%v", ctx.Value(traceIDKey{}))
				return ctx
			},
			FlowEnd: func(ctx context.Context, err error) { tr.addf("FlowEnd:%v", ctx.Value(traceIDKey{})) },
		})
		deadline := time.Now().Add(time.Hour)
		ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), traceIDKey{}, "trace-42"), deadline)
		defer cancel()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(func(ctx context.Context) (any, error) {
			d, _ := ctx.Deadline()
			tr.addf("Await:%v deadline=%v", ctx.Value(traceIDKey{}), d.Equal(deadline))
			return ctx.Value(traceIDKey{}), nil
		})
		results := make(chan asyncsteps.Result, 1)

		r.ExecuteThenContext(ctx, func(res asyncsteps.Result) { results <- res })

		wantSuccess(t, <-results, "trace-42")
		wantTrace(t, tr, "FlowStart:trace-42,Await:trace-42 deadline=true,FlowEnd:trace-42")
	})
}

// A nil ctx, or one that has ended, starts no step and no hook sees the
// flow, as PromiseContext starts nothing: done gets the error
// PromiseContext's Result would carry, once, on the flow's tool as the
// flow would begin (never inside the call), and the Root runs until
// then. A Root.Cancel meanwhile, or ResetEvents, changes nothing. The
// steps stay on the Root, which a later start runs.
func TestExecuteThenContextRefusesANilOrEndedContext(t *testing.T) {
	errGone := errors.New("client gone")
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errGone)
	passed, cancel2 := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), errors.New("order budget spent"))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"nil", nil, "done[]:InternalError(ExecuteThenContext called with a nil context: pass context.Background() or the caller's context)"},
		{"cancelled", cancelled, "done[]:canceled"},
		{"deadline passed", passed, "done[]:Timeout(" + deadlineInfo + ")"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := new(tracer)
			r, tt := newThenFlow(tr)
			tt.SetHooks(&asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
				tr.add("FlowStart")
				return ctx
			}})
			rec := newThenRecorder(tr)
			r.Add(tr.step("step"))

			r.ExecuteThenContext(c.ctx, rec.done)
			wantTrace(t, tr, "")
			if !r.Running() {
				t.Fatal("not Running after ExecuteThenContext")
			}
			r.Cancel()
			tt.ResetEvents()
			drive(t, tt)

			wantTrace(t, tr, c.want)
			res := rec.only(t)
			switch c.name {
			case "cancelled":
				if res.Err != context.Canceled {
					t.Errorf("Result.Err = %v, want ctx.Err(), context.Canceled", res.Err)
				}
			case "deadline passed":
				if e := asError(t, res.Err); e != nil && e.Cause != context.Cause(passed) {
					t.Errorf("Timeout's Cause = %v, want ctx's cause", e.Cause)
				}
			}
			if r.Running() {
				t.Error("Running after done")
			}
			r.ExecuteThen(rec.done)
			drive(t, tt)
			wantTrace(t, tr, c.want+",FlowStart,step,done[]:nil")
		})
	}
}

// On a closed Loop done is called as ExecuteThen's is, on a goroutine of
// its own once the call has returned: with the loop's InternalError
// under a live ctx, with ctx's error under an ended one (its checks come
// first, as PromiseContext's).
func TestExecuteThenContextLoopClosed(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	live, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"live", live, "done[]:InternalError(the flow's loop is closed)"},
		{"ended", ended, "done[]:canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
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
				r.ExecuteThenContext(c.ctx, func(res asyncsteps.Result) {
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
			wantTrace(t, tr, c.want)
			rec.only(t)
		})
	}
}

// A ctx that outlives 10,000 flows (a queue consumer's, cancelled at
// shutdown) keeps nothing of them, however they ended (a success, an
// error, a Root.Cancel), and its cancel afterwards reaches none.
func TestExecuteThenContextKeepsNothingOfEndedFlows(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const flows = 10000
	states := make([]weak.Pointer[asyncsteps.State], 0, flows)
	var calls, failed, cancelled atomic.Int32
	done := func(res asyncsteps.Result) {
		calls.Add(1)
		switch {
		case errors.Is(res.Err, context.Canceled):
			cancelled.Add(1)
		case res.Err != nil:
			failed.Add(1)
		}
	}
	for i := range flows {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		states = append(states, weak.Make(r.State()))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			switch i % 3 {
			case 1:
				as.Error("Failed")
			case 2:
				as.SetCancel(func(asyncsteps.AsyncSteps) {})
			}
		})
		r.ExecuteThenContext(ctx, done)
		if i%3 == 2 {
			tt.Run()
			r.Cancel()
		}
	}
	tt.Run()
	runtime.GC()
	kept := 0
	for _, p := range states {
		if p.Value() != nil {
			kept++
		}
	}
	if kept != 0 {
		t.Errorf("the context keeps %d of %d ended flows", kept, flows)
	}
	cancel()
	tt.Run()
	if got := fmt.Sprint(calls.Load(), failed.Load(), cancelled.Load()); got != "10000 3333 3333" {
		t.Errorf("done calls, failures, cancels: %s, want 10000 3333 3333", got)
	}
}

// done may execute the Root again, under another context: the first
// context's cancel, once its execution has ended, does not reach the
// next one, whose own cancel does. Each done is called once.
func TestExecuteThenContextRestartFromDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := new(tracer)
		r, tt := newThenFlow(tr)
		rec := newThenRecorder(tr)
		first, cancelFirst := context.WithCancel(context.Background())
		second, cancelSecond := context.WithCancel(context.Background())
		r.Add(tr.step("first"))
		r.ExecuteThenContext(first, func(res asyncsteps.Result) {
			tr.addf("first done:%v running=%v", resultErr(res.Err), r.Running())
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("second waits")
				as.SetCancel(tr.cancel("second cancelled"))
			})
			r.ExecuteThenContext(second, rec.done)
		})
		drive(t, tt)
		cancelFirst()
		synctest.Wait()
		drive(t, tt)
		wantTrace(t, tr, "first,first done:nil running=false,second waits")
		if !r.Running() {
			t.Fatal("the first context's cancel reached the second execution")
		}

		cancelSecond()
		synctest.Wait()
		drive(t, tt)

		wantTrace(t, tr, "first,first done:nil running=false,second waits,second cancelled,done[]:canceled")
		rec.only(t)
	})
}

// A nil done makes it Execute under ctx: an error that ends the flow,
// the deadline's Timeout and a nil ctx's InternalError go to the
// unhandled-error function, on the tool; a cancel of ctx cancels the
// flow (its cancel handler runs) and, not being an error, goes nowhere.
func TestExecuteThenContextNilDone(t *testing.T) {
	passed, cancelPassed := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPassed()
	for _, c := range []struct {
		name  string
		ctx   context.Context // nil: a live one, cancelled once the flow waits
		nilCx bool
		code  string // the step's error, or "" for a step that waits
		trace string
	}{
		{name: "error", code: "Failed", trace: "unhandled:Failed"},
		{name: "cancel", trace: "waits,cancel"},
		{name: "nil ctx", nilCx: true, trace: "unhandled:InternalError"},
		{name: "deadline passed", ctx: passed, trace: "unhandled:Timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := new(tracer)
				r, tt := newThenFlow(tr)
				if c.ctx == nil && !c.nilCx {
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						if c.code != "" {
							as.Error(c.code)
							return
						}
						tr.add("waits")
						as.SetCancel(tr.cancel("cancel"))
					})
				}
				ctx, cancel := c.ctx, context.CancelFunc(func() {})
				if ctx == nil && !c.nilCx {
					ctx, cancel = context.WithCancel(context.Background())
				}
				r.ExecuteThenContext(ctx, nil)
				wantTrace(t, tr, "")
				drive(t, tt)
				cancel()
				synctest.Wait()
				drive(t, tt)
				if r.Running() {
					t.Fatal("still running")
				}
				wantTrace(t, tr, c.trace)
			})
		})
	}
}

// A panic in done, also in a refused start's, is logged as ExecuteThen's
// is, and the tool goes on serving flows.
func TestExecuteThenContextPanicIsLogged(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, ctx := range []context.Context{context.Background(), ended} {
		t.Run(fmt.Sprint("ended=", ctx == ended), func(t *testing.T) {
			logs := asyncsteps.CaptureLog(t)
			tt := asyncsteps.NewTestTool()
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.SuccessStep()
			calls := 0
			r.ExecuteThenContext(ctx, func(asyncsteps.Result) {
				calls++
				panic("done boom")
			})
			r2 := asyncsteps.New(asyncsteps.WithTool(tt))
			r2.SuccessStep("alive")
			wantSuccess(t, run(t, r2, tt), "alive")
			if calls != 1 || r.Running() {
				t.Errorf("done called %d times, Running %v; want once, and not running", calls, r.Running())
			}
			if got := logs.String(); !strings.Contains(got, `panic="done boom"`) {
				t.Errorf("logged %q, want the panic", got)
			}
		})
	}
}
