package asyncsteps_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Error, Break and Continue called from another goroutine while a step that
// has not declared that it waits still runs: the step fails with an
// InternalError that names the call, the other goroutine's call returns,
// and the process and the loop go on. Each case runs in a child process: a
// crash (an abort panicking on the other goroutine) fails it.

// foreignInfo is the info of the InternalError of call made from another
// goroutine on a step that does not wait.
func foreignInfo(call string) string {
	return call + " called from another goroutine on a step that does not wait:" +
		" call WaitExternal, SetTimeout or SetCancel first"
}

// foreignCall is a call made from another goroutine, and the name the
// InternalError gives it.
type foreignCall struct {
	name string
	do   func(as asyncsteps.AsyncSteps)
}

var foreignCalls = []foreignCall{
	{"Error(Boom)", func(as asyncsteps.AsyncSteps) { as.Error("Boom", "from another goroutine") }},
	{"Break", func(as asyncsteps.AsyncSteps) { as.Break() }},
	{"Break(retry)", func(as asyncsteps.AsyncSteps) { as.Break("retry") }},
	{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue() }},
	{"Continue(retry)", func(as asyncsteps.AsyncSteps) { as.Continue("retry") }},
	// A misuse is named by what its info says: the user called no Error.
	{"Add: nil step function", func(as asyncsteps.AsyncSteps) { as.Add(nil) }},
	{"Sync: nil Syncer", func(as asyncsteps.AsyncSteps) { as.Sync(nil, nil) }},
}

// foreignTools are the tools the cases run on: a Loop, whose goroutine
// runs the callback, and a TestTool, driven by the test's goroutine.
var foreignTools = []string{"Loop", "TestTool"}

// runOn runs r to its end on l, or on tt if it is not nil, and returns
// its Result.
func runOn(t *testing.T, r *asyncsteps.Root, l *asyncsteps.Loop, tt *asyncsteps.TestTool) asyncsteps.Result {
	t.Helper()
	if tt != nil {
		return run(t, r, tt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args, err := r.Run(ctx)
	return asyncsteps.Result{Args: args, Err: err}
}

// openTool returns the tool named name and a function that releases it.
func openTool(name string) (asyncsteps.Tool, *asyncsteps.Loop, *asyncsteps.TestTool, func()) {
	if name == "Loop" || name == "LoopUnmarked" {
		l := asyncsteps.NewLoop()
		return l, l, nil, l.Close
	}
	tt := asyncsteps.NewTestTool()
	return tt, nil, tt, func() {}
}

// onForeignTools runs body in a child process once per tool of
// foreignTools, each with a new flow on that tool and a tracer; body ends
// with run, which runs the flow to its end.
func onForeignTools(t *testing.T, body func(t *testing.T, r *asyncsteps.Root, tr *tracer, run func() asyncsteps.Result)) {
	for _, toolName := range foreignTools {
		t.Run(toolName, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				tool, l, tt, release := openTool(toolName)
				defer release()
				r := asyncsteps.New(asyncsteps.WithTool(tool))
				body(t, r, &tracer{}, func() asyncsteps.Result { return runOn(t, r, l, tt) })
			})
		})
	}
}

func TestForeignCallOnStepThatDoesNotWait(t *testing.T) {
	for _, toolName := range foreignTools {
		for _, fc := range foreignCalls {
			t.Run(toolName+"/"+fc.name, func(t *testing.T) {
				inChild(t, func(t *testing.T) { foreignCallCase(t, toolName, fc) })
			})
		}
	}
}

// foreignCallCase runs, in a loop labelled retry, a step whose callback
// waits for a goroutine that makes the call on its AsyncSteps, then
// succeeds: the Success has no effect, the step fails with the
// InternalError, the loop does not take it, its handler sees it, and
// the next flow on the tool runs.
func foreignCallCase(t *testing.T, toolName string, fc foreignCall) {
	tool, l, tt, release := openTool(toolName)
	defer release()
	tr := &tracer{}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("outer")
		as.Loop(func(as asyncsteps.AsyncSteps) {
			tr.add("body")
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				done := make(chan struct{})
				go func() {
					defer close(done)
					fc.do(as)
					tr.add("call returned")
				}()
				<-done
				tr.add("callback goes on")
				as.Success("ignored")
			})
		}, "retry")
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("handler:" + code + ":" + as.State().ErrorInfo)
	})
	r.Add(tr.step("never"))
	res := runOn(t, r, l, tt)
	wantError(t, res.Err, asyncsteps.InternalError, foreignInfo(fc.name))
	wantTrace(t, tr, "outer,body,step,call returned,callback goes on,handler:InternalError:"+foreignInfo(fc.name))

	next := asyncsteps.New(asyncsteps.WithTool(tool))
	next.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("next") })
	wantSuccess(t, runOn(t, next, l, tt), "next")
}

// The same call from another goroutine in a running error handler fails
// the handler's step with the InternalError.
func TestForeignErrorInErrorHandler(t *testing.T) {
	onForeignTools(t, func(t *testing.T, r *asyncsteps.Root, tr *tracer, run func() asyncsteps.Result) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				as.Error("First")
			}, func(as asyncsteps.AsyncSteps, code string) {
				tr.add("inner:" + code)
				done := make(chan struct{})
				go func() { defer close(done); as.Error("Second") }()
				<-done
				tr.add("handler goes on")
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("outer:" + code + ":" + as.State().ErrorInfo)
		})
		wantError(t, run().Err, asyncsteps.InternalError, foreignInfo("Error(Second)"))
		wantTrace(t, tr, "step,inner:First,handler goes on,outer:InternalError:"+foreignInfo("Error(Second)"))
	})
}

