package asyncsteps

import (
	"runtime"
	"testing"
)

// searchFor stands in for invokerOnStack, so that searchStack reads the
// stack from searchFor's caller on, with one way of matching only.
//
//go:noinline
func searchFor(match func(pc uintptr) bool, first int) bool { return searchStack(match, first) }

// callThrough calls f through depth frames of its own.
//
//go:noinline
func callThrough(depth int, f func()) {
	if depth == 0 {
		f()
		return
	}
	callThrough(depth-1, f)
}

// Each way of matching finds the invoker of a step callback and of an
// error handler on a TestTool at any depth below it (around the end of
// the first read and of each chunk), and none on a goroutine that runs no
// callback.
func TestSearchStackFindsInvokersAtAnyDepth(t *testing.T) {
	matches := []struct {
		name  string
		match func(pc uintptr) bool
	}{{"return address", isInvokerReturn}, {"function", isInvokerCode}}
	for _, m := range matches {
		t.Run(m.name, func(t *testing.T) {
			for depth := range 300 {
				var inStep, inHandler, elsewhere bool
				tt := NewTestTool()
				r := New(WithTool(tt))
				r.Add(func(as AsyncSteps, _ ...any) {
					callThrough(depth, func() { inStep = searchFor(m.match, nearFrames) })
					as.Error("Boom")
				}, func(as AsyncSteps, _ string) {
					callThrough(depth, func() { inHandler = searchFor(m.match, nearFrames) })
					done := make(chan struct{})
					go func() {
						defer close(done)
						callThrough(depth, func() { elsewhere = searchFor(m.match, nearFrames) })
					}()
					<-done
					as.Success()
				})
				r.Execute()
				tt.Run()
				if !inStep || !inHandler || elsewhere {
					t.Fatalf("depth %d: found in the step %v, in the handler %v, elsewhere %v; want true, true, false",
						depth, inStep, inHandler, elsewhere)
				}
			}
		})
	}
}

// The probe found the invokers: their entries are those of (*flow).invoke
// and (*flow).invokeHandler, and the return addresses are in them.
func TestInvokerProbe(t *testing.T) {
	const pkg = "github.com/asyncsteps/asyncsteps."
	for i, name := range []string{pkg + "(*flow).invoke", pkg + "(*flow).invokeHandler"} {
		if f := runtime.FuncForPC(invokerEntries[i]); f == nil || f.Name() != name || f.Entry() != invokerEntries[i] {
			t.Errorf("invokerEntries[%d] = %#x is not the entry of %s", i, invokerEntries[i], name)
		}
		if f := runtime.FuncForPC(invokerReturns[i] - 1); f == nil || f.Name() != name {
			t.Errorf("invokerReturns[%d] = %#x is not in %s", i, invokerReturns[i], name)
		}
	}
}
