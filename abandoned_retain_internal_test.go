package asyncsteps

import (
	"runtime"
	"testing"
	"weak"
)

// A frame that the loop does not recycle as it finishes keeps no other
// flow alive through its step API, kept by anyone: the frame's parent,
// recycled, is given by the loop to the step of any later flow, here one
// that waits and that nothing else refers to. A step that a cancel kills
// in the window between another goroutine's claim of its completion and
// the write of it leaves its frame to the writer (see frame.kill), and so
// does one that fails as that completion comes after Add, whose error
// handler then runs in a frame of its own. A parallel branch whose frame
// is a lock's key (ownerKey) leaves its frame to the lock.
func TestAFrameNotRecycledKeepsNoOtherFlow(t *testing.T) {
	noop := func(AsyncSteps, ...any) {}
	for _, tc := range []struct {
		name string
		// run runs one flow on loop to its end and returns the step API
		// to keep.
		run func(t *testing.T, loop *Loop) *stepAPI
	}{
		{"cancelled in a claim's window", func(t *testing.T, loop *Loop) *stepAPI {
			r := New(WithTool(loop))
			var h *stepAPI
			waits := make(chan struct{})
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Add(func(as AsyncSteps, _ ...any) {
					h = as.(*stepAPI)
					as.WaitExternal()
					close(waits)
				})
			})
			ended := r.Promise()
			<-waits
			if !h.claim(0) { // a Success from outside claims, and stops before its write
				t.Fatal("the waiting step could not be claimed")
			}
			r.Cancel()
			<-ended
			leftToTheWriter(t, h)
			return h
		}},
		{"failed in a claim's window after Add", func(t *testing.T, loop *Loop) *stepAPI {
			r := New(WithTool(loop))
			var h *stepAPI
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Add(func(as AsyncSteps, _ ...any) {
					h = as.(*stepAPI)
					as.WaitExternal()
					as.Add(noop)
					h.claim(0) // a Success from outside claims, and stops before its write
				}, func(as AsyncSteps, _ string) { as.Success() })
			})
			if res := <-r.Promise(); res.Err != nil {
				t.Fatal(res.Err)
			}
			leftToTheWriter(t, h)
			return h
		}},
		{"a lock's key", func(t *testing.T, loop *Loop) *stepAPI {
			r := New(WithTool(loop))
			var h *stepAPI
			r.Add(func(as AsyncSteps, _ ...any) {
				as.Parallel().Add(func(as AsyncSteps, _ ...any) {
					h = as.(*stepAPI)
					if ownerKey(as) == nil {
						panic("the branch gave no key")
					}
				})
			})
			if res := <-r.Promise(); res.Err != nil {
				t.Fatal(res.Err)
			}
			return h
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const flows = 20
			loop := NewLoop()
			defer loop.Close()
			var kept []*stepAPI
			var payloads []weak.Pointer[[4096]byte]
			for range flows {
				kept = append(kept, tc.run(t, loop))
				payloads = append(payloads, ParkWithPayload(loop))
			}
			alive := AliveAfterGC(loop, payloads)
			if alive != 0 {
				t.Errorf("%d of %d waiting flows' State kept alive by %d step APIs, want none", alive, flows, len(kept))
			}
			runtime.KeepAlive(kept)
		})
	}
}

// leftToTheWriter checks that the frame of h, whose completion another
// goroutine has claimed and not written, was not recycled.
func leftToTheWriter(t *testing.T, h *stepAPI) {
	t.Helper()
	if f := h.f; f.h != h || f.consumed {
		t.Fatal("the claimed step's frame is not left to its writer")
	}
}
