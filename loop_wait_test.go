package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// Loop.Wait and LoopGroup.Wait, each on a Loop in a testing/synctest
// bubble: the times are the bubble's, exact.

// bubbleGoroutines counts the goroutines of the caller's synctest bubble,
// exactly, whatever other goroutines of the process start or end.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), ", synctest bubble ")
}

// deaf is an Await function that ignores its context for d.
func deaf(d time.Duration) asyncsteps.AwaitFunc {
	return func(context.Context) (any, error) {
		time.Sleep(d)
		return nil, nil
	}
}

// heeding is an Await function that returns when its context ends.
func heeding(ctx context.Context) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// startDeafAndHeeding starts, on loop, a flow running in parallel a
// function that ignores its context for 300ms and one that returns as
// its context ends, after a flow whose function returned, whose
// goroutine the loop keeps. It returns once both functions run.
func startDeafAndHeeding(t *testing.T, loop *asyncsteps.Loop) <-chan asyncsteps.Result {
	t.Helper()
	first := asyncsteps.New(asyncsteps.WithTool(loop))
	first.Await(func(context.Context) (any, error) { return nil, nil })
	if _, err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	p := r.Parallel()
	p.Await(deaf(300 * time.Millisecond))
	p.Await(heeding)
	res := r.Promise()
	synctest.Wait()
	return res
}

// Close cancels the functions' contexts and returns; Wait returns once
// the function that ignores its context has returned, at 300ms, and
// then no goroutine of the loop is left, not even the one it kept.
func TestLoopWaitReturnsOnceEveryAwaitFunctionHasReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		loop := asyncsteps.NewLoop()
		start := time.Now()
		res := startDeafAndHeeding(t, loop)
		loop.Close()
		if took := time.Since(start); took != 0 {
			t.Errorf("Close returned at %v, want 0s", took)
		}
		wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 300ms", err, time.Since(start))
		}
		synctest.Wait() // what is left of the goroutines is their exit
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble after Wait, %d before the loop", n, before)
		}
	})
}

// A context that ends first ends Wait with its error; the function is
// still counted: a later Wait returns once it has returned.
func TestLoopWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		start := time.Now()
		startDeafAndHeeding(t, loop)
		loop.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := loop.Wait(ctx); err != context.DeadlineExceeded || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait: %v at %v, want %v at 100ms", err, time.Since(start), context.DeadlineExceeded)
		}
		// The loop is done, yet its Await function runs: an ended
		// context still ends Wait.
		<-loop.Done()
		if err := loop.Wait(ctx); err != context.DeadlineExceeded || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait once Done: %v at %v, want %v at 100ms", err, time.Since(start), context.DeadlineExceeded)
		}
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Errorf("second Wait: %v at %v, want <nil> at 300ms", err, time.Since(start))
		}
		// Once nothing of the loop runs, an ended context does not hide it.
		if err := loop.Wait(ctx); err != nil {
			t.Errorf("Wait under an ended context once done: %v, want <nil>", err)
		}
	})
}

// Goroutines that wait at once all return at 300ms.
func TestLoopWaitConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		start := time.Now()
		startDeafAndHeeding(t, loop)
		var wg sync.WaitGroup
		got := make([]string, 3)
		for i := range got {
			wg.Go(func() {
				err := loop.Wait(context.Background())
				got[i] = fmt.Sprint(err, " at ", time.Since(start))
			})
		}
		synctest.Wait()
		loop.Close()
		wg.Wait()
		for i, g := range got {
			if g != "<nil> at 300ms" {
				t.Errorf("Wait %d: %s, want <nil> at 300ms", i, g)
			}
		}
	})
}

// Wait before Close waits for Close too: a loop that runs can start
// Await functions at any time.
func TestLoopWaitBeforeCloseWaitsForClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		start := time.Now()
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(heeding)
		res := r.Promise()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := loop.Wait(ctx); err != context.DeadlineExceeded || time.Since(start) != 20*time.Millisecond {
			t.Errorf("Wait before Close: %v at %v, want %v at 20ms", err, time.Since(start), context.DeadlineExceeded)
		}
		waited := make(chan string)
		go func() {
			err := loop.Wait(context.Background())
			waited <- fmt.Sprint(err, " at ", time.Since(start))
		}()
		time.Sleep(30 * time.Millisecond)
		loop.Close()
		if got := <-waited; got != "<nil> at 50ms" {
			t.Errorf("Wait: %s, want <nil> at 50ms, when Close ended the function", got)
		}
		wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
	})
}

