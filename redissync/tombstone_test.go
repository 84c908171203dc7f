package redissync

import (
	"context"
	"testing"
	"time"
)

// TestLingeringAcquireAfterGiveBack: the give-back of a lease whose
// acquire's outcome is unknown, run by Redis before the acquire (the two
// travel on different connections), leaves a tombstone: the acquire run
// after it takes nothing. Run after the acquire, the give-back frees the
// lease. Either way the slot is free.
func TestLingeringAcquireAfterGiveBack(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("m", MutexOptions{TTL: time.Minute})
	ctx := context.Background()
	acquire := func(lease string) int64 {
		t.Helper()
		res, err := mutexScript.Run(ctx, rdb, m.keys, m.callArgs(nil, nil, nil, []string{lease})...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res[0].(int64)
	}
	giveBack := func(lease string) {
		t.Helper()
		if err := mutexScript.Run(ctx, rdb, m.keys, m.callArgs(nil, []string{lease}, nil, nil)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	giveBack("first-given-back")
	if n := acquire("first-given-back"); n != 0 {
		t.Errorf("the acquire run after the give-back took %d leases, want 0", n)
	}
	if n := acquire("taken-first"); n != 1 {
		t.Fatalf("the acquire took %d leases, want 1", n)
	}
	giveBack("taken-first")
	if n := rdb.ZCard(ctx, m.keys[0]).Val(); n != 0 {
		t.Errorf("%d leases held, want 0", n)
	}
	if n := acquire("taken-first"); n != 0 {
		t.Errorf("the acquire run again after the give-back took %d leases, want 0", n)
	}
	if n := rdb.ZCard(ctx, m.keys[3]).Val(); n != 2 {
		t.Errorf("%d tombstones, want 2", n)
	}
	if ttl := rdb.PTTL(ctx, m.keys[3]).Val(); ttl <= goneFor || ttl > goneFor+time.Second {
		t.Errorf("the tombstones expire in %v, want in (%v, %v]", ttl, goneFor, goneFor+time.Second)
	}
}
