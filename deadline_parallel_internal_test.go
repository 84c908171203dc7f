package asyncsteps

import (
	"slices"
	"testing"
)

// Past Run's deadline, two branches of a Parallel wait, each claimed by
// a completion from another goroutine that has not reached the loop. The
// deadline times the flow out once where it has got to: the fallback an
// outer handler adds then, which does not wait, runs as usual.
func TestRunDeadlineTimesOutOnceAfterTwoClaims(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var trace []string
	var claimed []*stepAPI
	branch := func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		h := as.(*stepAPI)
		if !h.claim(0) {
			t.Error("the waiting branch could not be claimed")
		}
		claimed = append(claimed, h)
	}
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal() // the deadline times this one out
	}, func(as AsyncSteps, code string) {
		trace = append(trace, "first:"+code)
		as.Success()
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(branch)
		p.Add(branch)
		as.Add(func(AsyncSteps, ...any) { trace = append(trace, "next") })
	}, func(as AsyncSteps, code string) {
		trace = append(trace, "outer:"+code)
		as.Add(func(AsyncSteps, ...any) { trace = append(trace, "fallback1") })
		as.Add(func(AsyncSteps, ...any) { trace = append(trace, "fallback2") })
	})
	ctx, w := startUnderDeadline(r, tt)
	passDeadline(r, ctx, w)
	tt.Run()
	if len(claimed) != 2 {
		t.Fatalf("%d branches claimed, want 2 (trace %q)", len(claimed), trace)
	}
	for _, h := range claimed { // the writers go on
		h.f.args = nil
		h.publish(false)
	}
	tt.Run()

	want := []string{"first:Timeout", "outer:Timeout", "fallback1", "fallback2"}
	if !slices.Equal(trace, want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
	select {
	case res := <-w.promise:
		if res.Err != nil {
			t.Errorf("Result error %v, want none: the fallback recovered", res.Err)
		}
	default:
		t.Fatal("the flow has not ended")
	}
}
