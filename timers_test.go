package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Step timeouts on a real Loop are recycled once disarmed or fired. 3,000
// flows arm them every way at once: disarmed by a completion, fired, re-armed
// shorter (the first one recycled while the flow still waits), re-armed
// longer and disarmed. Each flow must end exactly as its own timers say,
// whatever entry another flow got back from the pool.
func TestLoopStepTimeoutsRecycled(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	const flows = 3000
	kinds := []struct {
		name    string
		step    asyncsteps.StepFunc
		timeout bool
	}{
		{"disarmed", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			as.Tool().Immediate(func() { as.Success() })
		}, false},
		{"fired", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Millisecond)
		}, true},
		{"re-armed shorter", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			as.SetTimeout(2 * time.Millisecond)
		}, true},
		{"re-armed longer", func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Millisecond)
			as.SetTimeout(time.Hour)
			as.Tool().Deferred(5*time.Millisecond, func() { as.Success() })
		}, false},
	}
	var wg sync.WaitGroup
	errs := make(chan error, flows)
	for i := range flows {
		k := kinds[i%len(kinds)]
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(k.step)
		ch := r.Promise()
		wg.Go(func() {
			res := <-ch
			var e *asyncsteps.Error
			timedOut := errors.As(res.Err, &e) && e.Code == asyncsteps.Timeout
			if timedOut != k.timeout || (!k.timeout && res.Err != nil) {
				errs <- fmt.Errorf("flow %d (%s): got %v", i, k.name, res.Err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("flows did not end")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The loop is still sound: a flow after all that runs as usual.
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("ok") })
	if args, err := r.Run(context.Background()); err != nil || args[0] != "ok" {
		t.Fatalf("a later flow: %v, %v", args, err)
	}
}

// A step timeout on a real Loop never falls due before its duration has
// passed, also when the loop reads its clock only after a pass of callbacks
// (stepTimers.stamp). A timeout armed by a callback that a timer ran (here
// the error handler of a step whose timeout fired) is armed when the loop
// goes to sleep next: the loop must wake for it, or the flow would hang.
func TestLoopStepTimeoutNeverEarly(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	const d = 20 * time.Millisecond
	var armed [2]time.Time
	var elapsed [2]time.Duration
	wait := func(i int) asyncsteps.StepFunc {
		return func(as asyncsteps.AsyncSteps, _ ...any) {
			armed[i] = time.Now()
			as.SetTimeout(d)
			as.SetCancel(func(asyncsteps.AsyncSteps) { elapsed[i] = time.Since(armed[i]) })
		}
	}
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(wait(0), func(as asyncsteps.AsyncSteps, code string) {
		as.Add(wait(1))
	})
	res := receive(t, r.Promise(), "the flow of two timeouts")
	wantCode(t, res.Err, asyncsteps.Timeout)
	for i, e := range elapsed {
		if e < d {
			t.Errorf("timeout %d fell due after %v, before its %v", i, e, d)
		}
	}
}

// docs/DESIGN.md#timeouts: success disarms the timeout. A Success called, from outside
// the step's callback, before the timeout falls due wins even when the loop
// is too busy to deliver it before the timeout would have fired: here the
// callback that calls it then keeps the loop 50 ms past a 20 ms timeout.
func TestLoopCompletionClaimedBeforeTimeoutWins(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	var cancelled atomic.Bool
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(20 * time.Millisecond)
		as.SetCancel(func(asyncsteps.AsyncSteps) { cancelled.Store(true) })
		as.Tool().Immediate(func() {
			as.Success("value")
			time.Sleep(50 * time.Millisecond) // busy past the timeout
		})
	})

	res := <-r.Promise()
	if res.Err != nil || len(res.Args) != 1 || res.Args[0] != "value" {
		t.Errorf("Result = %+v, want [value]", res)
	}
	if cancelled.Load() {
		t.Error("the cancel handler of a step that succeeded ran")
	}
}

// A flow whose waiting step has a timeout of its own is ended by Close like
// any other waiting flow: with the closed loop's error, reported once, its
// cancel handler not run. Twelve durations, so that some timeouts go to the
// heap rather than to a list of their own; the steps wait for nothing but
// their timeouts, and a sub-step waits under a step that has one too.
func TestCloseEndsFlowsWaitingWithTimeouts(t *testing.T) {
	loop := asyncsteps.NewLoop()
	const flows = 12
	var mu sync.Mutex
	reports := map[int][]string{}
	var waiting sync.WaitGroup
	waiting.Add(flows + 1)
	for i := range flows {
		r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
			mu.Lock()
			reports[i] = append(reports[i], err.Code+": "+err.Info)
			mu.Unlock()
		}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { t.Errorf("flow %d: cancel handler ran", i) })
			as.SetTimeout(time.Hour + time.Duration(i)*time.Minute)
			waiting.Done()
		})
		r.Execute()
	}
	nested := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		mu.Lock()
		reports[flows] = append(reports[flows], err.Code+": "+err.Info)
		mu.Unlock()
	}))
	nested.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Hour)
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(2 * time.Hour)
			waiting.Done()
		})
	})
	nested.Execute()
	waiting.Wait()

	loop.Close()

	want := []string{asyncsteps.InternalError + ": " + closedInfo}
	for i := range flows + 1 {
		if got := reports[i]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("flow %d reported %q, want %q", i, got, want)
		}
	}
}
