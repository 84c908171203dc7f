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