// A function that the goroutine in RunHelping runs is counted too: it is
// the flow's, though the goroutine is the caller's.
func TestLoopWaitCountsTheFunctionsOfRunHelping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop := asyncsteps.NewLoop()
		start := time.Now()
		var lent atomic.Bool
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Await(func(context.Context) (any, error) {
			buf := make([]byte, 1<<16)
			lent.Store(strings.Contains(string(buf[:runtime.Stack(buf, false)]), "RunHelping"))
			time.Sleep(300 * time.Millisecond)
			return nil, nil
		})
		helped := make(chan string)
		go func() {
			_, err := r.RunHelping(context.Background())
			helped <- fmt.Sprint(err, " at ", time.Since(start))
		}()
		synctest.Wait()
		loop.Close()
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 300ms", err, time.Since(start))
		}
		if got := <-helped; got != "InternalError: the flow's loop is closed at 300ms" {
			t.Errorf("RunHelping: %s", got)
		}
		if !lent.Load() {
			t.Error("the function did not run on the goroutine of RunHelping")
		}
	})
}

// slowCancelTool is a Tool of the user's, on a Loop it does not embed
// (the flows of a Tool that embeds one run on that Loop), whose
// Immediate takes 200ms once slow is set.
type slowCancelTool struct {
	l    *asyncsteps.Loop
	slow atomic.Bool
}

func (s *slowCancelTool) Immediate(f func()) asyncsteps.Handle {
	if s.slow.Load() {
		time.Sleep(200 * time.Millisecond)
	}
	return s.l.Immediate(f)
}

func (s *slowCancelTool) Deferred(d time.Duration, f func()) asyncsteps.Handle {
	return s.l.Deferred(d, f)
}

func (s *slowCancelTool) IsSameThread() bool { return s.l.IsSameThread() }
func (s *slowCancelTool) Now() time.Time     { return s.l.Now() }

// The goroutine of an AwaitFlow step cancels the awaited flow when the
// step's loop closes, through that flow's Tool: Wait waits for it. So
// are the goroutines that wait for a channel (AwaitChan, ForEachChan),
// which the close releases: none is left after Wait.
func TestLoopWaitCountsTheGoroutinesThatWaitForItsSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		loop, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer other.Close()
		tool := &slowCancelTool{l: other}
		start := time.Now()
		sub := asyncsteps.New(asyncsteps.WithTool(tool))
		sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		p := r.Parallel()
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, sub) })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitChan(as, make(chan int)) })
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			asyncsteps.ForEachChan(as, make(chan int), 2, func(asyncsteps.AsyncSteps, int) {})
		})
		res := r.Promise()
		synctest.Wait()
		tool.slow.Store(true)
		loop.Close()
		wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 200*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 200ms", err, time.Since(start))
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n != before+1 { // other's
			t.Errorf("%d goroutines in the bubble after Wait, %d before the loops", n, before)
		}
	})
}

// The close of the loop stops an iter.Seq2 that a ForEach pulls: Wait
// waits for its cleanup, which runs on a goroutine of its own.
func TestLoopWaitCountsAPulledSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		loop := asyncsteps.NewLoop()
		start := time.Now()
		var seq iter.Seq2[int, int] = func(yield func(int, int) bool) {
			defer time.Sleep(400 * time.Millisecond) // the sequence's cleanup
			for i := 0; yield(i, i); i++ {
			}
		}
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.ForEach(seq, func(as asyncsteps.AsyncSteps, _, _ any) { as.WaitExternal() })
		res := r.Promise()
		synctest.Wait()
		loop.Close()
		wantError(t, (<-res).Err, asyncsteps.InternalError, "the flow's loop is closed")
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 400*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 400ms", err, time.Since(start))
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble after Wait, %d before the loop", n, before)
		}
	})
}

