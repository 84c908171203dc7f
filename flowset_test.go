package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// setLog records the ends of a FlowSet's flows, from any loop, with the
// bubble's time since start.
type setLog struct {
	mu    sync.Mutex
	start time.Time
	ends  []string
}

func (l *setLog) then(name string) func(asyncsteps.Result) {
	return func(res asyncsteps.Result) {
		l.mu.Lock()
		defer l.mu.Unlock()
		code := "ok"
		var e *asyncsteps.Error
		switch {
		case errors.Is(res.Err, context.Canceled):
			code = "canceled"
		case errors.As(res.Err, &e):
			code = e.Code
		}
		l.ends = append(l.ends, fmt.Sprintf("%s %s at %v", name, code, time.Since(l.start)))
	}
}

func (l *setLog) sorted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(slices.Values(l.ends))
}

// sleeper is a flow on loop that sleeps d.
func sleeper(loop *asyncsteps.Loop, d time.Duration) *asyncsteps.Root {
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.Sleep(r, d)
	return r
}

// Flows on two loops: Shutdown lets those that end within the grace end,
// cancels the others at its end, and returns once every then has
// returned; Start is refused from then on, and the loops' goroutines all
// end with Close.
func TestFlowSetShutdownOnTwoLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		g := asyncsteps.NewLoopGroup(2)
		log := &setLog{start: time.Now()}
		var set asyncsteps.FlowSet
		for i, d := range []time.Duration{time.Second, time.Hour, 1500 * time.Millisecond, time.Hour} {
			r := sleeper(g.Next(), d)
			if !set.Start(r, log.then(fmt.Sprintf("f%d", i))) {
				t.Fatalf("f%d not started", i)
			}
		}
		if n := set.Len(); n != 4 {
			t.Errorf("Len %d, want 4", n)
		}
		time.Sleep(500 * time.Millisecond)
		err := set.Shutdown(context.Background(), 2*time.Second)
		took := time.Since(log.start)
		late := set.Start(sleeper(g.Next(), time.Second), log.then("late"))
		want := []string{"f0 ok at 1s", "f1 canceled at 2.5s", "f2 ok at 1.5s", "f3 canceled at 2.5s"}
		if got := log.sorted(); err != nil || took != 2500*time.Millisecond || late || set.Len() != 0 ||
			!slices.Equal(got, want) {
			t.Errorf("Shutdown %v at %v, late start %v, Len %d, ends %q; want <nil> at 2.5s, false, 0, %q",
				err, took, late, set.Len(), got, want)
		}
		g.Close()
		if err := g.Wait(context.Background()); err != nil {
			t.Errorf("LoopGroup.Wait: %v", err)
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble at the end, %d before", n, before)
		}
	})
}

// With every flow ended within the grace, Shutdown returns as the last
// then returns, not at the grace's end; with none running, at once.
func TestFlowSetShutdownReturnsWhenTheLastEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		start := time.Now()
		var set asyncsteps.FlowSet
		var thens []string
		set.Start(sleeper(loop, 300*time.Millisecond), func(asyncsteps.Result) {
			time.Sleep(100 * time.Millisecond) // a then that takes time: Shutdown waits for it
			thens = append(thens, fmt.Sprint("then at ", time.Since(start)))
		})
		err := set.Shutdown(context.Background(), time.Hour)
		got := fmt.Sprint(err, " at ", time.Since(start), " ", thens)
		err = set.Shutdown(context.Background(), time.Hour)
		got += fmt.Sprint("; again ", err, " at ", time.Since(start))
		if want := "<nil> at 400ms [then at 400ms]; again <nil> at 400ms"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// A ctx that ends within the grace ends Shutdown then: the flows are
