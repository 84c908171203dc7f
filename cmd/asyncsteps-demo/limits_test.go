package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The plain gateway's window follows asyncsteps.Throttle's rules: limit
// entries per period, then a bounded first-in first-out queue let in by
// the next period, a waiter that gives up leaving the queue. Periods are
// ended by hand: the timer's one hour never passes in the test.
func TestWindowLimitFollowsTheThrottleRules(t *testing.T) {
	w := &windowLimit{limit: 2, maxQueue: 2, period: time.Hour}
	ctx := context.Background()
	for i := range 2 {
		if err := w.enter(ctx); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	entered := make(chan int, 3)
	gaveUp, giveUp := context.WithCancel(ctx)
	go func() {
		if w.enter(ctx) == nil {
			entered <- 1
		}
	}()
	waitWaiting(t, w, 1)
	go func() {
		if err := w.enter(gaveUp); errors.Is(err, context.Canceled) {
			entered <- -2
		}
	}()
	waitWaiting(t, w, 2)
	var e *asyncsteps.Error
	if err := w.enter(ctx); !errors.As(err, &e) || e.Code != asyncsteps.DefenseRejected || e.Info != "Throttle queue limit" {
		t.Errorf("with the queue full: %v", err)
	}
	giveUp()
	if got := <-entered; got != -2 {
		t.Fatalf("got %d, want the second waiter to give up", got)
	}
	waitWaiting(t, w, 1)
	w.nextPeriod()
	if got := <-entered; got != 1 {
		t.Fatalf("got %d, want the first waiter in", got)
	}
	// One entry of the new period is taken; one is left, then it is full.
	if err := w.enter(ctx); err != nil {
		t.Errorf("second entry of the new period: %v", err)
	}
	w.mu.Lock()
	entries, running := w.entered, w.running
	w.mu.Unlock()
	if entries != 2 || !running {
		t.Errorf("entered %d, running %v; want 2, true", entries, running)
	}
	w.nextPeriod() // nobody waits: idle, no timer
	w.mu.Lock()
	entries, running = w.entered, w.running
	w.mu.Unlock()
	if entries != 0 || running {
		t.Errorf("after an empty period: entered %d, running %v; want 0, false", entries, running)
	}
}

func waitWaiting(t *testing.T, w *windowLimit, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting %d, want %d", w.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