// Wait returns at once on a Loop where it would wait for ever, and tells
// the misuse: from a callback of a Loop (its own, which cannot stop while
// the callback waits, or another, which must not block), under a nil
// context, on the loop of DefaultTool, which is never closed. A zero
// Loop never ran anything.
func TestLoopWaitMisuse(t *testing.T) {
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	other := asyncsteps.NewLoop()
	defer other.Close()
	onLoop := func(l *asyncsteps.Loop, f func()) {
		done := make(chan struct{})
		l.Immediate(func() { defer close(done); f() })
		<-done
	}
	const onLoopInfo = "Loop.Wait called on the goroutine of a Loop: it would block that loop," +
		" which the Await functions it waits for may need"
	var own, another error
	onLoop(loop, func() { own = loop.Wait(context.Background()) })
	onLoop(other, func() { another = loop.Wait(context.Background()) })
	wantError(t, own, asyncsteps.InternalError, onLoopInfo)
	wantError(t, another, asyncsteps.InternalError, onLoopInfo)
	//lint:ignore SA1012 the nil context is what is tested
	nilCtx := loop.Wait(nil)
	wantError(t, nilCtx, asyncsteps.InternalError,
		"Loop.Wait called with a nil context: pass context.Background() or the caller's context")
	wantError(t, asyncsteps.DefaultTool().(*asyncsteps.Loop).Wait(context.Background()),
		asyncsteps.InternalError, "Loop.Wait on the loop of DefaultTool, which is never closed")
	if err := new(asyncsteps.Loop).Wait(context.Background()); err != nil {
		t.Errorf("Wait on a zero Loop: %v, want <nil>", err)
	}
}

// LoopGroup.Wait waits for every loop of the group; a nil or zero group
// has nothing to wait for.
func TestLoopGroupWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := asyncsteps.NewLoopGroup(2)
		start := time.Now()
		for _, d := range []time.Duration{300 * time.Millisecond, 100 * time.Millisecond} {
			r := g.New()
			r.Await(deaf(d))
			r.Promise() // its Result: "the flow's loop is closed"
		}
		synctest.Wait()
		g.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 200*time.Millisecond {
			t.Errorf("Wait: %v at %v, want %v at 200ms", err, time.Since(start), context.DeadlineExceeded)
		}
		if err := g.Wait(context.Background()); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 300ms", err, time.Since(start))
		}
	})
	var nilGroup *asyncsteps.LoopGroup
	for _, g := range []*asyncsteps.LoopGroup{nilGroup, new(asyncsteps.LoopGroup)} {
		if err := g.Wait(context.Background()); err != nil {
			t.Errorf("Wait on %#v: %v, want <nil>", g, err)
		}
	}
	//lint:ignore SA1012 the nil context is what is tested
	nilCtx := nilGroup.Wait(nil)
	wantError(t, nilCtx, asyncsteps.InternalError,
		"LoopGroup.Wait called with a nil context: pass context.Background() or the caller's context")
}

// A flow started on the loop once it has stopped ends on a goroutine of
// its own, which runs its ExecuteThen function: Wait waits for it while
// it counts anything else, here the loop's goroutine, which started the
// flow from the function of a flow that the close ended.
func TestLoopWaitCountsTheEndOfAFlowStartedAsTheLoopCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		loop := asyncsteps.NewLoop()
		start := time.Now()
		var ended atomic.Value
		late := asyncsteps.New(asyncsteps.WithTool(loop))
		late.Add(func(asyncsteps.AsyncSteps, ...any) {})
		parked := asyncsteps.New(asyncsteps.WithTool(loop))
		parked.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
		parked.ExecuteThen(func(asyncsteps.Result) {
			late.ExecuteThen(func(res asyncsteps.Result) {
				time.Sleep(100 * time.Millisecond) // a function of the user's
				ended.Store(fmt.Sprint(res.Err, " at ", time.Since(start)))
			})
		})
		synctest.Wait()
		loop.Close()
		if err := loop.Wait(context.Background()); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait: %v at %v, want <nil> at 100ms", err, time.Since(start))
		}
		if got, want := ended.Load(), "InternalError: the flow's loop is closed at 100ms"; got != want {
			t.Errorf("the late flow's ExecuteThen function: %v when Wait returned, want %s", got, want)
		}
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble after Wait, %d before the loop", n, before)
		}
		time.Sleep(time.Second) // a goroutine left would end the bubble in a panic
	})
}
