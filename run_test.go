package asyncsteps_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// toolCase makes a fresh tool for a test that must hold on both kinds.
type toolCase struct {
	name string
	make func(t *testing.T) asyncsteps.Tool
}

var runTools = []toolCase{
	{"TestTool", func(*testing.T) asyncsteps.Tool { return asyncsteps.NewTestTool() }},
	{"Loop", func(t *testing.T) asyncsteps.Tool {
		l := asyncsteps.NewLoop()
		t.Cleanup(l.Close)
		return l
	}},
}

// fence returns once every callback queued on loop before it has run.
func fence(t *testing.T, loop *asyncsteps.Loop) {
	t.Helper()
	for range 2 { // twice: work that the first round queued runs too
		done := make(chan struct{})
		loop.Immediate(func() { close(done) })
		waitFor(t, done)
	}
}

// API: Run returns the success args of the last completed step; an error
// that ends the flow is an *Error that errors.Is matches by code; a Timeout
// also matches context.DeadlineExceeded.
func TestRunReportsArgsAndErrors(t *testing.T) {
	for _, tool := range runTools {
		t.Run(tool.name+"/success", func(t *testing.T) {
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(1, 2) })
			r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				as.Success(args[0].(int) + args[1].(int))
			})
			args, err := runCtx(t, r)
			if err != nil {
				t.Fatal(err)
			}
			wantArgs(t, "Run args", args, 3)
		})
		t.Run(tool.name+"/error", func(t *testing.T) {
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.Unauthorized, "bad token") })
			args, err := runCtx(t, r)
			wantArgs(t, "Run args", args)
			wantError(t, err, asyncsteps.Unauthorized, "bad token")
			if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Unauthorized}) {
				t.Errorf("errors.Is(%v, Unauthorized) = false", err)
			}
			if errors.Is(err, &asyncsteps.Error{Code: asyncsteps.Timeout}) || errors.Is(err, context.Canceled) {
				t.Errorf("%v matches Timeout or context.Canceled", err)
			}
		})
		t.Run(tool.name+"/timeout", func(t *testing.T) {
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.SetTimeout(10 * time.Millisecond) })
			_, err := runCtx(t, r)
			wantError(t, err, asyncsteps.Timeout, "")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
			}
		})
	}
}

// API: when Run's context is cancelled first, the flow is cancelled (cancel
// handlers only, already run when Run returns) and the error matches
// ctx.Err(); it is not a flow error, so the unhandled-error function is not
// called.
func TestRunContextEndCancelsFlow(t *testing.T) {
	contexts := []struct {
		name string
		make func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"cancel cause", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(10*time.Millisecond, func() { cancel(errors.New("client gone")) })
			return ctx, func() { cancel(nil) }
		}, context.Canceled},
		// A deadline is a timeout, not a cancel: run_deadline_test.go.
	}
	for _, tool := range runTools {
		for _, c := range contexts {
			t.Run(tool.name+"/"+c.name, func(t *testing.T) {
				var tr tracer
				r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)),
					asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { tr.addf("unhandled:%v", err) }))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.SetCancel(tr.cancel("cancel inner"))
					}, tr.handler("onerror inner"))
					as.SetCancel(tr.cancel("cancel outer")) // after Add: still allowed
				}, tr.handler("onerror outer"))
				ctx, cancel := c.make()
				defer cancel()

				_, err := r.Run(ctx)

				if !errors.Is(err, c.want) || !errors.Is(err, ctx.Err()) {
					t.Errorf("Run error = %v, want %v", err, c.want)
				}
				var e *asyncsteps.Error
				if errors.As(err, &e) {
					t.Errorf("Run error is an *Error %v, want the context's error", e)
				}
				wantTrace(t, &tr, "cancel inner,cancel outer")
			})
		}
	}
}

// API: Run reports only once the flow has fully stopped: after it returns,
// no callback of the flow runs, not a queued step, not a timer that was
// armed, not an external completion that comes late.
func TestRunReportsOnlyAfterFlowStopped(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	var reported atomic.Bool
	var after, iterations, cancels atomic.Int32
	mark := func() {
		if reported.Load() {
			after.Add(1)
		}
	}
	handles := make(chan asyncsteps.AsyncSteps, 1)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	p := r.Parallel(func(as asyncsteps.AsyncSteps, code string) { mark() })
	p.Loop(func(as asyncsteps.AsyncSteps) { // busy: a step queued at every moment
		mark()
		iterations.Add(1)
	})
	p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { // a timer armed past the end
		mark()
		// Far past Run's 10 ms, so that even a loaded machine reaches the
		// context's end first.
		as.SetTimeout(250 * time.Millisecond)
		as.SetCancel(func(asyncsteps.AsyncSteps) { mark(); cancels.Add(1) })
		handles <- as
	}, func(as asyncsteps.AsyncSteps, code string) { mark() })
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { mark() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()

	_, err := r.Run(ctx)
	reported.Store(true)

	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run error = %v, want context.DeadlineExceeded", err)
	}
	if cancels.Load() != 1 {
		t.Errorf("the waiting step's cancel handler ran %d times before Run returned, want 1", cancels.Load())
	}
	as := <-handles
	as.Success("late") // an external completion after the end
	as.Error("Late")
	if as.IsValid() {
		t.Error("the handle of a cancelled step is still valid")
	}
	fence(t, loop)
	time.Sleep(300 * time.Millisecond) // past the timer the step had armed
	fence(t, loop)
	if n := after.Load(); n != 0 {
		t.Errorf("%d callbacks ran after Run returned", n)
	}
	t.Logf("%d loop iterations before the deadline", iterations.Load())
}

