package asyncsteps_test

import (
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// syncPause is a step that waits d on the flow's tool: an external event the
// flow waits for inside its critical section.
func syncPause(d time.Duration) asyncsteps.StepFunc {
	return func(as asyncsteps.AsyncSteps, _ ...any) {
		as.WaitExternal()
		as.Tool().Deferred(d, func() { as.Success() })
	}
}

// The spec's example 3.6: a critical section guarded by a Mutex that lets
// 10 flows in at once. The incoming args reach the section, and its result
// goes on to the next step as if there were no critical section.
func ExampleMutex() {
	tt := asyncsteps.NewTestTool()
	mutex := asyncsteps.NewMutex(10)

	as := asyncsteps.New(asyncsteps.WithTool(tt))
	as.SuccessStep("order-42")
	as.Sync(mutex, func(as asyncsteps.AsyncSteps, args ...any) {
		// critical section with regular AsyncSteps
		fmt.Println("processing", args[0])
		as.Add(syncPause(10 * time.Millisecond))
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Success("done") })
	})
	as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("result:", args[0])
	})

	as.Execute()
	tt.Run()
	// Output:
	// processing order-42
	// result: done
}

// Transfers from one account take turns, so that each debits the balance
// the one before it left (it reads it, calls the ledger, then writes it);
// a transfer from another account goes on meanwhile. The credit is made
// within one callback, which needs no key here, as no account credited
// sends: a credit to an account whose transfer is between its read and its
// write would be overwritten, so a credit would then take the key of its
// account too (and on Loops, with flows on several of them, the callbacks
// would lock a sync.Mutex around the map). An account's key is in use only
// while a transfer holds or waits for it.
func ExampleKeyedMutex() {
	tt := asyncsteps.NewTestTool()
	accounts := asyncsteps.NewKeyedMutex[string](1)
	balance := map[string]int{"alice": 100, "dave": 50}

	transfer := func(from, to string, amount int) {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		accounts.Sync(r, from, func(as asyncsteps.AsyncSteps, _ ...any) {
			seen := balance[from]
			fmt.Println(syncElapsed(tt), from, "->", to, amount, "reads", seen)
			as.Add(syncPause(10 * time.Millisecond)) // the ledger's call
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				balance[from], balance[to] = seen-amount, balance[to]+amount
			})
		})
		r.Execute()
	}
	transfer("alice", "bob", 30)
	transfer("alice", "carol", 20)
	transfer("dave", "erin", 5)
	tt.Advance(0)
	fmt.Println("accounts in use:", accounts.Len())
	tt.Run()
	fmt.Println("alice:", balance["alice"], "dave:", balance["dave"], "accounts in use:", accounts.Len())
	// Output:
	// 0s alice -> bob 30 reads 100
	// 0s dave -> erin 5 reads 50
	// accounts in use: 2
	// 10ms alice -> carol 20 reads 70
	// alice: 50 dave: 45 accounts in use: 0
}

// Three flows share a Mutex(1) whose queue holds one flow: the first enters,
// the second waits for it, the third finds the queue full. Its error
// handler sees the rejection first.
func ExampleNewMutex() {
	tt := asyncsteps.NewTestTool()
	mutex := asyncsteps.NewMutex(1, 1)

	for _, name := range []string{"A", "B", "C"} {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(mutex, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(syncElapsed(tt), name, "enters")
			as.Add(syncPause(10 * time.Millisecond))
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				fmt.Println(syncElapsed(tt), name, "leaves")
			})
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println(syncElapsed(tt), name, code, as.State().ErrorInfo)
			as.Success()
		})
		r.Execute()
	}
	tt.Run()
	// Output:
	// 0s A enters
	// 0s C DefenseRejected Mutex queue limit
	// 10ms A leaves
	// 10ms B enters
	// 20ms B leaves
}

// A Throttle lets 2 flows in per 100 ms. The first period starts with the
// first entry; the flows that come after wait for the next periods. Once a
// period ends with nobody waiting, no timer is left.
func ExampleThrottle() {
	tt := asyncsteps.NewTestTool()
	throttle := asyncsteps.NewThrottle(2, 100*time.Millisecond)

	for i := 1; i <= 5; i++ {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(throttle, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(syncElapsed(tt), "flow", i, "enters")
		})
		r.Execute()
	}
	tt.Run()
	fmt.Println(syncElapsed(tt), "idle, events left:", tt.Pending())
	// Output:
	// 0s flow 1 enters
	// 0s flow 2 enters
	// 100ms flow 3 enters
	// 100ms flow 4 enters
	// 200ms flow 5 enters
	// 300ms idle, events left: 0
}

