package asyncsteps_test

import (
	"bytes"
	"log/slog"
	"runtime"
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
// the flow once, not twice.
func TestHostileTestToolDrivenDuringAGoexit(t *testing.T) {
	inChild(t, func(t *testing.T) {
		var logs bytes.Buffer // the child's own: a panic in the engine is logged
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
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
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer tt.Run()
			runtime.Goexit()
		}()
		<-done
		tt.Run() // what the Goexit queued, if anything
		wantError(t, result(t, ch).Err, asyncsteps.Timeout, "")
		wantTrace(t, &tr, "cancel,outer:Timeout")
		if logs.Len() > 0 {
			t.Errorf("the engine logged:\n%s", logs.String())
		}
	})
}
