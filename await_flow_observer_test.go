package asyncsteps_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/toolinfo"
)

// stepObserver is an observer of AwaitFlow steps (see
// toolinfo.AwaitFlowObserver) that numbers the steps it is told of and
// records, in tr, each start (with the number of the step whose context
// it was started under, "-" for none) and each end (with its error and
// its context's Err).
type stepObserver struct {
	tr *tracer
	n  atomic.Int32
}

type observedStep struct{}

func (o *stepObserver) AwaitFlowStart(ctx context.Context) context.Context {
	id := o.n.Add(1)
	parent := "-"
	if p, ok := ctx.Value(observedStep{}).(int32); ok {
		parent = fmt.Sprint(p)
	}
	o.tr.addf("start %d under %s", id, parent)
	return context.WithValue(ctx, observedStep{}, id)
}

func (o *stepObserver) AwaitFlowEnd(ctx context.Context, err error) {
	o.tr.addf("end %v: %v, %v", ctx.Value(observedStep{}), err, ctx.Err())
}

// stoppingTool is a Tool of another package on a Loop, whose Immediate
// panics once stopped, as a Tool built on a channel does with a send on
// the closed channel, or calls runtime.Goexit if exits is set too.
type stoppingTool struct {
	loopTool
	stopped, exits atomic.Bool
}

func (t *stoppingTool) Immediate(f func()) asyncsteps.Handle {
	if t.stopped.Load() {
		if t.exits.Load() {
			runtime.Goexit()
		}
		panic("send on closed channel")
	}
	return t.loopTool.Immediate(f)
}

