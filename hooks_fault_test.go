package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The hooks that have nothing of a flow to fail (LoopPass, LoopLag,
// FlowEnd, StepError) are recovered when they panic: the loop and the
// flows go on as if the hook had returned. These run in child processes:
// without that, a panicking hook crashes the process or hangs a flow.

// A LoopPass hook runs on the loop's goroutine outside of any callback: its
// panic must not end the process, and the loop must go on running flows.
// One that calls runtime.Goexit (t.FailNow in a test's hook) ends the
// loop's goroutine before the pass has run anything; the loop goes on with
// a new goroutine, which must not be stopped the same way before it runs
// its queue, or a hook that exits at every pass would keep the loop from
// running any flow, a new goroutine a pass. The same holds for a Goexit
// during which a deferred call of the hook panics: the loop's recover
// takes the panic, and Go resumes the Goexit.
func TestLoopPassHookFaultKeepsTheLoopRunning(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault func()
	}{
		{"panic", func() { panic("LoopPass") }},
		{"Goexit", runtime.Goexit},
		{"Goexit with a panicking defer", func() {
			defer panic("deferred")
			runtime.Goexit()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inChildFor(t, 10*time.Second, func(t *testing.T) { loopPassFault(t, c.fault) })
		})
	}
}

// loopPassFault runs flows on a Loop whose LoopPass hook calls fault at
// every pass.
func loopPassFault(t *testing.T, fault func()) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	var passes atomic.Int32
	l.SetHooks(&asyncsteps.Hooks{LoopPass: func(*asyncsteps.Loop, int) {
		passes.Add(1)
		fault()
	}})
	for i := range 3 {
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(i) })
		args, err := r.Run(context.Background())
		if err != nil || len(args) != 1 || args[0] != i {
			t.Fatalf("flow %d = %v %v, want [%d] <nil>", i, args, err, i)
		}
	}
	if passes.Load() == 0 {
		t.Fatal("the LoopPass hook never ran")
	}
}

// A FlowEnd hook runs before the Result is delivered: one that panics, or
// calls runtime.Goexit (t.FailNow in a test's hook), must not keep the
// Result from its waiter nor leave the Root running for good.
func TestFlowEndHookFaultStillDeliversTheResult(t *testing.T) {
	for name, fault := range map[string]func(){"panic": func() { panic("FlowEnd") }, "Goexit": runtime.Goexit} {
		t.Run(name, func(t *testing.T) {
			inChild(t, func(t *testing.T) { flowEndFault(t, fault) })
		})
	}
}

func flowEndFault(t *testing.T, fault func()) {
	tt := asyncsteps.NewTestTool()
	var ends []string
	tt.SetHooks(&asyncsteps.Hooks{FlowEnd: func(_ context.Context, err error) {
		ends = append(ends, fmt.Sprint(err))
		fault()
	}})
	var unhandled []string
	r := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		unhandled = append(unhandled, err.Code)
	}))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("A") })
	ch := r.Promise()
	driveDying(t, tt)
	select {
	case res := <-ch:
		wantSuccess(t, res, "A")
	default:
		t.Fatal("no Result after a FlowEnd hook that faulted")
	}
	if r.Running() {
		t.Fatal("the Root is still running")
	}
	// Executed again, its error still reaches the unhandled-error function.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest) })
	r.Execute()
	driveDying(t, tt)
	if got, want := fmt.Sprint(ends, unhandled), "[<nil> InvalidRequest] [InvalidRequest]"; got != want {
		t.Fatalf("FlowEnd saw, then unhandled got %s, want %s", got, want)
	}
}

// driveDying runs tt on a goroutine of its own, which a hook may end with
// runtime.Goexit, until no event is left.
func driveDying(t *testing.T, tt *asyncsteps.TestTool) {
	t.Helper()
	for tt.HasEvents() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			tt.Run()
		}()
		<-done
	}
}

// A FlowStart hook that panics or calls runtime.Goexit fails the flow
// before its first step, with an InternalError, as a step that does so
// fails its step; the flow must not be left begun and never ended.
func TestFlowStartHookFaultFailsTheFlow(t *testing.T) {
	faults := []struct {
		name  string
		fault func()
		info  string
	}{
		{"panic", func() { panic("FlowStart") }, "FlowStart"},
		{"Goexit", runtime.Goexit, goexitInfo},
		{"Goexit with a panicking defer", func() {
			defer func() { panic("deferred") }()
			runtime.Goexit()
		}, "deferred"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) { flowStartFault(t, f.fault, f.info) })
		})
		t.Run(f.name+" on a Loop", func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				l := asyncsteps.NewLoop()
				defer l.Close()
				l.SetHooks(&asyncsteps.Hooks{FlowStart: func(ctx context.Context) context.Context {
					f.fault()
					return ctx
				}})
				r := asyncsteps.New(asyncsteps.WithTool(l))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("the step ran") })
				_, err := r.Run(context.Background())
				wantError(t, err, asyncsteps.InternalError, f.info)
			})
		})
	}
}

func flowStartFault(t *testing.T, fault func(), info string) {
	tt := asyncsteps.NewTestTool()
	var tr tracer
	tt.SetHooks(&asyncsteps.Hooks{
		FlowStart: func(ctx context.Context) context.Context {
			tr.add("start")
			fault()
			return ctx
		},
		FlowEnd: func(_ context.Context, err error) { tr.addf("end(%v)", err) },
	})
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(tr.step("A"))
	ch := r.Promise()
	driveDying(t, tt)
	select {
	case res := <-ch:
		wantError(t, res.Err, asyncsteps.InternalError, info)
	default:
		t.Fatal("no Result after a FlowStart hook that faulted")
	}
	if st := r.State(); st.ErrorInfo != info {
		t.Errorf("ErrorInfo = %q, want %q", st.ErrorInfo, info)
	}
	wantTrace(t, &tr, "start,end(InternalError: "+info+")")
	if r.Running() {
		t.Fatal("the Root is still running")
	}
}

