package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// nameKey keys the name of a flow in the context it runs under.
type nameKey struct{}

// A flow that a Mutex lets in, but that is cancelled before it goes on
// (the holder's release and the cancel come in one callback), never
// entered: SyncWait does not report it, and no hook of it follows its
// FlowEnd; the slot it was given comes back, and a later flow enters at
// once. SyncWait reported the wait after the flow's FlowEnd.
func TestHooksSyncWaitOfAFlowCancelledAsItIsLetIn(t *testing.T) {
	tt := asyncsteps.NewTestTool()
	var seen []string
	tt.SetHooks(&asyncsteps.Hooks{
		FlowEnd: func(ctx context.Context, err error) {
			seen = append(seen, fmt.Sprintf("end %v: %v", ctx.Value(nameKey{}), errText(err)))
		},
		SyncWait: func(_ asyncsteps.Syncer, d time.Duration) { seen = append(seen, fmt.Sprintf("wait %v", d)) },
	})
	m := asyncsteps.NewMutex(1)
	start := func(name string, r *asyncsteps.Root) <-chan asyncsteps.Result {
		return r.PromiseContext(context.WithValue(context.Background(), nameKey{}, name))
	}
	var holder steps
	a := asyncsteps.New(asyncsteps.WithTool(tt))
	a.Sync(m, func(as steps, _ ...any) { holder = as; as.WaitExternal() })
	pa := start("A", a)
	b := asyncsteps.New(asyncsteps.WithTool(tt))
	b.Sync(m, func(steps, ...any) { seen = append(seen, "B entered") })
	pb := start("B", b)
	c := asyncsteps.New(asyncsteps.WithTool(tt))
	c.Add(func(as steps, _ ...any) {
		as.Tool().Deferred(time.Second, func() {
			holder.Success() // lets B in
			b.Cancel()
		})
	})
	pc := start("C", c)
	tt.Run()
	d := asyncsteps.New(asyncsteps.WithTool(tt))
	d.Sync(m, func(steps, ...any) { seen = append(seen, "D entered") })
	pd := start("D", d)
	tt.Run()
	var results []string
	for _, p := range []<-chan asyncsteps.Result{pa, pb, pc, pd} {
		results = append(results, errText((<-p).Err))
	}
	if got, want := strings.Join(results, ","), ",context canceled,,"; got != want {
		t.Errorf("results %q, want %q", got, want)
	}
	want := "end C: \nend B: context canceled\nend A: \nD entered\nend D: "
	if got := strings.Join(seen, "\n"); got != want {
		t.Errorf("hooks:\n%s\nwant:\n%s", got, want)
	}
}
