package asyncsteps_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// loopCounter counts the flows that ran on each tool. Its step runs on the
// loops of a group, so it is guarded by a mutex.
type loopCounter struct {
	mu     sync.Mutex
	counts map[asyncsteps.Tool]int
}

// record counts a flow on the tool that as runs on.
func (c *loopCounter) record(as asyncsteps.AsyncSteps) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = make(map[asyncsteps.Tool]int)
	}
	c.counts[as.Tool()]++
	c.mu.Unlock()
}

// want fails the test unless exactly the loops ran exactly n flows each.
func (c *loopCounter) want(t *testing.T, loops []*asyncsteps.Loop, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.counts) != len(loops) {
		t.Errorf("flows ran on %d tools, want the group's %d loops", len(c.counts), len(loops))
	}
	for i, l := range loops {
		if got := c.counts[l]; got != n {
			t.Errorf("loop %d ran %d flows, want %d", i, got, n)
		}
	}
}

// groupFlow adds three steps to r that compute 2*(i+1), the first of them
// counted by c.
func groupFlow(r *asyncsteps.Root, c *loopCounter, i int) *asyncsteps.Root {
	return r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		c.record(as)
		as.Success(i)
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Success(args[0].(int) + 1)
	}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
		as.Success(args[0].(int) * 2)
	}).(*asyncsteps.Root)
}

// runGroupFlow runs a counted flow of g and checks its result.
func runGroupFlow(t *testing.T, g *asyncsteps.LoopGroup, c *loopCounter, i int) {
	t.Helper()
	args, err := groupFlow(g.New(), c, i).Run(context.Background())
	if err != nil || len(args) != 1 || args[0] != 2*(i+1) {
		t.Errorf("flow %d: got %v, %v; want [%d] and no error", i, args, err, 2*(i+1))
	}
}

func TestLoopGroupNextCyclesInOrder(t *testing.T) {
	g := asyncsteps.NewLoopGroup(3)
	defer g.Close()
	if g.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", g.Len())
	}
	loops := g.Loops()
	if len(loops) != 3 || loops[0] == loops[1] || loops[1] == loops[2] || loops[0] == loops[2] {
		t.Fatalf("Loops() = %v, want 3 distinct loops", loops)
	}
	for i := range 10 {
		if got := g.Next(); got != loops[i%3] {
			t.Fatalf("call %d of Next: loop %p, want loop %d (%p)", i, got, i%3, loops[i%3])
		}
	}

	loops[0] = nil
	if again := g.Loops(); again[0] == nil {
		t.Error("changing the slice returned by Loops changed the group")
	}
}

func TestLoopGroupDefaultsToGOMAXPROCS(t *testing.T) {
	for _, n := range []int{0, -1} {
		g := asyncsteps.NewLoopGroup(n)
		if got, want := g.Len(), runtime.GOMAXPROCS(0); got != want || len(g.Loops()) != want {
			t.Errorf("NewLoopGroup(%d): Len() = %d, %d loops; want %d", n, got, len(g.Loops()), want)
		}
		g.Close()
	}
}

// TestLoopGroupConcurrentFlows makes 1,000 flows from 8 goroutines: the
// turns of Next are taken exactly once each whatever the interleaving, so
// each of the 4 loops runs exactly 250 flows.
func TestLoopGroupConcurrentFlows(t *testing.T) {
	const workers, perWorker = 8, 125
	g := asyncsteps.NewLoopGroup(4)
	defer g.Close()

	var c loopCounter
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range perWorker {
				runGroupFlow(t, g, &c, w*perWorker+j)
			}
		})
	}
	wg.Wait()
	c.want(t, g.Loops(), workers*perWorker/g.Len())
}

func TestLoopGroupSpreadsEvenly(t *testing.T) {
	g := asyncsteps.NewLoopGroup(4)
	defer g.Close()

	var c loopCounter
	results := make([]<-chan asyncsteps.Result, 400)
	for i := range results {
		results[i] = groupFlow(g.New(), &c, i).Promise()
	}
	for i, ch := range results {
		if res := <-ch; res.Err != nil || len(res.Args) != 1 || res.Args[0] != 2*(i+1) {
			t.Errorf("flow %d: result %+v, want [%d] and no error", i, res, 2*(i+1))
		}
	}
	c.want(t, g.Loops(), 100)
}

func TestLoopGroupNewExplicitToolWins(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	other := asyncsteps.NewLoop()
	defer other.Close()

	var c loopCounter
	r := groupFlow(g.New(asyncsteps.WithTool(other)), &c, 1)
	if r.Tool() != other {
		t.Errorf("Tool() = %v, want the explicit loop", r.Tool())
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.want(t, []*asyncsteps.Loop{other}, 1)
	if g.Next() != g.Loops()[0] {
		t.Error("a flow with an explicit tool took a turn of the group")
	}
}

// TestLoopGroupNewKeepsOtherOptions checks that options other than the tool
// reach the Root: an unhandled error goes to the group flow's function.
func TestLoopGroupNewKeepsOtherOptions(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()

	got := make(chan *asyncsteps.Error, 1)
	r := g.New(asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { got <- err }))
	if r.Tool() != g.Loops()[0] {
		t.Errorf("Tool() = %v, want the group's first loop", r.Tool())
	}
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Error(asyncsteps.InvalidRequest, "bad")
	})
	r.Execute()
	if err := <-got; err.Code != asyncsteps.InvalidRequest {
		t.Errorf("unhandled error %v, want %s", err, asyncsteps.InvalidRequest)
	}
}

