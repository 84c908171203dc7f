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
	token := func() int64 {
		t.Helper()
		var tok int64
		r := asyncsteps.New(asyncsteps.WithTool(l))
		r.Sync(m, func(as asyncsteps.AsyncSteps, _ ...any) { tok, _ = m.Token(as) })
		if _, err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tokens := []int64{token()}
	for _, key := range m.keys[1:3] {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= fenceFor-time.Minute || ttl > fenceFor {
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
