package asyncsteps_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// heldCallback returns a callback that holds an object whose cleanup adds
// to released once the callback is unreachable.
func heldCallback(released *atomic.Int32) func() {
	p := new([64]byte)
	runtime.AddCleanup(p, func(r *atomic.Int32) { r.Add(1) }, released)
	return func() { p[0]++ }
}

// waitReleased collects garbage until want callbacks are released, or
// gives up and reports how many were.
func waitReleased(released *atomic.Int32, want int32) int32 {
	for range 50 {
		if released.Load() >= want {
			break
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return released.Load()
}

// A handle kept after its callback was cancelled, skipped or dropped keeps
// no callback, on a TestTool as on a Loop: a test or a service that keeps
// the handle of a timeout it cancelled (a field it re-arms) must not keep
// what the callback holds alive.
func TestCancelledHandlesKeepNoCallback(t *testing.T) {
	cases := []struct {
		name     string
		schedule func(released *atomic.Int32) []asyncsteps.Handle
	}{
		{"Loop Deferred cancelled", func(released *atomic.Int32) []asyncsteps.Handle {
			l := asyncsteps.NewLoop()
			t.Cleanup(l.Close)
			h := l.Deferred(time.Hour, heldCallback(released))
			h.Cancel()
			return []asyncsteps.Handle{h}
		}},
		{"TestTool Deferred cancelled", func(released *atomic.Int32) []asyncsteps.Handle {
			tt := asyncsteps.NewTestTool()
			h := tt.Deferred(time.Second, heldCallback(released))
			h.Cancel()
			return []asyncsteps.Handle{h}
		}},
		{"TestTool Immediate cancelled and passed", func(released *atomic.Int32) []asyncsteps.Handle {
			tt := asyncsteps.NewTestTool()
			h := tt.Immediate(heldCallback(released))
			h.Cancel()
			tt.Immediate(func() {})
			tt.Run()
			return []asyncsteps.Handle{h}
		}},
		{"TestTool Immediate cancelled, tool not run", func(released *atomic.Int32) []asyncsteps.Handle {
			tt := asyncsteps.NewTestTool()
			h := tt.Immediate(heldCallback(released))
			h.Cancel()
			return []asyncsteps.Handle{h}
		}},
		{"TestTool ResetEvents", func(released *atomic.Int32) []asyncsteps.Handle {
			tt := asyncsteps.NewTestTool()
			hs := []asyncsteps.Handle{
				tt.Immediate(heldCallback(released)),
				tt.Deferred(time.Second, heldCallback(released)),
			}
			tt.ResetEvents()
			return hs
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var released atomic.Int32
			handles := c.schedule(&released)
			want := int32(len(handles))
			if got := waitReleased(&released, want); got != want {
				t.Errorf("%d of %d callbacks released while their handles are kept", got, want)
			}
			for _, h := range handles {
				if h.IsValid() {
					t.Error("a cancelled or dropped handle is valid")
				}
			}
			runtime.KeepAlive(handles)
		})
	}
}
