package asyncsteps_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// A Root holds its execution and reuses it when executed again. Executed
// 2,000 times in a row on a real Loop, each time completed from another
// goroutine, cancelled from another goroutine, or failed, it gives each
// execution exactly its own result; a handle kept from an earlier execution
// stays dead and changes nothing in the later ones. Run with -race, this
// also checks that a new execution, started from the test goroutine, does
// not race with what the loop still does for the one that just ended.
func TestRootReusedAcrossExecutions(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	var stale asyncsteps.AsyncSteps
	for i := range 2000 {
		parked := make(chan asyncsteps.AsyncSteps, 1)
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			parked <- as
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Success(args[0].(int) + 1)
		})
		ch := r.Promise()
		as := <-parked
		if stale != nil {
			if stale.IsValid() {
				t.Fatalf("execution %d: a handle of the previous execution is valid", i)
			}
			stale.Success(-1) // must not complete this execution's step
			stale.Error("Stale")
		}
		var wg sync.WaitGroup
		switch i % 3 {
		case 0:
			wg.Go(func() { as.Success(i) })
		case 1:
			wg.Go(func() { r.Cancel() })
		case 2:
			wg.Go(func() { as.Error("E", "from another goroutine") })
		}
		res := <-ch
		wg.Wait()
		checkReuseResult(t, i, res)
		select {
		case extra := <-ch:
			t.Fatalf("execution %d: a second result %v", i, extra)
		default:
		}
		stale = as
	}
}

func checkReuseResult(t *testing.T, i int, res asyncsteps.Result) {
	t.Helper()
	switch i % 3 {
	case 0:
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != i+1 {
			t.Fatalf("execution %d: got %v, %v; want [%d], nil", i, res.Args, res.Err, i+1)
		}
	case 1:
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("execution %d: got %v, want context.Canceled", i, res.Err)
		}
	case 2:
		var e *asyncsteps.Error
		if !errors.As(res.Err, &e) || e.Code != "E" || e.Info != "from another goroutine" {
			t.Fatalf("execution %d: got %v, want E: from another goroutine", i, res.Err)
		}
	}
}

// A Root misused before Execute fails that execution at once; its steps are
// dropped with it, and the next execution runs only the steps added since.
func TestRootRunsOnlyNewStepsAfterMisuse(t *testing.T) {
	var tr tracer
	r, tt := newFlow()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("old") })
	r.Success() // misuse: valid only inside a step
	ch := r.Promise()
	drive(t, tt)
	wantCode(t, (<-ch).Err, asyncsteps.InternalError)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("new") })
	ch = r.Promise()
	drive(t, tt)
	if res := <-ch; res.Err != nil {
		t.Fatalf("second execution: %v", res.Err)
	}
	wantTrace(t, &tr, "new")
}
