package asyncsteps

import "testing"

// A one-shot Root's SuccessStep costs two allocations as it is added, the
// copy of its args and the step holding it, and one as it runs, the args
// it gives (each run of a model's copies gets its own): three more than
// a Root whose step is a function without captures. The caller's
// variadic slice stays on its stack.
func TestARootsSuccessStepCostsThreeAllocations(t *testing.T) {
	oneAPIChunk(t)
	tt := NewTestTool()
	noop := func(AsyncSteps, ...any) {}
	plain := rootAllocs(tt, func(r *Root) { r.Add(noop) })
	success := rootAllocs(tt, func(r *Root) { r.SuccessStep("v") })
	if success != plain+3 {
		t.Errorf("a flow allocates %v objects with SuccessStep(\"v\"), %v with a plain step: want three more", success, plain)
	}
}

// rootAllocs returns the allocations of a one-shot flow on tt built by
// build, from its making to its end.
func rootAllocs(tt *TestTool, build func(r *Root)) float64 {
	return testing.AllocsPerRun(100, func() {
		r := New(WithTool(tt))
		build(r)
		r.Execute()
		tt.Run()
	})
}

// BenchmarkRootSuccessStep is a one-shot Root whose one step is a
// SuccessStep of one arg, from its making to its end.
func BenchmarkRootSuccessStep(b *testing.B) {
	tt := NewTestTool()
	b.ReportAllocs()
	for b.Loop() {
		r := New(WithTool(tt))
		r.SuccessStep("v")
		r.Execute()
		tt.Run()
	}
}