// A Limiter lets 3 flows in at once, 1 per 100 ms, with room for 1 flow
// waiting for a slot and 1 waiting for the rate. Of 6 flows, 3 take the
// slots and 1 waits for one; 2 find that queue full. Of the 3 holding a
// slot, 1 enters, 1 waits for the next period and 1 is rejected: it gives
// its slot back, to the waiting flow, which the rate rejects in turn.
func ExampleLimiter() {
	tt := asyncsteps.NewTestTool()
	limiter := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
		Concurrent: 3,
		MaxQueue:   1,
		Rate:       1,
		Period:     100 * time.Millisecond,
		Burst:      1,
	})

	for i := 1; i <= 6; i++ {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(limiter, func(as asyncsteps.AsyncSteps, _ ...any) {
			fmt.Println(syncElapsed(tt), "flow", i, "enters")
			as.Add(syncPause(10 * time.Millisecond))
		}, func(as asyncsteps.AsyncSteps, code string) {
			fmt.Println(syncElapsed(tt), "flow", i, code, as.State().ErrorInfo)
			as.Success()
		})
		r.Execute()
	}
	tt.Run()
	// Output:
	// 0s flow 1 enters
	// 0s flow 3 DefenseRejected Throttle queue limit
	// 0s flow 5 DefenseRejected Mutex queue limit
	// 0s flow 6 DefenseRejected Mutex queue limit
	// 0s flow 4 DefenseRejected Throttle queue limit
	// 100ms flow 2 enters
}

// tracedSteps is a decorator that tags what its steps log with a name:
// they receive a tracedSteps of the engine's AsyncSteps. Unwrap gives that
// one back, so that a Mutex tells the flow behind the decorator.
type tracedSteps struct {
	asyncsteps.AsyncSteps
	name string
}

func (t tracedSteps) Add(f asyncsteps.StepFunc, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	t.AsyncSteps.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		f(tracedSteps{as, t.name}, args...)
	}, onerror...)
	return t
}

func (t tracedSteps) Unwrap() asyncsteps.AsyncSteps { return t.AsyncSteps }

func (t tracedSteps) log(msg string) { fmt.Println(t.name+":", msg) }

// A flow that holds a Mutex(1) enters it again through a decorator of its
// AsyncSteps, as it does through the engine's own; without Unwrap, the
// nested Sync would wait for the section around it, for ever here.
func ExampleUnwrapper() {
	tt := asyncsteps.NewTestTool()
	mutex := asyncsteps.NewMutex(1)

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		mutex.Sync(tracedSteps{as, "orders"}, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.(tracedSteps).log("outer section")
			mutex.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) {
				as.(tracedSteps).log("inner section")
			})
		})
	})
	done := r.Promise()
	tt.Run()
	fmt.Println("error:", (<-done).Err)
	// Output:
	// orders: outer section
	// orders: inner section
	// error: <nil>
}

// The "Mutex example" of the JavaScript reference implementation; the
// output is the same. Each flow counts itself in while it is inside the
// critical section: with a Mutex of 1, none sees another there.
func Example_mutexConcurrency() {
	tt := asyncsteps.NewTestTool()
	mtx := asyncsteps.NewMutex(1)
	concurrency := 0

	for i := range 3 {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(mtx, func(as asyncsteps.AsyncSteps, _ ...any) {
			// regular AsyncSteps in the critical section
			concurrency++
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.Success(concurrency)
				concurrency--
			})
		}).Add(func(as asyncsteps.AsyncSteps, args ...any) {
			fmt.Printf("Max concurrency %d: %v\n", i, args[0])
		})
		r.Execute()
	}
	tt.Run()
	// Output:
	// Max concurrency 0: 1
	// Max concurrency 1: 1
	// Max concurrency 2: 1
}

// The "Throttle example" of the JavaScript reference implementation: a
// Throttle of 10 entries per 100 ms lets 50 of 100 parallel branches in
// within 450 ms, here on the TestTool's virtual clock.
func Example_throttlePassed() {
	tt := asyncsteps.NewTestTool()
	thrtl := asyncsteps.NewThrottle(10, 100*time.Millisecond)
	passed := 0

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	p := r.Parallel()
	for range 100 {
		p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(thrtl, func(as asyncsteps.AsyncSteps, _ ...any) { passed++ })
		})
	}
	r.Execute()
	tt.Advance(450 * time.Millisecond)
	fmt.Println("passed:", passed)
	// Output:
	// passed: 50
}
