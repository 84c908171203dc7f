package asyncsteps_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// waitGoroutines waits until at most n goroutines run, or fails the test.
// Exiting goroutines take a moment to be counted out; the deadline is a
// failure guard only.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTenThousandFlowsLeaveNoGoroutineAfterClose runs 10,000 flows on a Loop, completes half
// of them from other goroutines while the other half stay parked, closes the
// loop and checks that the parked ones end with an error and that no
// goroutine is left.
func TestTenThousandFlowsLeaveNoGoroutineAfterClose(t *testing.T) {
	const flows = 10000
	before := runtime.NumGoroutine()
	loop := asyncsteps.NewLoop()

	type waiting struct {
		i  int
		as asyncsteps.AsyncSteps
	}
	parked := make(chan waiting, flows)
	results := make([]<-chan asyncsteps.Result, flows)
	for i := range flows {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			parked <- waiting{i, as}
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			as.Success(args[0].(int) + 1)
		})
		results[i] = r.Promise()
	}

	// Complete the even flows from four goroutines; the odd ones stay parked.
	var wg sync.WaitGroup
	work := make(chan asyncsteps.AsyncSteps)
	for range 4 {
		wg.Go(func() {
			for as := range work {
				as.Success(41)
			}
		})
	}
	for range flows {
		w := <-parked
		if w.i%2 == 0 {
			work <- w.as
		}
	}
	close(work)
	wg.Wait()

	for i := 0; i < flows; i += 2 {
		res := <-results[i]
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != 42 {
			t.Fatalf("flow %d: result %+v, want [42] and no error", i, res)
		}
	}
	for i := 1; i < flows; i += 2 {
		if len(results[i]) != 0 {
			t.Fatalf("parked flow %d has a result", i)
		}
	}
	loop.Close()
	for i := 1; i < flows; i += 2 {
		if res := receive(t, results[i], "a parked flow"); res.Err == nil {
			t.Fatalf("parked flow %d: result %+v after Close, want the closed loop's error", i, res)
		}
	}
	waitGoroutines(t, before)
}
