package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// closedInfo is the info of the InternalError that ends a flow its closed
// loop will never run.
const closedInfo = "the flow's loop is closed"

// receive waits for the one Result of a Promise, or fails the test.
func receive(t *testing.T, ch <-chan asyncsteps.Result, what string) asyncsteps.Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no Result within 10s", what)
		return asyncsteps.Result{}
	}
}

// A flow parked when its loop closes ends for its Promise with an
// InternalError; its cancel handler does not run (the loop runs nothing
// more), and the Root can be executed again, ending at once the same way.
func TestCloseGivesAParkedFlowsPromiseItsResult(t *testing.T) {
	loop := asyncsteps.NewLoop()
	parked := make(chan struct{})
	var cancelled atomic.Bool
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { cancelled.Store(true) })
		as.SetTimeout(time.Hour)
		as.WaitExternal()
		close(parked)
	})
	ch := r.Promise()
	waitFor(t, parked)

	loop.Close()

	res := receive(t, ch, "the parked flow")
	wantError(t, res.Err, asyncsteps.InternalError, closedInfo)
	if cancelled.Load() {
		t.Error("the cancel handler ran on a closed loop")
	}
	again := receive(t, r.Promise(), "the flow executed again")
	wantError(t, again.Err, asyncsteps.InternalError, closedInfo)
}

// The flows a Promise waits for that have ended leave the loop's awaited
// flows from wherever they were among them (first, last, in the middle,
// next to each other); a Close then ends each flow left waiting, and only
// those, with one Result each.
func TestCloseEndsTheAwaitedFlowsLeftAfterOthersEnded(t *testing.T) {
	loop := asyncsteps.NewLoop()
	const flows = 6
	parked := make(chan asyncsteps.AsyncSteps, flows)
	promises := make([]<-chan asyncsteps.Result, flows)
	for i := range flows {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			parked <- as
		})
		promises[i] = r.Promise()
	}
	steps := make([]asyncsteps.AsyncSteps, flows)
	for i := range flows {
		steps[i] = <-parked // the flows park in the order they started
	}
	ended := []int{0, 2, 3, 5}
	for _, i := range ended {
		steps[i].Success(i)
		res := receive(t, promises[i], fmt.Sprintf("flow %d", i))
		if res.Err != nil || len(res.Args) != 1 || res.Args[0] != i {
			t.Fatalf("flow %d: Result %v, %v; want [%d], nil", i, res.Args, res.Err, i)
		}
	}

	closed := make(chan struct{})
	go func() {
		loop.Close()
		close(closed)
	}()
	waitFor(t, closed) // a Close that loses track of a flow may never end

	for i, p := range promises {
		select {
		case res := <-p:
			if slices.Contains(ended, i) {
				t.Errorf("flow %d, ended before Close: a second Result %v, %v", i, res.Args, res.Err)
				continue
			}
			wantError(t, res.Err, asyncsteps.InternalError, closedInfo)
		default:
			if !slices.Contains(ended, i) {
				t.Errorf("flow %d: no Result once Close has returned", i)
			}
		}
		select {
		case res := <-p:
			t.Errorf("flow %d: a second Result %v, %v", i, res.Args, res.Err)
		default:
		}
	}
}

