package redissync

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

// hookPanicEnv names the Redis address for the child process of
// TestRedisClientHookPanics.
const hookPanicEnv = "REDISSYNC_HOOK_PANIC_ADDR"

// panicHook is a go-redis hook, the user's, that panics on script calls.
type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if strings.HasPrefix(cmds[0].Name(), "eval") {
			panic("boom")
		}
		return next(ctx, cmds)
	}
}

func (panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			panic("boom")
		}
		return next(ctx, cmd)
	}
}

// TestRedisClientHookPanics: a hook of the user's redis client that
// panics in a round trip fails the flows of the round trip with an
// InternalError naming the panic, as a panic in a callback does, and a
// FailOpen Throttle, or KeyedThrottle, does not let them in: that is a
// bug, not Redis lost.
// The panic ended the process: it came on a Syncer's goroutine, where
// nobody could recover it. (With ContextTimeoutEnabled, the round trips
// go through the user's client and its hooks.) A KeyedMutex's pipelines,
// sent from goroutines of their own, fail each of their calls so. It
// runs in a child process, which such a panic kills.
func TestRedisClientHookPanics(t *testing.T) {
	if addr := os.Getenv(hookPanicEnv); addr != "" {
		hookPanicChild(t, addr)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedisClientHookPanics$", "-test.count=1")
	cmd.Env = append(os.Environ(), hookPanicEnv+"="+sharedRedis(t))
	dieWithTest(cmd)
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}

func hookPanicChild(t *testing.T, addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	rdb.AddHook(panicHook{})
	c, err := New(context.Background(), rdb, Options{Prefix: "hook-panic"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := newLoops(t, 1)[0]
	syncers := map[string]asyncsteps.Syncer{
		"Mutex":         c.NewMutex("m", MutexOptions{}),
		"Throttle":      c.NewThrottle("t", ThrottleOptions{FailOpen: true}),
		"Keyed":         c.NewKeyedMutex("k", MutexOptions{}).Key("a"),
		"KeyedThrottle": c.NewKeyedThrottle("kt", ThrottleOptions{FailOpen: true}).Key("a"),
	}
	for name, s := range syncers {
		var tr tracer
		res := <-enter(l, s, &tr, name)
		var e *asyncsteps.Error
		if !errors.As(res.Err, &e) || e.Code != asyncsteps.InternalError || e.Info != "redis: panic: boom" {
			t.Errorf("%s: %v, want InternalError \"redis: panic: boom\"", name, res.Err)
		}
		tr.check(t, name+" onerror InternalError: redis: panic: boom")
		var p *asyncsteps.PanicError
		if cause := goCause(res.Err); !errors.As(res.Err, &p) || cause.Error() != "redis "+addr+": panic: boom" {
			t.Errorf("%s: cause %v, want a PanicError under \"redis %s: panic: boom\"", name, cause, addr)
		}
	}
	// Two pipelines, the second on a goroutine of its own (see callAll).
	calls := make([]scriptCall, pipelineMax+2)
	for i := range calls {
		calls[i] = scriptCall{keys: c.mutexKeys("p", "r"), args: []any{i}}
	}
	for i, r := range c.callAll(mutexScript, calls) {
		var p *asyncsteps.PanicError
		if !errors.As(r.err, &p) || p.Value != "boom" {
			t.Fatalf("pipelined call %d: %v, want the hook's panic", i, r.err)
		}
	}
}
