package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// slowThenFast is an Await function for attempt i of a retry: the first
// two take a second, the third 30ms; each returns early when its context
// ends. It logs the time of each call since start.
func slowThenFast(start time.Time, log *[]string, i int) asyncsteps.AwaitFunc {
	return func(ctx context.Context) (any, error) {
		*log = append(*log, fmt.Sprint(time.Since(start)))
		d := time.Second
		if i == 2 {
			d = 30 * time.Millisecond
		}
		select {
		case <-time.After(d):
			return "42", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TestLoopInSynctestRetriesAwaitOnVirtualTime pins what TestTool's doc
// says: a flow whose steps wait for goroutines (Await) is tested on
// virtual time with a Loop made inside a testing/synctest bubble, whose
// clock moves only once those goroutines are blocked too.
func TestLoopInSynctestRetriesAwaitOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close() // before the bubble ends, or synctest reports a deadlock
		start := time.Now()
		var log []string
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 3, Timeout: 200 * time.Millisecond}, func(as asyncsteps.AsyncSteps, i int) {
			as.Await(slowThenFast(start, &log, i))
		})
		body, err := asyncsteps.Run[string](context.Background(), r)
		got := fmt.Sprint(body, " ", err, " at ", time.Since(start), " attempts ", strings.Join(log, ","))
		if want := "42 <nil> at 430ms attempts 0s,200ms,400ms"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// A timer that re-arms itself with no delay waits for the loop's next
// pass, also when the clock has not moved since the pass began, as it
// never does inside a testing/synctest bubble while the loop runs: the
// loop runs the immediate that its first run scheduled before it runs
// the timer again, rather than run the timer for as long as it re-arms.
func TestLoopInSynctestTimerReArmedAtOnceWaitsForTheNextPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		const rearms = 100
		runs, immediateAfter := 0, 0
		done := make(chan struct{})
		var rearm func()
		rearm = func() {
			if runs++; runs == 1 {
				loop.Immediate(func() { immediateAfter = runs })
			}
			if runs == rearms {
				close(done)
				return
			}
			loop.Deferred(0, rearm)
		}
		loop.Deferred(0, rearm)
		<-done
		loop.Close() // before the loop's variables are read
		if immediateAfter != 1 {
			t.Errorf("the immediate ran after %d runs of the timer, want 1", immediateAfter)
		}
	})
}