// callDeep calls f through depth functions of its own, so that the call
// is made that many frames below the callback.
//
//go:noinline
func callDeep(depth int, f func()) {
	if depth == 0 {
		f()
		return
	}
	callDeep(depth-1, f)
}

// Error, Break and Continue called by the callback itself through deep
// helpers abort it as when it calls them directly: the abort panics
// through the helpers to the engine, whatever the depth.
//
// LoopUnmarked is a Loop whose goroutine a callback has cleared of its
// panic-on-fault setting, which marks it as a goroutine that runs
// callbacks: the stack is searched then, as on a TestTool.
func TestOwnCallThroughDeepHelpers(t *testing.T) {
	for _, toolName := range append(foreignTools, "LoopUnmarked") {
		for _, depth := range []int{0, 10, 100, 300} {
			t.Run(fmt.Sprintf("%s/depth %d", toolName, depth), func(t *testing.T) {
				inChild(t, func(t *testing.T) { ownDeepCase(t, toolName, depth) })
			})
		}
	}
}

func ownDeepCase(t *testing.T, toolName string, depth int) {
	tool, l, tt, release := openTool(toolName)
	defer release()
	tr := &tracer{}
	r := asyncsteps.New(asyncsteps.WithTool(tool))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		if toolName == "LoopUnmarked" {
			debug.SetPanicOnFault(false)
		}
		as.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
			tr.addf("iteration %d", i)
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				switch i {
				case 0:
					callDeep(depth, func() { as.Continue("retry") })
				case 1:
					callDeep(depth, func() { as.Break("retry") })
				}
				tr.add("not aborted")
			})
		}, "retry")
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("after the loop")
			callDeep(depth, func() { as.Error("Boom", "deep") })
			tr.add("not aborted")
		})
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.add("handler:" + code + ":" + as.State().ErrorInfo)
		callDeep(depth, func() { as.Success("handled") })
	})
	wantSuccess(t, runOn(t, r, l, tt), "handled")
	wantTrace(t, tr, "iteration 0,iteration 1,after the loop,handler:Boom:deep")
}

// A callback that added a sub-step before the call from another goroutine
// fails with the same InternalError, and the sub-step does not run.
func TestForeignErrorAfterAdd(t *testing.T) {
	onForeignTools(t, func(t *testing.T, r *asyncsteps.Root, tr *tracer, run func() asyncsteps.Result) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("step")
			as.Add(tr.step("sub-step"))
			done := make(chan struct{})
			go func() { defer close(done); as.Error("Boom") }()
			<-done
		}, func(as asyncsteps.AsyncSteps, code string) {
			tr.add("handler:" + code + ":" + as.State().ErrorInfo)
		})
		wantError(t, run().Err, asyncsteps.InternalError, foreignInfo("Error(Boom)"))
		wantTrace(t, tr, "step,handler:InternalError:"+foreignInfo("Error(Boom)"))
	})
}

// A Loop closed by the callback after the call from another goroutine
// ends the flow once, as a closed loop does, though the error of that
// call was never delivered.
func TestForeignErrorThenLoopClosed(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		tr := &tracer{}
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			tr.add("step")
			done := make(chan struct{})
			go func() { defer close(done); as.Error("Boom") }()
			<-done
			l.Close()
		}, func(as asyncsteps.AsyncSteps, code string) { tr.add("handler:" + code) })
		res := runOn(t, r, l, nil)
		wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
		wantTrace(t, tr, "step")
	})
}

// The stack search reads a few return addresses, then chunks of them:
// a callback's Break is found wherever the invoker falls, on either side
// of a chunk's end. A TestTool's goroutine carries no mark, so every
// Break here is searched for.
func TestOwnBreakAtEveryDepthAroundTheReads(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	for depth := range 300 {
		tr := &tracer{}
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Loop(func(as asyncsteps.AsyncSteps) {
				tr.add("body")
				callDeep(depth, func() { as.Break() })
				tr.add("not aborted")
			})
		})
		wantSuccess(t, run(t, r, tt))
		if got := tr.String(); got != "body" {
			t.Fatalf("depth %d: trace %s, want body", depth, got)
		}
	}
}

// panicOnFault reports the calling goroutine's panic-on-fault setting.
func panicOnFault() bool {
	old := debug.SetPanicOnFault(true)
	debug.SetPanicOnFault(old)
	return old
}

// A Loop's goroutine is marked (panic-on-fault set), also the one that
// goes on after a callback called runtime.Goexit; a goroutine that a
// callback starts is not.
func TestLoopGoroutineIsMarked(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		tr := &tracer{}
		check := func(as asyncsteps.AsyncSteps, _ ...any) {
			child := make(chan bool)
			go func() { child <- panicOnFault() }()
			tr.addf("loop %v, started %v", panicOnFault(), <-child)
		}
		first := asyncsteps.New(asyncsteps.WithTool(l))
		first.Add(check)
		first.Add(func(asyncsteps.AsyncSteps, ...any) { runtime.Goexit() })
		res := runOn(t, first, l, nil)
		wantCode(t, res.Err, asyncsteps.InternalError)
		next := asyncsteps.New(asyncsteps.WithTool(l))
		next.Add(check)
		wantSuccess(t, runOn(t, next, l, nil))
		wantTrace(t, tr, "loop true, started false,loop true, started false")
	})
}
