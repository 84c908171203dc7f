package asyncsteps

import "testing"

// Running is true from Execute until the flow has ended, false before and
// after, on virtual time.
func TestRootRunning(t *testing.T) {
	tt := NewTestTool()
	r := New(WithTool(tt))
	var inStep bool
	r.Add(func(as AsyncSteps, _ ...any) { inStep = r.Running() })
	if r.Running() {
		t.Fatal("Running before Execute")
	}
	r.Execute()
	if !r.Running() {
		t.Fatal("not Running after Execute")
	}
	tt.Run()
	if !inStep {
		t.Error("not Running inside a step")
	}
	if r.Running() {
		t.Error("Running after the flow ended")
	}
}
