package asyncsteps

import (
	"context"
	"testing"
)

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
// itself in the panic: the caller's own method, not Execute. A context
// that has ended, or none, does not hide the mistake: it is checked after.
func TestStartingARunningFlowPanicsWithTheMethodsName(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	var none context.Context
	starts := []struct {
		method, ctx string
		start       func(r *Root)
	}{
		{"Execute", "", func(r *Root) { r.Execute() }},
		{"ExecuteWith", "", func(r *Root) { r.ExecuteWith(func(*Error) {}) }},
		{"ExecuteThen", "", func(r *Root) { r.ExecuteThen(func(Result) {}) }},
		{"ExecuteThen", "nil", func(r *Root) { r.ExecuteThen(nil) }},
		{"Promise", "", func(r *Root) { r.Promise() }},
		{"Run", "", func(r *Root) { r.Run(t.Context()) }},
		{"Run", "ended", func(r *Root) { r.Run(ended) }},
		{"Run", "nil", func(r *Root) { r.Run(none) }},
		{"RunHelping", "", func(r *Root) { r.RunHelping(t.Context()) }},
		{"RunHelping", "ended", func(r *Root) { r.RunHelping(ended) }},
		{"RunHelping", "nil", func(r *Root) { r.RunHelping(none) }},
		{"PromiseContext", "", func(r *Root) { r.PromiseContext(t.Context()) }},
		{"PromiseContext", "ended", func(r *Root) { r.PromiseContext(ended) }},
		{"PromiseContext", "nil", func(r *Root) { r.PromiseContext(none) }},
		{"ExecuteThenContext", "", func(r *Root) { r.ExecuteThenContext(t.Context(), func(Result) {}) }},
		{"ExecuteThenContext", "ended", func(r *Root) { r.ExecuteThenContext(ended, func(Result) {}) }},
		{"ExecuteThenContext", "nil", func(r *Root) { r.ExecuteThenContext(none, func(Result) {}) }},
		{"ExecuteThenContext", "nil done", func(r *Root) { r.ExecuteThenContext(t.Context(), nil) }},
	}
	for _, tool := range []string{"TestTool", "Loop"} {
		for _, s := range starts {
			t.Run(tool+"/"+s.method+"/"+s.ctx, func(t *testing.T) {
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
