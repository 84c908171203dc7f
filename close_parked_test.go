package asyncsteps_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A step that has added sub-steps while another goroutine called Error on
// it (a misuse, which fails the step) waits for the loop to deliver that
// error. A loop closed meanwhile drops the delivery, and ends the flow.
func TestCloseEndsAFlowFailedFromElsewhereAfterAdd(t *testing.T) {
	loop := asyncsteps.NewLoop()
	var ended []string // on the loop, before Done is closed
	r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		ended = append(ended, err.Code+": "+err.Info)
	}))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Add(func(asyncsteps.AsyncSteps, ...any) {})
		loop.Close() // from the loop: the loop stops once this callback returns
		raised := make(chan struct{})
		go func() {
			as.Error("Boom")
			close(raised)
		}()
		<-raised
	})
	r.Execute()
	<-loop.Done()
	if want := []string{asyncsteps.InternalError + ": " + closedInfo}; !slices.Equal(ended, want) {
		t.Errorf("the flow ended with %q, want %q", ended, want)
	}
	runtime.KeepAlive(r)
}

// An unhandled-error function that calls runtime.Goexit while Close ends
// the waiting flows ends the loop's goroutine; the next one goes on with
// the shutdown, and still ends the flows that waited with a timeout.
func TestCloseEndsTimedFlowsAfterAGoexitInAnUnhandledError(t *testing.T) {
	inChild(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		var mu sync.Mutex
		ended := map[string][]string{}
		waiting := make(chan asyncsteps.AsyncSteps, 2)
		start := func(name string, exit bool, step asyncsteps.StepFunc) {
			r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
				mu.Lock()
				ended[name] = append(ended[name], err.Code+": "+err.Info)
				mu.Unlock()
				if exit {
					runtime.Goexit()
				}
			}))
			r.Add(step)
			r.Execute()
		}
		start("parked", true, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			waiting <- as
		})
		start("timed", false, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			waiting <- as
		})
		held := []asyncsteps.AsyncSteps{<-waiting, <-waiting} // as whoever would complete them does
		loop.Close()
		want := []string{asyncsteps.InternalError + ": " + closedInfo}
		mu.Lock()
		defer mu.Unlock()
		for _, name := range []string{"parked", "timed"} {
			if got := ended[name]; !slices.Equal(got, want) {
				t.Errorf("flow %s ended with %q, want %q", name, got, want)
			}
		}
		runtime.KeepAlive(held)
	})
}
