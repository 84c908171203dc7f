package asyncsteps

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// runAwaits runs one flow on l whose Parallel has one Await per function,
// and returns the flow's error.
func runAwaits(t *testing.T, l *Loop, fns ...AwaitFunc) error {
	t.Helper()
	r := New(WithTool(l))
	r.Add(func(as AsyncSteps, _ ...any) {
		p := as.Parallel()
		for _, fn := range fns {
			p.Await(fn)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, err := r.Run(ctx)
	return err
}

// onGoroutine returns an Await function that records the id of the
// goroutine it runs on.
func onGoroutine(id *int64) AwaitFunc {
	return func(context.Context) (any, error) {
		*id = goid()
		return nil, nil
	}
}

// The Await functions of a Loop's flows run on goroutines the Loop keeps:
// one after another they share one, at once each has its own, and none is
// the loop's.
func TestAwaitWorkersReuseTheirGoroutines(t *testing.T) {
	l := newTestLoop(t)
	l.awaitWorkers.idleFor = guard // kept whatever the machine's pace
	var first, second int64
	if err := runAwaits(t, l, onGoroutine(&first)); err != nil {
		t.Fatal(err)
	}
	// The step completes before its goroutine is back among the waiting
	// ones: the next Await may start a goroutine until then.
	waitIdleAwaitWorkers(t, l, 1)
	if err := runAwaits(t, l, onGoroutine(&second)); err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("two Await functions one after the other ran on goroutines %d and %d, want one", first, second)
	}
	if first == l.gid.Load() {
		t.Error("an Await function ran on the loop's goroutine")
	}
	var ids [3]int64
	var started sync.WaitGroup
	started.Add(len(ids))
	fns := make([]AwaitFunc, len(ids))
	for i := range ids {
		fns[i] = func(context.Context) (any, error) {
			ids[i] = goid()
			started.Done()
			started.Wait() // all three at once
			return nil, nil
		}
	}
	if err := runAwaits(t, l, fns...); err != nil {
		t.Fatal(err)
	}
	if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		t.Errorf("three Await functions at once ran on goroutines %v, want three", ids)
	}
}

// A Loop keeps at most maxIdleAwaitWorkers goroutines waiting, and none
// once closed.
func TestAwaitWorkersAreBoundedAndEndWithTheLoop(t *testing.T) {
	before := runtime.NumGoroutine()
	l := NewLoop()
	l.awaitWorkers.idleFor = guard
	const n = maxIdleAwaitWorkers + 40
	if err := runAwaits(t, l, awaitsTogether(n)...); err != nil {
		t.Fatal(err)
	}
	// A goroutine is kept, or ends, a moment after its step completed.
	waitGoroutineCount(t, before+1+maxIdleAwaitWorkers) // the loop's and those kept
	for deadline := time.Now().Add(guard); idleAwaitWorkers(l) != maxIdleAwaitWorkers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines kept after %d Await functions at once, want %d", idleAwaitWorkers(l), n, maxIdleAwaitWorkers)
		}
	}
	l.Close()
	waitGoroutineCount(t, before)
}

// A goroutine kept for Await functions ends once it has waited idleFor
// for the next.
func TestAwaitWorkersEndWhenIdle(t *testing.T) {
	before := runtime.NumGoroutine()
	l := newTestLoop(t)
	l.awaitWorkers.idleFor = 10 * time.Millisecond
	var id int64
	if err := runAwaits(t, l, onGoroutine(&id), onGoroutine(new(int64))); err != nil {
		t.Fatal(err)
	}
	// The goroutine count alone could reach its mark early, as goroutines
	// of an earlier test end: look at the kept ones first.
	for deadline := time.Now().Add(guard); idleAwaitWorkers(l) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still kept after their idle time", idleAwaitWorkers(l))
		}
	}
	waitGoroutineCount(t, before+1) // the loop's only
}

// A goroutine kept for Await functions that one of them ends with
// runtime.Goexit fails that step only: the next Await runs as usual.
func TestAwaitWorkersSurviveAGoexit(t *testing.T) {
	l := newTestLoop(t)
	l.awaitWorkers.idleFor = guard
	var id int64
	if err := runAwaits(t, l, onGoroutine(&id)); err != nil {
		t.Fatal(err)
	}
	err := runAwaits(t, l, func(context.Context) (any, error) {
		runtime.Goexit()
		return nil, nil
	})
	if e, ok := err.(*Error); !ok || e.Code != InternalError || e.Info != goexitInfo {
		t.Fatalf("Goexit in an Await function: error %v, want InternalError %q", err, goexitInfo)
	}
	var next int64
	if err := runAwaits(t, l, onGoroutine(&next)); err != nil {
		t.Fatal(err)
	}
	if next == id {
		t.Errorf("the goroutine that called Goexit (%d) ran the next Await function", id)
	}
}

func idleAwaitWorkers(l *Loop) int {
	l.awaitWorkers.mu.Lock()
	defer l.awaitWorkers.mu.Unlock()
	return len(l.awaitWorkers.idle)
}

// waitGoroutineCount waits until at most n goroutines run, or fails the
// test; goroutines that end take a moment to be counted out.
func waitGoroutineCount(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitIdleAwaitWorkers waits until n goroutines of l wait for Await
// functions.
func waitIdleAwaitWorkers(t *testing.T, l *Loop, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.awaitWorkers.mu.Lock()
		idle := len(l.awaitWorkers.idle)
		l.awaitWorkers.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for Await functions, want %d", idle, n)
		}
		runtime.Gosched()
	}
}

// awaitsTogether returns n Await functions that each return only once all
// n have started: n goroutines busy at once.
func awaitsTogether(n int) []AwaitFunc {
	var started sync.WaitGroup
	started.Add(n)
	fns := make([]AwaitFunc, n)
	for i := range fns {
		fns[i] = func(context.Context) (any, error) {
			started.Done()
			started.Wait()
			return nil, nil
		}
	}
	return fns
}