func TestLoopGroupCloseClosesEveryLoop(t *testing.T) {
	before := runtime.NumGoroutine()
	g := asyncsteps.NewLoopGroup(4)
	var c loopCounter
	for i := range g.Len() {
		runGroupFlow(t, g, &c, i)
	}
	g.Close()
	waitGoroutines(t, before)
	for i, l := range g.Loops() {
		if h := l.Immediate(func() {}); h.IsValid() {
			t.Errorf("loop %d still accepts callbacks after Close", i)
		}
	}
	g.Close() // idempotent

	_, err := groupFlow(g.New(), &c, 0).Run(context.Background())
	if !errors.Is(err, &asyncsteps.Error{Code: asyncsteps.InternalError}) {
		t.Errorf("a flow made after Close: %v, want %s", err, asyncsteps.InternalError)
	}
}

// TestLoopGroupCloseStopsEveryLoopFirst checks that a loop stuck in a
// callback keeps no other loop of its group from closing: the flow that
// holds a Mutex on loop 1 ends, and gives the slot back to a flow on a
// loop outside the group, while loop 0 is still blocked in a step.
func TestLoopGroupCloseStopsEveryLoopFirst(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	loops := g.Loops()
	mu := asyncsteps.NewMutex(1)
	blocked, unblock := make(chan struct{}), make(chan struct{})
	stuck := asyncsteps.New(asyncsteps.WithTool(loops[0]))
	stuck.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		close(blocked)
		<-unblock
	})
	stuck.Execute()
	<-blocked
	entered := make(chan struct{})
	holder := asyncsteps.New(asyncsteps.WithTool(loops[1]))
	holder.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) {
		close(entered)
		as.WaitExternal()
	})
	held := holder.Promise()
	<-entered
	other := asyncsteps.NewLoop()
	defer other.Close()
	waiter := asyncsteps.New(asyncsteps.WithTool(other))
	waiter.Sync(mu, func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("entered") })
	waited := waiter.Promise()

	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	const limit = 10 * time.Second // a hang guard only
	select {
	case res := <-held:
		wantError(t, res.Err, asyncsteps.InternalError, "the flow's loop is closed")
	case <-time.After(limit):
		t.Fatal("loop 1 did not close while loop 0 was stuck in a step")
	}
	select {
	case res := <-waited:
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != "entered" {
			t.Errorf("the waiter outside the group: %v %v, want [entered] <nil>", res.Args, res.Err)
		}
	case <-time.After(limit):
		t.Fatal("the Mutex slot of the closed loop 1 was not given back")
	}
	select {
	case <-closed:
		t.Error("LoopGroup.Close returned while loop 0 was still in a step")
	default:
	}
	close(unblock)
	<-closed
}

// rootSink keeps the Roots made by the allocation test alive, so that the
// compiler cannot drop them.
var rootSink *asyncsteps.Root

func ignoreUnhandled(*asyncsteps.Error) {}

// TestLoopGroupNewAllocatesLikeNew checks that g.New costs no allocation
// beyond the Root that New makes, with or without options.
func TestLoopGroupNewAllocatesLikeNew(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	loop := g.Loops()[0]

	want := testing.AllocsPerRun(1000, func() {
		rootSink = asyncsteps.New(asyncsteps.WithTool(loop))
	})
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"no option", func() { rootSink = g.New() }},
		{"WithUnhandledError", func() { rootSink = g.New(asyncsteps.WithUnhandledError(ignoreUnhandled)) }},
		{"WithTool", func() { rootSink = g.New(asyncsteps.WithTool(loop)) }},
	} {
		if got := testing.AllocsPerRun(1000, c.f); got != want {
			t.Errorf("g.New with %s: %v allocations, want %v like New", c.name, got, want)
		}
	}
	rootSink = nil
}

// The flows of a zero LoopGroup, made without NewLoopGroup, fail with an
// info that names the group the caller made, not a Loop it never saw.
func TestZeroLoopGroupsFlowsNameTheGroup(t *testing.T) {
	var g asyncsteps.LoopGroup
	const info = "the flow's LoopGroup was not made by NewLoopGroup"
	for name, r := range map[string]*asyncsteps.Root{
		"New":  g.New(),
		"Next": asyncsteps.New(asyncsteps.WithTool(g.Next())),
	} {
		_, err := r.Run(context.Background())
		var e *asyncsteps.Error
		if !errors.As(err, &e) || e.Code != asyncsteps.InternalError || e.Info != info {
			t.Errorf("%s: Run = %v, want InternalError: %s", name, err, info)
		}
	}
}
