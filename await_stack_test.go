package asyncsteps

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// failingAwait is the Await function of TestAwaitStackNamesTheFunction.
func failingAwait(context.Context) (any, error) { return nil, errors.New("refused") }

// TestAwaitStackNamesTheFunction checks that the AsyncStack of a failed
// Await step names the user's Await function, the same whether a model
// Root or a running step added it: the engine runs the two through
// different step functions of its own (see addAwait), neither of which is
// the user's.
func TestAwaitStackNamesTheFunction(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	var stacks [][]string
	record := func(as AsyncSteps, _ string) {
		stacks = append(stacks, as.State().AsyncStack)
		as.Success()
	}
	adder := func(as AsyncSteps, _ ...any) { as.Await(failingAwait, record) }
	r := New(WithTool(l))
	r.Await(failingAwait, record)
	r.Add(adder)
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	const pkg = "github.com/asyncsteps/asyncsteps."
	want := [][]string{
		{pkg + "failingAwait"},
		{pkg + "TestAwaitStackNamesTheFunction.func2", pkg + "failingAwait"},
	}
	if len(stacks) != len(want) {
		t.Fatalf("AsyncStacks %q, want %q", stacks, want)
	}
	for i := range want {
		if !slices.Equal(stacks[i], want[i]) {
			t.Errorf("AsyncStack %d: %q, want %q", i, stacks[i], want[i])
		}
	}
}
