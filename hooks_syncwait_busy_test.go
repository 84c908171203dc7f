package asyncsteps_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A SyncWait hook only observes: a flow let into a Mutex, Throttle or
// Limiter goes on as it would without the hook, also on a Loop too busy to
// run it before the timeout around its Sync falls due. The loop that was
// busy from 0.9s to 1.1s runs, in its next pass, what came meanwhile
// before its timers: the flow's admission, and with it the flow, which
// enters at 1.1s. (With the hook, the admission reached the loop through
// its inbox, and the flow's completion then went through the inbox once
// more: the timeout due at 1s ran first, so the flow timed out, once
// reported let in when the slot came from another loop.)
func TestHooksSyncWaitDoesNotDelayTheFlowLetIn(t *testing.T) {
	cases := []struct {
		name     string
		syncer   func() asyncsteps.Syncer
		sameLoop bool
		waited   string // the wait SyncWait reports
	}{
		{"Mutex, slot from another loop", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) }, false, "1s"},
		{"Throttle, period ended on another loop", func() asyncsteps.Syncer { return asyncsteps.NewThrottle(1, time.Second) }, false, "1s"},
		{"KeyedThrottle, period ended on another loop", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedThrottle[string](1, time.Second).Key("a")
		}, false, "1s"},
		{"Mutex, slot from the same loop", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) }, true, "1.1s"},
		{"Limiter, slot from the same loop", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited})
		}, true, "1.1s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, hooked := range []bool{false, true} {
				want := "B in 1.1s; B ok"
				if hooked {
					want = "wait " + c.waited + "; " + want
				}
				got := letInOnABusyLoop(t, c.syncer(), c.sameLoop, hooked)
				if got != want {
					t.Errorf("with hook %v:\n%s\nwant:\n%s", hooked, got, want)
				}
			}
		})
	}
}

// letInOnABusyLoop runs, on Loop l, flow B, whose step with a 1s timeout
// syncs on s behind flow A, and flow X, whose callback keeps l busy from
// 0.9s to 1.1s. A, on another loop or on l, leaves s at 1s, or, on l, as
// X's callback ends (a Throttle's next period starts at 1s). It returns
// the trace: the SyncWait hook's calls, if hooked, B's entry and end.
func letInOnABusyLoop(t *testing.T, s asyncsteps.Syncer, sameLoop, hooked bool) string {
	var trace []string
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		add := func(format string, args ...any) {
			mu.Lock()
			trace = append(trace, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		t0 := time.Now()
		l, other := asyncsteps.NewLoop(), asyncsteps.NewLoop()
		defer l.Close()
		defer other.Close()
		if hooked {
			h := &asyncsteps.Hooks{SyncWait: func(_ asyncsteps.Syncer, d time.Duration) { add("wait %v", d) }}
			l.SetHooks(h)
			other.SetHooks(h)
		}
		var holder asyncsteps.AsyncSteps
		a := asyncsteps.New(asyncsteps.WithTool(other))
		if sameLoop {
			a = asyncsteps.New(asyncsteps.WithTool(l))
		}
		a.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
			holder = as
			as.SetTimeout(time.Hour)
			if !sameLoop {
				as.Tool().Deferred(time.Second, func() { as.Success() })
			}
		})
		resA := a.Promise()
		synctest.Wait()

		b := asyncsteps.New(asyncsteps.WithTool(l))
		b.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Second)
			as.Sync(s, func(asyncsteps.AsyncSteps, ...any) { add("B in %v", time.Since(t0)) })
		})
		resB := b.Promise()
		x := asyncsteps.New(asyncsteps.WithTool(l))
		x.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			as.Tool().Deferred(900*time.Millisecond, func() {
				time.Sleep(200 * time.Millisecond) // the loop is busy
				if sameLoop {
					holder.Success() // A leaves in the callbacks that follow
				}
				as.Success()
			})
		})
		resX := x.Promise()
		for _, res := range []<-chan asyncsteps.Result{resA, resX} {
			if err := (<-res).Err; err != nil {
				t.Errorf("A or X: %v", err)
			}
		}
		end := "ok"
		if err := (<-resB).Err; err != nil {
			end = err.Error()
		}
		add("B %s", end)
	})
	return strings.Join(trace, "; ")
}
