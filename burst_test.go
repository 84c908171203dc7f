package asyncsteps

import "testing"

// burstTrace runs, on a new Loop with bursts set as given, two flows of
// three steps started in one loop callback, the first step of the first
// queuing a callback, then a flow with a Parallel of two branches of two
// steps, and returns the order of their steps.
func burstTrace(t *testing.T, bursts bool) (flows, branches string) {
	l := newTestLoop(t)
	l.SetBursts(bursts)
	var tr trace
	done := make(chan struct{}, 3)
	steps := func(name string) *Root {
		r := New(WithTool(l))
		for i := 1; i <= 3; i++ {
			r.Add(func(as AsyncSteps, _ ...any) {
				tr.add("%s%d", name, i)
				if name == "a" && i == 1 {
					l.Immediate(func() { tr.add("cb"); done <- struct{}{} })
				}
			})
		}
		r.Add(func(AsyncSteps, ...any) { done <- struct{}{} })
		return r
	}
	a, b := steps("a"), steps("b")
	onLoop(t, l, func() {
		a.Execute()
		b.Execute()
	})
	for range 3 { // both flows and the callback: in bursts it runs last
		wait(t, done, "flow a, flow b or the callback")
	}
	flows = tr.String()

	var br trace
	p := New(WithTool(l))
	p.Parallel().
		Add(func(as AsyncSteps, _ ...any) {
			br.add("x1")
			as.Add(func(AsyncSteps, ...any) { br.add("x2") })
		}).
		Add(func(as AsyncSteps, _ ...any) {
			br.add("y1")
			as.Add(func(AsyncSteps, ...any) { br.add("y2") })
		})
	p.Add(func(AsyncSteps, ...any) { done <- struct{}{} })
	onLoop(t, l, p.Execute)
	wait(t, done, "the parallel flow")
	return flows, br.String()
}

func TestLoopTakesTurnsPerStepByDefault(t *testing.T) {
	flows, branches := burstTrace(t, false)
	if want := "a1 b1 a2 b2 a3 b3 cb"; flows != want {
		t.Errorf("flows ran %q, want %q", flows, want)
	}
	if want := "x1 y1 x2 y2"; branches != want {
		t.Errorf("branches ran %q, want %q", branches, want)
	}
}

func TestLoopSetBurstsRunsAFlowsStepsBackToBack(t *testing.T) {
	flows, branches := burstTrace(t, true)
	if want := "a1 a2 a3 b1 b2 b3 cb"; flows != want {
		t.Errorf("flows ran %q, want %q", flows, want)
	}
	if want := "x1 y1 x2 y2"; branches != want {
		t.Errorf("branches still take turns: ran %q, want %q", branches, want)
	}
}
