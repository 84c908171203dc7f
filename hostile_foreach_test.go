package asyncsteps_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// exitingKey is a map key whose String method, which ForEach calls to
// order keys of a kind that has no order, ends the goroutine.
type exitingKey struct{ n int }

func (k exitingKey) String() string {
	runtime.Goexit()
	return fmt.Sprint(k.n)
}

// exitingPanickingKey is an exitingKey whose String method also has a
// deferred call that panics as the Goexit runs it.
type exitingPanickingKey struct{ n int }

func (k exitingPanickingKey) String() string {
	defer func() { panic("deferred") }()
	runtime.Goexit()
	return fmt.Sprint(k.n)
}

// ForEach snapshots a map when its loop starts, outside of any callback,
// and orders its keys by their printed form when their kind has no order:
// a String method that calls runtime.Goexit ends the goroutine there. The
// loop's step fails with InternalError, as for a Goexit in a callback or
// in an iter.Seq2, and the flow goes on from its handlers.
func TestHostileGoexitInAForEachKeysString(t *testing.T) {
	maps := []struct {
		name string
		m    any
		info string
	}{
		{"Goexit", map[exitingKey]int{{1}: 1, {2}: 2}, goexitInfo},
		// fmt recovers the String method's panic, and the Goexit goes on.
		{"Goexit with a panicking defer", map[exitingPanickingKey]int{{1}: 1, {2}: 2}, goexitInfo},
	}
	for _, tool := range hostileTools {
		for _, m := range maps {
			t.Run(tool.name+"/"+m.name, func(t *testing.T) {
				inChild(t, func(t *testing.T) {
					tl, release := tool.open(t)
					defer release()
					r := asyncsteps.New(asyncsteps.WithTool(tl))
					var got string
					r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
						as.ForEach(m.m, func(as asyncsteps.AsyncSteps, k, v any) {
							t.Error("an iteration ran")
						})
					}, func(as asyncsteps.AsyncSteps, code string) {
						got = code + ": " + as.State().ErrorInfo
						as.Success("caught")
					})
					wantSuccess(t, finish(t, tl, r.Promise()), "caught")
					if want := "InternalError: " + m.info; got != want {
						t.Errorf("the handler saw %q, want %q", got, want)
					}
					wantServing(t, tl)
				})
			})
		}
	}
}
