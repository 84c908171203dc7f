package asyncsteps_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The Loop's timer stays armed across the wake-ups of producers: a step
// timeout falls due at its time however often the loop is woken before.
func TestLoopStepTimeoutIsOnTimeAfterWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		start := time.Now()
		timingOut(loop, 100*time.Millisecond, &tr, "", start).Execute()
		for range 9 {
			time.Sleep(10 * time.Millisecond)
			loop.Immediate(func() { tr.addf("woken@%v", time.Since(start)) })
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantTrace(t, &tr, "woken@10ms,woken@20ms,woken@30ms,woken@40ms,woken@50ms,"+
			"woken@60ms,woken@70ms,woken@80ms,woken@90ms,Timeout@100ms")
	})
}

// A timer left armed for a step timeout that is gone wakes the loop early;
// the loop sleeps again until the next timeout falls due.
func TestLoopSleepsAgainAfterAGoneTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		start := time.Now()
		waiting := make(chan asyncsteps.AsyncSteps, 1)
		short := asyncsteps.New(asyncsteps.WithTool(loop))
		short.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(10 * time.Millisecond)
			waiting <- as
		})
		short.Add(func(as asyncsteps.AsyncSteps, _ ...any) { tr.addf("short done@%v", time.Since(start)) })
		long := timingOut(loop, 50*time.Millisecond, &tr, "long ", start)
		short.Execute()
		long.Execute()
		as := <-waiting
		time.Sleep(5 * time.Millisecond)
		as.Success()
		time.Sleep(time.Second)
		synctest.Wait()
		wantTrace(t, &tr, "short done@5ms,long Timeout@50ms")
	})
}

// A timer that falls due before the one the loop's timer is armed for
// shortens the loop's sleep.
func TestLoopSleepShortensForAnEarlierTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var tr tracer
		start := time.Now()
		timingOut(loop, 100*time.Millisecond, &tr, "", start).Execute()
		time.Sleep(5 * time.Millisecond)
		loop.Deferred(15*time.Millisecond, func() { tr.addf("deferred@%v", time.Since(start)) })
		time.Sleep(time.Second)
		synctest.Wait()
		wantTrace(t, &tr, "deferred@20ms,Timeout@100ms")
	})
}

// timingOut returns a flow on loop whose step times out after d; its
// error handler traces prefix, the code and the time since start.
func timingOut(loop *asyncsteps.Loop, d time.Duration, tr *tracer, prefix string, start time.Time) *asyncsteps.Root {
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(d)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr.addf("%s%s@%v", prefix, code, time.Since(start))
		as.Success()
	})
	return r
}
