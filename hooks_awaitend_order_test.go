package asyncsteps_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// AwaitEnd may come after FlowEnd: a flow whose step times out while its
// Await function runs ends at once, and no one waits for the function's
// goroutine, whose AwaitEnd reports the function's own outcome when it
// returns.
func TestHooksAwaitEndMayComeAfterFlowEnd(t *testing.T) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	rec := &recorder{}
	hooks := rec.hooks()
	awaitEnd, awaited := hooks.AwaitEnd, make(chan struct{})
	hooks.AwaitEnd = func(ctx context.Context, err *asyncsteps.Error) {
		awaitEnd(ctx, err)
		close(awaited)
	}
	l.SetHooks(hooks)
	release := make(chan struct{})
	r := asyncsteps.New(asyncsteps.WithTool(l))
	r.Add(func(as steps, _ ...any) {
		as.SetTimeout(time.Millisecond)
		as.Await(func(context.Context) (any, error) {
			<-release // ignores its context
			return "late", nil
		})
	})

	_, err := r.Run(context.Background())
	close(release)
	waitFor(t, awaited)

	wantCode(t, err, asyncsteps.Timeout)
	want := "start flow1\nawait flow1\nerror flow1: Timeout\nend flow1: Timeout\nawaited flow1/await: <nil>"
	if got := rec.String(); got != want {
		t.Errorf("hooks saw:\n%s\nwant:\n%s", got, want)
	}
}
