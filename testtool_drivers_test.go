package asyncsteps

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// oneAtATime counts the callbacks that ran while another was running: a
// TestTool runs its callbacks one at a time, whoever drives it.
type oneAtATime struct {
	running  atomic.Int32
	overlaps atomic.Int32
}

func (o *oneAtATime) enter() {
	if o.running.Add(1) != 1 {
		o.overlaps.Add(1)
	}
}

func (o *oneAtATime) leave() { o.running.Add(-1) }

// driversFlow is a flow of n iterations on tt that adds one to *shared per
// iteration, owned by the tool's callbacks; every tenth one waits for a
// timeout on the tool's clock and recovers from it, so that the flows of
// several drivers interleave on the tool's FIFO and timers.
func driversFlow(tt *TestTool, n int, shared *int, o *oneAtATime) *Root {
	r := New(WithTool(tt))
	r.Repeat(n, func(as AsyncSteps, i int) {
		o.enter()
		defer o.leave()
		*shared++
		if i%10 == 0 {
			as.Add(func(as AsyncSteps, _ ...any) {
				as.SetTimeout(time.Millisecond)
				as.WaitExternal()
			}, func(as AsyncSteps, code string) { as.Success() })
		}
	}, "it")
	return r
}

// withinWallClock runs drive on a goroutine of its own, so that a Goexit in
// a callback ends that goroutine and not the test's, and fails t if drive
// has not returned in a minute: two drivers of one TestTool used to hang
// as often as they crashed.
func withinWallClock(t *testing.T, drive func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		drive()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the driver of a TestTool did not return in a minute: it hangs")
	}
}

// Two goroutines that Run flows on one TestTool at once take turns: both
// flows end, no callback overlaps another, and the counter they share
// without a lock has every increment.
func TestTestToolTwoGoroutinesRunFlowsAtOnce(t *testing.T) {
	tt := NewTestTool()
	var o oneAtATime
	shared := 0
	errs := []error{errNotRun, errNotRun}
	withinWallClock(t, func() {
		var wg sync.WaitGroup
		for j := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = driversFlow(tt, 200, &shared, &o).Run(context.Background())
			}()
		}
		wg.Wait()
	})
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("Run errors = %v, want [<nil> <nil>]", errs)
	}
	if shared != 400 || o.overlaps.Load() != 0 || tt.Pending() != 0 {
		t.Fatalf("shared = %d, overlaps = %d, pending = %d; want 400, 0, 0", shared, o.overlaps.Load(), tt.Pending())
	}
	// 20 timeouts of 1ms each per flow, on one clock: the flows' waits
	// overlap, so the clock has moved by at least 20ms and at most 40ms.
	if d := offset(tt); d < 20*time.Millisecond || d > 40*time.Millisecond {
		t.Fatalf("clock moved by %v, want 20ms to 40ms", d)
	}
}

// errNotRun marks a result that the driver never wrote.
var errNotRun = &Error{Code: "NotRun"}

// A goroutine that starts a flow with Promise and drives the tool with Run
// or Advance takes turns with one whose Root.Run drives it: whichever holds
// the turn runs the events of both flows, and both see theirs end.
func TestTestToolPromiseAndDriveTakesTurnsWithRun(t *testing.T) {
	for _, drive := range []struct {
		name string
		f    func(tt *TestTool)
	}{
		{"Run", (*TestTool).Run},
		{"Advance", func(tt *TestTool) {
			for tt.HasEvents() {
				tt.Advance(time.Millisecond)
			}
		}},
		{"NextEvent", func(tt *TestTool) {
			for tt.NextEvent() {
			}
		}},
	} {
		t.Run(drive.name, func(t *testing.T) {
			tt := NewTestTool()
			var o oneAtATime
			shared := 0
			var promised Result
			runErr := error(errNotRun)
			withinWallClock(t, func() {
				var wg sync.WaitGroup
				wg.Add(2)
				go func() {
					defer wg.Done()
					ch := driversFlow(tt, 200, &shared, &o).Promise()
					for len(ch) == 0 {
						drive.f(tt)
					}
					promised = <-ch
				}()
				go func() {
					defer wg.Done()
					_, runErr = driversFlow(tt, 200, &shared, &o).Run(context.Background())
				}()
				wg.Wait()
			})
			if promised.Err != nil || runErr != nil {
				t.Errorf("Promise err = %v, Run err = %v; want <nil>, <nil>", promised.Err, runErr)
			}
			if shared != 400 || o.overlaps.Load() != 0 || tt.Pending() != 0 {
				t.Fatalf("shared = %d, overlaps = %d, pending = %d; want 400, 0, 0", shared, o.overlaps.Load(), tt.Pending())
			}
		})
	}
}

