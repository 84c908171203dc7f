package asyncsteps

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// propagators counts the goroutines that the context package starts to
// watch a parent context it cannot be told about.
func propagators() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "context.(*cancelCtx).propagateCancel.func")
}

// The contexts an Await function derives from its own cost no goroutine
// each (net/http derives one per request): the call's context tells the
// context package of its cancel. They are cancelled with the step, with
// the step's cause, and the functions that context.AfterFunc gives them
// run then unless stopped.
func TestAwaitDerivedContextsCostNoGoroutine(t *testing.T) {
	const derived = 100
	l := newTestLoop(t)
	type seen struct {
		goroutines   int
		err, cause   error
		ranA         bool
		stoppedA     bool
		stoppedAfter bool
	}
	out := make(chan seen, 1)
	ready := make(chan struct{})
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		var s seen
		ctxs := make([]context.Context, derived)
		for i := range ctxs {
			var cancel context.CancelFunc
			ctxs[i], cancel = context.WithCancel(ctx)
			defer cancel()
		}
		ranA, ranB := make(chan struct{}), make(chan struct{})
		stopA := context.AfterFunc(ctx, func() { close(ranA) })
		stopB := context.AfterFunc(ctxs[derived-1], func() { close(ranB) })
		s.goroutines = propagators()
		s.stoppedA = stopA()
		close(ready)             // the test cancels the flow now
		<-ctxs[derived/2].Done() // cancelled with the step
		<-ranB
		s.err, s.cause = ctxs[0].Err(), context.Cause(ctxs[derived-1])
		s.stoppedAfter = stopB()
		select {
		case <-ranA:
			s.ranA = true
		default:
		}
		out <- s
		return nil, ctx.Err()
	})
	go func() {
		<-ready
		r.Cancel()
	}()
	if _, err := r.Run(context.Background()); err == nil {
		t.Fatal("Run of a cancelled flow succeeded")
	}
	s := <-out
	if s.goroutines != 0 {
		t.Errorf("%d goroutines watch the contexts derived from an Await function's, want 0", s.goroutines)
	}
	if !s.stoppedA || s.ranA || s.stoppedAfter {
		t.Errorf("context.AfterFunc: stop before the cancel %v, ran anyway %v, stop after it ran %v; want true, false, false",
			s.stoppedA, s.ranA, s.stoppedAfter)
	}
	if s.err != context.Canceled || s.cause != context.Canceled {
		t.Errorf("derived contexts after the step's cancel: Err %v, Cause %v, want context.Canceled twice", s.err, s.cause)
	}
}

// An Await function's context is cancelled once the function has
// returned, so that what the function started with it stops, with
// context.Canceled when no deadline has passed; a context derived from it
// then is cancelled at once.
func TestAwaitContextEndsWithItsFunction(t *testing.T) {
	l := newTestLoop(t)
	var kept context.Context
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		if ctx.Err() != nil {
			t.Errorf("ctx.Err() = %v while the function runs, want nil", ctx.Err())
		}
		kept = ctx
		return nil, nil
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait(t, kept.Done(), "the context of a returned Await function")
	if kept.Err() != context.Canceled || context.Cause(kept) != context.Canceled {
		t.Errorf("Err %v, Cause %v, want context.Canceled", kept.Err(), context.Cause(kept))
	}
	derived, cancel := context.WithCancel(kept)
	defer cancel()
	if derived.Err() != context.Canceled {
		t.Errorf("a context derived after the end: Err %v, want context.Canceled", derived.Err())
	}
	ran := make(chan struct{})
	if context.AfterFunc(kept, func() { close(ran) })() {
		t.Error("context.AfterFunc on a cancelled context: stop reported true")
	}
	wait(t, ran, "context.AfterFunc on a cancelled context")
}

// Closing a Loop cancels every Await call in flight, whichever of them
// ended before (the loop's list of calls loses them from its head, middle
// and tail), and leaves no goroutine.
func TestCloseCancelsEveryAwaitCallInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	l := NewLoop()
	const calls = 7
	var started sync.WaitGroup
	started.Add(calls)
	errs := make(chan error, calls)
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		for i := range calls {
			p.Await(func(ctx context.Context) (any, error) {
				started.Done()
				if i%3 == 0 { // calls 0, 3 and 6 return at once
					return nil, nil
				}
				derived, cancel := context.WithCancel(ctx)
				defer cancel()
				<-derived.Done()
				errs <- ctx.Err()
				return nil, ctx.Err()
			})
		}
	})
	res := r.Promise()
	started.Wait()
	waitInFlight(t, l, calls-3)
	l.Close()
	select {
	case res := <-res:
		if res.Err == nil {
			t.Fatal("the flow on the closed loop succeeded")
		}
	case <-time.After(guard):
		t.Fatal("the flow on the closed loop did not end")
	}
	for range calls - 3 {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a call's context ended with %v, want context.Canceled", err)
			}
		case <-time.After(guard):
			t.Fatal("a call's context was not cancelled by Close")
		}
	}
	if n := inFlight(l); n != 0 {
		t.Errorf("%d calls in flight after Close, want 0", n)
	}
	waitGoroutineCount(t, before)
}

