package redissync

import (
	"testing"
	"time"
)

// TestGiveBackWakesAProcessWithALargerMax: processes whose Mutexes of one
// name have different Max (a rolling change of the setting) share the
// holders. A (Max 1) holds one lease and B (Max 2) the other; B's second
// flow waits. When A's flow leaves, the slot is free for B, and B's waiter
// is woken by the notification. A sent none: its script notified only
// while fewer leases than its own Max were held, and one still was, so
// B's waiter slept until its next renewal or re-check (here, minutes).
func TestGiveBackWakesAProcessWithALargerMax(t *testing.T) {
	addr := sharedRedis(t)
	a, _ := newClient(t, addr, Options{Recheck: 10 * time.Minute})
	b, _ := newClient(t, addr, Options{Prefix: a.opts.Prefix, Recheck: 10 * time.Minute})
	small := a.NewMutex("m", MutexOptions{Max: 1, TTL: 10 * time.Minute})
	large := b.NewMutex("m", MutexOptions{Max: 2, MaxQueue: 1, TTL: 10 * time.Minute})
	l := newLoops(t, 1)[0]
	var tr tracer
	releaseB1, releaseA1 := make(chan struct{}), make(chan struct{})
	a1 := holdOpen(t, l, small, &tr, "A1", releaseA1)
	b1 := holdOpen(t, l, large, &tr, "B1", releaseB1)
	b2 := enter(l, large, &tr, "B2")
	waitFor(t, "B2 to queue", func() bool { return queued(&large.gateQueue) == 1 })
	close(releaseA1)
	if res := <-a1; res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-b2:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("B2 still waits 5s after A1 gave its slot back")
	}
	close(releaseB1)
	if res := <-b1; res.Err != nil {
		t.Fatal(res.Err)
	}
	tr.check(t, "A1 in", "B1 in", "A1 out", "B2 in", "B1 out")
	if n := queued(&large.gateQueue); n != 0 {
		t.Errorf("%d flows still queued", n)
	}
}