// Flows started by Execute that wait when their loop closes end once each,
// through their unhandled-error functions, wherever they wait: a step, a
// step two levels down, two branches of a Parallel, a queue of a Mutex,
// and a step that waited before a thousand other flows ran and ended. The
// test keeps their step APIs, as whoever would complete them does: a flow
// that nothing refers to is collected instead.
func TestCloseEndsEachWaitingExecuteFlowOnce(t *testing.T) {
	loop := asyncsteps.NewLoop()
	var mu sync.Mutex
	ended := map[string][]string{}
	waiting := make(chan asyncsteps.AsyncSteps, 8)
	wait := func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	}
	start := func(name string, build func(r *asyncsteps.Root)) {
		r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
			mu.Lock()
			ended[name] = append(ended[name], err.Code+": "+err.Info)
			mu.Unlock()
		}))
		build(r)
		r.Execute()
	}
	start("old", func(r *asyncsteps.Root) { r.Add(wait) })
	held := []asyncsteps.AsyncSteps{<-waiting}
	for range 1000 {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.SuccessStep()
		receive(t, r.Promise(), "a flow that does not wait")
	}
	start("step", func(r *asyncsteps.Root) { r.Add(wait) })
	start("nested", func(r *asyncsteps.Root) {
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Add(wait) })
	})
	start("parallel", func(r *asyncsteps.Root) {
		r.Parallel().Add(wait).Add(wait)
	})
	m := asyncsteps.NewMutex(1)
	start("holder", func(r *asyncsteps.Root) { r.Sync(m, wait) })
	start("queued", func(r *asyncsteps.Root) { r.Sync(m, wait) })
	for range 5 { // step, nested, two branches, holder; queued waits for m
		held = append(held, <-waiting)
	}
	runtime.GC() // what is kept is what nothing but the test refers to

	closed := make(chan struct{})
	go func() {
		loop.Close()
		close(closed)
	}()
	waitFor(t, closed)

	want := []string{asyncsteps.InternalError + ": " + closedInfo}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"old", "step", "nested", "parallel", "holder", "queued"} {
		if got := ended[name]; !slices.Equal(got, want) {
			t.Errorf("flow %s ended with %q, want %q", name, got, want)
		}
	}
	runtime.KeepAlive(held)
	runtime.KeepAlive(m) // its queue refers to the queued flow's step API
}

// Flows whose start is still queued when their loop closes end with the
// same InternalError: a Promise receives it, an Execute hands it to the
// unhandled-error function.
func TestCloseEndsTheFlowsThatHaveNotBegun(t *testing.T) {
	loop := asyncsteps.NewLoop()
	blocking, unblock := make(chan struct{}), make(chan struct{})
	loop.Immediate(func() { close(blocking); <-unblock })
	waitFor(t, blocking)

	// While the loop is busy: two starts, then a callback that closes the
	// loop, which the loop will run before the starts (Loop's doc).
	var ran atomic.Bool
	step := func(as asyncsteps.AsyncSteps, _ ...any) { ran.Store(true) }
	promised := asyncsteps.New(asyncsteps.WithTool(loop))
	promised.Add(step)
	ch := promised.Promise()
	unhandled := make(chan *asyncsteps.Error, 1)
	executed := asyncsteps.New(asyncsteps.WithTool(loop),
		asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { unhandled <- err }))
	executed.Add(step)
	executed.Execute()
	loop.Immediate(loop.Close)
	close(unblock)

	wantError(t, receive(t, ch, "the promised flow").Err, asyncsteps.InternalError, closedInfo)
	select {
	case err := <-unhandled:
		wantError(t, err, asyncsteps.InternalError, closedInfo)
	case <-time.After(10 * time.Second):
		t.Fatal("the executed flow was not reported to its unhandled-error function")
	}
	if ran.Load() {
		t.Error("a step ran after its loop was closed")
	}
}

// Starts racing Close from several goroutines: every Promise receives
// exactly one Result, its flow's success or the closed loop's error.
func TestStartsRacingCloseAllGetOneResult(t *testing.T) {
	const producers, flows = 2, 2000
	for round := range 5 {
		loop := asyncsteps.NewLoop()
		results := make([][]<-chan asyncsteps.Result, producers)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range flows {
					r := asyncsteps.New(asyncsteps.WithTool(loop))
					r.SuccessStep(i)
					results[p] = append(results[p], r.Promise())
					if p == 0 && i == flows/2 {
						loop.Close()
					}
				}
			})
		}
		wg.Wait()
		ok, closed := 0, 0
		for p := range producers {
			for i, ch := range results[p] {
				res := receive(t, ch, fmt.Sprintf("round %d, flow %d of producer %d", round, i, p))
				switch {
				case res.Err == nil && len(res.Args) == 1 && res.Args[0] == i:
					ok++
				case res.Err != nil:
					wantError(t, res.Err, asyncsteps.InternalError, closedInfo)
					closed++
				default:
					t.Fatalf("round %d, flow %d: Result %+v", round, i, res)
				}
				if len(ch) != 0 {
					t.Fatalf("round %d, flow %d: a second Result", round, i)
				}
			}
		}
		if ok+closed != producers*flows || closed < flows/2 {
			t.Fatalf("round %d: %d successes and %d closed, want %d in all and at least %d closed",
				round, ok, closed, producers*flows, flows/2)
		}
	}
}

