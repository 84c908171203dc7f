package asyncsteps

import (
	"context"
	"testing"
)

// The key under which the context package looks up a context's cancel is
// learnt, and an Await context answers it with nothing and without an
// allocation: each context net/http derives from the call's asks for it.
// Other keys of its type still find Run's values
// (TestAwaitContextFindsRunValuesUnderIntPointerKeys).
func TestAwaitContextCancelKeyCostsNoAllocation(t *testing.T) {
	if _, ok := cancelCtxKey.(*int); !ok {
		t.Fatalf("cancelCtxKey is %T, want the context package's *int key", cancelCtxKey)
	}
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Under the key, a cancelCtx answers with itself: the call must not.
	if parent.Value(cancelCtxKey) == nil {
		t.Fatal("the learnt key is not the one a cancelCtx answers")
	}
	c := &awaitCall{Context: parent}
	var got any = c
	allocs := testing.AllocsPerRun(100, func() { got = c.Value(cancelCtxKey) })
	if got != nil || allocs != 0 {
		t.Errorf("Value(cancel key) = %v with %v allocations, want <nil> with 0", got, allocs)
	}
}

// An Await step added by a running step is its own call on its first run,
// and makes a new call on any other: a call is never given out twice.
func TestAwaitStepClaimsItsCallOnce(t *testing.T) {
	step := &awaitCall{fn: func(context.Context) (any, error) { return nil, nil }}
	fl := &New().fl
	f := &frame{}
	first, second := step.claim(f, fl), step.claim(f, fl)
	if first != step || second == step || second.fn == nil {
		t.Errorf("claims gave %p then %p (fn set: %v), want the step %p then a new call", first, second, second.fn != nil, step)
	}
}
