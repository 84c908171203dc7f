package asyncsteps_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A SyncWait hook only observes: a flow let into a Mutex or Limiter by a
// flow of its own tool goes on after the same tasks of the tool's queue
// as without the hook, so the steps of the two flows interleave alike.
// Flow A holds s for 1s, then runs A2..A5; flow B, queued behind it,
// enters and runs B2. (With the hook, the task that ran it queued the
// flow's continuation once more, behind A's: B2 came after A4.)
func TestHooksSyncWaitKeepsTheOrderOfFlows(t *testing.T) {
	syncers := []struct {
		name string
		make func() asyncsteps.Syncer
	}{
		{"Mutex", func() asyncsteps.Syncer { return asyncsteps.NewMutex(1) }},
		{"KeyedMutex", func() asyncsteps.Syncer { return asyncsteps.NewKeyedMutex[string](1).Key("a") }},
		{"Limiter", func() asyncsteps.Syncer {
			return asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited})
		}},
		{"KeyedLimiter", func() asyncsteps.Syncer {
			return asyncsteps.NewKeyedLimiter[string](asyncsteps.LimiterOptions{Concurrent: 1, MaxQueue: asyncsteps.Unlimited}).Key("a")
		}},
	}
	const want = "A in,B in,A2,A3,B2,A4,A5"
	for _, s := range syncers {
		for _, hooked := range []bool{false, true} {
			wantHere := want
			if hooked {
				wantHere = "A in,wait 1s,B in,A2,A3,B2,A4,A5"
			}
			t.Run(fmt.Sprintf("%s, hook %v", s.name, hooked), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l := asyncsteps.NewLoop()
					defer l.Close()
					got := interleaveBehindAHolder(l, s.make(), hooked, func(res ...<-chan asyncsteps.Result) {
						for _, r := range res {
							<-r
						}
					})
					if got != wantHere {
						t.Errorf("Loop, hooked %v:\n got: %s\nwant: %s", hooked, got, wantHere)
					}
				})
				tt := asyncsteps.NewTestTool()
				got := interleaveBehindAHolder(tt, s.make(), hooked, func(...<-chan asyncsteps.Result) { tt.Run() })
				if got != wantHere {
					t.Errorf("TestTool, hooked %v:\n got: %s\nwant: %s", hooked, got, wantHere)
				}
			})
		}
	}
}

// interleaveBehindAHolder runs on tool flows A and B, which sync on s in
// turn (see TestHooksSyncWaitKeepsTheOrderOfFlows), waits for them with
// wait, and returns the trace.
func interleaveBehindAHolder(tool interface {
	asyncsteps.Tool
	SetHooks(*asyncsteps.Hooks)
}, s asyncsteps.Syncer, hooked bool, wait func(...<-chan asyncsteps.Result)) string {
	tr := &tracer{}
	if hooked {
		tool.SetHooks(&asyncsteps.Hooks{SyncWait: func(_ asyncsteps.Syncer, d time.Duration) { tr.addf("wait %v", d) }})
	}
	a := asyncsteps.New(asyncsteps.WithTool(tool))
	a.Sync(s, func(as asyncsteps.AsyncSteps, _ ...any) {
		tr.add("A in")
		as.SetTimeout(time.Hour)
		as.Tool().Deferred(time.Second, func() { as.Success() })
	})
	for i := 2; i <= 5; i++ {
		a.Add(func(asyncsteps.AsyncSteps, ...any) { tr.addf("A%d", i) })
	}
	b := asyncsteps.New(asyncsteps.WithTool(tool))
	b.Sync(s, func(asyncsteps.AsyncSteps, ...any) { tr.add("B in") })
	b.Add(func(asyncsteps.AsyncSteps, ...any) { tr.add("B2") })
	ra := a.Promise()
	rb := b.Promise()
	wait(ra, rb)
	return tr.String()
}