// AwaitFlow on a flow of another loop that is closed while the flow waits:
// the awaiting step fails with an error that names the awaited flow's loop,
// the closed loop's error as its cause, instead of waiting forever, and the
// goroutine that waited for the other flow exits.
func TestAwaitFlowOnAClosedLoopFailsAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	here, there := asyncsteps.NewLoop(), asyncsteps.NewLoop()
	defer here.Close()
	parked := make(chan struct{})
	other := asyncsteps.New(asyncsteps.WithTool(there))
	other.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		close(parked)
	})
	var caught string
	var cause *asyncsteps.Error
	r := asyncsteps.New(asyncsteps.WithTool(here))
	asyncsteps.AwaitFlow(r, other, func(as asyncsteps.AsyncSteps, code string) {
		caught = code + ": " + as.State().ErrorInfo
		cause, _ = errors.Unwrap(as.State().LastException).(*asyncsteps.Error)
		as.Success("recovered")
	})
	ch := r.Promise()
	waitFor(t, parked)

	there.Close()

	wantSuccess(t, receive(t, ch, "the awaiting flow"), "recovered")
	if want := asyncsteps.InternalError + ": the awaited flow's loop is closed"; caught != want {
		t.Errorf("the handler caught %q, want %q", caught, want)
	}
	if cause == nil || cause.Code != asyncsteps.InternalError || cause.Info != closedInfo {
		t.Errorf("the error's cause is %#v, want the awaited flow's %q", cause, closedInfo)
	}
	here.Close()
	waitGoroutines(t, before)
}

// Roots re-executed from their own ends while their loop is closed, from a
// step on the loop or from another goroutine: every execution ends exactly
// once, and one that ends with the closed loop's error never ran its step.
func TestReExecutionsRacingCloseEndOnce(t *testing.T) {
	const producers, roots, executions = 2, 300, 3
	for round := range 10 {
		loop := asyncsteps.NewLoop()
		var ended sync.WaitGroup
		ended.Add(producers * roots * executions)
		var producing sync.WaitGroup
		for p := range producers {
			producing.Go(func() {
				for i := range roots {
					closeHere := i == roots/2 && p == round%2
					startRoot(t, loop, &ended, executions, closeHere && p == 0, i%2 == 0)
					if closeHere && p == 1 {
						loop.Close()
					}
				}
			})
		}
		producing.Wait()
		loop.Close()
		all := make(chan struct{})
		go func() { ended.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: executions that never ended", round)
		}
	}
}

// startRoot executes a Root of one failing step on loop, and executes it
// again from each of its ends, executions times in all, telling ended of
// each end. closeLoop makes the step close the loop; promise, the Root be
// started with Promise rather than Execute.
func startRoot(t *testing.T, loop *asyncsteps.Loop, ended *sync.WaitGroup, executions int, closeLoop, promise bool) {
	var ran, open atomic.Bool // the step ran in the current execution; it has not ended
	step := func(as asyncsteps.AsyncSteps, _ ...any) {
		ran.Store(true)
		if closeLoop {
			loop.Close()
		}
		as.Error("Boom")
	}
	var r *asyncsteps.Root
	var start func()
	left := executions
	onEnd := func(err error) {
		if !open.CompareAndSwap(true, false) {
			t.Error("an execution ended twice")
			return
		}
		var e *asyncsteps.Error
		if errors.As(err, &e) && e.Info == closedInfo && ran.Load() {
			t.Error("an execution whose step ran ended with the closed loop's error")
		}
		ended.Done()
		if left--; left > 0 {
			start()
		}
	}
	r = asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) { onEnd(err) }))
	start = func() {
		ran.Store(false)
		open.Store(true)
		r.Add(step)
		if !promise {
			r.Execute()
			return
		}
		ch := r.Promise()
		go func() { onEnd((<-ch).Err) }()
	}
	start()
}

