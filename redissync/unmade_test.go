package redissync

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/redis/go-redis/v9"
)

const unmadeEnv = "REDISSYNC_UNMADE_CHILD"

// Syncers not made by a Client from New (zero values, nil pointers, those
// of a zero or nil Client) fail each flow that enters them with an
// InternalError its error handler sees, and New refuses a nil redis
// client. Before, the zero Mutex and Limiter failed with a nil
// dereference, the zero Throttle left its flow waiting forever, and a zero
// Client's NewMutex, its Close, and New with a nil client panicked. It runs
// in a child process, since a hang or a panic there is the failure.
func TestUnmadeSyncersFailTheirFlows(t *testing.T) {
	if os.Getenv(unmadeEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUnmadeSyncersFailTheirFlows$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), unmadeEnv+"=1")
		dieWithTest(cmd)
		timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the child process: %v\n%s", err, out)
		}
		return
	}
	var zero Client
	var nilClient *Client
	var nilRedis *redis.Client
	syncers := []struct {
		name, what string
		s          asyncsteps.Syncer
	}{
		{"zero Mutex", "Mutex", new(Mutex)},
		{"zero Throttle", "Throttle", new(Throttle)},
		{"zero Limiter", "Limiter", new(Limiter)},
		{"nil Mutex", "Mutex", (*Mutex)(nil)},
		{"nil Throttle", "Throttle", (*Throttle)(nil)},
		{"nil Limiter", "Limiter", (*Limiter)(nil)},
		{"zero Client's Mutex", "Mutex", zero.NewMutex("m", MutexOptions{})},
		{"zero Client's Throttle", "Throttle", zero.NewThrottle("t", ThrottleOptions{})},
		{"nil Client's Limiter", "Limiter", nilClient.NewLimiter("l", LimiterOptions{})},
	}
	for _, s := range syncers {
		var tr tracer
		tt := asyncsteps.NewTestTool()
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(s.s, func(as asyncsteps.AsyncSteps, _ ...any) { tr.add("inside") },
			func(as asyncsteps.AsyncSteps, code string) { tr.add("%s: %s", code, as.State().ErrorInfo) })
		res := r.Promise()
		tt.Run()
		info := "redissync: the " + s.what + " was not made by a Client from New"
		select {
		case res := <-res:
			wantError(t, res.Err, asyncsteps.InternalError, info)
		default:
			t.Errorf("%s: the flow did not end", s.name)
		}
		tr.check(t, "InternalError: "+info)
	}
	// Token reads the State of a flow inside the section: none is, here.
	r := asyncsteps.New()
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		for name, token := range map[string]func(asyncsteps.AsyncSteps) (int64, bool){
			"zero Mutex":   new(Mutex).Token,
			"nil Mutex":    (*Mutex)(nil).Token,
			"zero Limiter": new(Limiter).Token,
			"nil Limiter":  (*Limiter)(nil).Token,
		} {
			if n, ok := token(as); n != 0 || ok {
				t.Errorf("%s: Token = %d, %v; want 0, false", name, n, ok)
			}
		}
	})
	if _, err := r.Run(context.Background()); err != nil {
		t.Errorf("the flow reading the tokens: %v", err)
	}
	if err := zero.Close(); err != nil {
		t.Errorf("zero Client's Close: %v", err)
	}
	var noContext context.Context
	unused := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer unused.Close()
	if c, err := New(noContext, unused, Options{}); c != nil || err == nil || err.Error() != "redissync: New: nil context" {
		t.Errorf("New with a nil context: %v, %v", c, err)
	}
	for name, rdb := range map[string]redis.UniversalClient{"nil": nil, "nil *redis.Client": nilRedis} {
		c, err := New(context.Background(), rdb, Options{})
		if c != nil || err == nil || err.Error() != "redissync: New: nil redis client" {
			t.Errorf("New with a %s client: %v, %v", name, c, err)
		}
	}
}

// A negative option panics with the constructor's name and the first
// negative option and its value, as the core's constructors do, so that a
// misconfiguration read from flags or a file says what to fix.
func TestConstructorsNameTheNegativeOption(t *testing.T) {
	c := new(Client)
	cases := []struct {
		make func()
		want string
	}{
		{func() { c.NewMutex("m", MutexOptions{Max: -2}) }, "redissync: NewMutex: negative Max -2"},
		{func() { c.NewMutex("m", MutexOptions{TTL: -time.Second}) }, "redissync: NewMutex: negative TTL -1s"},
		{func() { c.NewKeyedMutex("m", MutexOptions{TTL: -time.Second}) }, "redissync: NewKeyedMutex: negative TTL -1s"},
		{func() { c.NewThrottle("t", ThrottleOptions{Rate: -1}) }, "redissync: NewThrottle: negative Rate -1"},
		{func() { c.NewKeyedThrottle("t", ThrottleOptions{Period: -time.Millisecond}) }, "redissync: NewKeyedThrottle: negative Period -1ms"},
		{func() { c.NewLimiter("l", LimiterOptions{Concurrent: -3, Rate: -1}) }, "redissync: NewLimiter: negative Concurrent -3"},
		{func() { c.NewLimiter("l", LimiterOptions{TTL: -time.Minute}) }, "redissync: NewLimiter: negative TTL -1m0s"},
	}
	for _, tc := range cases {
		func() {
			defer func() {
				if r := recover(); r != tc.want {
					t.Errorf("panicked with %#v, want %q", r, tc.want)
				}
			}()
			tc.make()
		}()
	}
}
