package asyncsteps_test

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A callback that calls runtime.Goexit while one of its deferred calls
// panics: the engine recovers that panic, which fails the step, but the
// Goexit goes on and ends the goroutine all the same. The flow must go on
// from there, as after a plain Goexit, not stop where it was.
func TestHostileGoexitWithAPanickingDefer(t *testing.T) {
	act := func() {
		defer func() { panic("deferred") }()
		runtime.Goexit()
	}
	for _, tool := range hostileTools {
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				for _, kind := range callbackKinds {
					if kind.name == "Await function" {
						continue // TestAwaitGoexitWithAPanickingDeferStillFailsTheStep: its step reports the Goexit
					}
					t.Run(kind.name, func(t *testing.T) {
						hostileCallback(t, tool, misdeed{"Goexit with a panicking defer", act, "deferred"}, kind)
					})
				}
			})
		})
	}
}

// A TestTool may be driven from a deferred call of a goroutine that
// runtime.Goexit is ending (a test's deferred clean-up after t.FailNow).
// A cancel handler that panics there looks, by its stack, like one that
// panicked during a Goexit of its own: the cancel job it was run by is
// queued to go on after the Goexit, and also goes on at once. It must end
// the flow once, not twice, and the panic, which replaces no error, is
// logged once.
func TestHostileTestToolDrivenDuringAGoexit(t *testing.T) {
	inChild(t, func(t *testing.T) {
		r, tt := newFlow()
		var tr tracer
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) {
					tr.add("cancel")
					panic("cancel handler")
				})
			})
		}, tr.handler("outer"))
		ch := r.Promise()
		logged := driveDuringAGoexit(tt)
		wantError(t, result(t, ch).Err, asyncsteps.Timeout, "")
		wantTrace(t, &tr, "cancel,outer:Timeout")
		lines := strings.Split(strings.TrimSuffix(logged, "\n"), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `msg="asyncsteps: panic in cancel handler" panic="cancel handler"`) {
			t.Errorf("the engine logged:\n%s\nwant the cancel handler's panic, once", logged)
		}
	})
}

// driveDuringAGoexit runs tt from a deferred call of a goroutine that
// runtime.Goexit ends, then once more for what that queued, if anything.
// It returns what the engine logged meanwhile (with slog's default
// logger, which it sets: run it in a child process).
func driveDuringAGoexit(tt *asyncsteps.TestTool) (logged string) {
	var logs bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tt.Run()
		runtime.Goexit()
	}()
	<-done
	tt.Run()
	return logs.String()
}

// A TestTool driven from a deferred call of a goroutine that
// runtime.Goexit is ending (a test's clean-up after t.FailNow): every
// panic of a callback then looks, by its stack, like one raised during a
// Goexit of the callback's own, and the engine queues the task that would
// go on after that Goexit, while the flow goes on at once as after any
// panic. The flow, which goes on past each of those frames (an error
// handler in the failed step's place that waits, an error unwound through
// a cancel handler that panics), must run as it would anywhere else, once,
// and the queued tasks must do nothing.
func TestHostileTestToolDrivenDuringAGoexitStepsPanic(t *testing.T) {
	inChild(t, func(t *testing.T) {
		r, tt := newFlow()
		var tr tracer
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("A")
			panic("A")
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("hA:%s", code)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("B")
				as.SetTimeout(10 * time.Millisecond) // waits on the tool's clock
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("hB:%s", code)
				as.Success("fallback")
			})
		})
		r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
			tr.addf("C%v", args)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) {
					tr.add("cancelD")
					panic("cancel D")
				})
				as.Error("Boom")
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.addf("hC:%s", code)
			as.Success()
		})
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("E")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(10 * time.Millisecond)
				as.SetCancel(tr.cancel("cancelF"))
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("hF:%s", code)
				as.Success("end")
			})
		})
		ch := r.Promise()
		logged := driveDuringAGoexit(tt)
		res := result(t, ch)
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != "end" {
			t.Errorf("Result %v %v, want [end] <nil>", res.Args, res.Err)
		}
		wantTrace(t, &tr, "A,hA:InternalError,B,hB:Timeout,C[fallback],cancelD,hC:InternalError,E,cancelF,hF:Timeout")
		if logged != "" {
			t.Errorf("the engine logged:\n%s", logged)
		}
	})
}