// Execute on a Loop already closed ends the flow with the closed loop's
// error, but not inside Execute (docs/DESIGN.md#execute-only-schedules): the unhandled-error
// function runs after Execute has returned, and the goroutine that runs it
// exits.
func TestExecuteOnAClosedLoopReportsAfterItReturns(t *testing.T) {
	before := runtime.NumGoroutine()
	loop := asyncsteps.NewLoop()
	loop.Close()
	type report struct {
		err           *asyncsteps.Error
		afterReturned bool
	}
	// The report waits for Execute to return: on another goroutine it
	// sees it return; inside Execute it would wait forever, so it gives
	// up after a while and says so.
	returned := make(chan struct{})
	reports := make(chan report, 1)
	r := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(err *asyncsteps.Error) {
		select {
		case <-returned:
			reports <- report{err, true}
		case <-time.After(2 * time.Second):
			reports <- report{err, false}
		}
	}))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { t.Error("a step ran on a closed loop") })
	r.Execute()
	close(returned)
	select {
	case got := <-reports:
		wantError(t, got.err, asyncsteps.InternalError, closedInfo)
		if !got.afterReturned {
			t.Error("the unhandled-error function ran inside Execute")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the flow was not reported to its unhandled-error function")
	}
	wantError(t, receive(t, r.Promise(), "the flow promised").Err, asyncsteps.InternalError, closedInfo)
	waitGoroutines(t, before)
}

// Closing a loop runs no cancel handler, yet releases the goroutines that
// wait for its steps: an Await's context is cancelled, so a function that
// watches it returns, and an AwaitChan on a channel that never delivers
// stops waiting. The flows end with the closed loop's error.
func TestCloseReleasesTheGoroutinesOfWaitingSteps(t *testing.T) {
	loop := asyncsteps.NewLoop()
	funcErr := make(chan error, 1)
	awaiting := asyncsteps.New(asyncsteps.WithTool(loop))
	awaiting.Await(func(ctx context.Context) (any, error) {
		<-ctx.Done()
		funcErr <- ctx.Err()
		return nil, ctx.Err()
	})
	receiving := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.AwaitChan(receiving, make(chan int))
	results := []<-chan asyncsteps.Result{awaiting.Promise(), receiving.Promise()}
	waitStacks(t, true, "asyncsteps.callAwait(", "asyncsteps.AwaitChan[")

	loop.Close()

	for i, ch := range results {
		wantError(t, receive(t, ch, fmt.Sprint("flow ", i)).Err, asyncsteps.InternalError, closedInfo)
	}
	select {
	case err := <-funcErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the Await function's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Await function's context was not cancelled")
	}
	waitStacks(t, false, "asyncsteps.callAwait(", "asyncsteps.AwaitChan[")
}

// waitStacks waits until the stacks of the running goroutines hold each of
// the function names (present), or none of them, or fails the test.
func waitStacks(t *testing.T, present bool, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		held := 0
		for _, f := range funcs {
			if strings.Contains(stacks, f) {
				held++
			}
		}
		if present && held == len(funcs) || !present && held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s, %d of %v in the goroutines' stacks, want present=%v:\n%s", held, funcs, present, stacks)
		}
		time.Sleep(time.Millisecond)
	}
}

// A step that closes its own loop is the last one the flow runs: the loop
// stops when the step returns, and the flow's Promise gets the closed
// loop's error.
func TestCloseFromAStepRunsNoFurtherStep(t *testing.T) {
	loop := asyncsteps.NewLoop()
	var second atomic.Bool
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { loop.Close() })
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { second.Store(true) })
	wantError(t, receive(t, r.Promise(), "the flow").Err, asyncsteps.InternalError, closedInfo)
	if second.Load() {
		t.Error("the step after the one that closed the loop ran")
	}
}

