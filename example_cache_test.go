package asyncsteps_test

import (
	"fmt"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A cache shared by flows: the lookup, the fetch on a miss and the store
// run as one critical section, so two requests for the same key that come
// together fetch it once. The map itself needs no other lock here, since
// every access is inside the section (a sync.Mutex would do for a map
// read and written within one callback).
func ExampleMutex_cache() {
	tt := asyncsteps.NewTestTool()
	lock := asyncsteps.NewMutex(1)
	cache := map[string]string{}

	// fetch stands for an upstream call, 100ms on the virtual clock.
	fetch := func(as asyncsteps.AsyncSteps, key string) {
		fmt.Println("fetching", key)
		asyncsteps.Sleep(as, 100*time.Millisecond).SuccessStep("value of " + key)
	}
	cached := func(as asyncsteps.AsyncSteps, key string) {
		as.Sync(lock, func(as asyncsteps.AsyncSteps, _ ...any) {
			if v, ok := cache[key]; ok {
				as.Success(v)
				return // Success does not abort the callback
			}
			fetch(as, key)
			as.Add(func(as asyncsteps.AsyncSteps, args ...any) {
				cache[key], _ = asyncsteps.Arg[string](args, 0)
				as.Success(cache[key])
			})
		})
	}

	results := make([]<-chan asyncsteps.Result, 2)
	for i := range results {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { cached(as, "k") })
		results[i] = r.Promise()
	}
	tt.Run()
	for i, res := range results {
		r := <-res
		fmt.Println("flow", i, r.Args, r.Err)
	}
	// Output:
	// fetching k
	// flow 0 [value of k] <nil>
	// flow 1 [value of k] <nil>
}
