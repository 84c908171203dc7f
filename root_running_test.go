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

// Each way to start a flow panics on a flow already running, and names
// itself in the panic: the caller's own method, not Execute.
func TestStartingARunningFlowPanicsWithTheMethodsName(t *testing.T) {
	starts := []struct {
		method string
		start  func(r *Root)
	}{
		{"Execute", func(r *Root) { r.Execute() }},
		{"ExecuteWith", func(r *Root) { r.ExecuteWith(func(*Error) {}) }},
		{"Promise", func(r *Root) { r.Promise() }},
		{"Run", func(r *Root) { r.Run(t.Context()) }},
		{"RunHelping", func(r *Root) { r.RunHelping(t.Context()) }},
	}
	for _, tool := range []string{"TestTool", "Loop"} {
		for _, s := range starts {
			t.Run(tool+"/"+s.method, func(t *testing.T) {
				var r *Root
				if tool == "Loop" {
					loop := NewLoop()
					defer loop.Close()
					r = New(WithTool(loop))
				} else {
					r = New(WithTool(NewTestTool()))
				}
				held := make(chan struct{})
				r.Add(func(as AsyncSteps, _ ...any) { AwaitChan(as, held) })
				r.Execute()
				defer close(held)
				got := func() (p any) {
					defer func() { p = recover() }()
					s.start(r)
					return nil
				}()
				want := "asyncsteps: " + s.method + " called on a running flow"
				if got != want {
					t.Errorf("panic %v, want %q", got, want)
				}
			})
		}
	}
}
