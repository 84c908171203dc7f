package asyncsteps_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A call that takes one error handler or one label at most, given more,
// is a misuse: InternalError, whose info names the call, and the step
// that made it ends there (on a Root, its next execution fails before
// any step runs). The call kept the first and dropped the others unseen.
func TestMoreThanOneHandlerOrLabelIsAMisuse(t *testing.T) {
	h := func(as asyncsteps.AsyncSteps, _ string) { as.Success() }
	step := func(asyncsteps.AsyncSteps, ...any) {}
	m, th := asyncsteps.NewMutex(1), asyncsteps.NewThrottle(1, time.Second, 0)
	l := asyncsteps.NewLimiter(asyncsteps.LimiterOptions{Concurrent: 1})
	await := func(context.Context) (any, error) { return nil, nil }
	two := "more than one error handler (2 given)"
	cases := []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
		info string
	}{
		{"Add", func(as asyncsteps.AsyncSteps) { as.Add(step, h, h) }, "Add: " + two},
		{"Parallel", func(as asyncsteps.AsyncSteps) { as.Parallel(h, h) }, "Parallel: " + two},
		{"branch Add", func(as asyncsteps.AsyncSteps) { as.Parallel().Add(step, h, h) }, "Add: " + two},
		{"Sync", func(as asyncsteps.AsyncSteps) { as.Sync(m, step, h, h) }, "Sync: " + two},
		{"Mutex.Sync", func(as asyncsteps.AsyncSteps) { m.Sync(as, step, h, h) }, "Sync: " + two},
		{"Throttle.Sync", func(as asyncsteps.AsyncSteps) { th.Sync(as, step, h, h) }, "Sync: " + two},
		{"Limiter.Sync", func(as asyncsteps.AsyncSteps) { l.Sync(as, step, h, h) }, "Sync: " + two},
		{"Await", func(as asyncsteps.AsyncSteps) { as.Await(await, h, h) }, "Await: " + two},
		{"AwaitThen", func(as asyncsteps.AsyncSteps) {
			asyncsteps.AwaitThen(as, func(context.Context) (int, error) { return 1, nil }, nil, h, h)
		}, "AwaitThen: " + two},
		{"AwaitChan", func(as asyncsteps.AsyncSteps) {
			asyncsteps.AwaitChan(as, make(chan int), h, h)
		}, "AwaitChan: " + two},
		{"AwaitResult", func(as asyncsteps.AsyncSteps) {
			asyncsteps.AwaitResult(as, make(chan asyncsteps.Result), h, h)
		}, "AwaitResult: " + two},
		{"AwaitFlow", func(as asyncsteps.AsyncSteps) {
			asyncsteps.AwaitFlow(as, asyncsteps.New(), h, h)
		}, "AwaitFlow: " + two},
		{"Then", func(as asyncsteps.AsyncSteps) {
			asyncsteps.Then(as, func(asyncsteps.AsyncSteps, int) {}, h, h)
		}, "Then: " + two},
		{"Loop", func(as asyncsteps.AsyncSteps) {
			as.Loop(func(as asyncsteps.AsyncSteps) { as.Break() }, "a", "b")
		}, "Loop: more than one label (2 given)"},
		{"Repeat", func(as asyncsteps.AsyncSteps) {
			as.Repeat(1, func(asyncsteps.AsyncSteps, int) {}, "a", "b", "c")
		}, "Repeat: more than one label (3 given)"},
		{"ForEach", func(as asyncsteps.AsyncSteps) {
			as.ForEach([]int{1}, func(asyncsteps.AsyncSteps, any, any) {}, "a", "b")
		}, "ForEach: more than one label (2 given)"},
	}
	for _, c := range cases {
		t.Run(c.name+" in a step", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tr.add("step")
				c.call(as)
				tr.add("after the call")
			})
			r.Add(tr.step("next"))
			res := run(t, r, tt)
			wantTrace(t, &tr, "step")
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
		})
		t.Run(c.name+" on a Root", func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Add(tr.step("step"))
			c.call(r)
			res := run(t, r, tt)
			wantTrace(t, &tr, "")
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
		})
	}
}

// Break and Continue given more than one label fail their step with
// InternalError, as Error given more than one info does; the loop is
// neither left nor continued.
func TestBreakWithMoreThanOneLabelIsAMisuse(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(as asyncsteps.AsyncSteps)
		info string
	}{
		{"Break", func(as asyncsteps.AsyncSteps) { as.Break("outer", "inner") }, "Break: more than one label (2 given)"},
		{"Continue", func(as asyncsteps.AsyncSteps) { as.Continue("outer", "inner") }, "Continue: more than one label (2 given)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr tracer
			r, tt := newFlow()
			r.Loop(func(as asyncsteps.AsyncSteps) {
				tr.add("iteration")
				c.call(as)
				tr.add("after the call")
			}, "outer")
			r.Add(tr.step("next"))
			res := run(t, r, tt)
			wantTrace(t, &tr, "iteration")
			wantError(t, res.Err, asyncsteps.InternalError, c.info)
		})
	}
}
