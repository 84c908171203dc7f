package asyncsteps

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// State keeps its variables as a map would, before and after it has more
// than it keeps without one: each Set, Unset, Get and Exists is checked
// against a map, and so are the sorted names, a clone and CopyFrom.
func TestStateVariablesBehaveAsAMap(t *testing.T) {
	var s State
	want := map[string]any{}
	check := func(op string) {
		t.Helper()
		for i := range 10 {
			name := fmt.Sprint("v", i)
			w, ok := want[name]
			if got := s.Get(name); got != w || s.Exists(name) != ok {
				t.Fatalf("after %s: Get(%q) = %v, Exists %v; want %v, %v", op, name, got, s.Exists(name), w, ok)
			}
		}
		if names := slices.Sorted(maps.Keys(want)); !slices.Equal(s.names(), names) {
			t.Fatalf("after %s: names %q, want %q", op, s.names(), names)
		}
	}
	ops := []struct {
		set   bool
		name  string
		value any
	}{
		{true, "v1", 1}, {true, "v2", nil}, {true, "v1", 11}, {false, "v1", nil}, {false, "v9", nil},
		{true, "v3", 3}, {true, "v4", 4}, {true, "v5", 5}, {true, "v6", 6}, {true, "v5", 55},
		{false, "v2", nil}, {true, "v7", 7}, {true, "v2", 2},
	}
	for _, op := range ops {
		if op.set {
			s.Set(op.name, op.value)
			want[op.name] = op.value
		} else {
			s.Unset(op.name)
			delete(want, op.name)
		}
		check(fmt.Sprintf("%+v", op))
	}

	r := New(WithTool(NewTestTool()))
	r.State().Set("v1", "model")
	r.State().Set("v8", 8)
	for _, op := range ops[:4] {
		if op.set {
			r.State().Set(op.name, op.value)
		}
	}
	c := r.Clone()
	c.State().Set("v8", "clone's")
	if got := r.State().Get("v8"); got != 8 {
		t.Errorf("the model's v8 is %v after its clone's Set, want 8", got)
	}
	into := New(WithTool(NewTestTool()))
	into.State().Set("v2", "own")
	into.CopyFrom(r)
	copied := map[string]any{}
	into.State().eachVar(func(name string, value any) { copied[name] = value })
	if want := map[string]any{"v1": 11, "v2": "own", "v8": 8}; !maps.Equal(copied, want) {
		t.Errorf("after CopyFrom: %v, want %v", copied, want)
	}
}

// A flow that sets a few State variables allocates no map for them.
func TestAFewStateVariablesAllocateNoMap(t *testing.T) {
	var s *State
	allocs := testing.AllocsPerRun(100, func() {
		s = new(State)
		s.Set("AAPL", &s)
		s.Set("MSFT", &s)
		s.Set("GOOG", &s)
	})
	if allocs != 1 {
		t.Errorf("a State with three variables costs %v allocations, want 1 (the State)", allocs)
	}
}
