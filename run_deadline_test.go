package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// runDeadline runs r under a context whose deadline passes after d, inside
// a synctest bubble's fake time when called from one.
func runDeadline(r *asyncsteps.Root, d time.Duration) (context.Context, []any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	args, err := r.Run(ctx)
	return ctx, args, err
}

// API: a deadline of Run's context is a timeout of the whole flow: the
// innermost running step fails with Timeout, each level runs its cancel
// handler then its error handler, and the flow's error matches ctx.Err();
// it is a flow error given to Run, not to the unhandled-error function.
func TestRunDeadlineTimesOutFlow(t *testing.T) {
	for _, tool := range runTools {
		t.Run(tool.name, func(t *testing.T) {
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)),
				asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { tr.addf("unhandled:%v", err) }))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel("cancel inner"))
				}, tr.handler("onerror inner"))
				as.SetCancel(tr.cancel("cancel outer"))
			}, tr.handler("onerror outer"))

			ctx, _, err := runDeadline(r, 10*time.Millisecond)

			wantError(t, err, asyncsteps.Timeout, deadlineInfo)
			if !errors.Is(err, ctx.Err()) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(%v, %v) = false", err, ctx.Err())
			}
			wantTrace(t, &tr, "cancel inner,onerror inner:Timeout,cancel outer,onerror outer:Timeout")
		})
	}
}

// An error handler may recover from the deadline with a fallback; the
// Await function's context, which carries Run's deadline, ends with
// context.DeadlineExceeded. Once the deadline has passed, a step that
// waits fails with Timeout at once, so the flow cannot outlive it.
func TestRunDeadlineHandlersMayRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr, call tracer // the call runs beside the flow: a trace of its own
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(func(ctx context.Context) (any, error) {
			d, ok := ctx.Deadline()
			call.addf("deadline in %v %v", d.Sub(start), ok)
			<-ctx.Done()
			call.addf("%v@%v", ctx.Err(), time.Since(start))
			return nil, ctx.Err()
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("fallback:%s", code)
			as.Success("cached")
		})
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("next%v", args)
			as.WaitExternal() // never completed: only the deadline ends it
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("next:onerror:%s@%v", code, time.Since(start))
			as.Success("still cached")
		})

		_, args, err := runDeadline(r, 50*time.Millisecond)

		if err != nil {
			t.Fatalf("Run error = %v, want the fallback", err)
		}
		wantArgs(t, "Run args", args, "still cached")
		wantTrace(t, &tr, "fallback:Timeout,next[cached],next:onerror:Timeout@50ms")
		synctest.Wait()
		wantTrace(t, &call, "deadline in 50ms true,context deadline exceeded@50ms")
	})
}

// Inside a Parallel, the Parallel itself times out: its branches are
// cancelled (no error handler of theirs runs), then its own handler sees
// Timeout.
func TestRunDeadlineTimesOutParallelAsAWhole(t *testing.T) {
	for _, tool := range runTools {
		t.Run(tool.name, func(t *testing.T) {
			var tr tracer
			r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
			p := r.Parallel(tr.handler("parallel:onerror"))
			for _, name := range []string{"A", "B"} {
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetCancel(tr.cancel(name + ":cancel"))
				}, tr.handler(name+":onerror"))
			}

			_, _, err := runDeadline(r, 10*time.Millisecond)

			wantError(t, err, asyncsteps.Timeout, deadlineInfo)
			wantTrace(t, &tr, "A:cancel,B:cancel,parallel:onerror:Timeout")
		})
	}
}

// A plain cancel of Run's context before its deadline stays a cancel.
func TestRunCancelBeforeDeadlineIsACancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(tr.cancel("cancel"))
		}, tr.handler("onerror"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		time.AfterFunc(10*time.Millisecond, cancel)

		_, err := r.Run(ctx)

		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error = %v, want context.Canceled", err)
		}
		var e *asyncsteps.Error
		if errors.As(err, &e) {
			t.Errorf("Run error is an *Error %v, want the context's error", e)
		}
		wantTrace(t, &tr, "cancel")
	})
}