// inFlight counts the Await calls in flight of l.
func inFlight(l *Loop) int {
	l.awaitCalls.mu.Lock()
	defer l.awaitCalls.mu.Unlock()
	n := 0
	for c := l.awaitCalls.head; c != nil; c = c.next {
		n++
	}
	return n
}

// waitInFlight waits until n Await calls of l are in flight.
func waitInFlight(t *testing.T, l *Loop, n int) {
	t.Helper()
	for deadline := time.Now().Add(guard); inFlight(l) != n; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d Await calls in flight, want %d", inFlight(l), n)
		}
	}
}

// A goroutine kept for Await functions ends once it has waited
// awaitWorkerIdle, not before, and the others stay: on virtual time, the
// pool's one timer ends the longest waiting one, then the next as its
// time comes.
func TestAwaitWorkersEndAfterTheirIdleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop()
		defer l.Close()
		idleAfter := func(d time.Duration, want int) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if got := idleAwaitWorkers(l); got != want {
				t.Fatalf("%d goroutines kept, want %d", got, want)
			}
		}
		if err := runAwaits(t, l, awaitsTogether(3)...); err != nil {
			t.Fatal(err)
		}
		idleAfter(0, 3)
		half := awaitWorkerIdle / 2
		idleAfter(half, 3)
		// One of the three runs another function: it waits from now on.
		if err := runAwaits(t, l, awaitsTogether(1)...); err != nil {
			t.Fatal(err)
		}
		idleAfter(half-1, 3)
		idleAfter(1, 1) // the two that waited a full awaitWorkerIdle end
		idleAfter(half-1, 1)
		idleAfter(1, 0)
	})
}

// An Await call in flight is one object of at most 208 bytes (a size
// class of its own): what a request held on a slow upstream keeps for its
// call. A new field must find room, or be worth the next class.
func TestAwaitCallSize(t *testing.T) {
	if got := unsafe.Sizeof(awaitCall{}); got > 208 {
		t.Errorf("awaitCall is %d bytes, want at most 208", got)
	}
}

// A function that derives contexts one after another, ending each (a
// request per item of a long job), keeps no record of those ended: the
// call holds the AfterFunc entries of the contexts alive only, as a
// cancelCtx drops its ended children; and a stop once run stops nothing
// more, whatever was registered since.
func TestAwaitCallForgetsStoppedAfterFuncs(t *testing.T) {
	l := newTestLoop(t)
	const derived = 1000
	ran := 0
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		c := ctx.(*awaitCall)
		_, cancelFirst := context.WithCancel(ctx) // alive till the end
		defer cancelFirst()
		for range derived {
			_, cancel := context.WithCancel(ctx)
			cancel()
		}
		c.mu.Lock()
		kept := 0
		if c.more != nil {
			kept = len(*c.more)
		}
		c.mu.Unlock()
		if kept != 0 {
			t.Errorf("%d AfterFunc entries kept for %d ended contexts, want 0", kept, derived)
		}
		// One stop, run twice, forgets its own function only.
		stopA := c.AfterFunc(func() { ran++ })
		if !stopA() || stopA() {
			t.Error("stop: want true, then false")
		}
		c.AfterFunc(func() { ran += 10 })
		if stopA() {
			t.Error("a stop run again stopped another function")
		}
		return nil, nil
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran != 10 {
		t.Errorf("the functions run at the end add up to %d, want 10", ran)
	}
}

// An Await function's context has the values of Run's context but not its
// cancellation: when Run's context is cancelled with a cause, the call is
// cancelled by its step, and context.Cause of its context, and of one
// derived from it, is the call's own Err, not the cause of Run's context.
func TestAwaitContextHasRunValuesNotItsCancel(t *testing.T) {
	type key struct{}
	l := newTestLoop(t)
	runCtx, cancelRun := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	defer cancelRun(nil)
	type seen struct {
		value, causeBefore       any
		err, cause, derivedCause error
	}
	out := make(chan seen, 1)
	started := make(chan struct{})
	r := New(WithTool(l))
	r.Await(func(ctx context.Context) (any, error) {
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		s := seen{value: ctx.Value(key{}), causeBefore: context.Cause(ctx)}
		close(started)
		<-derived.Done()
		s.err, s.cause, s.derivedCause = ctx.Err(), context.Cause(ctx), context.Cause(derived)
		out <- s
		return nil, nil
	})
	go func() {
		<-started
		cancelRun(errors.New("the caller's own cause"))
	}()
	if _, err := r.Run(runCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	want := seen{value: "v", err: context.Canceled, cause: context.Canceled, derivedCause: context.Canceled}
	if s := <-out; s != want {
		t.Errorf("the Await function saw value %v, Cause %v, then Err %v, Cause %v, derived Cause %v; want %v, %v, then %v, %v, %v",
			s.value, s.causeBefore, s.err, s.cause, s.derivedCause, want.value, want.causeBefore, want.err, want.cause, want.derivedCause)
	}
}