// A cancel requested of a flow before its FlowStart hook faults wins over
// the hook's InternalError, as over any error raised after it: the flow
// ends cancelled, with the error in its State, and the unhandled-error
// function is not called.
func TestFlowStartHookFaultAfterACancelEndsCancelled(t *testing.T) {
	faults := []struct {
		name  string
		fault func()
		info  string
	}{
		{"panic", func() { panic("FlowStart") }, "FlowStart"},
		{"Goexit", runtime.Goexit, goexitInfo},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				var tr tracer
				tt.SetHooks(&asyncsteps.Hooks{
					FlowStart: func(ctx context.Context) context.Context {
						tr.add("start")
						f.fault()
						return ctx
					},
					FlowEnd: func(_ context.Context, err error) { tr.addf("end(%v)", err) },
				})
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				r.Add(tr.step("A"))
				ch := r.Promise()
				r.Cancel()
				driveDying(t, tt)
				select {
				case res := <-ch:
					if !errors.Is(res.Err, context.Canceled) {
						t.Errorf("Result.Err = %v, want one matching context.Canceled", res.Err)
					}
				default:
					t.Fatal("no Result after a FlowStart hook that faulted")
				}
				if st := r.State(); st.ErrorInfo != f.info {
					t.Errorf("ErrorInfo = %q, want %q", st.ErrorInfo, f.info)
				}
				wantTrace(t, &tr, "start,end(context canceled)")

				tr = tracer{}
				r.Add(tr.step("A"))
				r.ExecuteWith(func(err *asyncsteps.Error) { tr.addf("unhandled:%s", err.Code) })
				r.Cancel()
				driveDying(t, tt)
				wantTrace(t, &tr, "start,end(context canceled)")
			})
		})
	}
}

// A StepError hook that panics must change nothing of the flow: the error
// it was told of goes to the handlers as it would without the hook, for
// an error raised in a callback (Error, a panic) and one the engine
// raises between callbacks (a timeout).
func TestStepErrorHookPanicLeavesTheFlowAsItIs(t *testing.T) {
	inChild(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		var tr tracer
		tt.SetHooks(&asyncsteps.Hooks{StepError: func(_ context.Context, err *asyncsteps.Error) {
			tr.add("hook:" + err.Code)
			panic("StepError")
		}})
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		recoverAs := func(name string) asyncsteps.ErrorFunc {
			return func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("%s:%s:%s", name, code, as.State().ErrorInfo)
				as.Success()
			}
		}
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "bad") }, recoverAs("A"))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { panic("B") }, recoverAs("B"))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(time.Second) }, recoverAs("C"))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("D") })
		ch := r.Promise()
		tt.Run()
		select {
		case res := <-ch:
			wantSuccess(t, res, "D")
		default:
			t.Fatal("no Result after a StepError hook that panicked")
		}
		wantTrace(t, &tr, "hook:InvalidRequest,A:InvalidRequest:bad,hook:InternalError,B:InternalError:B,hook:Timeout,C:Timeout:")
	})
}

// A panic in AwaitStart or AwaitEnd is a panic of the Await function that
// they wrap: the step fails with InternalError, and the flow goes on.
func TestAwaitHookPanicFailsTheStep(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for _, which := range []string{"AwaitStart", "AwaitEnd"} {
			l := asyncsteps.NewLoop()
			hooks := &asyncsteps.Hooks{}
			if which == "AwaitStart" {
				hooks.AwaitStart = func(context.Context) context.Context { panic(which) }
			} else {
				hooks.AwaitEnd = func(context.Context, *asyncsteps.Error) { panic(which) }
			}
			l.SetHooks(hooks)
			r := asyncsteps.New(asyncsteps.WithTool(l))
			var got string
			r.Await(func(context.Context) (any, error) { return "value", nil }, func(as asyncsteps.AsyncSteps, code string) {
				got = code + ": " + as.State().ErrorInfo
				as.Success("caught")
			})
			args, err := r.Run(context.Background())
			if err != nil || fmt.Sprint(args) != "[caught]" || got != "InternalError: panic: "+which {
				t.Errorf("%s: flow %v %v, handler saw %q; want [caught] <nil> and %q", which, args, err, got, "InternalError: panic: "+which)
			}
			l.Close()
		}
	})
}

// An AwaitEnd hook that panics while it reports an Await function that
// called runtime.Goexit must not keep the step from failing: the goroutine
// is ending, and the step fails with the Goexit's InternalError.
func TestAwaitEndHookPanicAfterAGoexit(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var ended atomic.Int32
		l.SetHooks(&asyncsteps.Hooks{AwaitEnd: func(context.Context, *asyncsteps.Error) {
			ended.Add(1)
			panic("AwaitEnd")
		}})
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Second) // a guard against a hang; the step fails at once
			as.Await(func(context.Context) (any, error) {
				runtime.Goexit()
				return nil, nil
			})
		})
		_, err := r.Run(context.Background())
		wantError(t, err, asyncsteps.InternalError, goexitInfo)
		if n := ended.Load(); n != 1 {
			t.Errorf("AwaitEnd ran %d times, want 1", n)
		}
	})
}