// cancelled at once, and Shutdown returns ctx's error; they end on
// their own loop right after.
func TestFlowSetShutdownUnderAnEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		log := &setLog{start: time.Now()}
		var set asyncsteps.FlowSet
		set.Start(sleeper(loop, time.Hour), log.then("f"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := set.Shutdown(ctx, time.Minute)
		took := time.Since(log.start)
		synctest.Wait()
		if got := log.sorted(); !errors.Is(err, context.DeadlineExceeded) || took != time.Second ||
			!slices.Equal(got, []string{"f canceled at 1s"}) {
			t.Errorf("Shutdown %v at %v, ends %q; want context.DeadlineExceeded at 1s, [f canceled at 1s]", err, took, got)
		}
	})
}

// Wait returns at the first moment none runs, under a ctx that bounds
// it; Cancel cancels the flows running and does not wait.
func TestFlowSetWaitAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		log := &setLog{start: time.Now()}
		var set asyncsteps.FlowSet
		if err := set.Wait(context.Background()); err != nil {
			t.Errorf("Wait on an empty set: %v", err)
		}
		set.Start(sleeper(loop, time.Second), log.then("a"))
		set.Start(sleeper(loop, time.Hour), log.then("b"))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := set.Wait(ctx)
		got := fmt.Sprint(err, " at ", time.Since(log.start), " Len ", set.Len())
		set.Cancel()
		err = set.Wait(context.Background())
		got += fmt.Sprint("; ", err, " at ", time.Since(log.start), " Len ", set.Len(), " ", log.sorted())
		if want := "context deadline exceeded at 2s Len 1; <nil> at 2s Len 0 [a ok at 1s b canceled at 2s]"; got != want {
			t.Errorf("got %s\nwant %s", got, want)
		}
	})
}

// A then may start its Root again through the set: the set counts both
// executions, and Shutdown waits for the second one.
func TestFlowSetThenStartsItsRootAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		log := &setLog{start: time.Now()}
		var set asyncsteps.FlowSet
		r := sleeper(loop, time.Second)
		first := log.then("first")
		set.Start(r, func(res asyncsteps.Result) {
			first(res)
			asyncsteps.Sleep(r, time.Second) // an execution consumes the steps
			if !set.Start(r, log.then("second")) {
				t.Error("the second start refused")
			}
		})
		time.Sleep(1500 * time.Millisecond)
		n := set.Len()
		err := set.Shutdown(context.Background(), time.Hour)
		if got, want := log.sorted(), []string{"first ok at 1s", "second ok at 2s"}; n != 1 || err != nil || !slices.Equal(got, want) {
			t.Errorf("Len %d, Shutdown %v, ends %q; want 1, <nil>, %q", n, err, got, want)
		}
	})
}

// Start of a Root that runs panics, as ExecuteThen does, and the set
// does not keep it: its Len, and the Shutdown that follows, count the
// first execution only.
func TestFlowSetStartOfARunningRootPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		defer loop.Close()
		var set asyncsteps.FlowSet
		r := sleeper(loop, time.Second)
		set.Start(r, nil)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Start of a running Root did not panic")
				}
			}()
			set.Start(r, nil)
		}()
		n := set.Len()
		start := time.Now()
		err := set.Shutdown(context.Background(), time.Hour)
		if took := time.Since(start); n != 1 || err != nil || took != time.Second {
			t.Errorf("Len %d, Shutdown %v after %v; want 1, <nil>, 1s", n, err, took)
		}
	})
}