// A callback that calls runtime.Goexit while one of its deferred calls
// raises Error, Break or Continue on the callback's own step: the abort
// that unwinds the deferred call is recovered, but the Goexit goes on and
// ends the goroutine all the same. The flow goes on from the next one,
// as after a deferred call that panics, and the step ends as the
// deferred call says, as it would without the Goexit: with the Error
// raised, or by the Break or the Continue of its loop.
func TestHostileGoexitWithAnAbortingDefer(t *testing.T) {
	cases := []struct {
		name  string
		build func(r *asyncsteps.Root, tr *tracer)
		trace string
	}{
		{"Error in a step", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				defer as.Error("E", "deferred")
				runtime.Goexit()
			})
		}, "step,outer E:deferred"},
		{"Error in an error handler", func(r *asyncsteps.Root, tr *tracer) {
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Error("Failed")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.addf("handler %s", code)
				defer as.Error("E", "deferred")
				runtime.Goexit()
			})
		}, "handler Failed,outer E:deferred"},
		{"Break in a Repeat body", func(r *asyncsteps.Root, tr *tracer) {
			r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("body %d", i)
				if i == 1 {
					defer as.Break()
					runtime.Goexit()
				}
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
		}, "body 0,body 1,after"},
		{"Continue in a Repeat body", func(r *asyncsteps.Root, tr *tracer) {
			r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
				tr.addf("body %d", i)
				if i == 0 {
					defer as.Continue()
					runtime.Goexit()
				}
			})
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
		}, "body 0,body 1,body 2,after"},
	}
	for _, tool := range hostileTools {
		for _, c := range cases {
			t.Run(tool.name+"/"+c.name, func(t *testing.T) {
				inChildFor(t, 40*time.Second, func(t *testing.T) {
					tl, release := tool.open(t)
					defer release()
					var tr tracer
					inner := asyncsteps.New(asyncsteps.WithTool(tl))
					c.build(inner, &tr)
					outer := asyncsteps.New(asyncsteps.WithTool(tl))
					outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.CopyFrom(inner)
					}, func(as asyncsteps.AsyncSteps, code string) {
						tr.addf("outer %s:%s", code, as.State().ErrorInfo)
						as.Success("caught")
					})
					outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("done") })
					wantSuccess(t, finish(t, tl, outer.Promise()), "done")
					wantTrace(t, &tr, c.trace)
					wantServing(t, tl)
				})
			})
		}
	}
}

// The abort that a deferred call of a step of flow B makes as the step
// calls runtime.Goexit may be another flow's: the call was on the
// AsyncSteps of flow A's running step, whose callback drives the TestTool
// that runs B. The Goexit ends both callbacks, A's by the Goexit, B's by
// the misuse (see TestAbortMeantForAnotherFlowFailsTheStepItCutShort),
// and both flows go on from the next goroutine to their ends.
func TestHostileGoexitWithADeferAbortingAnotherFlow(t *testing.T) {
	var tr tracer
	tt := asyncsteps.NewTestTool()
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	var running asyncsteps.AsyncSteps
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("B step")
		defer running.Error("FromB")
		runtime.Goexit()
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("B handler %s:%s", code, as.State().ErrorInfo)
	})
	var chB <-chan asyncsteps.Result
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		running = as
		chB = b.Promise()
		for len(chB) == 0 && tt.NextEvent() { // B's events, inside this callback
		}
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("A handler %s:%s", code, as.State().ErrorInfo)
	})
	chA := a.Promise()
	driveDying(t, tt)

	wantError(t, result(t, chA).Err, asyncsteps.InternalError, goexitInfo)
	wantError(t, result(t, chB).Err, asyncsteps.InternalError, wantAbortedInfo)
	wantTrace(t, &tr, "B step,A handler InternalError:"+goexitInfo+",B handler InternalError:"+wantAbortedInfo)
}
