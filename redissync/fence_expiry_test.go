package redissync

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// TestFenceKeysExpireWhenIdle: a Mutex's fence counter and the name of
// its server expire a day after its last lease, and tokens still grow
// once they are gone: the next lease raises the counter to Redis's clock,
// as after a restart, also when only the counter is gone (the server's
// name kept, by a process of an older version). They were kept for
// good: a Mutex per account left two keys in Redis for every account
// ever served.
func TestFenceKeysExpireWhenIdle(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("m", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	token := func() int64 { t.Helper(); return leaseToken(t, m, l) }
	tokens := []int64{token()}
	for _, key := range m.keys[1:3] {
		// a ms over: the counter, a µs or more past the clock, may be in the next ms
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= fenceFor-time.Minute || ttl > fenceFor+time.Millisecond {
			t.Errorf("%s expires in %v, want just under %v", key, ttl, fenceFor)
		}
	}
	rdb.Del(ctx, m.keys[1]) // the counter alone
	tokens = append(tokens, token())
	rdb.Del(ctx, m.keys[1], m.keys[2]) // both, as they expire
	tokens = append(tokens, token())
	if !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
		t.Errorf("tokens %v, want each above the one before", tokens)
	}
}

// TestFenceKeysOutliveTheirTokens: the fence keys expire only once Redis's
// clock has passed the counter, so that the raise of the next lease goes
// above every token given. Here the counter stands two days ahead of the
// clock, as one raised while the server's clock was ahead (a clock set
// wrong at boot, stepped back by NTP since) does. The keys expired a day
// after the last lease whatever the counter: the next lease then raised it
// to a clock still a day behind the tokens given, with the server's data
// and run ID kept, where the counter kept for good had gone on growing.
func TestFenceKeysOutliveTheirTokens(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	m := c.NewMutex("m", MutexOptions{Max: 1})
	l := newLoops(t, 1)[0]
	ctx := context.Background()
	token := func() int64 { t.Helper(); return leaseToken(t, m, l) }
	token() // the server's name recorded: no raise at the next lease
	ahead := rdb.Time(ctx).Val().Add(48 * time.Hour).UnixMicro()
	rdb.Set(ctx, m.keys[1], ahead, 0)
	tok := token()
	if tok != ahead+1 {
		t.Fatalf("token %d, want %d", tok, ahead+1)
	}
	now := rdb.Time(ctx).Val()
	for _, key := range m.keys[1:3] {
		ttl := rdb.PTTL(ctx, key).Val()
		if at := now.Add(ttl); at.UnixMicro() <= tok {
			t.Errorf("%s expires at %v on Redis's clock, before it reaches the token %d (%v)",
				key, at.UTC(), tok, time.UnixMicro(tok).UTC())
		}
	}
}

// leaseToken runs a flow on l that enters m and returns the fencing token
// of its lease.
func leaseToken(t *testing.T, m *Mutex, l *asyncsteps.Loop) int64 {
	t.Helper()
	var tok int64
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tok, _ = m.Token(as) })
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tok
}