// Wait and Shutdown refuse the goroutine of a Loop, which they could
// block for good, and a nil context, with an InternalError at once; on
// a loop's goroutine its info names what they wait for, the flows.
func TestFlowSetWaitMisuse(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	var set asyncsteps.FlowSet
	ignore := func(asyncsteps.Result) {} // the loop closes them
	set.Start(sleeper(loop, time.Hour), ignore)
	got := make(chan string, 1)
	loop.Immediate(func() {
		got <- fmt.Sprint(set.Wait(context.Background()), " | ", set.Shutdown(context.Background(), 0))
	})
	var nilCtx context.Context
	onLoop := "InternalError: FlowSet.Wait called on the goroutine of a Loop: it would block that loop," +
		" which the flows it waits for may need | InternalError: FlowSet.Shutdown called on the goroutine" +
		" of a Loop: it would block that loop, which the flows it waits for may need"
	if g := <-got; g != onLoop {
		t.Errorf("on the loop's goroutine\n got %s\nwant %s", g, onLoop)
	}
	g := fmt.Sprint(set.Wait(nilCtx), " | ", set.Shutdown(nilCtx, 0))
	for _, part := range strings.Split(g, " | ") {
		if !strings.HasPrefix(part, "InternalError: FlowSet.") || !strings.Contains(part, "nil context") {
			t.Errorf("got %q, want an InternalError naming the nil context", part)
		}
	}
	if set.Len() != 1 {
		t.Errorf("Len %d, want 1: a refused Shutdown closes nothing", set.Len())
	}
	if set.Start(sleeper(loop, time.Hour), ignore) != true {
		t.Errorf("Start refused after a refused Shutdown")
	}
}

// Cancel cancels the flows in the order they were started: on one loop
// they end in that order, so a test on a TestTool sees one order on every
// run (a map's would change from run to run).
func TestFlowSetCancelsInStartOrder(t *testing.T) {
	for range 10 {
		tt := asyncsteps.NewTestTool()
		var set asyncsteps.FlowSet
		var got []string
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			r := asyncsteps.New(asyncsteps.WithTool(tt))
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetCancel(func(asyncsteps.AsyncSteps) { got = append(got, name) })
			})
			set.Start(r, nil)
		}
		tt.Run()
		set.Cancel()
		tt.Run()
		if want := "a b c d e"; strings.Join(got, " ") != want || set.Len() != 0 {
			t.Fatalf("cancelled in the order %q, Len %d; want %q, 0", got, set.Len(), want)
		}
	}
}

// Without a then, an error that ends a flow goes to its unhandled-error
// function, as with Execute; StartContext runs the flow under its
// context, whose deadline times it out.
func TestFlowSetStartWithoutThenAndUnderAContext(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var unhandled []string
	r := asyncsteps.New(asyncsteps.WithTool(tt), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		unhandled = append(unhandled, err.Code+" "+err.Info)
	}))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error("Refused", "no") })
	var set asyncsteps.FlowSet
	set.Start(r, nil)
	tt.Run()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var res asyncsteps.Result
	asyncsteps.Sleep(r, time.Second)
	set.StartContext(ctx, r, func(got asyncsteps.Result) { res = got })
	tt.Run()
	if got := fmt.Sprint(unhandled, " ", res.Err, " ", set.Len()); got != "[Refused no] context canceled 0" {
		t.Errorf("got %s, want [Refused no] context canceled 0", got)
	}
}

// A service's background jobs at its shutdown: the grace period lets the
// quick ones finish, then the slow one is cancelled, its cancel handler
// releasing what it holds; Shutdown returns once every job's then has
// returned, and Start starts nothing afterwards.
func ExampleFlowSet() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	var jobs asyncsteps.FlowSet
	for _, job := range []struct {
		name string
		work time.Duration
	}{{"report", 10 * time.Millisecond}, {"export", 20 * time.Millisecond}, {"reindex", time.Hour}} {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetCancel(func(asyncsteps.AsyncSteps) { fmt.Println(job.name, "cancelled: releases its lease") })
			asyncsteps.Sleep(as, job.work)
		})
		jobs.Start(r, func(res asyncsteps.Result) { fmt.Println(job.name, "ended:", res.Err) })
	}

	err := jobs.Shutdown(context.Background(), time.Second) // far more than the quick jobs need
	started := jobs.Start(asyncsteps.New(asyncsteps.WithTool(loop)), nil)
	fmt.Println("shutdown:", err, "running:", jobs.Len(), "started after:", started)
	// Output:
	// report ended: <nil>
	// export ended: <nil>
	// reindex cancelled: releases its lease
	// reindex ended: context canceled
	// shutdown: <nil> running: 0 started after: false
}
