package redissync_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/redissync"
	"github.com/redis/go-redis/v9"
)

// Two instances of a service, each with its own Client and loop (two
// processes, in a real cluster), share one Mutex(1) through Redis: while a
// flow of the first holds it, a flow of the second waits for it.
func ExampleClient_NewMutex() {
	ctx := context.Background()
	addr := redissync.RedisForExamples() // in a service: "127.0.0.1:6379"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	// instance makes what one process of the service makes at start.
	instance := func() (*redissync.Mutex, *asyncsteps.Loop, func()) {
		c, err := redissync.New(ctx, rdb, redissync.Options{Prefix: "example"})
		if err != nil {
			panic(err) // a CommError naming the address when Redis is not there
		}
		loop := asyncsteps.NewLoop()
		db := c.NewMutex("db", redissync.MutexOptions{Max: 1, MaxQueue: 100})
		return db, loop, func() { loop.Close(); c.Close() }
	}
	dbA, loopA, closeA := instance()
	defer closeA()
	dbB, loopB, closeB := instance()
	defer closeB()

	entered, release := make(chan struct{}), make(chan struct{})
	a := asyncsteps.New(asyncsteps.WithTool(loopA))
	a.Sync(dbA, func(as asyncsteps.AsyncSteps, _ ...any) {
		_, ok := dbA.Token(as) // the fencing token of the lease
		fmt.Println("A holds the lock, token:", ok)
		close(entered)
		as.Await(func(context.Context) (any, error) {
			<-release // A's work
			return nil, nil
		})
	})
	doneA := a.Promise()
	<-entered

	enteredB := make(chan struct{})
	b := asyncsteps.New(asyncsteps.WithTool(loopB))
	b.Sync(dbB, func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("B holds the lock")
		close(enteredB)
	})
	doneB := b.Promise()
	select {
	case <-enteredB:
		fmt.Println("B did not wait")
	case <-time.After(100 * time.Millisecond):
		fmt.Println("B waits while A holds the lock")
	}
	close(release)
	resA, resB := <-doneA, <-doneB
	fmt.Println("A:", resA.Err, "B:", resB.Err)
	// Output:
	// A holds the lock, token: true
	// B waits while A holds the lock
	// B holds the lock
	// A: <nil> B: <nil>
}

// Two instances of a service share a Throttle of an upstream's rate.
// The first meets a 429 with "Retry-After: 1": its Hold keeps the flows
// of every instance out until then, not only its own retry.
func ExampleThrottle_Hold() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redissync.RedisForExamples()})
	defer rdb.Close()
	opts := redissync.ThrottleOptions{Rate: 10, MaxQueue: 100} // the upstream's 10 a second
	// a and b stand for the Clients of two processes of the fleet.
	a, err := redissync.New(ctx, rdb, redissync.Options{Prefix: "example-hold"})
	if err != nil {
		panic(err) // a CommError naming the address when Redis is not there
	}
	defer a.Close()
	b, err := redissync.New(ctx, rdb, redissync.Options{Prefix: "example-hold"})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	apiA, apiB := a.NewThrottle("api", opts), b.NewThrottle("api", opts)
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	var until time.Time
	ra := asyncsteps.New(asyncsteps.WithTool(loop))
	ra.Sync(apiA, func(as asyncsteps.AsyncSteps, _ ...any) {
		// ... the upstream answered 429, "Retry-After: 1"
		until = as.Tool().Now().Add(time.Second)
		apiA.Hold(until)
	})
	fmt.Println("A:", (<-ra.Promise()).Err)

	// The hold reaches Redis with A's next round trip, made at once; B's
	// request comes once it is there ("P:{N}:hold", see Keys).
	for rdb.Exists(ctx, "example-hold:{api}:hold").Val() == 0 {
		time.Sleep(time.Millisecond)
	}
	rb := asyncsteps.New(asyncsteps.WithTool(loop))
	rb.Sync(apiB, func(as asyncsteps.AsyncSteps, _ ...any) {
		fmt.Println("B entered at the hold's end:", !time.Now().Before(until))
	})
	fmt.Println("B:", (<-rb.Promise()).Err)
	// Output:
	// A: <nil>
	// B entered at the hold's end: true
	// B: <nil>
}
