package asyncsteps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// SyncWait for a Limiter reports each wait in the Mutex or the Throttle it
// is made of, with the Limiter itself as obj, the Syncer that Sync was
// called on, so that a hook can tell one Limiter's waits from another's; a
// flow that leaves a queue without entering (its step timed out) is not
// reported.
func TestHooksSyncWaitOfALimiter(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var waits []string
	var lim *asyncsteps.Limiter
	tt.SetHooks(&asyncsteps.Hooks{SyncWait: func(obj asyncsteps.Syncer, d time.Duration) {
		waits = append(waits, fmt.Sprintf("%T %v %v", obj, obj == asyncsteps.Syncer(lim), d))
	}})
	lim = asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: 5, Rate: 1, Period: 100 * time.Millisecond, Burst: 5})
	hold := func(as steps, _ ...any) {
		as.SetTimeout(time.Hour)
		as.Tool().Deferred(30*time.Millisecond, func() { as.Success() })
	}
	var results []<-chan asyncsteps.Result
	for range 3 {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Sync(lim, hold)
		results = append(results, r.Promise())
	}
	impatient := asyncsteps.New(asyncsteps.WithTool(tt))
	impatient.Add(func(as steps, _ ...any) {
		as.SetTimeout(10 * time.Millisecond)
		as.Sync(lim, hold)
	})
	results = append(results, impatient.Promise())
	tt.Run()
	var got []string
	for _, p := range results {
		got = append(got, errText((<-p).Err))
	}
	if want := ",,,Timeout"; strings.Join(got, ",") != want {
		t.Errorf("results %q, want %q", strings.Join(got, ","), want)
	}
	// Flow 2 waits 30ms for the slot, then 70ms for the next period;
	// flow 3 waits 130ms for the slot, then 70ms more.
	want := "*asyncsteps.Limiter true 30ms\n*asyncsteps.Limiter true 70ms\n*asyncsteps.Limiter true 130ms\n*asyncsteps.Limiter true 70ms"
	if got := strings.Join(waits, "\n"); got != want {
		t.Errorf("waits:\n%s\nwant:\n%s", got, want)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
