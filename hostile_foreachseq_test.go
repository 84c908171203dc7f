package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// stubbornSeq is an endless iter.Seq2 that ignores yield's false, and
// records how often its yield returned false.
func stubbornSeq(falses *int) func(yield func(int, int) bool) {
	return func(yield func(int, int) bool) {
		for i := 0; ; i++ {
			if !yield(i, i) {
				*falses++
			}
		}
	}
}

// A sequence that goes on yielding after its yield returned false made
// the stop that follows a Break spin forever on the goroutine that drives
// the flow: the flow and its loop hung. Its next yield now panics (as a
// range over it does), which ends it; the Break goes on as usual.
func TestHostileForEachSeqIgnoringBreak(t *testing.T) {
	inChildFor(t, 20*time.Second, func(t *testing.T) {
		for _, tool := range []string{"TestTool", "Loop"} {
			t.Run(tool, func(t *testing.T) {
				var tr tracer
				falses := 0
				var r *asyncsteps.Root
				if tool == "Loop" {
					l := asyncsteps.NewLoop()
					defer l.Close()
					r = asyncsteps.New(asyncsteps.WithTool(l))
				} else {
					r = asyncsteps.New(asyncsteps.WithTool(asyncsteps.NewTestTool()))
				}
				r.ForEach(stubbornSeq(&falses), func(as asyncsteps.AsyncSteps, k, _ any) {
					tr.addf("k%v", k)
					if k == 2 {
						as.Break()
					}
				})
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("after")
					as.Success("done")
				})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				args, err := r.Run(ctx)
				if err != nil || fmt.Sprint(args) != "[done]" {
					t.Errorf("Run = %v, %v; want [done], nil", args, err)
				}
				wantTrace(t, &tr, "k0,k1,k2,after")
				if falses != 1 {
					t.Errorf("yield returned false %d times, want 1", falses)
				}
			})
		}
	})
}

// A Goexit in the cleanup of a sequence that a Break stops ended the
// loop's goroutine in the middle of the unwinding, outside of any
// callback: nothing went on with the flow, which hung (here until Run's
// deadline). It now fails at the loop with InternalError, as a Goexit in
// a cancel handler does, and the loop serves the next flow.
func TestHostileForEachSeqGoexitsWhenStoppedByBreak(t *testing.T) {
	inChildFor(t, 20*time.Second, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		defer l.Close()
		var tr tracer
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.ForEach(func(yield func(int, int) bool) {
				defer runtime.Goexit()
				for i := 0; yield(i, i); i++ {
				}
			}, func(as asyncsteps.AsyncSteps, k, _ any) {
				tr.addf("k%v", k)
				if k == 1 {
					as.Break()
				}
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("after") })
		}, func(as asyncsteps.AsyncSteps, code string) { tr.add("handler " + code) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := r.Run(ctx)
		var e *asyncsteps.Error
		if !errors.As(err, &e) || e.Code != asyncsteps.InternalError || !strings.HasPrefix(e.Info, "runtime.Goexit called in a callback") {
			t.Errorf("Run error %v, want the InternalError of a Goexit", err)
		}
		wantTrace(t, &tr, "k0,k1,handler InternalError")
		next := asyncsteps.New(asyncsteps.WithTool(l))
		next.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(7) })
		if args, err := next.Run(ctx); err != nil || fmt.Sprint(args) != "[7]" {
			t.Errorf("next flow: %v, %v; want [7], nil", args, err)
		}
	})
}

// A panic in the cleanup of a sequence that a Break stops is raised at
// the loop, which records its AsyncStack there; a Goexit there left the
// stack of the Break, which names the loop's body, though the error is
// the loop's as for the panic.
func TestHostileForEachSeqCleanupFaultAtBreakRecordsTheLoopsStack(t *testing.T) {
	for _, fault := range []string{"panic", "Goexit"} {
		t.Run(fault, func(t *testing.T) {
			r, tt := newFlow()
			step := forEachBreakingOn1(func() {
				if fault == "Goexit" {
					runtime.Goexit()
				}
				panic("close failed")
			})
			r.Add(step)
			ch := r.Promise()
			driveAway(tt) // a Goexit ends the goroutine that drives
			driveAway(tt)
			wantCode(t, result(t, ch).Err, asyncsteps.InternalError)
			stack := r.State().AsyncStack
			if want := runtime.FuncForPC(reflect.ValueOf(step).Pointer()).Name(); !slices.Equal(stack, []string{want}) {
				t.Errorf("AsyncStack = %q, want the loop's step alone, %q", stack, want)
			}
		})
	}
}

// forEachBreakingOn1 returns a step whose ForEach over an endless
// sequence, which runs cleanup as it ends, breaks at its second pair.
func forEachBreakingOn1(cleanup func()) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, _ ...any) {
		as.ForEach(func(yield func(int, int) bool) {
			defer cleanup()
			for i := 0; yield(i, i); i++ {
			}
		}, func(as asyncsteps.AsyncSteps, k, _ any) {
			if k == 1 {
				as.Break()
			}
		})
	}
}

// An iter.Seq2 that drives its TestTool (a misuse) runs no event of its
// own flow inside it, as a step's callback does not: they wait until the
// pull, or the stop at a Break, returns, and the loop fails with the
// InternalError of the misuse. The timeout of a branch beside the
// ForEach ran inside the pull, or the stop: had it failed the Parallel,
// the loop's cancel would have stopped the sequence from the sequence's
// own goroutine, and the flow hung.
func TestHostileForEachSeqDrivingItsTestToolWaitsForItsFlow(t *testing.T) {
	const reentryInfo = "the flow's tool was driven from inside a callback of the flow (TestTool.NextEvent, Advance or Run in a step?): its own events wait until the callback returns"
	for _, at := range []string{"pull", "cleanup at Break"} {
		t.Run(at, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				r, tt := newFlow()
				var tr tracer
				drive := func() {
					tr.add("drive")
					for tt.NextEvent() {
					}
					tr.add("driven")
				}
				seq := func(yield func(int, int) bool) {
					if at == "cleanup at Break" {
						defer drive()
					} else {
						drive()
					}
					for i := 0; yield(i, i); i++ {
					}
				}
				p := r.Parallel()
				p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					tr.add("B waits")
					as.SetTimeout(msec) // the event the sequence's drive comes to
				}, func(as asyncsteps.AsyncSteps, code string) {
					tr.add("B: " + code)
					as.Success()
				})
				p.ForEach(seq, func(as asyncsteps.AsyncSteps, k, _ any) {
					tr.addf("body %v", k)
					as.Break()
				})
				wantError(t, run(t, r, tt).Err, asyncsteps.InternalError, reentryInfo)
				// B's timeout waits until the iteration has raised the
				// misuse, as after a step's: the failing ForEach cancels B.
				want := "B waits,drive,driven"
				if at == "cleanup at Break" {
					want = "B waits,body 0,drive,driven"
				}
				wantTrace(t, &tr, want)
			})
		})
	}
}
