package asyncsteps_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"weak"

	"github.com/asyncsteps/asyncsteps"
)

// A flow that waits keeps nothing of the flows that ran beside it: once
// they end and nothing refers to their Roots, their State is collected,
// though their steps and the waiting one's ran on the same loop, one after
// the other. Each finished flow's State holds a payload; the test holds
// it weakly only.
func TestAWaitingFlowKeepsNoFinishedFlowAlive(t *testing.T) {
	for _, start := range []struct {
		name string
		run  func(*asyncsteps.Root)
	}{
		{"Execute", (*asyncsteps.Root).Execute},
		{"Promise", func(r *asyncsteps.Root) { r.Promise() }},
	} {
		t.Run(start.name, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			var waiting []asyncsteps.AsyncSteps // kept to the end: they must not keep the rest
			var payloads []weak.Pointer[[4096]byte]
			for range 20 {
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					as.WaitExternal()
					waiting = append(waiting, as)
				})
				start.run(r)
				for range 30 {
					payload := new([4096]byte)
					payloads = append(payloads, weak.Make(payload))
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.State().Set("payload", payload)
						as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {})
					})
					if _, err := r.RunHelping(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			kept := asyncsteps.AliveAfterGC(loop, payloads)
			if kept != 0 {
				t.Errorf("%d of the %d finished flows' State kept alive by %d waiting flows, want none", kept, len(payloads), len(waiting))
			}
			runtime.KeepAlive(waiting)
		})
	}
}

// A flow started by Execute that waits and that nothing refers to is
// collected, with its State, though its loop notes it to end it on Close:
// the loop holds it weakly. Those still referred to are ended by Close.
func TestAWaitingFlowNothingRefersToIsCollected(t *testing.T) {
	const flows = 50
	loop := asyncsteps.NewLoop()
	var payloads []weak.Pointer[[4096]byte]
	var ended []string
	parked := 0 // on the loop
	allParked := make(chan struct{})
	held := make(chan asyncsteps.AsyncSteps, 1)
	for i := range flows {
		payload := new([4096]byte)
		payloads = append(payloads, weak.Make(payload))
		r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
			ended = append(ended, err.Code) // on the loop, before Close returns
		}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.State().Set("payload", payload)
			as.WaitExternal()
			if i == 0 {
				held <- as
			}
			if parked++; parked == flows {
				close(allParked)
			}
		})
		r.Execute()
	}
	kept := <-held
	<-allParked
	alive := asyncsteps.AliveAfterGC(loop, payloads)
	if alive != 1 {
		t.Errorf("%d of %d waiting flows' State alive, want 1: the flow whose AsyncSteps the test keeps", alive, flows)
	}
	loop.Close()
	if want := []string{asyncsteps.InternalError}; !slices.Equal(ended, want) {
		t.Errorf("Close ended flows with %q, want %q", ended, want)
	}
	runtime.KeepAlive(kept)
}

// A flow started by Execute whose Await function runs when its loop closes
// is ended by Close, through its unhandled-error function, and the
// function's context is cancelled.
func TestCloseEndsAnExecuteFlowInAnAwait(t *testing.T) {
	loop := asyncsteps.NewLoop()
	var ended []string
	started := make(chan struct{})
	funcErr := make(chan error, 1)
	r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		ended = append(ended, err.Code+": "+err.Info) // on the loop, before Close returns
	}))
	r.Await(func(ctx context.Context) (any, error) {
		close(started)
		<-ctx.Done()
		funcErr <- ctx.Err()
		return nil, ctx.Err()
	})
	r.Execute()
	<-started
	loop.Close()
	if want := []string{asyncsteps.InternalError + ": " + closedInfo}; !slices.Equal(ended, want) {
		t.Errorf("Close ended the flow with %q, want %q", ended, want)
	}
	if err := <-funcErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the Await function's context ended with %v, want context.Canceled", err)
	}
}

// A step's AsyncSteps kept once its step has completed keeps no other flow
// alive through the frame the step ran in, which the loop recycles for the
// step of the next flow: a flow that then waits, which nothing else refers
// to, is collected with its State. So is it when the step failed and its
// error handler took over its frame.
func TestAKeptAsyncStepsKeepsNoFlowThatReusesItsFrame(t *testing.T) {
	for _, kept := range []struct {
		name string
		step asyncsteps.StepFunc
		// onerror is the error handler of the step, if any.
		onerror []asyncsteps.ErrorFunc
	}{
		{"completed", func(asyncsteps.AsyncSteps, ...any) {}, nil},
		{"failed", func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Lost") },
			[]asyncsteps.ErrorFunc{func(as asyncsteps.AsyncSteps, _ string) { as.Success() }}},
	} {
		t.Run(kept.name, func(t *testing.T) {
			const flows = 20
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			var stale []asyncsteps.AsyncSteps // kept to the end: they must not keep the waiting flows
			var payloads []weak.Pointer[[4096]byte]
			for range flows {
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
					stale = append(stale, as)
					kept.step(as, args...)
				}, kept.onerror...)
				if _, err := r.RunHelping(t.Context()); err != nil {
					t.Fatal(err)
				}
				payloads = append(payloads, asyncsteps.ParkWithPayload(loop))
			}
			if alive := asyncsteps.AliveAfterGC(loop, payloads); alive != 0 {
				t.Errorf("%d of %d waiting flows' State kept alive by %d stale AsyncSteps, want none", alive, flows, len(stale))
			}
			for _, as := range stale {
				if as.IsValid() {
					t.Fatal("a stale AsyncSteps is valid")
				}
			}
		})
	}
}