// The context of an Await function carries the nearest deadline: the step
// timeouts around its step (the time left on them) and Run's deadline. On
// a Loop inside a synctest bubble the clock stands still, so the time left
// is exact.
func TestAwaitContextCarriesNearestDeadline(t *testing.T) {
	cases := []struct {
		name          string
		outer, inner  time.Duration // SetTimeout of the outer and inner step; 0: none
		run           time.Duration // Run's deadline; 0: none
		want          time.Duration
		wantsDeadline bool
	}{
		{"none", 0, 0, 0, 0, false},
		{"inner step", time.Second, 300 * time.Millisecond, 0, 300 * time.Millisecond, true},
		{"outer step", 200 * time.Millisecond, time.Second, 0, 200 * time.Millisecond, true},
		{"Run", time.Second, 0, 150 * time.Millisecond, 150 * time.Millisecond, true},
		{"step before Run", 0, 100 * time.Millisecond, time.Second, 100 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				type key struct{}
				var got time.Duration
				var ok bool
				var value any
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					if tc.outer > 0 {
						as.SetTimeout(tc.outer)
					}
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						if tc.inner > 0 {
							as.SetTimeout(tc.inner)
						}
						as.Await(func(ctx context.Context) (any, error) {
							var d time.Time
							d, ok = ctx.Deadline()
							got, value = time.Until(d), ctx.Value(key{})
							return nil, nil
						})
					})
				})
				ctx := context.WithValue(context.Background(), key{}, "caller's value")
				if tc.run > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.run)
					defer cancel()
				}
				if _, err := r.Run(ctx); err != nil {
					t.Fatal(err)
				}
				if ok != tc.wantsDeadline || ok && got != tc.want {
					t.Errorf("Deadline() = %v from now, %v; want %v, %v", got, ok, tc.want, tc.wantsDeadline)
				}
				if value != "caller's value" {
					t.Errorf("ctx.Value = %v, want Run's context's value", value)
				}
			})
		})
	}
}

// On a TestTool, a step timeout's time left is virtual: the Await function,
// which runs on the wall clock, gets it as that much wall time from the
// moment it starts.
func TestAwaitContextDeadlineOnTestToolIsTimeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		var left time.Duration
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.WaitExternal()
				as.Tool().Deferred(400*time.Millisecond, func() { as.Success() })
			})
			as.Await(func(ctx context.Context) (any, error) {
				d, _ := ctx.Deadline()
				left = time.Until(d)
				return nil, nil
			})
		})
		res := r.Promise()
		tt.Advance(400 * time.Millisecond)
		synctest.Wait()
		drive(t, tt)
		wantSuccess(t, result(t, res), nil)
		if left != 600*time.Millisecond {
			t.Errorf("deadline %v from the call's start, want the 600ms left", left)
		}
	})
}

// A step timeout that ResetEvents dropped gives an Await function no
// deadline: the step waits on until it is completed or cancelled, so a
// function that sets its I/O deadlines from its context must not fail
// by a timer that will never fire.
func TestAwaitContextHasNoDeadlineOfATimeoutResetEventsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := asyncsteps.NewTestTool()
		var held asyncsteps.AsyncSteps
		deadlines := 0
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				held = as
				as.WaitExternal()
			})
			as.Await(func(ctx context.Context) (any, error) {
				if _, ok := ctx.Deadline(); ok {
					deadlines++
				}
				return nil, ctx.Err()
			})
		})
		res := r.Promise()
		tt.Advance(100 * time.Millisecond)
		tt.ResetEvents()
		held.Success()
		tt.Run()
		synctest.Wait()
		drive(t, tt)
		wantSuccess(t, result(t, res), nil)
		if deadlines != 0 {
			t.Error("the Await function has a deadline of a timeout that ResetEvents dropped")
		}
	})
}

// An Await function that runs already when ResetEvents drops the timeout
// of its step keeps the deadline it was given (a context's deadline never
// changes), and its context, cancelled once the tool's clock is past that
// deadline, reports context.DeadlineExceeded; one cancelled before it,
// context.Canceled (docs/DESIGN.md#virtual-time).
func TestAwaitRunningWhenResetEventsDropsItsTimeoutKeepsItsDeadline(t *testing.T) {
	for _, c := range []struct {
		name    string
		advance time.Duration
		want    error
	}{
		{"cancelled past the deadline", 2 * time.Second, context.DeadlineExceeded},
		{"cancelled before it", 500 * time.Millisecond, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt := asyncsteps.NewTestTool()
				var hasDeadline bool
				var ctxErr error
				r := asyncsteps.New(asyncsteps.WithTool(tt))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.SetTimeout(time.Second)
					as.Await(func(ctx context.Context) (any, error) {
						_, hasDeadline = ctx.Deadline()
						<-ctx.Done()
						ctxErr = ctx.Err()
						return nil, ctxErr
					})
				})
				res := r.Promise()
				tt.Advance(100 * time.Millisecond)
				synctest.Wait() // the function waits for its context's end
				tt.ResetEvents()
				tt.Advance(c.advance)
				r.Cancel()
				drive(t, tt)
				synctest.Wait()
				if err := result(t, res).Err; !errors.Is(err, context.Canceled) {
					t.Errorf("Result.Err = %v, want one matching context.Canceled", err)
				}
				if !hasDeadline {
					t.Error("the Await function had no deadline")
				}
				if ctxErr != c.want {
					t.Errorf("the function's ctx.Err() = %v, want %v", ctxErr, c.want)
				}
			})
		})
	}
}

