package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Sleep waits on the tool's clock, exactly, and hands the args it was
// given on to the next step; it returns what Add returns, to chain.
func TestSleepWaitsOnTheClockAndPassesItsArgsOn(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var tr []string
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("x", 1) })
	asyncsteps.Sleep(r, 100*time.Millisecond).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr = append(tr, fmt.Sprintf("after the first: %v at %v", args, elapsed(tt)))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("y") })
		asyncsteps.Sleep(as, 50*time.Millisecond)
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		tr = append(tr, fmt.Sprintf("after the second: %v at %v", args, elapsed(tt)))
		as.Success(args...)
	})
	res := r.Promise()
	tt.Run()
	got := <-res
	tr = append(tr, fmt.Sprintf("result %v %v, pending %d", got.Args, got.Err, tt.Pending()))
	want := []string{
		"after the first: [x 1] at 100ms",
		"after the second: [y] at 150ms",
		"result [y] <nil>, pending 0",
	}
	if strings.Join(tr, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(tr, "\n"), strings.Join(want, "\n"))
	}
}

// A cancel while the step sleeps stops its timer: the clock stays where
// the cancel came, no event of the flow is left, the next step never runs.
func TestSleepCancelledStopsItsTimer(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	ran := false
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.Sleep(r, time.Hour).Add(func(asyncsteps.AsyncSteps, ...any) { ran = true })
	res := r.Promise()
	tt.Advance(10 * time.Millisecond)
	if n := tt.Pending(); n != 1 {
		t.Fatalf("sleeping with %d events pending, want 1: its timer", n)
	}
	r.Cancel()
	tt.Run()
	got := <-res
	if !errors.Is(got.Err, context.Canceled) || ran || elapsed(tt) != 10*time.Millisecond || tt.Pending() != 0 {
		t.Errorf("got %v, next step ran %v, at %v, %d pending; want context.Canceled, false, 10ms, 0",
			got.Err, ran, elapsed(tt), tt.Pending())
	}
}

// A timeout around the sleep cancels it: the handler sees Timeout at the
// timeout's time, with no timer left.
func TestSleepTimedOutAround(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var tr []string
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(30 * time.Millisecond)
		asyncsteps.Sleep(as, time.Hour)
	}, func(as asyncsteps.AsyncSteps, code string) {
		tr = append(tr, fmt.Sprintf("%s at %v, pending %d, stack of %d",
			code, elapsed(tt), tt.Pending(), len(as.State().AsyncStack)))
		as.Success("recovered")
	})
	res := r.Promise()
	tt.Run()
	got := <-res
	tr = append(tr, fmt.Sprintf("result %v %v at %v, pending %d", got.Args, got.Err, elapsed(tt), tt.Pending()))
	want := "Timeout at 30ms, pending 0, stack of 1\nresult [recovered] <nil> at 30ms, pending 0"
	if g := strings.Join(tr, "\n"); g != want {
		t.Errorf("got\n%s\nwant\n%s", g, want)
	}
}

// countingTool is a Tool of the test's own, on a TestTool, that counts
// the timers armed through it.
type countingTool struct {
	tt       *asyncsteps.TestTool
	deferred int
}

func (c *countingTool) Immediate(f func()) asyncsteps.Handle { return c.tt.Immediate(f) }
func (c *countingTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	c.deferred++
	return c.tt.Deferred(d, f)
}
func (c *countingTool) IsSameThread() bool { return c.tt.IsSameThread() }
func (c *countingTool) Now() time.Time     { return c.tt.Now() }

// A Sleep of 0 or less arms no timer, as time.Sleep returns at once, and
// still passes its args on; one of 1ns arms one.
func TestSleepOfZeroOrLessArmsNoTimer(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Nanosecond} {
		t.Run(d.String(), func(t *testing.T) {
			tool := &countingTool{tt: asyncsteps.NewTestTool()}
			r := asyncsteps.New(asyncsteps.WithTool(tool))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("x") })
			asyncsteps.Sleep(r, d)
			res := r.Promise()
			tool.tt.Run()
			got := <-res
			want := 0
			if d > 0 {
				want = 1
			}
			if fmt.Sprint(got.Args, got.Err) != "[x] <nil>" || tool.deferred != want || elapsed(tool.tt) != max(d, 0) {
				t.Errorf("got %v %v, %d timers, at %v; want [x] <nil>, %d, %v",
					got.Args, got.Err, tool.deferred, elapsed(tool.tt), want, max(d, 0))
			}
		})
	}
}

// On a Loop in a testing/synctest bubble, the sleep is on the bubble's
// virtual clock. The deadline of Run's context while it sleeps times the
// flow out then; that Timeout is raised in the innermost step, the
// sleep's, which AsyncStack leaves out as the engine's own. The loop's
// goroutines all end with Close.
func TestSleepOnALoopInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success(7) })
		asyncsteps.Sleep(r, 2*time.Second)
		v, err := asyncsteps.Run[int](context.Background(), r)
		got := fmt.Sprint(v, " ", err, " at ", time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var stack []string
		r = asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.Sleep(as, time.Hour)
		}, func(as asyncsteps.AsyncSteps, code string) {
			for _, fn := range as.State().AsyncStack {
				stack = append(stack, strings.TrimPrefix(fn, "github.com/asyncsteps/asyncsteps_test."))
			}
		})
		_, err = r.Run(ctx)
		var e *asyncsteps.Error
		code := ""
		if errors.As(err, &e) {
			code = e.Code
		}
		got += fmt.Sprint("; ", code, " at ", time.Since(start), " stack ", stack)
		loop.Close()
		if werr := loop.Wait(context.Background()); werr != nil {
			t.Errorf("Wait: %v", werr)
		}
		if want := "7 <nil> at 2s; Timeout at 3s stack [TestSleepOnALoopInSynctest.func1.2]"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// As the first step of a level, Sleep is given no args, as any first
// sub-step is, and passes none on: the args of the step that added it
// stay that step's.
func TestSleepFirstOfALevelPassesNone(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("x") })
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.Sleep(as, time.Second) })
	res := r.Promise()
	tt.Run()
	if got := fmt.Sprint(<-res); got != "{[] <nil>}" {
		t.Errorf("got %s, want {[] <nil>}", got)
	}
}
