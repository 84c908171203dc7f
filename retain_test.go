package asyncsteps

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"
)

// retained is what the steps of TestPooledFramesKeepNoSteps capture: large
// enough to be an object of its own, so that a weak pointer to it reports
// exactly whether something still refers to it.
type retained struct{ n [8]int }

// TestPooledFramesKeepNoSteps checks that the frames a Loop pools for later
// steps keep nothing of the steps that ran in them: not the functions of
// the sub-steps a step added (kept in the frame's step array), nor a
// finished loop's definition (whose array a loop's frame queues its
// iterations in), nor an error handler's. A pooled frame that kept them
// would keep what they capture alive, for as long as the loop lives.
func TestPooledFramesKeepNoSteps(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	var kept []weak.Pointer[retained]
	capture := func() *retained {
		v := &retained{n: [8]int{len(kept)}}
		kept = append(kept, weak.Make(v))
		return v
	}
	var trace []int
	run := func() {
		a, b, c, d, e := capture(), capture(), capture(), capture(), capture()
		r := New(WithTool(l))
		r.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(as AsyncSteps, _ ...any) { trace = append(trace, a.n[0]) })
			as.Add(func(as AsyncSteps, _ ...any) { trace = append(trace, b.n[0]) })
			as.Add(func(as AsyncSteps, _ ...any) { trace = append(trace, c.n[0]) })
		})
		r.Add(func(as AsyncSteps, _ ...any) {
			as.Repeat(2, func(as AsyncSteps, i int) { trace = append(trace, d.n[0]+10*i) })
		})
		r.Add(func(as AsyncSteps, _ ...any) {
			as.Add(func(as AsyncSteps, _ ...any) { as.Error("Fail") },
				func(as AsyncSteps, code string) {
					as.Add(func(as AsyncSteps, _ ...any) { trace = append(trace, e.n[0]) })
					as.Add(func(as AsyncSteps, _ ...any) { as.Success() })
				})
		})
		res := <-r.Promise()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	run()
	if want := []int{0, 1, 2, 3, 13, 4}; !equalInts(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	runtime.GC()
	runtime.GC()
	for i, w := range kept {
		if w.Value() != nil {
			t.Errorf("value %d captured by a finished step is still alive", i)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The frames a Loop keeps for its next flows do not keep the steps of a
// flow that ended through the one-step queues they were given: a
// Parallel's branch frames get slices of its definition, a loop's frame
// a slice of its control, which no later step appends to.
func TestPooledFramesKeepNoEndedFlow(t *testing.T) {
	l := newTestLoop(t)
	collected := make(chan struct{})
	func() {
		payload := new([1 << 10]byte)
		runtime.AddCleanup(payload, func(struct{}) { close(collected) }, struct{}{})
		body := func(as AsyncSteps) {
			_ = payload[0]
			as.Break()
		}
		r := New(WithTool(l))
		p := r.Parallel() // in the Root's own queue, which is not pooled
		p.Loop(body)
		p.Loop(body)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Error("the ended flow's Parallel is still reachable after 50 collections")
}