// The deadline of Run's context passes while a completion from another
// goroutine is on its way to the waiting step (claimed, not yet run on the
// loop): the completion wins, then the flow times out where it has got
// to, also when it waits for nothing more. The timeout was dropped: a flow
// that went on without waiting again, here a loop of synchronous steps,
// outlived the deadline.
func TestRunDeadlineOutlastsACompletionOnItsWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var held asyncsteps.AsyncSteps
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			held = as
			as.WaitExternal()
		})
		const most = 10000 // iterations: far more than run between two yields
		n := 0
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Loop(func(as asyncsteps.AsyncSteps) {
				if n++; n == most {
					as.Break()
				}
			})
		}, func(as asyncsteps.AsyncSteps, code string) { tr.add("loop:" + code) })
		errc := make(chan error, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		go func() {
			_, err := r.Run(ctx)
			errc <- err
		}()
		synctest.Wait() // the first step waits
		gate := make(chan struct{})
		loop.Immediate(func() { <-gate })
		time.Sleep(50 * time.Millisecond) // fake time: the deadline passes
		synctest.Wait()                   // Run has queued the timeout, behind the gate
		held.Success()                    // claimed now, its completion queued behind the timeout
		close(gate)

		err := <-errc

		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run error = %v, want the Timeout of its deadline", err)
		}
		wantTrace(t, &tr, "loop:Timeout")
		if n >= most {
			t.Errorf("the loop ran all its %d iterations past the deadline", n)
		}
	})
}

// Past the deadline of Run's context every step that waits fails at once:
// a loop whose iterations wait, with an error handler in each that
// recovers, would spin on the loop's goroutine for ever and Run never
// return. A loop through whose iteration a timeout of the deadline went
// begins no further iteration: the next one fails with Timeout, which
// goes on through the loops around it likewise; a Retry's attempts are
// such iterations, also when Continue starts the next. A loop begun after
// the deadline, a fallback's, runs as usual.
func TestRunDeadlineEndsLoopsItTimedOut(t *testing.T) {
	const most = 1000 // iterations before a loop breaks by itself
	waitRecovering := func(tr *tracer, name string) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.addf("%s:%s", name, code)
					as.Success()
				})
		}
	}
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root, tr *tracer)
		trace string
	}{
		{"Loop", func(r *asyncsteps.Root, tr *tracer) {
			n := 0
			r.Loop(func(as asyncsteps.AsyncSteps) {
				if n++; n > most {
					as.Break()
				}
				as.Add(waitRecovering(tr, "wait"))
			})
		}, "wait:Timeout"},
		{"ForEach", func(r *asyncsteps.Root, tr *tracer) {
			r.ForEach(make([]int, most), func(as asyncsteps.AsyncSteps, _, _ any) {
				as.Add(waitRecovering(tr, "wait"))
			})
		}, "wait:Timeout"},
		{"nested", func(r *asyncsteps.Root, tr *tracer) {
			n := 0
			r.Loop(func(as asyncsteps.AsyncSteps) {
				if n++; n > most {
					as.Break()
				}
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Repeat(most, func(as asyncsteps.AsyncSteps, _ int) {
						as.Add(waitRecovering(tr, "inner"))
					})
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.add("outer:" + code)
					as.Success()
				})
			})
		}, "inner:Timeout,outer:Timeout"},
		{"Parallel", func(r *asyncsteps.Root, tr *tracer) {
			r.Repeat(most, func(as asyncsteps.AsyncSteps, _ int) {
				p := as.Parallel(func(as asyncsteps.AsyncSteps, code string) {
					tr.add("parallel:" + code)
					as.Success()
				})
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
			})
		}, "parallel:Timeout"},
		{"Retry", func(r *asyncsteps.Root, tr *tracer) {
			// Continue starts the next attempt, as a loop's next iteration,
			// without asking whether to retry.
			asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: most, Label: "retry"}, func(as asyncsteps.AsyncSteps, _ int) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() },
					func(as asyncsteps.AsyncSteps, code string) {
						tr.add("attempt:" + code)
						as.Continue("retry")
					})
			})
		}, "attempt:Timeout"},
		{"fallback loop", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() },
				func(as asyncsteps.AsyncSteps, code string) {
					tr.add("fallback:" + code)
					as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) { tr.addf("cached %d", i) })
				})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("served") })
		}, "fallback:Timeout,cached 0,cached 1,cached 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				var tr tracer
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				c.build(r, &tr)
				start := time.Now()

				_, args, err := runDeadline(r, 50*time.Millisecond)

				if c.name == "fallback loop" {
					if err != nil || len(args) != 1 || args[0] != "served" {
						t.Errorf("Run = %v, %v; want [served], nil", args, err)
					}
				} else if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Run error = %v, want the Timeout of its deadline", err)
				}
				wantTrace(t, &tr, c.trace)
				if d := time.Since(start); d != 50*time.Millisecond {
					t.Errorf("Run returned after %v, want 50ms", d)
				}
			})
		})
	}
}

