package asyncsteps

import (
	"sync"
	"testing"
)

// Done asked for while another goroutine cancels the call: Done may see
// the call cancelled already and hand out the shared closed channel before
// cancel looks at the call's channel, which cancel must then not close
// again (a "close of closed channel" panic ended the loop's goroutine when
// a Loop closed while a function asked for Done).
func TestAwaitCallDoneRacingCancel(t *testing.T) {
	for range 20000 {
		c := &awaitCall{stepDue: noStepDue}
		c.used.Store(true) // as after an AfterFunc: cancel takes the lock
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.cancel() }()
		go func() { defer wg.Done(); <-c.Done() }()
		wg.Wait()
	}
}
