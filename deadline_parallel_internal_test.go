package asyncsteps

import (
	"slices"
	"testing"
)

// Past Run's deadline, two branches of a Parallel wait, each claimed by
// a completion from another goroutine that has not reached the loop. The
// deadline times the flow out once where it has got to: the fallback an
// outer handler adds then, which does not wait, runs as usual. That is so
// whether both completions reach the loop before the timeout they owe
// runs, or only one: the timeout then goes through the Parallel and
// cancels the other branch, whose claim owed that same timeout.
func TestRunDeadlineTimesOutOnceAfterTwoClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		// apart: the second writer goes on only once the flow has
		// ended, so that the timeout the first owes cancels its branch.
		apart bool
	}{
		{"BothWritten", false},
		{"SecondCancelled", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := NewTestTool()
			trace, claimed, w := claimPastDeadline(t, tt, 2)
			for i, h := range claimed { // the writers go on
				h.f.args = nil
				h.publish(false)
				if tc.apart && i == 0 {
					tt.Run()
				}
			}
			tt.Run()

			want := []string{"first:Timeout", "outer:Timeout", "fallback1", "fallback2"}
			if !slices.Equal(*trace, want) {
				t.Errorf("trace %q, want %q", *trace, want)
			}
			checkRecovered(t, tt, w)
		})
	}
}

// Past Run's deadline, one branch of a Parallel waits, claimed by a
// completion from another goroutine that has not reached the loop, and
// the other waits, claimed by nobody: the deadline times that one out at
// once, and its failure cancels the claimed branch. That timeout pays
// what the claim owed: the fallback an outer handler adds, which does not
// wait, runs as usual, and the claim's writer, going on later, changes
// nothing.
func TestRunDeadlineTimesOutOnceWhenASiblingTimesOut(t *testing.T) {
	tt := NewTestTool()
	trace, claimed, w := claimPastDeadline(t, tt, 1)
	h := claimed[0] // the writer goes on once the flow has ended
	h.f.args = nil
	h.publish(false)
	tt.Run()

	want := []string{"first:Timeout", "outer:Timeout", "fallback1", "fallback2"}
	if !slices.Equal(*trace, want) {
		t.Errorf("trace %q, want %q", *trace, want)
	}
	checkRecovered(t, tt, w)
}

// claimPastDeadline runs under Run's deadline, on tt, the flow of
// buildTwoClaimedBranches with claims of its branches claimed, passes the
// deadline, and returns once tt is idle: the flow's trace, the step APIs
// claimed, and the execution.
func claimPastDeadline(t *testing.T, tt *TestTool, claims int) (trace *[]string, claimed []*stepAPI, w *waiter) {
	t.Helper()
	r, trace, got := buildTwoClaimedBranches(t, tt, claims)
	ctx, w := startUnderDeadline(r, tt)
	passDeadline(r, ctx, w)
	tt.Run()
	if len(*got) != claims {
		t.Fatalf("%d branches claimed, want %d (trace %q)", len(*got), claims, *trace)
	}
	return trace, *got, w
}

// buildTwoClaimedBranches adds to a new Root on tt a step that Run's
// deadline times out, and a Parallel of two branches that wait, the first
// claims of them claimed as a Success from another goroutine claims it,
// which stops there: the writer has not written.
func buildTwoClaimedBranches(t *testing.T, tt *TestTool, claims int) (r *Root, trace *[]string, claimed *[]*stepAPI) {
	r = New(WithTool(tt))
	trace, claimed = new([]string), new([]*stepAPI)
	branches := 0
	branch := func(as AsyncSteps, _ ...any) {
		as.WaitExternal()
		if branches++; branches > claims {
			return
		}
		h := as.(*stepAPI)
		if !h.claim(0) {
			t.Error("the waiting branch could not be claimed")
		}
		*claimed = append(*claimed, h)
	}
	r.Add(func(as AsyncSteps, _ ...any) {
		as.WaitExternal() // the deadline times this one out
	}, func(as AsyncSteps, code string) {
		*trace = append(*trace, "first:"+code)
		as.Success()
	})
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		p.Add(branch)
		p.Add(branch)
		as.Add(func(AsyncSteps, ...any) { *trace = append(*trace, "next") })
	}, func(as AsyncSteps, code string) {
		*trace = append(*trace, "outer:"+code)
		as.Add(func(AsyncSteps, ...any) { *trace = append(*trace, "fallback1") })
		as.Add(func(AsyncSteps, ...any) { *trace = append(*trace, "fallback2") })
	})
	return r, trace, claimed
}

// checkRecovered checks that the execution w has ended, once, with no
// error, and that nothing is left pending on tt.
func checkRecovered(t *testing.T, tt *TestTool, w *waiter) {
	t.Helper()
	select {
	case res := <-w.promise:
		if res.Err != nil {
			t.Errorf("Result error %v, want none: the fallback recovered", res.Err)
		}
	default:
		t.Fatal("the flow has not ended")
	}
	if n := tt.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the flow ended", n)
	}
	select {
	case res := <-w.promise:
		t.Errorf("a second Result: %v, %v", res.Args, res.Err)
	default:
	}
}