// A deadline that passed before Run, RunHelping or PromiseContext was
// called starts nothing, and is the Timeout the same deadline gives a
// flow it passes as the flow begins: an *Error matching
// context.DeadlineExceeded, as the deadline's rule and a Result's Err
// (nil, an *Error, or a cancel) say, with the deadline's info and the
// context's cause. Before, these returned the bare
// context.DeadlineExceeded, which no code test finds: a request that came
// with its budget spent was an error of no code, while one whose budget
// ran out a moment after its start was a Timeout.
func TestRunUnderAPassedDeadlineIsATimeout(t *testing.T) {
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), errBudget)
	defer cancel()
	for _, tool := range runTools {
		for _, s := range deadlineStarts {
			t.Run(tool.name+"/"+s.name, func(t *testing.T) {
				var tr tracer
				r := asyncsteps.New(asyncsteps.WithTool(tool.make(t)))
				r.Add(tr.step("ran"), tr.handler("onerror"))
				err := s.run(ctx, r)
				wantDeadlineError(t, ctx, err)
				if !errors.Is(err, errBudget) {
					t.Errorf("errors.Is(%v, errBudget) = false", err)
				}
				if r.Running() || tr.String() != "" {
					t.Errorf("running %v, trace %q; want false, nothing run", r.Running(), tr.String())
				}
			})
		}
	}
}

// deadlineInfo is the info of the Timeout with which the deadline of the
// flow's context times a step out.
const deadlineInfo = "the flow's context deadline passed"

// errBudget is the cause a request's context gives its deadline
// (context.WithTimeoutCause): what an error handler tests to tell the
// request's budget from a step's own timeout.
var errBudget = errors.New("request budget spent")

// timeoutSeen returns an error handler that records, under name, the code
// it sees, ErrorInfo, whether LastException matches errBudget, and what
// LastException wraps: the Cause of the Timeout.
func timeoutSeen(tr *tracer, name string) asyncsteps.ErrorFunc {
	return func(as asyncsteps.AsyncSteps, code string) {
		exc := as.State().LastException
		tr.addf("%s:%s %q budget=%v cause=%v", name, code, as.State().ErrorInfo, errors.Is(exc, errBudget), errors.Unwrap(exc))
	}
}

// wantDeadlineError fails the test unless err is the Timeout of the
// deadline of ctx: its info says so, its Cause is context.Cause(ctx), and
// it matches ctx.Err().
func wantDeadlineError(t *testing.T, ctx context.Context, err error) {
	t.Helper()
	wantError(t, err, asyncsteps.Timeout, deadlineInfo)
	if got, want := errors.Unwrap(err), context.Cause(ctx); got != want {
		t.Errorf("Cause = %v, want context.Cause(ctx) = %v", got, want)
	}
	if !errors.Is(err, ctx.Err()) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, %v) = false", err, ctx.Err())
	}
}

// deadlineStarts are the ways to run a flow under a context, each
// returning the flow's error.
var deadlineStarts = []struct {
	name string
	run  func(ctx context.Context, r *asyncsteps.Root) error
}{
	{"Run", func(ctx context.Context, r *asyncsteps.Root) error { _, err := r.Run(ctx); return err }},
	{"RunHelping", func(ctx context.Context, r *asyncsteps.Root) error { _, err := r.RunHelping(ctx); return err }},
	{"Run[T]", func(ctx context.Context, r *asyncsteps.Root) error { _, err := asyncsteps.Run[int](ctx, r); return err }},
	{"PromiseContext", func(ctx context.Context, r *asyncsteps.Root) error { return (<-r.PromiseContext(ctx)).Err }},
}

