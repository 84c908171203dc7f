package otelsteps_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/otelsteps"
)

// Many flows on two loops at once, sharing a Mutex and a Throttle, with
// parallel Awaits, failures, cancels, and the loops closed under the
// ones still waiting: every span started is ended, with the status its
// flow's Result calls for, each flow is counted once by its outcome, and
// no goroutine is left (the bubble ends).
func TestManyFlowsOnTwoLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const flows = 300
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		g := asyncsteps.NewLoopGroup(2)
		mp := newMetered()
		g.SetHooks(otelsteps.Hooks(otelsteps.Config{TracerProvider: tp, MeterProvider: mp}))
		m := asyncsteps.NewMutex(2)
		th := asyncsteps.NewThrottle(5, time.Second)
		results := make([]<-chan asyncsteps.Result, flows)
		roots := make([]*asyncsteps.Root, flows)
		for i := range flows {
			r := g.New()
			r.Add(func(as steps, _ ...any) {
				p := as.Parallel()
				p.Sync(m, func(as steps, _ ...any) {
					as.Await(func(ctx context.Context) (any, error) {
						time.Sleep(time.Millisecond)
						return nil, nil
					})
				})
				p.Sync(th, func(as steps, _ ...any) {
					if i%3 == 1 {
						as.Error(asyncsteps.CommError, "down")
					}
				})
				p.Await(func(ctx context.Context) (any, error) {
					if i%3 == 2 {
						return untilDone(ctx) // until the cancel or the close
					}
					return nil, nil
				})
			})
			roots[i] = r
			results[i] = r.Promise()
		}
		for i := 2; i < flows/2; i += 3 {
			go roots[i].Cancel()
		}
		time.Sleep(2 * time.Minute) // the Throttle let all in: only the flows waiting for their end wait
		g.Close()
		counts := map[string]int{}
		for i, p := range results {
			res := <-p
			counts[fmt.Sprintf("%d %s", i%3, errText(res.Err))]++
		}
		synctest.Wait()
		got := fmt.Sprint(counts)
		want := fmt.Sprintf("map[0 :%d 1 CommError: down:%d 2 InternalError: the flow's loop is closed:%d 2 context canceled:%d]",
			flows/3, flows/3, flows/3-flows/6, flows/6)
		if got != want {
			t.Errorf("results %s, want %s", got, want)
		}
		if s, e := len(rec.Started()), len(rec.Ended()); s != e {
			t.Errorf("%d spans started, %d ended", s, e)
		}
		flowSpans := map[string]int{}
		for _, s := range rec.Ended() {
			switch {
			case s.Name() == otelsteps.FlowSpan:
				flowSpans[describe([]sdktrace.ReadOnlySpan{s})]++
			case s.Status().Code != codes.Unset:
				// Only the flows fail: their Awaits succeed or are
				// cancelled with them.
				t.Errorf("Await span %s", describe([]sdktrace.ReadOnlySpan{s}))
			}
		}
		want = fmt.Sprintf("map[%s:%d %s:%d %s:%d %s:%d]",
			`asyncsteps.flow <- -: Error "CommError: down" asyncsteps.error.code=CommError error.type=CommError event asyncsteps.step_error asyncsteps.error.code=CommError asyncsteps.error.info=down`, flows/3,
			`asyncsteps.flow <- -: Error "InternalError: the flow's loop is closed" asyncsteps.error.code=InternalError error.type=InternalError`, flows/3-flows/6,
			`asyncsteps.flow <- -: Unset ""`, flows/3,
			`asyncsteps.flow <- -: Unset "" asyncsteps.canceled=true`, flows/6)
		if got := fmt.Sprint(flowSpans); got != want {
			t.Errorf("flow spans %s\nwant %s", got, want)
		}
		// The durations, and which flows had to wait in the gates, depend
		// on how the loops' goroutines interleave: only their counts are
		// exact, and the flows are counted as their spans are.
		sum := regexp.MustCompile(` sum=\S+`)
		var measured, waits []string
		for _, line := range strings.Split(mp.read(t), "\n") {
			line = sum.ReplaceAllString(line, "")
			if strings.HasPrefix(line, otelsteps.SyncWaitMetric) {
				waits = append(waits, line)
			} else {
				measured = append(measured, line)
			}
		}
		got = strings.Join(measured, "\n")
		want = describeLines([]string{
			fmt.Sprintf(`asyncsteps.flow.duration{} count=%d`, flows/3),
			fmt.Sprintf(`asyncsteps.flow.duration{asyncsteps.canceled=true} count=%d`, flows/6),
			fmt.Sprintf(`asyncsteps.flow.duration{asyncsteps.error.code=CommError error.type=CommError} count=%d`, flows/3),
			fmt.Sprintf(`asyncsteps.flow.duration{asyncsteps.error.code=InternalError error.type=InternalError} count=%d`, flows/3-flows/6),
			fmt.Sprintf(`asyncsteps.flow.ended{} %d`, flows/3),
			fmt.Sprintf(`asyncsteps.flow.ended{asyncsteps.canceled=true} %d`, flows/6),
			fmt.Sprintf(`asyncsteps.flow.ended{asyncsteps.error.code=CommError error.type=CommError} %d`, flows/3),
			fmt.Sprintf(`asyncsteps.flow.ended{asyncsteps.error.code=InternalError error.type=InternalError} %d`, flows/3-flows/6),
			fmt.Sprintf(`asyncsteps.flow.started{} %d`, flows),
			fmt.Sprintf(`asyncsteps.step.failed{asyncsteps.error.code=CommError error.type=CommError} %d`, flows/3),
		})
		if got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
		if len(waits) == 0 {
			t.Errorf("no flow waited in the Mutex or the Throttle")
		}
	})
}