// A callback may still drive the tool (NextEvent, Advance, Run) while
// another goroutine waits for its turn: the nested call runs at once, on
// the callback's goroutine, which keeps the turn until its outermost call
// returns.
func TestTestToolCallbackDrivesWhileAnotherGoroutineWaits(t *testing.T) {
	tt := NewTestTool()
	var tr trace
	entered := make(chan struct{})
	release := make(chan struct{})
	tt.Immediate(func() {
		close(entered)
		<-release // the other goroutine is now waiting for its turn
		tt.Immediate(func() { tr.add("inner1:%v", tt.IsSameThread()) })
		tt.Deferred(time.Second, func() { tr.add("inner2:%v", tt.IsSameThread()) })
		tr.add("nested:%v", tt.NextEvent())
		tt.Advance(time.Second)
		tt.Run()
		tr.add("outer:%v", tt.IsSameThread())
	})
	withinWallClock(t, func() {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tt.Run()
		}()
		<-entered
		posted := make(chan struct{})
		other := make(chan bool)
		go func() {
			tt.Immediate(func() { tr.add("other:%v", tt.IsSameThread()) })
			close(posted)
			tt.Run() // waits for the first goroutine's turn
			other <- tt.IsSameThread()
		}()
		<-posted
		close(release)
		wg.Wait()
		if <-other {
			t.Error("IsSameThread() = true after the second driver returned")
		}
	})
	// The first driver's nested calls run the other goroutine's Immediate
	// too, first in FIFO order: the second Run finds nothing left.
	want := "other:true nested:true inner1:true inner2:true outer:true"
	if got := tr.String(); got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
	if offset(tt) != time.Second || tt.Pending() != 0 {
		t.Fatalf("clock at %v, pending %d; want 1s, 0", offset(tt), tt.Pending())
	}
}

// Another goroutine's Run may drive a flow to its end while Root.Run of
// that flow waits for its turn, and may hold the tool until that Run has
// returned (a ticker that re-arms until then): Root.Run takes its Result
// without the turn. Before, it waited for a turn that never came.
func TestTestToolRootRunReturnsWhileAnotherHoldsTheTool(t *testing.T) {
	tt := NewTestTool()
	var stop atomic.Bool
	var tick func()
	tick = func() {
		if !stop.Load() {
			tt.Deferred(time.Millisecond, tick)
		}
	}
	tt.Immediate(tick)
	holding := make(chan struct{})
	tt.Immediate(func() { close(holding) })
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		tt.Run()
	}()
	<-holding

	r := New(WithTool(tt))
	r.Add(func(as AsyncSteps, _ ...any) { as.Success(1) })
	got := make(chan Result, 1)
	go func() {
		args, err := r.Run(context.Background())
		stop.Store(true)
		got <- Result{Args: args, Err: err}
	}()

	select {
	case res := <-got:
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != 1 {
			t.Errorf("Run = %v, %v; want [1], nil", res.Args, res.Err)
		}
	case <-time.After(10 * time.Second):
		stop.Store(true)
		t.Fatal("Root.Run did not return in 10s while another goroutine held the tool")
	}
	<-ticked
}
