package asyncsteps_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A SyncWait hook that panics (or calls runtime.Goexit) while a waiter is let into a Mutex must
// neither crash the process (the slot may be given back from the goroutine
// of an Await function) nor leave the waiter, which then holds the slot,
// waiting forever: its step fails with the panic, and the slot comes back.
func TestSyncWaitHookPanicFailsTheAdmittedStep(t *testing.T) {
	hooks := []struct {
		name string
		do   func()
		info string
	}{
		{"panic", func() { panic("hook") }, "panic: hook"}, // as a panicking Await function fails its step
		{"Goexit", runtime.Goexit, goexitInfo},
	}
	for _, hook := range hooks {
		for _, viaAwait := range []bool{false, true} {
			name := hook.name + "/slot given back on the loop"
			if viaAwait {
				name = hook.name + "/slot given back by a returning Await function"
			}
			t.Run(name, func(t *testing.T) {
				inChild(t, func(t *testing.T) { syncWaitPanic(t, hook.do, hook.info, viaAwait) })
			})
		}
	}
}

func syncWaitPanic(t *testing.T, hook func(), info string, viaAwait bool) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	l.SetHooks(&asyncsteps.Hooks{SyncWait: func(asyncsteps.Syncer, time.Duration) { hook() }})
	m := asyncsteps.NewMutex(1)

	gate, started := make(chan struct{}), make(chan struct{})
	a := asyncsteps.New(asyncsteps.WithTool(l))
	a.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(func(context.Context) (any, error) {
				close(started)
				<-gate
				return nil, nil
			})
		})
	})
	resA := a.Promise()
	waitFor(t, started)

	b := asyncsteps.New(asyncsteps.WithTool(l))
	b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("B") })
	})
	resB := b.Promise()
	for range 3 { // let B queue behind A
		done := make(chan struct{})
		l.Immediate(func() { close(done) })
		waitFor(t, done)
	}
	if viaAwait {
		a.Cancel() // A leaves; its Await function keeps the slot
		<-resA
	}
	close(gate)
	select {
	case res := <-resB:
		wantError(t, res.Err, asyncsteps.InternalError, info)
	case <-time.After(10 * time.Second):
		t.Fatal("B, let in by a panicking SyncWait hook, never goes on")
	}
	// The slot is free again.
	c := asyncsteps.New(asyncsteps.WithTool(l))
	c.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		m.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("C") })
	})
	select {
	case res := <-c.Promise():
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != "C" {
			t.Errorf("C = %v %v, want [C] <nil>", res.Args, res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot was never given back")
	}
}

// A Throttle's period end lets several waiters in at once, on the loop. A
// SyncWait hook that panics or calls runtime.Goexit for the first of them
// must not cut that short: every waiter let in goes on (the first fails
// with the hook's error), and the loop keeps serving.
func TestSyncWaitHookFaultLetsTheOtherWaitersIn(t *testing.T) {
	for _, hook := range []struct {
		name string
		do   func()
		info string
	}{
		{"panic", func() { panic("hook") }, "panic: hook"},
		{"Goexit", runtime.Goexit, goexitInfo},
	} {
		t.Run(hook.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				// On virtual time: the six flows are all queued before
				// the first period ends, however slow the machine.
				synctest.Test(t, func(t *testing.T) { syncWaitFaultInPeriodEnd(t, hook.do, hook.info) })
			})
		})
	}
}

func syncWaitFaultInPeriodEnd(t *testing.T, hook func(), info string) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	var calls atomic.Int32
	l.SetHooks(&asyncsteps.Hooks{SyncWait: func(asyncsteps.Syncer, time.Duration) {
		if calls.Add(1) == 1 {
			hook()
		}
	}})
	th := asyncsteps.NewThrottle(3, 50*time.Millisecond)
	var results []<-chan asyncsteps.Result
	for i := range 6 { // three enter at once, three wait for the next period
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			th.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(i) })
		})
		results = append(results, r.Promise())
	}
	failed := 0
	for i, ch := range results {
		select {
		case res := <-ch:
			if res.Err != nil {
				wantError(t, res.Err, asyncsteps.InternalError, info)
				failed++
			} else if len(res.Args) != 1 || res.Args[0] != i {
				t.Errorf("flow %d = %v, want [%d]", i, res.Args, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("flow %d, let in at a period's end, never goes on", i)
		}
	}
	if failed != 1 || calls.Load() != 3 {
		t.Errorf("%d flows failed and the hook was called %d times, want 1 and 3", failed, calls.Load())
	}
}
