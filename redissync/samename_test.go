package redissync

import (
	"testing"
	"time"
)

// TestGiveBackWakesEveryMutexOfTheName: two Mutex values of one name in
// one process (two handlers that each make the Limiter of the upstream
// they share) are both woken by a notification. Here another process
// holds the slot and the first value's flow waits; when that process
// gives the slot back, the waiter enters. The Client woke only the Mutex
// of the name made last, so the first one's waiter slept until its next
// re-check (here, minutes).
func TestGiveBackWakesEveryMutexOfTheName(t *testing.T) {
	addr := sharedRedis(t)
	a, _ := newClient(t, addr, Options{Recheck: 10 * time.Minute})
	b, _ := newClient(t, addr, Options{Prefix: a.opts.Prefix, Recheck: 10 * time.Minute})
	opts := MutexOptions{Max: 1, MaxQueue: 1, TTL: 10 * time.Minute}
	first := a.NewMutex("m", opts)
	a.NewMutex("m", opts) // the second value of the name
	other := b.NewMutex("m", opts)
	l := newLoops(t, 1)[0]
	var tr tracer
	release := make(chan struct{})
	held := holdOpen(t, l, other, &tr, "B", release)
	waiter := enter(l, first, &tr, "A")
	waitFor(t, "A to queue", func() bool { return queued(&first.gateQueue) == 1 })
	close(release)
	if res := <-held; res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-waiter:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A still waits 5s after B gave its slot back")
	}
	tr.check(t, "B in", "B out", "A in")
}
