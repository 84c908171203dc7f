package asyncsteps

import (
	"runtime"
	"testing"
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