// API: Promise gives exactly one Result, whatever ends the flow, even when
// Cancel is called again, or after the end.
func TestPromiseDeliversExactlyOneResult(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root)
		check func(t *testing.T, res asyncsteps.Result)
	}{
		{"success", func(r *asyncsteps.Root) { r.SuccessStep("ok") },
			func(t *testing.T, res asyncsteps.Result) { wantSuccess(t, res, "ok") }},
		{"error", func(r *asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest) })
		}, func(t *testing.T, res asyncsteps.Result) { wantError(t, res.Err, asyncsteps.InvalidRequest, "") }},
		{"cancel", func(r *asyncsteps.Root) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				r.Cancel()
				r.Cancel()
			})
		}, func(t *testing.T, res asyncsteps.Result) {
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("Result.Err = %v, want context.Canceled", res.Err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := asyncsteps.New(asyncsteps.WithTool(loop))
			tc.build(r)
			ch := r.Promise()
			select {
			case res := <-ch:
				tc.check(t, res)
			case <-time.After(10 * time.Second):
				t.Fatal("no Result")
			}
			r.Cancel() // after the end: nothing to cancel
			fence(t, loop)
			noResult(t, ch)
		})
	}
}

// API: a Root whose flow has ended may be given new steps and run again.
func TestRunAgainAfterFlowEnded(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.SuccessStep("first")
	args, err := runCtx(t, r)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs(t, "first run", args, "first")

	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.NotImplemented) })
	_, err = runCtx(t, r)
	wantCode(t, err, asyncsteps.NotImplemented)

	r.SuccessStep("third")
	args, err = runCtx(t, r)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs(t, "third run", args, "third")
}

// Run called from a callback of the flow's own tool would wait for itself
// forever (a Loop) or drive the tool inside one of its own callbacks (a
// TestTool, whose state the outer drive then finds changed under it): it
// returns an InternalError at once instead, and the outer flow goes on.
// RunHelping does the same, and its info names it, not Run.
func TestRunOnOwnToolFails(t *testing.T) {
	infos := map[string]string{
		"Loop":     " called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow",
		"TestTool": " called from a callback of the flow's TestTool: it would drive the tool inside itself",
	}
	for _, tool := range runTools {
		for _, method := range []string{"Run", "RunHelping"} {
			t.Run(tool.name+"/"+method, func(t *testing.T) {
				on := tool.make(t)
				var got error
				outer := asyncsteps.New(asyncsteps.WithTool(on))
				outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(time.Second) // a timer the inner drive must not fire
					inner := asyncsteps.New(asyncsteps.WithTool(on))
					inner.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.WaitExternal()
						as.Tool().Deferred(2*time.Second, func() { as.Success() })
					})
					if method == "Run" {
						_, got = inner.Run(context.Background())
					} else {
						_, got = inner.RunHelping(context.Background())
					}
					as.Success("outer done")
				})
				args, err := runCtx(t, outer)
				if err != nil {
					t.Fatal(err)
				}
				wantArgs(t, "outer result", args, "outer done")
				wantError(t, got, asyncsteps.InternalError, method+infos[tool.name])
			})
		}
	}
}

// Go convention (exec.CommandContext, http.Client.Do): work started under a
// context that has already ended does not run. Run with a done context
// returns its error, but the engine runs the flow's first step before the
// cancel reaches it. Engine change proposed in the report (Root.Run).
func TestRunWithDoneContextRunsNoStep(t *testing.T) {
	for _, tool := range runTools {
		t.Run(tool.name, func(t *testing.T) {
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			r.Add(tr.step("first"))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()

			_, err := r.Run(ctx)

			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run error = %v, want context.Canceled", err)
			}
			wantTrace(t, &tr, "")
		})
	}
}

// Run and RunHelping with a nil context run no step and return an
// InternalError that says what was wrong, naming the method called, on
// every tool; the flow can run afterwards with a real context.
func TestRunWithNilContextIsMisuse(t *testing.T) {
	runs := map[string]func(*asyncsteps.Root, context.Context) ([]any, error){
		"Run":        (*asyncsteps.Root).Run,
		"RunHelping": (*asyncsteps.Root).RunHelping,
	}
	for _, tool := range runTools {
		for name, run := range runs {
			t.Run(tool.name+"/"+name, func(t *testing.T) {
				var tr tracer
				r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
				r.Add(tr.step("first"))

				_, err := run(r, nil)

				var e *asyncsteps.Error
				if !errors.As(err, &e) || e.Code != asyncsteps.InternalError ||
					e.Info != name+" called with a nil context: pass context.Background() or the caller's context" {
					t.Fatalf("error = %#v, want the InternalError for a nil context", err)
				}
				wantTrace(t, &tr, "")
				if _, err := run(r, context.Background()); err != nil {
					t.Fatalf("run with a context: %v", err)
				}
				wantTrace(t, &tr, "first")
			})
		}
	}
}

// Run returns as soon as the flow's Loop is closed under it (then no
// callback of the flow can run any more), before its context ends, with an
// InternalError that says so.
func TestRunReturnsWhenLoopClosedUnderFlow(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	time.AfterFunc(10*time.Millisecond, loop.Close)
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		wantError(t, err, asyncsteps.InternalError, "the flow's loop is closed")
		if ctx.Err() != nil {
			t.Errorf("Run returned only after its context ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still blocked 5s after its loop was closed")
	}
}