// The Timeout with which the deadline of the flow's context times a step
// out says so in its info, and has the context's cause as its Cause:
// context.DeadlineExceeded, or the cause given with
// context.WithTimeoutCause, which a handler tests with errors.Is to tell
// the request's budget from a step's own timeout (whose info is empty).
// It still matches ctx.Err(). Before, both were a bare Timeout.
func TestRunDeadlineTimeoutSaysSoWithItsCause(t *testing.T) {
	for _, s := range deadlineStarts {
		for _, withCause := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/cause=%v", s.name, withCause), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					loop := asyncsteps.NewLoop()
					defer loop.Close()
					var tr tracer
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, timeoutSeen(&tr, "inner"))
					}, timeoutSeen(&tr, "outer"))
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					cause := "context deadline exceeded"
					if withCause {
						ctx, cancel = context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errBudget)
						cause = errBudget.Error()
					}
					defer cancel()

					err := s.run(ctx, r)

					wantDeadlineError(t, ctx, err)
					seen := fmt.Sprintf("Timeout %q budget=%v cause=%s", deadlineInfo, withCause, cause)
					wantTrace(t, &tr, "inner:"+seen+",outer:"+seen)
				})
			})
		}
	}
}

// Every Timeout the deadline of the flow's context raises says so and has
// its cause, wherever it finds the flow: an Await, an AwaitFlow, a
// Parallel as a whole, a step that waits after a handler recovered, the
// next iteration of a loop it went through, a ForEachLimit that would
// wait for a slot. An Await function's context ends with
// context.DeadlineExceeded; what it returns then comes too late, the step
// having failed with the deadline's Timeout.
func TestRunDeadlineTimeoutsAllSaySo(t *testing.T) {
	seen := fmt.Sprintf("Timeout %q budget=true cause=%v", deadlineInfo, errBudget)
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root, tr *tracer)
		trace string
	}{
		{"Await", func(r *asyncsteps.Root, tr *tracer) {
			// The function's context and the flow end at the same instant:
			// it traces once the handler has, for one order of the trace.
			handled := make(chan struct{})
			r.Await(func(ctx context.Context) (any, error) {
				<-ctx.Done()
				<-handled
				tr.addf("function:%v", ctx.Err())
				return nil, ctx.Err()
			}, func(as asyncsteps.AsyncSteps, code string) {
				defer close(handled)
				timeoutSeen(tr, "await")(as, code)
			})
		}, "await:" + seen + ",function:context deadline exceeded"},
		{"AwaitFlow", func(r *asyncsteps.Root, tr *tracer) {
			sub := asyncsteps.New(asyncsteps.WithTool(r.Tool()))
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(tr.cancel("sub:cancel"))
			}, timeoutSeen(tr, "sub"))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, sub) }, timeoutSeen(tr, "awaitflow"))
		}, "awaitflow:" + seen + ",sub:cancel"},
		{"Parallel", func(r *asyncsteps.Root, tr *tracer) {
			p := r.Parallel(timeoutSeen(tr, "parallel"))
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, timeoutSeen(tr, "branch"))
		}, "parallel:" + seen},
		{"step after recovery", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, func(as asyncsteps.AsyncSteps, code string) {
				timeoutSeen(tr, "first")(as, code)
				as.Success()
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, timeoutSeen(tr, "next"))
		}, "first:" + seen + ",next:" + seen},
		{"next iteration", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Loop(func(as asyncsteps.AsyncSteps) {
					as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, func(as asyncsteps.AsyncSteps, code string) {
						timeoutSeen(tr, "iteration")(as, code)
						as.Success()
					})
				})
			}, timeoutSeen(tr, "loop"))
		}, "iteration:" + seen + ",loop:" + seen},
		{"ForEachLimit slot", func(r *asyncsteps.Root, tr *tracer) {
			// Begun past the deadline: item 0's Await fails at once, and
			// its function holds the only slot while item 1 would wait.
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, func(as asyncsteps.AsyncSteps, code string) {
				timeoutSeen(tr, "first")(as, code)
				as.Success()
			})
			release := make(chan struct{})
			time.AfterFunc(time.Second, func() { close(release) })
			asyncsteps.ForEachLimit(r, countTo(2), 1, func(as asyncsteps.AsyncSteps, i, _ int) {
				as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.Await(func(context.Context) (any, error) { <-release; return nil, nil }) // holds the slot
				}, func(as asyncsteps.AsyncSteps, code string) {
					timeoutSeen(tr, fmt.Sprint("item ", i))(as, code)
					as.Success()
				})
			}, timeoutSeen(tr, "foreach"))
		}, "first:" + seen + ",item 0:" + seen + ",foreach:" + seen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loop := asyncsteps.NewLoop()
				defer loop.Close()
				var tr tracer
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				c.build(r, &tr)
				ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errBudget)
				defer cancel()

				_, err := r.Run(ctx)

				wantDeadlineError(t, ctx, err)
				synctest.Wait() // the Await functions return
				wantTrace(t, &tr, c.trace)
				time.Sleep(time.Second) // a held slot's function returns
			})
		})
	}
}

