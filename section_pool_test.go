package asyncsteps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A Loop reuses the critical sections its flows have left, and the frames
// that entered them. Flows that take turns on a Mutex(1), each step after
// a section appending copied steps to a fresh frame (CopyFrom), must each
// run exactly their own steps: a reused section's steps never change under
// a flow that waits to enter it.
func TestLoopReusesSectionsSafely(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	const flows, rounds = 4, 50
	m := asyncsteps.NewMutex(1)
	traces := make([][]string, flows)
	results := make([]<-chan asyncsteps.Result, flows)
	for i := range flows {
		model := asyncsteps.New()
		model.Add(func(as asyncsteps.AsyncSteps, _ ...any) { traces[i] = append(traces[i], "x") })
		model.Add(func(as asyncsteps.AsyncSteps, _ ...any) { traces[i] = append(traces[i], "y") })
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Repeat(rounds, func(as asyncsteps.AsyncSteps, n int) {
			as.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				traces[i] = append(traces[i], fmt.Sprint("s", n))
				as.Success()
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.CopyFrom(model) })
		})
		results[i] = r.Promise()
	}
	want := make([]string, 0, 3*rounds)
	for n := range rounds {
		want = append(want, fmt.Sprint("s", n), "x", "y")
	}
	for i, ch := range results {
		if res := receive(t, ch, fmt.Sprint("flow ", i)); res.Err != nil {
			t.Fatalf("flow %d: %v", i, res.Err)
		}
		if got := strings.Join(traces[i], " "); got != strings.Join(want, " ") {
			t.Errorf("flow %d ran %q, want %q", i, got, strings.Join(want, " "))
		}
	}
}

// A flow on a Tool of another package enters critical sections too: its
// sections are not pooled (such a Tool has no pools), and a Mutex(1)
// shared by three such flows lets them in one at a time, in order.
func TestSyncOnAForeignTool(t *testing.T) {
	tool := &manualTool{}
	m := asyncsteps.NewMutex(1)
	var trace []string
	results := make([]<-chan asyncsteps.Result, 3)
	for i := range results {
		r := asyncsteps.New(asyncsteps.WithTool(tool))
		for n := range 2 {
			r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) {
				trace = append(trace, fmt.Sprintf("in%d.%d", i, n))
				as.WaitExternal()
				tool.Deferred(time.Millisecond, func() {
					trace = append(trace, fmt.Sprintf("out%d.%d", i, n))
					as.Success()
				})
			})
		}
		results[i] = r.Promise()
	}
	tool.run()
	for i, ch := range results {
		if res := receive(t, ch, fmt.Sprint("flow ", i)); res.Err != nil {
			t.Fatalf("flow %d: %v", i, res.Err)
		}
	}
	want := "in0.0 out0.0 in1.0 out1.0 in2.0 out2.0 in0.1 out0.1 in1.1 out1.1 in2.1 out2.1"
	if got := strings.Join(trace, " "); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}
