package redissync_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
	"github.com/redis/go-redis/v9"
)

// Two instances of a service share a lock per account through Redis:
// while a flow of the first charges account 1, a flow of the second on
// account 1 waits, and one on account 2 goes on at once. Accounts that
// no flow uses cost nothing in either process.
func ExampleClient_NewKeyedMutex() {
	ctx := context.Background()
	addr := redissync.RedisForExamples() // in a service: "127.0.0.1:6379"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	// instance makes what one process of the service makes at start.
	instance := func() (*redissync.KeyedMutex, *asyncsteps.Loop, func()) {
		c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: "example-keyed"})
		if err != nil {
			panic(err)
		}
		loop := asyncsteps.NewLoop()
		accounts := c.NewKeyedMutex("accounts", redissync.MutexOptions{MaxQueue: 100})
		return accounts, loop, func() { loop.Close(); c.Close() }
	}
	accountsA, loopA, closeA := instance()
	defer closeA()
	accountsB, loopB, closeB := instance()
	defer closeB()

	entered, release := make(chan struct{}), make(chan struct{})
	a := asyncsteps.New(asyncsteps.WithTool(loopA))
	a.Sync(accountsA.Key("1"), func(as asyncsteps.AsyncSteps, _ ...any) {
		_, ok := accountsA.Token(as, "1") // the fencing token of the lease
		fmt.Println("A charges account 1, holding a token:", ok)
		close(entered)
		asyncsteps.AwaitChan(as, release)
	})
	doneA := a.Promise()
	<-entered

	b := asyncsteps.New(asyncsteps.WithTool(loopB))
	b.Sync(accountsB.Key("2"), func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("B charges account 2")
	})
	if _, err := b.Run(ctx); err != nil {
		panic(err)
	}

	enteredB := make(chan struct{})
	b1 := asyncsteps.New(asyncsteps.WithTool(loopB))
	b1.Sync(accountsB.Key("1"), func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("B charges account 1")
		close(enteredB)
	})
	doneB := b1.Promise()
	select {
	case <-enteredB:
		fmt.Println("B did not wait")
	case <-time.After(100 * time.Millisecond):
		fmt.Println("B waits while A charges account 1")
	}
	close(release)
	resA, resB := <-doneA, <-doneB
	fmt.Println("A:", resA.Err, "B:", resB.Err)
	// Output:
	// A charges account 1, holding a token: true
	// B charges account 2
	// B waits while A charges account 1
	// B charges account 1
	// A: <nil> B: <nil>
}

// Two instances of a gateway share a rate limit per API key through
// Redis: each key gets 2 requests per minute in the whole fleet. Once the
// first instance has served key-1 twice, the second refuses key-1's next
// request (no queue: DefenseRejected, to answer with a 429), and still
// serves key-2. Keys that no flow uses cost nothing in either process.
func ExampleClient_NewKeyedThrottle() {
	ctx := context.Background()
	addr := redissync.RedisForExamples() // in a service: "127.0.0.1:6379"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	// A Prefix of this run's own: the rates used stay in Redis for a minute.
	prefix := fmt.Sprintf("example-keyed-throttle-%d", time.Now().UnixNano())

	// instance makes what one process of the gateway makes at start.
	instance := func() (*redissync.KeyedThrottle, *asyncsteps.Loop, func()) {
		c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: prefix})
		if err != nil {
			panic(err)
		}
		loop := asyncsteps.NewLoop()
		perKey := c.NewKeyedThrottle("api", redissync.ThrottleOptions{Rate: 2, Period: time.Minute})
		return perKey, loop, func() { loop.Close(); c.Close() }
	}
	perKeyA, loopA, closeA := instance()
	defer closeA()
	perKeyB, loopB, closeB := instance()
	defer closeB()

	serve := func(perKey *redissync.KeyedThrottle, loop *asyncsteps.Loop, who, apiKey string) {
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Sync(perKey.Key(apiKey), func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(who, "serves", apiKey)
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println(who, "refuses", apiKey+":", code)
			as.Success()
		})
		if _, err := r.Run(ctx); err != nil {
			panic(err)
		}
	}
	serve(perKeyA, loopA, "A", "key-1")
	serve(perKeyA, loopA, "A", "key-1")
	serve(perKeyB, loopB, "B", "key-1")
	serve(perKeyB, loopB, "B", "key-2")
	// Output:
	// A serves key-1
	// A serves key-1
	// B refuses key-1: DefenseRejected
	// B serves key-2
}
