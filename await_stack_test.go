package asyncsteps

import (
	"context"
	"errors"
	"fmt"
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

// The user's functions of TestAwaitStackNamesTheUsersFunctionEverywhere.
func failingTypedAwait(context.Context) (int, error) { return 0, errors.New("refused") }
func awaitStepFails(as AsyncSteps, _ ...any)         { as.Await(failingAwait) }
func awaitStepHandled(as AsyncSteps, _ ...any)       { as.Await(failingAwait, awaitHandlerAdds) }
func awaitHandlerAdds(as AsyncSteps, _ string)       { as.Add(awaitSubFails) }
func awaitSubFails(as AsyncSteps, _ ...any)          { as.Error("E2") }

// TestAwaitStackNamesTheUsersFunctionEverywhere checks that the AsyncStack
// of a failure in an Await step, or in a step its error handler adds,
// names the user's function, not the engine's closures around it: the
// wrapper of the Await hooks, AwaitThen's own function, or the engine's
// step function that the error handler's frame runs in place of the step.
func TestAwaitStackNamesTheUsersFunctionEverywhere(t *testing.T) {
	const pkg = "github.com/asyncsteps/asyncsteps."
	cases := []struct {
		name  string
		add   func(r *Root)
		code  string
		stack []string
	}{
		{"Await", func(r *Root) { r.Await(failingAwait) }, InternalError, []string{"failingAwait"}},
		{"Await in a step", func(r *Root) { r.Add(awaitStepFails) }, InternalError,
			[]string{"awaitStepFails", "failingAwait"}},
		{"AwaitThen", func(r *Root) { AwaitThen(r, failingTypedAwait, nil) }, InternalError,
			[]string{"failingTypedAwait"}},
		{"Await: a step its error handler adds", func(r *Root) { r.Await(failingAwait, awaitHandlerAdds) }, "E2",
			[]string{"failingAwait", "awaitSubFails"}},
		{"Await in a step: a step its error handler adds", func(r *Root) { r.Add(awaitStepHandled) }, "E2",
			[]string{"awaitStepHandled", "failingAwait", "awaitSubFails"}},
		{"AwaitThen: a step its error handler adds", func(r *Root) {
			AwaitThen(r, failingTypedAwait, nil, awaitHandlerAdds)
		}, "E2", []string{"failingTypedAwait", "awaitSubFails"}},
	}
	observe := &Hooks{AwaitStart: func(ctx context.Context) context.Context { return ctx }}
	for _, hooks := range []*Hooks{nil, observe} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s, hooks %t", c.name, hooks != nil), func(t *testing.T) {
				l := NewLoop()
				defer l.Close()
				l.SetHooks(hooks)
				r := New(WithTool(l))
				c.add(r)
				_, err := r.Run(context.Background())
				if !errors.Is(err, &Error{Code: c.code}) {
					t.Fatalf("error %v, want code %s", err, c.code)
				}
				want := make([]string, len(c.stack))
				for i, name := range c.stack {
					want[i] = pkg + name
				}
				if got := r.State().AsyncStack; !slices.Equal(got, want) {
					t.Errorf("AsyncStack %q, want %q", got, want)
				}
			})
		}
	}
}

// The user's functions of TestAwaitHelpersLeaveTheirStepsOutOfTheStack.
func awaitedFlowFails(as AsyncSteps, _ ...any) { as.Error("E3") }
func awaitsFlow(as AsyncSteps, _ ...any) {
	sub := New(WithTool(as.Tool()))
	sub.Add(awaitedFlowFails)
	AwaitFlow(as, sub)
}
func awaitsNilFlow(as AsyncSteps, _ ...any) { AwaitFlow(as, nil) }
func awaitsReadyResult(as AsyncSteps, _ ...any) {
	ch := make(chan Result, 1)
	ch <- Result{Err: &Error{Code: "E3"}}
	AwaitResult(as, ch)
}
func awaitsLateResult(as AsyncSteps, _ ...any) {
	ch := make(chan Result)
	go func() { ch <- Result{Err: &Error{Code: "E3"}} }()
	AwaitResult(as, ch)
}

// TestAwaitHelpersLeaveTheirStepsOutOfTheStack checks that the step that
// AwaitFlow or AwaitResult adds, which runs no function of the user's, is
// left out of the AsyncStack of its failure, as the steps of the other
// helpers are: the stack ends with the user's step that called the helper,
// not with the helper's closure.
func TestAwaitHelpersLeaveTheirStepsOutOfTheStack(t *testing.T) {
	const pkg = "github.com/asyncsteps/asyncsteps."
	for _, c := range []struct {
		name string
		step StepFunc
		want string
		code string
	}{
		{"AwaitFlow", awaitsFlow, "awaitsFlow", "E3"},
		{"AwaitFlow of a nil Root", awaitsNilFlow, "awaitsNilFlow", InternalError},
		{"AwaitResult, ready", awaitsReadyResult, "awaitsReadyResult", "E3"},
		{"AwaitResult, waiting", awaitsLateResult, "awaitsLateResult", "E3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLoop()
			defer l.Close()
			r := New(WithTool(l))
			r.Add(c.step)
			_, err := r.Run(context.Background())
			if !errors.Is(err, &Error{Code: c.code}) {
				t.Fatalf("error %v, want code %s", err, c.code)
			}
			want := []string{pkg + c.want}
			if got := r.State().AsyncStack; !slices.Equal(got, want) {
				t.Errorf("AsyncStack %q, want %q", got, want)
			}
		})
	}
}