// A Close that ends flows runs their unhandled-error functions on the
// loop's goroutine. One that calls runtime.Goexit ends that goroutine
// in the middle of the shutdown: the shutdown goes on with the next
// goroutine, and the callbacks still scheduled behind it are dropped all
// the same (their handles invalid).
func TestGoexitInAnUnhandledErrorDuringCloseDropsTheRest(t *testing.T) {
	inChild(t, func(t *testing.T) {
		l := asyncsteps.NewLoop()
		waiting := make(chan asyncsteps.AsyncSteps, 1)
		r := asyncsteps.New(asyncsteps.WithTool(l), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {
			runtime.Goexit()
		}))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.WaitExternal()
			waiting <- as
		})
		r.Execute()
		as := <-waiting
		gate, blocked := make(chan struct{}), make(chan struct{})
		l.Immediate(func() { close(blocked); <-gate })
		<-blocked
		as.Success() // queued behind the blocked callback
		h := l.Immediate(func() { t.Error("a callback ran after Close") })
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		for l.Immediate(func() {}).IsValid() { // until Close has begun
			runtime.Gosched()
		}
		close(gate)
		<-closed
		if h.IsValid() {
			t.Error("a callback scheduled before Close is still valid after it")
		}
	})
}

// Done is closed once the loop has stopped, not before: not while a
// callback that called Close still runs, and never on a live loop. A
// callback the loop accepted and dropped has not run by then, and never
// runs. A zero Loop's is closed already.
func TestLoopDoneClosesOnceTheLoopHasStopped(t *testing.T) {
	loop := asyncsteps.NewLoop()
	in, resume := make(chan struct{}), make(chan struct{})
	var doneInCallback bool
	loop.Immediate(func() {
		close(in)
		<-resume
		loop.Close() // the loop stops when this callback returns
		select {
		case <-loop.Done():
			doneInCallback = true
		default:
		}
	})
	<-in
	var dropped atomic.Bool
	h := loop.Immediate(func() { dropped.Store(true) }) // accepted: the loop is not closing yet
	if !h.IsValid() {
		t.Fatal("a live loop refused a callback")
	}
	select {
	case <-loop.Done():
		t.Fatal("Done is closed on a live loop")
	default:
	}
	close(resume)
	<-loop.Done()
	if doneInCallback {
		t.Error("Done was closed while a callback of the loop still ran")
	}
	if dropped.Load() || h.IsValid() {
		t.Errorf("after Done: dropped callback ran %v, handle valid %v; want false, false", dropped.Load(), h.IsValid())
	}
	loop.Close() // returns at once: the loop has stopped

	select {
	case <-new(asyncsteps.Loop).Done():
	default:
		t.Error("the Done of a zero Loop is not closed")
	}
}

// AwaitFlow names the awaited flow's loop as closed only when it is: a
// flow on an open loop that fails with the error of a third flow, whose
// loop was closed, fails the step with that error as it is.
func TestAwaitFlowNamesTheAwaitedLoopClosedOnlyWhenItIs(t *testing.T) {
	here, there, closed := asyncsteps.NewLoop(), asyncsteps.NewLoop(), asyncsteps.NewLoop()
	defer here.Close()
	defer there.Close()
	closed.Close()
	third := asyncsteps.New(asyncsteps.WithTool(closed))
	third.Add(func(asyncsteps.AsyncSteps, ...any) { t.Error("a step of a closed loop ran") })
	other := asyncsteps.New(asyncsteps.WithTool(there))
	other.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.AwaitResult(as, third.Promise())
	})
	var caught string
	r := asyncsteps.New(asyncsteps.WithTool(here))
	asyncsteps.AwaitFlow(r, other, func(as asyncsteps.AsyncSteps, code string) {
		caught = code + ": " + as.State().ErrorInfo
	})
	res := receive(t, r.Promise(), "the awaiting flow")
	want := asyncsteps.InternalError + ": " + closedInfo
	if caught != want {
		t.Errorf("the handler caught %q, want %q", caught, want)
	}
	wantError(t, res.Err, asyncsteps.InternalError, closedInfo)
}

