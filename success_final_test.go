package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// TestCallsAfterOwnSuccessHaveNoEffect pins what the docs of Success and
// Break say: the callback's own calls after its Success find the step
// completed and are dropped, and a loop passes no args to the next step.
func TestCallsAfterOwnSuccessHaveNoEffect(t *testing.T) {
	var trace []string
	mark := func(name string) asyncsteps.StepFunc {
		return func(asyncsteps.AsyncSteps, ...any) { trace = append(trace, name) }
	}
	late := map[string]func(as asyncsteps.AsyncSteps){
		"Add":      func(as asyncsteps.AsyncSteps) { as.Add(mark("Add")) },
		"Parallel": func(as asyncsteps.AsyncSteps) { as.Parallel().Add(mark("Parallel")) },
		"Repeat": func(as asyncsteps.AsyncSteps) {
			as.Repeat(1, func(as asyncsteps.AsyncSteps, _ int) { mark("Repeat")(as) })
		},
		"Sync":     func(as asyncsteps.AsyncSteps) { as.Sync(asyncsteps.NewMutex(1), mark("Sync")) },
		"Await":    func(as asyncsteps.AsyncSteps) { as.Await(func(context.Context) (any, error) { return "Await", nil }) },
		"Error":    func(as asyncsteps.AsyncSteps) { as.Error(asyncsteps.InvalidRequest) },
		"Break":    func(as asyncsteps.AsyncSteps) { as.Break() },    // outside a loop: a misuse if it acted
		"Continue": func(as asyncsteps.AsyncSteps) { as.Continue() }, // likewise
	}
	for name, call := range late {
		trace = nil
		r := asyncsteps.New(asyncsteps.WithTool(asyncsteps.NewTestTool()))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Success("v")
			call(as)
		})
		args, err := r.Run(context.Background())
		if got := fmt.Sprint(args, err, trace); got != "[v] <nil> []" {
			t.Errorf("%s after Success: got %s, want [v] <nil> []", name, got)
		}
	}
}

func TestBreakAfterOwnSuccessDoesNotLeaveTheLoop(t *testing.T) {
	var trace []string
	r := asyncsteps.New(asyncsteps.WithTool(asyncsteps.NewTestTool()))
	r.Repeat(3, func(as asyncsteps.AsyncSteps, i int) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			trace = append(trace, fmt.Sprint("attempt ", i))
			as.Success("body")
			as.Break() // no effect: the step has completed
		})
	})
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		trace = append(trace, fmt.Sprint("after the loop ", len(args), " args"))
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "attempt 0|attempt 1|attempt 2|after the loop 0 args"
	if got := strings.Join(trace, "|"); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}
