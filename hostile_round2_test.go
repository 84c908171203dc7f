package asyncsteps_test

import (
	"context"
	"fmt"
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