// The AsyncSteps of a step left waiting when its loop closes reports
// IsValid false once the loop has stopped and ended its flow: the step
// can never complete, and a Success on it has no effect. So it does for
// every way of waiting (a Promise's flow, Execute's, a timeout, a
// parallel branch), and from any goroutine. Before, it reported true for
// good.
func TestIsValidFalseOnceTheLoopClosed(t *testing.T) {
	loop := asyncsteps.NewLoop()
	waiting := make(chan asyncsteps.AsyncSteps, 4)
	wait := func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	}
	promised := asyncsteps.New(asyncsteps.WithTool(loop))
	promised.Add(wait)
	results := promised.Promise()
	executed := asyncsteps.New(asyncsteps.WithTool(loop), asyncsteps.WithUnhandledError(func(*asyncsteps.Error) {}))
	executed.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Hour)
		wait(as)
	})
	executed.Execute()
	branches := asyncsteps.New(asyncsteps.WithTool(loop))
	branches.Parallel().Add(wait).Add(wait)
	branchResults := branches.Promise()
	names := []string{"first", "second", "third", "fourth"}
	held := make([]asyncsteps.AsyncSteps, len(names))
	for i := range held {
		held[i] = <-waiting
		if !held[i].IsValid() {
			t.Fatalf("the %s waiting step is not valid before Close", names[i])
		}
	}

	loop.Close()

	wantError(t, receive(t, results, "the promised flow").Err, asyncsteps.InternalError, closedInfo)
	wantError(t, receive(t, branchResults, "the parallel flow").Err, asyncsteps.InternalError, closedInfo)
	for i, as := range held {
		if as.IsValid() {
			t.Errorf("the %s waiting step is valid once its loop closed", names[i])
		}
		as.Success("late") // no effect, no panic
	}
}

// loggingLoop is a Tool of the user's that embeds a Loop, as one that
// adds methods of its own to it would: the engine runs its flows on that
// Loop.
type loggingLoop struct{ *asyncsteps.Loop }

// A step left waiting on a Loop that a Tool of the user's embeds reports
// IsValid false once that Loop has stopped, as on the Loop itself. The
// engine ran the flow on the Loop, and its Close ended the flow, but it
// asked whether the flow's tool was a Loop by its type, and the step
// stayed valid for good.
func TestIsValidFalseOnceAnEmbeddedLoopClosed(t *testing.T) {
	loop := asyncsteps.NewLoop()
	r := asyncsteps.New(asyncsteps.WithTool(loggingLoop{loop}))
	waiting := make(chan asyncsteps.AsyncSteps, 1)
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		waiting <- as
	})
	results := r.Promise()
	as := <-waiting
	if !as.IsValid() {
		t.Fatal("the waiting step is not valid before Close")
	}

	loop.Close()

	wantError(t, receive(t, results, "the flow").Err, asyncsteps.InternalError, closedInfo)
	if as.IsValid() {
		t.Error("the waiting step is valid once its loop closed")
	}
}

// An Await function counted from inside itself (a WaitGroup's Add in the
// function) is not counted until its goroutine runs it: the flow may end,
// and the Wait return, before it has begun. A critical section counts it
// on the loop, as its step starts: a flow that enters the section after
// the cancelled flow has ended waits for the function to return. The
// hook holds the function's goroutine before the function begins, as a
// busy scheduler may.
func TestAwaitFunctionNotYetBegunIsCountedByItsSectionNotByAWaitGroupInside(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	begun, release := make(chan struct{}), make(chan struct{})
	loop.SetHooks(&asyncsteps.Hooks{AwaitStart: func(ctx context.Context) context.Context {
		close(begun)
		<-release
		return ctx
	}})
	var wg sync.WaitGroup
	var ran atomic.Bool
	calls := asyncsteps.NewMutex(1)
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	r.Sync(calls, func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Await(func(ctx context.Context) (any, error) {
			wg.Add(1)
			defer wg.Done()
			ran.Store(true)
			return nil, ctx.Err()
		})
	})
	res := r.Promise()
	<-begun
	r.Cancel()
	if err := (<-res).Err; !errors.Is(err, context.Canceled) {
		t.Fatalf("flow: %v, want a cancel", err)
	}
	wg.Wait()
	if ran.Load() {
		t.Fatal("the function ran before the flow ended")
	}
	enter := func(timeout time.Duration) error {
		w := asyncsteps.New(asyncsteps.WithTool(loop))
		w.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(timeout)
			calls.Sync(as, func(asyncsteps.AsyncSteps, ...any) {})
		})
		_, err := w.Run(context.Background())
		return err
	}
	wantCode(t, enter(20*time.Millisecond), asyncsteps.Timeout) // the function holds the slot
	close(release)
	if err := enter(time.Minute); err != nil || !ran.Load() {
		t.Fatalf("entered with %v, the function ran: %v; want nil, true", err, ran.Load())
	}
}
