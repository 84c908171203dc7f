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

// startExiting starts a flow on l with Execute whose unhandled-error
// function records the error in ended and calls runtime.Goexit, as a
// t.FailNow there does.
func startExiting(l *asyncsteps.Loop, ended chan<- string) {
	r := asyncsteps.New(asyncsteps.WithTool(l), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		ended <- err.Code + ": " + err.Info
		runtime.Goexit()
	}))
	r.Add(func(asyncsteps.AsyncSteps, ...any) {})
	r.Execute()
}

// startWaited starts a flow on l with Promise.
func startWaited(l *asyncsteps.Loop) <-chan asyncsteps.Result {
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(asyncsteps.AsyncSteps, ...any) {})
	return r.Promise()
}

// Flows started while the loop was busy, and not begun when it closes,
// are ended by the shutdown, oldest first. An unhandled-error function
// among them that calls runtime.Goexit ends the loop's goroutine there:
// the next one ends the flows started after it, whose Promise would
// otherwise wait for ever.
func TestCloseEndsUnstartedFlowsAfterAGoexitInAnUnhandledError(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		gate, blocked := make(chan struct{}), make(chan struct{})
		l.Immediate(func() { close(blocked); <-gate })
		<-blocked
		ended := make(chan string, 1)
		startExiting(l, ended) // waits to start, behind the blocked callback
		waited := startWaited(l)
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		for l.Immediate(func() {}).IsValid() { // until Close has begun
			runtime.Gosched()
		}
		close(gate)
		<-closed
		want := asyncsteps.InternalError + ": " + closedInfo
		if got := <-ended; got != want {
			t.Errorf("the exiting flow ended with %q, want %q", got, want)
		}
		wantError(t, receive(t, waited, "the flow started after it").Err, asyncsteps.InternalError, closedInfo)
	})
}

// Flows started on a loop that has closed end on a goroutine of their
// own. An unhandled-error function that calls runtime.Goexit ends that
// goroutine: a flow it would have ended next still ends. With one P,
// the flows are started before any of those goroutines runs, so that
// one takes both.
func TestFlowsStartedOnAClosedLoopEndAfterAGoexitInAnUnhandledError(t *testing.T) {
	inChild(t, func(t *testing.T) {
		runtime.GOMAXPROCS(1)
		l := asyncsteps.NewLoop()
		l.Close()
		ended := make(chan string, 1)
		startExiting(l, ended)
		waited := startWaited(l)
		want := asyncsteps.InternalError + ": " + closedInfo
		if got := <-ended; got != want {
			t.Errorf("the exiting flow ended with %q, want %q", got, want)
		}
		wantError(t, receive(t, waited, "the flow started after it").Err, asyncsteps.InternalError, closedInfo)
	})
}
