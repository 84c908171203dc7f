package asyncsteps

import "testing"

// Hooks whose fields are all nil cost a flow begun by Execute one
// allocation, the record that keeps its hooks (a flow begun by Run or
// Promise has one already), and nothing per step, per error or per Sync:
// what each point of observation pays for a nil hook is its nil check
// (docs/DESIGN.md#hooks).
func TestNilHooksCostAFlowOneAllocation(t *testing.T) {
	m := NewMutex(1)
	work := func(as AsyncSteps) {
		for range 3 {
			as.Add(func(as AsyncSteps, _ ...any) { as.Error(CommError) },
				func(as AsyncSteps, _ string) { as.Success() })
			as.Sync(m, func(as AsyncSteps, _ ...any) {})
		}
	}
	for name, hooks := range map[string]*Hooks{"no hooks": nil, "nil hooks": {}} {
		t.Run(name, func(t *testing.T) {
			bare := NewTestTool()
			hooked := NewTestTool()
			hooked.SetHooks(hooks)
			want := flowAllocs(bare, work)
			if hooks != nil {
				want++
			}
			if got := flowAllocs(hooked, work); got != want {
				t.Errorf("a flow allocates %v objects, want %v", got, want)
			}
		})
	}
}
