package redissync

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestCloseEndsEveryGoroutine: when Close returns, no goroutine of the
// Client or its Syncers (a KeyedMutex and a KeyedThrottle with a key
// served among them) runs, as Close promises. The notification
// listener's helper, which cancelled its context once the Client closed,
// was not waited for, and was often still there (more often with more
// Ps, which the test sets: a goroutine made ready to end may wait in
// another P's queue).
func TestCloseEndsEveryGoroutine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t)})
	defer rdb.Close()
	l := newLoops(t, 1)[0]
	for i := range 500 {
		c, err := New(context.Background(), rdb, Options{Prefix: "close-goroutines"})
		if err != nil {
			t.Fatal(err)
		}
		m := c.NewMutex("m", MutexOptions{})
		km := c.NewKeyedMutex("km", MutexOptions{})
		kt := c.NewKeyedThrottle("kt", ThrottleOptions{Rate: 1 << 30})
		if i == 0 { // once through a round trip, as a Client in use
			if res := <-enter(l, m, &tracer{}, "A"); res.Err != nil {
				t.Fatal(res.Err)
			}
			if res := <-enter(l, km.Key("k"), &tracer{}, "B"); res.Err != nil {
				t.Fatal(res.Err)
			}
			if res := <-enter(l, kt.Key("k"), &tracer{}, "C"); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		c.NewThrottle("t", ThrottleOptions{})
		c.Close()
		if left := clientGoroutines(); left != "" {
			t.Fatalf("after Close %d:\n%s", i, left)
		}
	}
}

// clientGoroutines returns the stacks of the goroutines that run a method
// of the package's. The two whose deferred wg.Done Close waits for, listen
// and the wrapper of each Syncer's goroutine, may still be returning from
// it when Close returns: their own frames do not count.
func clientGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	const pkg = "github.com/asyncsteps/asyncsteps/redissync."
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, pkg+"(*") &&
				!strings.HasPrefix(line, pkg+"(*Client).listen(") &&
				!strings.HasPrefix(line, pkg+"(*Client).startSyncer.func1(") {
				found = append(found, g)
				break
			}
		}
	}
	return strings.Join(found, "\n\n")
}
