package asyncsteps_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// faultyHooks returns hooks that each call fault, but for the one named
// hook, which calls fault then does what the others do.
func faultyHooks(hook string, fault func()) *asyncsteps.Hooks {
	at := func(name string) {
		if name == hook {
			fault()
		}
	}
	return &asyncsteps.Hooks{
		FlowStart:  func(ctx context.Context) context.Context { at("FlowStart"); return ctx },
		FlowEnd:    func(context.Context, error) { at("FlowEnd") },
		StepError:  func(context.Context, *asyncsteps.Error) { at("StepError") },
		AwaitStart: func(ctx context.Context) context.Context { at("AwaitStart"); return ctx },
		AwaitEnd:   func(context.Context, *asyncsteps.Error) { at("AwaitEnd") },
		SyncWait:   func(asyncsteps.Syncer, time.Duration) { at("SyncWait") },
		LoopPass:   func(*asyncsteps.Loop, int) { at("LoopPass") },
		LoopLag:    func(*asyncsteps.Loop, time.Duration) { at("LoopLag") },
	}
}

// Each hook panics, or calls runtime.Goexit, at every call, on a Loop:
// the flow ends as the Hooks doc says (failed for the hooks that start or
// end a flow's part, as it would be without the hook for the others), the
// loop goes on running later flows, and no goroutine is left once it is
// closed (the synctest bubble ends). The panics of the hooks that have
// nothing to fail are logged; a Goexit in them is not.
func TestEveryHookFaultOnALoop(t *testing.T) {
	goexit := "InternalError: runtime.Goexit called in a callback (t.FailNow, t.Fatal or t.SkipNow?)"
	want := map[string]string{
		"FlowStart panic":   "InternalError: hook fault",
		"FlowStart Goexit":  goexit,
		"AwaitStart panic":  "InternalError: panic: hook fault",
		"AwaitStart Goexit": goexit,
		"AwaitEnd panic":    "InternalError: panic: hook fault",
		"AwaitEnd Goexit":   goexit,
		"SyncWait panic":    "InternalError: panic: hook fault",
		"SyncWait Goexit":   goexit,
	}
	hooks := []string{"FlowStart", "FlowEnd", "StepError", "AwaitStart", "AwaitEnd", "SyncWait", "LoopPass", "LoopLag"}
	for _, hook := range hooks {
		for _, kind := range []string{"panic", "Goexit"} {
			name := hook + " " + kind
			t.Run(name, func(t *testing.T) {
				logs := asyncsteps.CaptureLog(t)
				fault := func() { panic("hook fault") }
				if kind == "Goexit" {
					fault = runtime.Goexit
				}
				synctest.Test(t, func(t *testing.T) {
					loop := asyncsteps.NewLoop()
					defer loop.Close()
					loop.SetHooks(faultyHooks(hook, fault))
					wantFirst := want[name]
					if wantFirst == "" {
						wantFirst = "[done]"
					}
					if got := runFaultFlow(loop); got != wantFirst {
						t.Errorf("first flow: %s, want %s", got, wantFirst)
					}
					loop.SetHooks(nil)
					if got := runFaultFlow(loop); got != "[done]" {
						t.Errorf("flow after the faults: %s, want [done]", got)
					}
					loop.Close()
				})
				logged := strings.Contains(logs.String(), `panic="hook fault"`)
				wantLog := kind == "panic" && want[name] == ""
				if logged != wantLog {
					t.Errorf("panic logged: %v, want %v:\n%s", logged, wantLog, logs.String())
				}
				if wantLog && !strings.Contains(logs.String(), hookPanicLog(hook)) {
					t.Errorf("log without %s:\n%s", hookPanicLog(hook), logs.String())
				}
			})
		}
	}
}

// hookPanicLog is the start of the log line of a panic in hook
// (docs/DESIGN.md#hooks): the loop hooks' is a callback's, the others'
// name the hook; the stack follows.
func hookPanicLog(hook string) string {
	if hook == "LoopPass" || hook == "LoopLag" {
		return `msg="asyncsteps: panic in loop callback" panic="hook fault" stack=`
	}
	return `msg="asyncsteps: panic in hook" hook=` + hook + ` panic="hook fault" stack=`
}

// runFaultFlow runs, on loop, a flow that meets every hook: two sections
// of a Mutex, the second queued behind the first, whose Await lets it in;
// an error a handler recovers from. It returns the Result's error or args.
func runFaultFlow(loop *asyncsteps.Loop) string {
	m := asyncsteps.NewMutex(1)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) { time.Sleep(time.Millisecond); return nil, nil })
		})
		p.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {})
	}).Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error(asyncsteps.CommError, "recovered")
	}, func(as asyncsteps.AsyncSteps, _ string) { as.Success("done") })
	res := <-r.Promise()
	if res.Err != nil {
		return strings.TrimSpace(res.Err.Error())
	}
	return fmt.Sprint(res.Args)
}