// A step's own timeout keeps its empty info and has no Cause, also under
// a context with a deadline and a cause of its own, and so does one around
// an Await: only the deadline of the flow's context says so.
func TestStepTimeoutUnderRunDeadlineKeepsNoInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Millisecond)
			as.WaitExternal()
		}, func(as asyncsteps.AsyncSteps, code string) {
			timeoutSeen(&tr, "step")(as, code)
			as.Success()
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Millisecond)
			as.Await(func(ctx context.Context) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
		}, timeoutSeen(&tr, "await"))
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Second, errBudget)
		defer cancel()

		_, err := r.Run(ctx)

		wantError(t, err, asyncsteps.Timeout, "")
		if errors.Unwrap(err) != nil || errors.Is(err, errBudget) {
			t.Errorf("a step's Timeout %v has the Cause %v", err, errors.Unwrap(err))
		}
		wantTrace(t, &tr, `step:Timeout "" budget=false cause=<nil>,await:Timeout "" budget=false cause=<nil>`)
	})
}

// ownDeadlineCtx is a context of a user's own type whose deadline passes
// when the test says so, over a context that never ends: context.Cause,
// which asks that context for its cause, finds none.
type ownDeadlineCtx struct {
	context.Context
	passed atomic.Bool
	done   chan struct{}
}

func newOwnDeadlineCtx(t *testing.T) *ownDeadlineCtx {
	live, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // once the test is over: its cause stays nil till then
	return &ownDeadlineCtx{Context: live, done: make(chan struct{})}
}

func (c *ownDeadlineCtx) pass() {
	c.passed.Store(true)
	close(c.done)
}

func (c *ownDeadlineCtx) Done() <-chan struct{} { return c.done }

func (c *ownDeadlineCtx) Err() error {
	if c.passed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// A flow whose context's deadline passes as it begins, after Run looked
// at it, times out before its first step with the deadline's Timeout, as
// a flow it passes later does. A context of the user's whose
// context.Cause is nil, since its deadline is its own, gives the Timeout
// its Err as Cause.
func TestRunDeadlinePassedAsTheFlowBeginsSaysSo(t *testing.T) {
	ctx := newOwnDeadlineCtx(t)
	tt := asyncsteps.NewTestTool()
	tt.SetHooks(&asyncsteps.Hooks{FlowStart: func(context.Context) context.Context {
		ctx.pass() // after Run looked at ctx, before the flow does
		return nil
	}})
	var tr tracer
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(tr.step("first step"))

	_, err := r.Run(ctx)

	wantError(t, err, asyncsteps.Timeout, deadlineInfo)
	if errors.Unwrap(err) != context.DeadlineExceeded || !errors.Is(err, ctx.Err()) {
		t.Errorf("Cause = %v, want context.DeadlineExceeded", errors.Unwrap(err))
	}
	wantTrace(t, &tr, "")
}

// An error handler that turns the deadline's Timeout into a code of its
// own keeps the deadline's cause under it, as it keeps an Await
// function's Go error: the flow's error still matches the cause, though
// no longer ctx.Err() by its code.
func TestRunDeadlineCauseOutlivesAHandlersCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }, func(as asyncsteps.AsyncSteps, code string) {
			as.Error("BudgetSpent", "gave up")
		})
		ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errBudget)
		defer cancel()

		_, err := r.Run(ctx)

		wantError(t, err, "BudgetSpent", "gave up")
		if errors.Unwrap(err) != errBudget || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Cause = %v, matches context.DeadlineExceeded %v; want errBudget, false", errors.Unwrap(err), errors.Is(err, context.DeadlineExceeded))
		}
	})
}