// An AwaitFlow step whose flow's context holds an observer tells it of
// its start and of its end, exactly once, however it ends; the flow it
// runs begins under the context the start returned, so that an AwaitFlow
// step of that flow is started under the outer step's.
//
// The step's cancel handler cancels the awaited flow through that flow's
// Tool, which may panic (a Tool of the user's, stopped): the step ends
// all the same. Before, the panic cut the handler short of telling the
// observer, and the step's end was never told (otelsteps' span of the
// step never ended).
func TestAwaitFlowObserverIsToldOfEachEndOnce(t *testing.T) {
	noop := func(asyncsteps.AsyncSteps, ...any) {}
	timedOut := func(as asyncsteps.AsyncSteps, sub *asyncsteps.Root) {
		as.SetTimeout(time.Second)
		asyncsteps.AwaitFlow(as, sub)
	}
	for _, c := range []struct {
		name string
		// onLoop runs the awaited flow on the Loop there itself, not on
		// the Tool over it, which its Close does not reach.
		onLoop bool
		sub    func(sub *asyncsteps.Root, tool *stoppingTool, there *asyncsteps.Loop)
		step   func(as asyncsteps.AsyncSteps, sub *asyncsteps.Root)
		// run runs outer with ctx, once here is set; nil: Run.
		run   func(ctx context.Context, outer, sub *asyncsteps.Root, here *asyncsteps.Loop) error
		err   string
		trace string
	}{{
		name:  "success",
		sub:   func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) { sub.Add(noop) },
		trace: "start 1 under -,end 1: <nil>, <nil>",
	}, {
		name: "step error",
		sub: func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "bad") })
		},
		err:   "InvalidRequest: bad",
		trace: "start 1 under -,end 1: InvalidRequest: bad, <nil>",
	}, {
		name: "error handler that recovers",
		sub: func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InvalidRequest, "bad") })
		},
		step: func(as asyncsteps.AsyncSteps, sub *asyncsteps.Root) {
			asyncsteps.AwaitFlow(as, sub, func(as asyncsteps.AsyncSteps, _ string) { as.Success() })
		},
		trace: "start 1 under -,end 1: InvalidRequest: bad, <nil>",
	}, {
		name:  "timeout",
		sub:   func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) { sub.Add(waitExternal) },
		step:  timedOut,
		err:   "Timeout",
		trace: "start 1 under -,end 1: <nil>, context deadline exceeded",
	}, {
		name: "cancel",
		sub:  func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) { sub.Add(waitExternal) },
		run: func(ctx context.Context, outer, _ *asyncsteps.Root, _ *asyncsteps.Loop) error {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(time.Second, cancel)
			_, err := outer.Run(ctx)
			return err
		},
		err:   "context canceled",
		trace: "start 1 under -,end 1: <nil>, context canceled",
	}, {
		name: "a failed parallel sibling",
		sub:  func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) { sub.Add(waitExternal) },
		step: func(as asyncsteps.AsyncSteps, sub *asyncsteps.Root) {
			p := as.Parallel()
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) { asyncsteps.AwaitFlow(as, sub) })
			p.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				as.SetTimeout(time.Second)
				as.WaitExternal()
			})
		},
		err:   "Timeout",
		trace: "start 1 under -,end 1: <nil>, context canceled",
	}, {
		name: "nested",
		sub: func(sub *asyncsteps.Root, _ *stoppingTool, there *asyncsteps.Loop) {
			inner := asyncsteps.New(asyncsteps.WithTool(there))
			inner.Add(noop)
			asyncsteps.AwaitFlow(sub, inner)
		},
		trace: "start 1 under -,start 2 under 1,end 2: <nil>, <nil>,end 1: <nil>, <nil>",
	}, {
		name: "running flow",
		sub: func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(waitExternal)
			sub.Execute()
		},
		err:   "InternalError: asyncsteps: Promise called on a running flow",
		trace: "start 1 under -,end 1: InternalError: asyncsteps: Promise called on a running flow, <nil>",
	}, {
		name: "the flow's Tool panics as it is given the flow",
		sub: func(sub *asyncsteps.Root, tool *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(noop)
			tool.stopped.Store(true)
		},
		err:   "InternalError: send on closed channel",
		trace: "start 1 under -,end 1: InternalError: send on closed channel, <nil>",
	}, {
		name: "the flow's Tool panics as the step cancels the flow",
		sub: func(sub *asyncsteps.Root, tool *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tool.stopped.Store(true)
				as.WaitExternal()
			})
		},
		step:  timedOut,
		err:   "Timeout",
		trace: "start 1 under -,end 1: <nil>, context deadline exceeded",
	}, {
		name: "the step's loop closed",
		sub:  func(sub *asyncsteps.Root, _ *stoppingTool, _ *asyncsteps.Loop) { sub.Add(waitExternal) },
		run: func(ctx context.Context, outer, _ *asyncsteps.Root, here *asyncsteps.Loop) error {
			time.AfterFunc(time.Second, here.Close)
			_, err := outer.Run(ctx)
			return err
		},
		err:   "InternalError: " + closedInfo,
		trace: "start 1 under -,end 1: <nil>, context canceled",
	}, {
		name: "the step's loop closed, the flow's Tool exiting as the step cancels the flow",
		sub: func(sub *asyncsteps.Root, tool *stoppingTool, _ *asyncsteps.Loop) {
			sub.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				tool.exits.Store(true)
				tool.stopped.Store(true)
				as.WaitExternal()
			})
		},
		run: func(ctx context.Context, outer, _ *asyncsteps.Root, here *asyncsteps.Loop) error {
			time.AfterFunc(time.Second, here.Close)
			_, err := outer.Run(ctx)
			return err
		},
		err:   "InternalError: " + closedInfo,
		trace: "start 1 under -,end 1: <nil>, context canceled",
	}, {
		name:   "the flow's loop closed",
		onLoop: true,
		sub: func(sub *asyncsteps.Root, _ *stoppingTool, there *asyncsteps.Loop) {
			sub.Add(waitExternal)
			time.AfterFunc(time.Second, there.Close)
		},
		err:   "InternalError: the awaited flow's loop is closed",
		trace: "start 1 under -,end 1: InternalError: the awaited flow's loop is closed, <nil>",
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				here, there := asyncsteps.NewLoop(), asyncsteps.NewLoop()
				defer here.Close()
				defer there.Close()
				tool := &stoppingTool{loopTool: loopTool{there}}
				tr := &tracer{}
				ctx := context.WithValue(context.Background(), toolinfo.AwaitFlowKey{}, &stepObserver{tr: tr})

				sub := asyncsteps.New(asyncsteps.WithTool(tool))
				if c.onLoop {
					sub = asyncsteps.New(asyncsteps.WithTool(there))
				}
				c.sub(sub, tool, there)
				outer := asyncsteps.New(asyncsteps.WithTool(here))
				if c.step != nil {
					outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.step(as, sub) })
				} else {
					asyncsteps.AwaitFlow(outer, sub)
				}
				run := func(ctx context.Context, outer, _ *asyncsteps.Root, _ *asyncsteps.Loop) error {
					_, err := outer.Run(ctx)
					return err
				}
				if c.run != nil {
					run = c.run
				}
				if err := run(ctx, outer, sub, here); fmt.Sprint(err) != fmt.Sprint(errOrNil(c.err)) {
					t.Errorf("Run: %v, want %v", err, errOrNil(c.err))
				}
				synctest.Wait()
				wantTrace(t, tr, c.trace)
				tool.stopped.Store(false) // for the Close of there
			})
		})
	}
}

// waitExternal is a step that waits for good, unless cancelled.
func waitExternal(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() }

// errOrNil is nil for "", else an error that prints as s.
func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return fmt.Errorf("%s", s)
}
