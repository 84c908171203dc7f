package asyncsteps

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// A Shutdown whose grace ends while a Start has counted its flow but not
// yet executed it cancels that flow as it starts: the set counted it as
// running, so Shutdown neither misses it (Root.Cancel of a Root not yet
// running does nothing) nor waits for it to end on its own.
func TestFlowSetShutdownCancelsAFlowStartingDuringIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := NewLoop()
		defer loop.Close()
		var set FlowSet
		release := make(chan struct{})
		onceHook(t, &testHookFlowSetCounted, func() { <-release })
		r := New(WithTool(loop))
		Sleep(r, time.Hour)
		start := time.Now()
		ended := make(chan string, 1)
		go set.Start(r, func(res Result) { ended <- fmt.Sprint(res.Err, " at ", time.Since(start)) })
		synctest.Wait() // Start has counted r, and waits in the hook
		shut := make(chan error, 1)
		go func() { shut <- set.Shutdown(context.Background(), 0) }()
		synctest.Wait() // Shutdown has cancelled what ran, and waits
		close(release)
		err := <-shut
		if got, want := fmt.Sprint(err, " at ", time.Since(start), "; flow ", <-ended), "<nil> at 0s; flow context canceled at 0s"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}
